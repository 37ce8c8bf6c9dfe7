//! `needle bench vs-bullet`: needle against Bullet's own query engine (bullet-core 1.5.2 from
//! Maven Central, run by the peer in `bench/peers/bullet`) on the same records file and the
//! same BQL queries, one core each, in one run; records/s of both and the ratio per query count.
//!
//! One command does it all:
//! 1. generates `--records` bullet records with needle's generator (seeded) into
//!    `OUT/vs-bullet/records.ndjson`, and the query files `q{N}.bql` (each a prefix of the
//!    largest);
//! 2. builds the peer if needed (its `run.sh`: Maven, once);
//! 3. **same-results check**: both engines run every query of the largest count over the first
//!    `--check-records` records, and every query's result records must be equal (see
//!    `compare`); a disagreement stops the bench with an error. Some queries look for ids
//!    that are in those records, so the check compares non-empty results;
//! 4. for each query count: Bullet on the file (the peer, in its own JVM), then needle on the
//!    same bytes on one thread of this process.
//!
//! What each side's time covers:
//! - **needle**: every line from its JSON bytes (held in memory) through every query: lazy
//!   decoding, the predicate index, filters, aggregation, the join (`needle_side`); wall
//!   clock of that loop over whole passes.
//! - **Bullet**: the peer reads the lines (untimed), decodes them into Bullet records (timed on
//!   its own: `decode`), then runs every record through every query's Querier as a Filter bolt
//!   does (`QueryManager.categorize`, timed on its own: `engine`). `bullet_records_per_sec` is
//!   the same work from the same bytes: one record costs its decoding plus its querying,
//!   `1 / (1/decode + 1/engine)`. `ratio` uses it. The engine alone (records decoded
//!   beforehand, Bullet at its most favourable) is `bullet_engine_records_per_sec`, with its own
//!   `ratio_engine_only`.
//!
//! One core: needle's measuring thread is pinned to `--cpu`, and the JVM runs under
//! `taskset -c CPU`, so its JIT compiler and GC threads share that core with its query thread
//! (the JVM then sees one CPU and picks its serial GC). Without `taskset`, or with `--no-pin`,
//! nothing is pinned and the result says so. Thread CPU-time figures are reported beside the
//! wall-clock ones (`*_per_cpu_sec`): on a loaded machine they are the steadier of the two.

mod compare;
mod needle_side;
mod peer;

use super::matching::bullet_lines;
use super::{Outcome, Output};
use comfy_table::Table;
use peer::{Peer, PeerReport, RunOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use sonic_rs::JsonValueTrait;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The options of `needle bench vs-bullet`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The query counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100,1000")]
    pub queries: Vec<usize>,
    /// Generated bullet records in the file both engines read.
    #[arg(long, default_value_t = 20_000)]
    pub records: usize,
    /// The queries: `a`, Bullet test 7 (`SELECT * FROM STREAM(30000, TIME) WHERE id = '<id>'
    /// LIMIT 10`, one id in four present in the records), or `mix` (that, a RAW range on
    /// `timespent`, GROUP BY with COUNT and AVG, COUNT DISTINCT, COUNT/SUM/MIN/MAX, in turn).
    #[arg(long, default_value = "a", value_parser = ["a", "mix"])]
    pub set: String,
    /// Seconds of timed passes per query count, for each engine (Bullet's passes are planned
    /// from an estimate of its speed, at least one).
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// The same-results check runs on the first N records.
    #[arg(long, default_value_t = 1_000)]
    pub check_records: usize,
    /// Seed of the records and the queries.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The Bullet peer's folder (default: bench/peers/bullet in or above the current directory
    /// or the needle binary).
    #[arg(long)]
    pub peer: Option<PathBuf>,
    /// How the peer builds Bullet records: `typed` (typedSet with the type JSON gave, the
    /// faster) or `setters` (setString, setStringMap..., Bullet infers each type).
    #[arg(long, default_value = "typed", value_parser = ["typed", "setters"])]
    pub bullet_decode: String,
    /// The CPU both engines run on.
    #[arg(long, default_value_t = 0)]
    pub cpu: usize,
    /// Pin nothing (the JVM's JIT and GC threads then use the other cores).
    #[arg(long)]
    pub no_pin: bool,
    /// For testing the check: the peer runs this query file in the same-results check instead
    /// of needle's, which must make the check fail.
    #[arg(long, hide = true)]
    pub check_peer_queries: Option<PathBuf>,
    #[command(flatten)]
    pub validate: super::ValidateOption,
    #[command(flatten)]
    pub output: Output,
}

/// Runs `needle bench vs-bullet` and reports it.
pub fn run(args: Args) -> ExitCode {
    if args.queries.is_empty() || args.queries.contains(&0) {
        return super::usage_error("--queries needs one or more counts, each at least 1");
    }
    if args.records == 0 || args.check_records == 0 {
        return super::usage_error("--records and --check-records must be at least 1");
    }
    if !(args.seconds.is_finite() && args.seconds > 0.0) {
        return super::usage_error("--seconds must be > 0");
    }
    if !args.no_pin {
        let cpu = args.cpu;
        let pinned = std::thread::spawn(move || needle_side::pin_current_thread(cpu)).join();
        if let Ok(Err(message)) = pinned {
            return super::usage_error(&message);
        }
    }
    super::report("vs-bullet", &args.output, measure(&args))
}

/// Where each engine runs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Pinning {
    /// The CPU needle's measuring thread is pinned to.
    pub needle_cpu: Option<usize>,
    /// The CPU the JVM is confined to (`taskset -c`).
    pub bullet_cpu: Option<usize>,
}

impl Pinning {
    fn describe(&self) -> String {
        match (self.needle_cpu, self.bullet_cpu) {
            (Some(n), Some(b)) => format!(
                "one core each: needle's thread pinned to CPU {n}, Bullet's JVM under taskset -c {b} \
                 (its JIT and GC threads share that core)"
            ),
            (Some(n), None) => format!(
                "needle's thread pinned to CPU {n}; Bullet's JVM not pinned (no taskset): one \
                 query thread, its JIT and GC threads on any core"
            ),
            _ => "nothing pinned (--no-pin): one thread each; the JVM's JIT and GC threads on \
                  any core"
                .into(),
        }
    }
}

/// The same-results check, as run.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub records: usize,
    #[serde(flatten)]
    pub agreement: compare::Agreement,
}

/// One query count.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub scenario: &'static str,
    /// How much of each record needle checked as JSON (`line`: all of it, its default).
    pub needle_validate: needle_record::Validation,
    pub set: String,
    pub queries: usize,
    pub records: usize,
    /// From the JSON bytes through every query, one thread (wall clock).
    pub needle_records_per_sec: f64,
    /// The same work from the same bytes: Bullet's decoding plus its engine, per record.
    pub bullet_records_per_sec: f64,
    /// needle ÷ Bullet, both from the bytes.
    pub ratio: f64,
    /// Bullet's engine alone, records decoded beforehand (the peer's `records_per_sec`).
    pub bullet_engine_records_per_sec: f64,
    pub ratio_engine_only: f64,
    /// Bullet's JSON → record decoding alone.
    pub bullet_decode_records_per_sec: f64,
    /// The same figures per second of the measuring thread's own CPU time.
    pub needle_records_per_cpu_sec: f64,
    pub bullet_records_per_cpu_sec: f64,
    pub ratio_cpu: f64,
    pub bullet_engine_records_per_cpu_sec: f64,
    pub bullet_decode_records_per_cpu_sec: f64,
    pub needle_passes: usize,
    pub bullet_passes: usize,
    pub bullet_warmup_passes: usize,
    /// `/proc/loadavg` (1, 5, 15 minutes) just after this point was measured.
    pub load_average: [f64; 3],
}

#[derive(Debug, Clone, Serialize)]
pub struct VsBulletResult {
    pub set: String,
    pub records: usize,
    pub record_bytes: f64,
    pub seed: u64,
    pub bullet_decode: String,
    pub pinning: Pinning,
    pub check: Check,
    /// The records and query files both engines read.
    pub files: PathBuf,
    /// The Bullet peer's folder.
    pub peer: PathBuf,
    pub load_average_at_start: [f64; 3],
    pub rows: Vec<Row>,
}

impl Outcome for VsBulletResult {
    fn scenario(&self) -> &str {
        "vs-bullet"
    }

    fn json_lines(&self) -> Vec<serde_json::Value> {
        crate::json_lines_of(&self.rows)
    }

    fn print_table(&self) {
        let mut table = Table::new();
        table.set_header([
            "queries",
            "needle records/s",
            "Bullet records/s (decode + engine)",
            "ratio",
            "Bullet engine only (pre-decoded)",
            "ratio vs engine only",
            "load avg (1 min)",
        ]);
        for row in &self.rows {
            table.add_row([
                row.queries.to_string(),
                format!("{:.0}", row.needle_records_per_sec),
                format!("{:.0}", row.bullet_records_per_sec),
                format!("{:.1}", row.ratio),
                format!("{:.0}", row.bullet_engine_records_per_sec),
                format!("{:.2}", row.ratio_engine_only),
                format!("{:.2}", row.load_average[0]),
            ]);
        }
        let checked = match self.rows.first().map(|r| r.needle_validate) {
            Some(needle_record::Validation::Fields) => "needle checks the fields read",
            _ => "needle checks whole lines",
        };
        println!(
            "vs-bullet: {} bullet records of {:.0} bytes (seed {}), query set {}; {}; {checked}",
            self.records,
            self.record_bytes,
            self.seed,
            self.set,
            self.pinning.describe()
        );
        println!(
            "same results: {} queries on the first {} records agree ({} with records, {} records \
             compared)",
            self.check.agreement.queries,
            self.check.records,
            self.check.agreement.non_empty,
            self.check.agreement.records_compared
        );
        println!("{table}");
        let decode = self.rows.iter().map(|r| r.bullet_decode_records_per_sec).fold(0.0, f64::max);
        println!(
            "needle: JSON bytes → every query → join, one thread. Bullet: JSON → record ({} \
             decoding, up to {decode:.0} records/s here), then every record through every query \
             as a Filter bolt; \"decode + engine\" adds both times per record. Files: {}",
            self.bullet_decode,
            self.files.display()
        );
    }
}

fn measure(args: &Args) -> Result<VsBulletResult, String> {
    let progress = super::progress_bar(1 + 2 * args.queries.len() as u64);
    let result = measure_with(args, &progress);
    // cleared on an error too, so that the error is the last thing on the terminal
    progress.finish_and_clear();
    result
}

fn measure_with(args: &Args, progress: &indicatif::ProgressBar) -> Result<VsBulletResult, String> {
    let load_average_at_start = load_average();
    let pinning = if args.no_pin {
        Pinning { needle_cpu: None, bullet_cpu: None }
    } else if peer::has_taskset() {
        Pinning { needle_cpu: Some(args.cpu), bullet_cpu: Some(args.cpu) }
    } else {
        progress
            .suspend(|| eprintln!("warning: taskset is not on PATH: Bullet's JVM runs unpinned"));
        Pinning { needle_cpu: Some(args.cpu), bullet_cpu: None }
    };
    let peer = Peer::locate(args.peer.as_deref())?;
    progress.set_message("building the Bullet peer");
    peer.build()?;

    progress.set_message("generating the records");
    let files = args.output.out.join("vs-bullet");
    std::fs::create_dir_all(&files)
        .map_err(|e| format!("cannot create {}: {e}", files.display()))?;
    let lines = bullet_lines(args.records, args.seed)?;
    let records_file = files.join("records.ndjson");
    write_lines(&records_file, &lines)?;
    let check_lines = &lines[..args.check_records.min(lines.len())];
    let check_file = files.join("check.ndjson");
    write_lines(&check_file, check_lines)?;

    let ids = record_ids(&lines)?;
    let present = record_ids(check_lines)?;
    let largest = args.queries.iter().copied().max().unwrap_or(1);
    let texts = query_texts(&args.set, largest, args.seed, &present, &ids.into_iter().collect());
    let query_file = |count: usize| files.join(format!("q{count}.bql"));
    for &count in args.queries.iter().chain([largest].iter()) {
        let body: String = texts[..count].iter().map(|t| format!("{t}\n")).collect();
        std::fs::write(query_file(count), body)
            .map_err(|e| format!("cannot write {}: {e}", query_file(count).display()))?;
    }

    progress.set_message(format!("same-results check: {largest} queries, both engines"));
    let check_queries = args.check_peer_queries.clone().unwrap_or_else(|| query_file(largest));
    let options = RunOptions {
        warmup: Some(0),
        repeat: 1,
        cpu: pinning.bullet_cpu,
        decode: args.bullet_decode.clone(),
    };
    let bullet = peer.run(&check_file, &check_queries, &options)?;
    let needle: Vec<Vec<serde_json::Value>> =
        needle_side::results(&texts, args.validate.validation(), check_lines)?
            .iter()
            .map(|records| {
                records
                    .iter()
                    .map(|r| serde_json::to_value(r).expect("a record serializes"))
                    .collect()
            })
            .collect();
    let agreement = compare::compare(&texts, &needle, &bullet.results).map_err(|e| {
        format!(
            "the same-results check failed ({} records, files in {}): {e}",
            check_lines.len(),
            files.display()
        )
    })?;
    progress.inc(1);

    let mut rows = Vec::new();
    for &count in &args.queries {
        progress.set_message(format!("{count} queries: Bullet"));
        let repeat = bullet_passes(lines.len(), count, args.seconds);
        let options = RunOptions {
            warmup: None,
            repeat,
            cpu: pinning.bullet_cpu,
            decode: args.bullet_decode.clone(),
        };
        let bullet = peer.run(&records_file, &query_file(count), &options)?;
        check_bullet_run(&bullet, count, lines.len())?;
        progress.inc(1);
        progress.set_message(format!("{count} queries: needle"));
        let needle = needle_side::measure(
            &texts[..count],
            args.validate.validation(),
            &lines,
            args.seconds,
            pinning.needle_cpu,
        )?;
        progress.inc(1);
        rows.push(row(&args.set, args.validate.validation(), count, lines.len(), &needle, &bullet));
    }
    let bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
    Ok(VsBulletResult {
        set: args.set.clone(),
        records: lines.len(),
        record_bytes: bytes as f64 / lines.len() as f64,
        seed: args.seed,
        bullet_decode: args.bullet_decode.clone(),
        pinning,
        check: Check { records: check_lines.len(), agreement },
        files,
        peer: peer.dir().to_path_buf(),
        load_average_at_start,
        rows,
    })
}

/// A timed Bullet run is only a figure if every query ran over every record it was meant to.
fn check_bullet_run(report: &PeerReport, queries: usize, records: usize) -> Result<(), String> {
    if report.queries != queries || report.records != records {
        return Err(format!(
            "the Bullet peer ran {} queries over {} records, not {queries} over {records}",
            report.queries, report.records
        ));
    }
    if report.timed_out > 0 {
        return Err(format!(
            "{} Bullet query runs reached the end of their 30 s duration during a timed pass, so \
             they stopped consuming records: use fewer --records",
            report.timed_out
        ));
    }
    if report.rate_limited > 0 {
        return Err(format!("{} Bullet queries were rate limited", report.rate_limited));
    }
    Ok(())
}

fn row(
    set: &str,
    validate: needle_record::Validation,
    queries: usize,
    records: usize,
    needle: &needle_side::Measured,
    bullet: &PeerReport,
) -> Row {
    // one record costs its decoding and its querying
    let both = |decode: f64, engine: f64| 1.0 / (1.0 / decode + 1.0 / engine);
    let bullet_records_per_sec = both(bullet.decode_records_per_sec, bullet.records_per_sec);
    let bullet_records_per_cpu_sec =
        both(bullet.decode_records_per_cpu_sec, bullet.records_per_cpu_sec);
    Row {
        scenario: "vs-bullet",
        needle_validate: validate,
        set: set.to_owned(),
        queries,
        records,
        needle_records_per_sec: needle.records_per_sec,
        bullet_records_per_sec,
        ratio: needle.records_per_sec / bullet_records_per_sec,
        bullet_engine_records_per_sec: bullet.records_per_sec,
        ratio_engine_only: needle.records_per_sec / bullet.records_per_sec,
        bullet_decode_records_per_sec: bullet.decode_records_per_sec,
        needle_records_per_cpu_sec: needle.records_per_cpu_sec,
        bullet_records_per_cpu_sec,
        ratio_cpu: needle.records_per_cpu_sec / bullet_records_per_cpu_sec,
        bullet_engine_records_per_cpu_sec: bullet.records_per_cpu_sec,
        bullet_decode_records_per_cpu_sec: bullet.decode_records_per_cpu_sec,
        needle_passes: needle.passes,
        bullet_passes: bullet.timed_passes,
        bullet_warmup_passes: bullet.warmup_passes,
        load_average: load_average(),
    }
}

/// Timed passes for Bullet to take about `seconds`, from its measured cost on this kind of
/// record (the peer's README: about 1 µs per record plus 0.1–0.2 µs per query in Filter-bolt
/// mode); at least one.
fn bullet_passes(records: usize, queries: usize, seconds: f64) -> usize {
    let per_record = 1e-6 + 0.2e-6 * queries as f64;
    ((seconds / (records as f64 * per_record)).ceil() as usize).clamp(1, 1_000)
}

fn write_lines(path: &Path, lines: &[Vec<u8>]) -> Result<(), String> {
    let mut body = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in lines {
        body.extend_from_slice(line);
        body.push(b'\n');
    }
    std::fs::write(path, body).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The `id` of every record.
fn record_ids(lines: &[Vec<u8>]) -> Result<Vec<String>, String> {
    lines
        .iter()
        .map(|line| {
            sonic_rs::get_from_slice(line, &["id"])
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .ok_or_else(|| "a generated record has no string id".to_owned())
        })
        .collect()
}

const COUNTRIES: &[&str] = &["US", "IN", "BR", "GB", "DE", "FR", "JP", "CA"];
const DEVICES: &[&str] = &["iphone", "android", "desktop", "ipad", "tablet", "tv"];
const BROWSERS: &[&str] = &["chrome", "safari", "edge", "firefox", "samsung"];
const OS: &[&str] = &["ios", "android", "windows", "macos", "linux"];
const LANGS: &[&str] = &["en", "es", "pt", "fr", "de"];

/// The BQL texts of `count` queries of set `a` or `mix`, deterministic for `seed`; the first
/// `n` of `count` are the texts of `n`, so the largest set holds every smaller one. An id query
/// looks for one of `present` (one in four) or for a random id of the same shape that none of
/// `absent_from` has.
pub fn query_texts(
    set: &str,
    count: usize,
    seed: u64,
    present: &[String],
    absent_from: &HashSet<String>,
) -> Vec<String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7673_2d62_756c_6c65);
    let kinds = if set == "mix" { 5 } else { 1 };
    fn pick(rng: &mut ChaCha8Rng, from: &[&'static str]) -> &'static str {
        from[rng.random_range(0..from.len())]
    }
    (0..count)
        .map(|i| match i % kinds {
            0 => {
                let id = if (i / kinds) % 4 == 1 && !present.is_empty() {
                    present[rng.random_range(0..present.len())].clone()
                } else {
                    absent_id(&mut rng, absent_from)
                };
                format!("SELECT * FROM STREAM(30000, TIME) WHERE id = '{id}' LIMIT 10")
            }
            1 => {
                let low = rng.random_range(0..3590);
                format!(
                    "SELECT id, timespent FROM STREAM(30000, TIME) \
                     WHERE timespent >= {low} AND timespent <= {} LIMIT 10",
                    low + 9
                )
            }
            2 => format!(
                "SELECT browser_version, COUNT(*) AS n, AVG(page_load_ms) AS avg_load_ms \
                 FROM STREAM(30000, TIME) WHERE demographics.country = '{}' AND device = '{}' \
                 GROUP BY browser_version",
                pick(&mut rng, COUNTRIES),
                pick(&mut rng, DEVICES)
            ),
            3 => format!(
                "SELECT COUNT(DISTINCT session_id) AS sessions FROM STREAM(30000, TIME) \
                 WHERE browser_name = '{}' AND os_name = '{}'",
                pick(&mut rng, BROWSERS),
                pick(&mut rng, OS)
            ),
            _ => format!(
                "SELECT COUNT(*) AS n, SUM(dl_bytes) AS bytes, MIN(timespent) AS least, \
                 MAX(timespent) AS most FROM STREAM(30000, TIME) \
                 WHERE device = '{}' AND lang = '{}'",
                pick(&mut rng, DEVICES),
                pick(&mut rng, LANGS)
            ),
        })
        .collect()
}

/// A random id of the records' shape (10 lowercase hex characters) that no record has.
fn absent_id(rng: &mut ChaCha8Rng, records: &HashSet<String>) -> String {
    loop {
        let id = format!("{:010x}", rng.random_range(0..1u64 << 40));
        if !records.contains(&id) {
            return id;
        }
    }
}

/// `/proc/loadavg`'s three averages (zeros where it cannot be read).
fn load_average() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut out = [0.0; 3];
    for (slot, field) in out.iter_mut().zip(text.split_whitespace()) {
        *slot = field.parse().unwrap_or(0.0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_sets_are_prefix_stable_compile_and_mix_present_and_absent_ids() {
        let lines = bullet_lines(50, 3).unwrap();
        let ids = record_ids(&lines).unwrap();
        let all: HashSet<String> = ids.iter().cloned().collect();
        for set in ["a", "mix"] {
            let texts = query_texts(set, 40, 3, &ids[..10], &all);
            assert_eq!(query_texts(set, 7, 3, &ids[..10], &all), texts[..7]);
            needle_side::Queries::compile(&texts, needle_record::Validation::Line).unwrap();
        }
        let a = query_texts("a", 8, 3, &ids[..10], &all);
        let present = a.iter().filter(|t| ids[..10].iter().any(|id| t.contains(id.as_str())));
        assert_eq!(present.count(), 2, "one in four: {a:?}");
        assert!(a.iter().all(|t| t.starts_with("SELECT * FROM STREAM(30000, TIME) WHERE id = '")));
        let mix = query_texts("mix", 5, 3, &ids[..10], &all);
        assert!(mix[1].contains("timespent >=") && mix[2].contains("GROUP BY browser_version"));
        assert!(mix[3].contains("COUNT(DISTINCT session_id)") && mix[4].contains("SUM(dl_bytes)"));
    }

    #[test]
    fn needle_finds_a_present_id_and_stops_a_raw_query_at_its_limit() {
        let lines = bullet_lines(30, 5).unwrap();
        let ids = record_ids(&lines).unwrap();
        let texts = vec![
            format!("SELECT * FROM STREAM(30000, TIME) WHERE id = '{}' LIMIT 10", ids[7]),
            "SELECT id FROM STREAM(30000, TIME) LIMIT 4".to_owned(),
            "SELECT COUNT(*) AS n FROM STREAM(30000, TIME)".to_owned(),
        ];
        let results =
            needle_side::results(&texts, needle_record::Validation::Line, &lines).unwrap();
        assert_eq!(results[0].len(), 1);
        assert_eq!(results[0][0].get("id").and_then(|v| v.as_str()), Some(ids[7].as_str()));
        assert_eq!(results[0][0].len(), 92, "SELECT * gives the whole record");
        let first: Vec<_> = results[1].iter().filter_map(|r| r.get("id")?.as_str()).collect();
        assert_eq!(first, ids[..4].iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(results[2][0].get("n").and_then(|v| v.as_i64()), Some(30));
    }

    #[test]
    fn bullet_gets_enough_passes_for_the_time_asked_and_at_least_one() {
        assert_eq!(bullet_passes(20_000, 1_000, 1.0), 1);
        assert!((20..=60).contains(&bullet_passes(20_000, 1, 1.0)));
        assert_eq!(bullet_passes(1, 1, 1e9), 1_000);
    }
}
