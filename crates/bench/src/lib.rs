//! needle's benchmark scenarios (`needle bench SCENARIO`): the reference experiments of
//! docs/workloads.md, one file each. A scenario measures needle and, in the same run, a baseline
//! (a peer such as Bullet's engine or DuckDB, or the bare cost of the same work without needle),
//! and reports both with their ratio, because this machine is shared and absolute figures drift
//! from run to run.
//!
//! Its place in the flow: beside the product, not in it. It drives the library (`needle`), the
//! runtime and the server as a user would, and the `needle` binary exposes it as `needle bench`
//! ([`Args`], [`run`]). [`report`] prints every outcome as a table or JSON lines and writes
//! `--out DIR/SCENARIO.json`.

pub mod chart;
pub mod data_scaling;
pub mod eps;
pub mod harness;
pub mod history;
mod history_s3;
mod history_table;
pub mod ingest;
pub mod kafka_scaling;
pub mod latency;
pub mod live;
pub mod matching;
pub mod max_raw_queries;
pub mod push;
pub mod query_scaling;
mod scenario;
pub mod vs_bullet;

pub use scenario::{run, Args, Scenario};

use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The heap's (allocated, resident) bytes as the process's allocator counts them; see
/// [`set_heap_probe`].
pub type HeapProbe = fn() -> Option<(u64, u64)>;

static HEAP_PROBE: std::sync::OnceLock<HeapProbe> = std::sync::OnceLock::new();

/// Lets the scenarios that measure memory read the allocator's own figures (the binary chooses
/// the allocator, not this crate): the bytes allocated and not freed, beside the resident size
/// (what is freed but kept by the allocator counts in the second only).
pub fn set_heap_probe(probe: HeapProbe) {
    let _ = HEAP_PROBE.set(probe);
}

/// The allocator's (allocated, resident) bytes now, when the binary gave a probe.
pub(crate) fn heap_bytes() -> Option<(u64, u64)> {
    HEAP_PROBE.get().and_then(|probe| probe())
}

/// Where and how every scenario reports (flattened into each scenario's options).
#[derive(clap::Args, Debug, Clone)]
pub struct Output {
    /// `table` (default) or `json` (one object per line).
    #[arg(long, default_value = "table", value_parser = ["table", "json"])]
    pub format: String,
    /// Where to write SCENARIO.json (and charts, for the scenarios that draw one).
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
}

/// How much of each record needle checks as JSON while measuring (`runtime.validate`).
#[derive(clap::Args, Debug, Clone)]
pub struct ValidateOption {
    /// How much of each record needle checks as JSON: line (the whole line, needle's default)
    /// or fields (only the fields the queries read).
    #[arg(long, default_value = "line", value_parser = ["line", "fields"])]
    pub validate: String,
}

impl ValidateOption {
    pub fn validation(&self) -> needle_record::Validation {
        self.validate.parse().unwrap_or_default()
    }
}

/// A scenario's result: serialized whole into `--out DIR/SCENARIO.json`, printed as JSON lines
/// or as a table.
pub trait Outcome: Serialize {
    /// The scenario's name, which names the result file.
    fn scenario(&self) -> &str;
    /// The objects `--format json` prints, one per line: the whole result unless a scenario
    /// reports rows.
    fn json_lines(&self) -> Vec<serde_json::Value> {
        vec![serde_json::to_value(self).expect("a result serializes")]
    }
    /// The human-readable report.
    fn print_table(&self);
}

/// Reports a scenario's outcome (or its failure) and returns the exit code: 0 when measured,
/// 1 when the measurement failed.
pub fn report<T: Outcome>(scenario: &str, output: &Output, outcome: Result<T, String>) -> ExitCode {
    let result = match outcome {
        Ok(result) => result,
        Err(message) => {
            eprintln!("error: {scenario} failed: {message}");
            return ExitCode::from(1);
        }
    };
    let json = serde_json::to_string(&result).expect("a result serializes");
    if let Err(e) = std::fs::create_dir_all(&output.out)
        .and_then(|_| std::fs::write(output.out.join(format!("{}.json", result.scenario())), &json))
    {
        eprintln!("warning: cannot write the result file in {}: {e}", output.out.display());
    }
    if output.format == "json" {
        for line in result.json_lines() {
            println!("{line}");
        }
    } else {
        result.print_table();
    }
    ExitCode::SUCCESS
}

/// Each of `rows` as one JSON line (for [`Outcome::json_lines`]).
pub fn json_lines_of<T: Serialize>(rows: &[T]) -> Vec<serde_json::Value> {
    rows.iter().map(|row| serde_json::to_value(row).expect("a row serializes")).collect()
}

/// A progress bar on stderr for a run of `steps` steps, hidden when stderr is not a terminal
/// (so JSON output and logs stay clean).
pub fn progress_bar(steps: u64) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(steps);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} ({elapsed})")
    {
        bar.set_style(style);
    }
    bar
}

/// CPU time consumed by the calling thread, in seconds (Linux `CLOCK_THREAD_CPUTIME_ID`).
/// Single-thread throughput figures divide by it rather than by wall time, so that other work
/// on a shared machine does not count against whichever side happened to run beside it.
pub fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The usage error of a scenario's options: printed, exit code 2.
pub fn usage_error(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}

/// Percentiles of a set of durations, in milliseconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Summary {
    pub runs: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Summary {
    pub fn of(samples: &[Duration]) -> Self {
        let ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        Self::of_ms(&ms)
    }

    /// [`Summary::of`] samples already in milliseconds.
    pub fn of_ms(samples: &[f64]) -> Self {
        let mut ms = samples.to_vec();
        ms.sort_by(f64::total_cmp);
        let at = |q: f64| -> f64 {
            if ms.is_empty() {
                return f64::NAN;
            }
            let rank = ((q * ms.len() as f64).ceil() as usize).clamp(1, ms.len());
            ms[rank - 1]
        };
        Self { runs: ms.len(), p50_ms: at(0.5), p90_ms: at(0.9), p99_ms: at(0.99), max_ms: at(1.0) }
    }
}

/// Linea's claim, which both eps modes cite.
pub(crate) const LINEA_REFERENCE: &str = "~1M events/s on a 6-core node (~170k per core)";

/// The lines under both eps modes' tables: the result checked — (events, sum, expected sum,
/// right) — and the target per core.
pub(crate) fn print_result_and_target(result: (u64, f64, f64, bool), per_core: f64, target: f64) {
    let (events, sum, expected, right) = result;
    println!(
        "result: {events} events, sum {sum:.3} (expected {expected:.3}, to 1e-9): {}",
        if right { "right" } else { "WRONG" }
    );
    println!(
        "target ≥ {:.0}M events/s per core: {}; Linea: {LINEA_REFERENCE}",
        target / 1e6,
        if per_core >= target { "met" } else { "not met" },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let s = Summary::of(&samples);
        assert_eq!((s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms), (50.0, 90.0, 99.0, 100.0));
        assert!(Summary::of(&[]).p50_ms.is_nan());
    }
}
