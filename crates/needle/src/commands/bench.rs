//! `needle bench SCENARIO`: the reference experiments of WORKLOADS.md, each with a same-run
//! baseline and ratio. One clap subcommand per scenario; each scenario's options, measurement
//! and table live in its own file under `src/bench/`, and all of them report through
//! [`crate::bench::report`]: a table (default) or one JSON object per line (`--format json`),
//! and the JSON result written to `--out DIR/SCENARIO.json`.

use crate::bench::{kafka_scaling, latency, matching};
use clap::Subcommand;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub scenario: Scenario,
}

#[derive(Subcommand)]
pub enum Scenario {
    /// Bullet test 1: a RAW query with no filter, query sent → first record back (over HTTP).
    LatencyMin(latency::Args),
    /// Bullet test 2: a needle record written while a query waits → its result (over HTTP).
    FindRecord(latency::Args),
    /// Records/s of one worker against the number of active queries (the predicate index).
    Matching(matching::Args),
    /// Records/s per worker process reading a Kafka topic (distributed mode), 1, 2, ...
    /// processes, against a bare Kafka consumer.
    DataScalingKafka(kafka_scaling::Args),
}

pub fn run(args: Args) -> ExitCode {
    match args.scenario {
        Scenario::LatencyMin(args) => latency::run("latency-min", args),
        Scenario::FindRecord(args) => latency::run("find-record", args),
        Scenario::Matching(args) => matching::run(args),
        Scenario::DataScalingKafka(args) => kafka_scaling::run(args),
    }
}
