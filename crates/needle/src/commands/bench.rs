//! `needle bench SCENARIO`: the reference experiments of WORKLOADS.md, with a same-run baseline
//! and ratio. Prints a table (default) or one JSON object per line (`--format json`), and writes
//! the JSON result to `--out DIR/SCENARIO.json`.
//!
//! Scenarios so far: `latency-min` and `find-record` (Bullet tests 1 and 2, over HTTP).

use crate::bench::latency::{self, LatencyResult};
use comfy_table::Table;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// latency-min | find-record
    #[arg(value_parser = ["latency-min", "find-record"])]
    pub scenario: String,
    /// Measurements to take.
    #[arg(long, default_value_t = 200)]
    pub runs: usize,
    /// Background records per second fed into the server while measuring (0: idle).
    #[arg(long, default_value_t = 20_000.0)]
    pub rate: f64,
    /// `table` (default) or `json` (one object per line).
    #[arg(long, default_value = "table", value_parser = ["table", "json"])]
    pub format: String,
    /// Where to write SCENARIO.json.
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
}

pub fn run(args: Args) -> ExitCode {
    if args.runs == 0 || !(args.rate >= 0.0 && args.rate.is_finite()) {
        eprintln!("error: --runs must be at least 1 and --rate a number ≥ 0");
        return ExitCode::from(2);
    }
    let outcome = match args.scenario.as_str() {
        "latency-min" => latency::latency_min(args.runs, args.rate),
        _ => latency::find_record(args.runs, args.rate),
    };
    let result = match outcome {
        Ok(result) => result,
        Err(message) => {
            eprintln!("error: {} failed: {message}", args.scenario);
            return ExitCode::from(1);
        }
    };
    let json = serde_json::to_string(&result).expect("a result serializes");
    if let Err(e) = std::fs::create_dir_all(&args.out)
        .and_then(|_| std::fs::write(args.out.join(format!("{}.json", result.scenario)), &json))
    {
        eprintln!("warning: cannot write the result file in {}: {e}", args.out.display());
    }
    if args.format == "json" {
        println!("{json}");
    } else {
        print_table(&result);
    }
    ExitCode::SUCCESS
}

fn print_table(r: &LatencyResult) {
    let mut table = Table::new();
    table.set_header(["", "runs", "p50 ms", "p90 ms", "p99 ms", "max ms"]);
    for (name, s) in [("needle", &r.needle), (r.baseline_name, &r.baseline)] {
        table.add_row([
            name.to_owned(),
            s.runs.to_string(),
            format!("{:.3}", s.p50_ms),
            format!("{:.3}", s.p90_ms),
            format!("{:.3}", s.p99_ms),
            format!("{:.3}", s.max_ms),
        ]);
    }
    println!("{} at {} background records/s", r.scenario, r.rate);
    println!("{table}");
    println!(
        "needle p50 / baseline p50 = {:.2}; Bullet on Storm (reference): {} ms",
        r.ratio_p50, r.bullet_reference_ms
    );
}
