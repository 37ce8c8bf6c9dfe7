//! `needle bench SCENARIO`: the reference experiments of WORKLOADS.md, with a same-run baseline
//! and ratio. Prints a table (default) or one JSON object per line (`--format json`), and writes
//! the JSON result to `--out DIR/SCENARIO.json`.
//!
//! Scenarios so far: `latency-min` and `find-record` (Bullet tests 1 and 2, over HTTP) and
//! `matching` (records/s on one worker against the number of active queries).

use crate::bench::latency::{self, LatencyResult};
use crate::bench::matching::{self, MatchingPlan, MatchingResult};
use comfy_table::Table;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// latency-min | find-record | matching
    #[arg(value_parser = ["latency-min", "find-record", "matching"])]
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
    /// matching: the query counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100,1000,10000,100000")]
    pub queries: Vec<usize>,
    /// matching: the query sets, `a` (Bullet test 7: id needles) and/or `b` (a mix).
    #[arg(long, value_delimiter = ',', default_value = "a,b", value_parser = ["a", "b"])]
    pub set: Vec<String>,
    /// matching: generated bullet records held in memory and read over and over.
    #[arg(long, default_value_t = 20_000)]
    pub records: usize,
    /// matching: seconds to measure each point (and as long again for its baseline).
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// matching: skip the memory-per-idle-query measurement.
    #[arg(long)]
    pub no_memory: bool,
    /// Seed of the generated records and queries.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

pub fn run(args: Args) -> ExitCode {
    if args.runs == 0 || !(args.rate >= 0.0 && args.rate.is_finite()) {
        eprintln!("error: --runs must be at least 1 and --rate a number ≥ 0");
        return ExitCode::from(2);
    }
    if args.scenario == "matching" {
        return run_matching(&args);
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

fn run_matching(args: &Args) -> ExitCode {
    if args.queries.is_empty() || args.records == 0 || args.seconds.is_nan() || args.seconds <= 0.0
    {
        eprintln!("error: --queries needs at least one count, --records and --seconds must be > 0");
        return ExitCode::from(2);
    }
    let plan = MatchingPlan {
        sets: args.set.iter().filter_map(|s| s.chars().next()).collect(),
        queries: args.queries.clone(),
        records: args.records,
        seconds: args.seconds,
        seed: args.seed,
        memory: !args.no_memory,
    };
    let result = match matching::run(&plan) {
        Ok(result) => result,
        Err(message) => {
            eprintln!("error: matching failed: {message}");
            return ExitCode::from(1);
        }
    };
    let json = serde_json::to_string(&result).expect("a result serializes");
    if let Err(e) = std::fs::create_dir_all(&args.out)
        .and_then(|_| std::fs::write(args.out.join("matching.json"), &json))
    {
        eprintln!("warning: cannot write the result file in {}: {e}", args.out.display());
    }
    if args.format == "json" {
        for row in &result.rows {
            println!("{}", serde_json::to_string(row).expect("a row serializes"));
        }
        if let Some(memory) = &result.memory {
            println!("{}", serde_json::to_string(memory).expect("a row serializes"));
        }
    } else {
        print_matching(&result);
    }
    ExitCode::SUCCESS
}

fn print_matching(r: &MatchingResult) {
    let mut table = Table::new();
    table.set_header([
        "set",
        "queries",
        "records/s",
        "parse-only records/s",
        "ratio",
        "candidates/record",
        "matched/record",
        "add ms",
    ]);
    for row in &r.rows {
        table.add_row([
            row.set.clone(),
            row.queries.to_string(),
            format!("{:.0}", row.records_per_sec),
            format!("{:.0}", row.parse_only_records_per_sec),
            format!("{:.2}", row.ratio),
            format!("{:.2}", row.candidates_per_record),
            format!("{:.3}", row.matched_per_record),
            format!("{:.0}", row.add_ms),
        ]);
    }
    println!("matching: one worker thread, bullet records of {:.0} bytes", r.record_bytes);
    println!("{table}");
    if let Some(m) = &r.memory {
        println!(
            "memory: {:.0} bytes per idle query ({} idle queries submitted in {:.0} ms)",
            m.bytes_per_idle_query, m.idle_queries, m.submit_ms
        );
    }
}
