//! `needle bench SCENARIO`: one clap subcommand per scenario; each scenario's options,
//! measurement and table live in its own file of this crate, and all of them report through
//! [`crate::report`]: a table (default) or one JSON object per line (`--format json`), and the
//! JSON result written to `--out DIR/SCENARIO.json`.

use crate::{
    data_scaling, eps, history, ingest, latency, matching, max_raw_queries, query_scaling,
    vs_bullet,
};
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
    /// needle against Bullet's own engine (the peer in bench/peers/bullet) on the same records
    /// and queries, one core each: records/s of both and the ratio per query count.
    VsBullet(vs_bullet::Args),
    /// Bullet tests 3–4: N RAW queries each waiting for 10 needle records; the largest N with
    /// every record found.
    MaxRawQueries(max_raw_queries::Args),
    /// Linea's events per second: small events end to end, per core, against reading and
    /// line-splitting the same bytes.
    Eps(eps::Args),
    /// Bullet test 7: read → filter latency against the number of concurrent RAW queries; the
    /// knee; a chart.
    QueryScaling(query_scaling::Args),
    /// Bullet tests 5–6: records/s and MiB/s per core with 400 RAW queries, for 1 and 2
    /// workers, while read → filter latency stays under 200 ms; a chart. With `--source kafka`:
    /// records/s per worker process reading a Kafka topic, against a bare Kafka consumer.
    DataScaling(data_scaling::Args),
    /// Akumuli's workload kept in history and read back: ingest points per CPU-second, bytes
    /// per point, and per-series MAX, the `temp0 > 95` needle filter, an hourly downsample and a
    /// one-hour COUNT, each beside DuckDB (PyPI) on the same records in the same run.
    History(history::Args),
    /// Metrics agents' protocols (InfluxDB line protocol, OpenTSDB, Graphite, Prometheus remote
    /// write) end to end into history: points per CPU-second of each, beside JSON lines carrying
    /// the same points in the same run, and each decoder's bare rate.
    Ingest(ingest::Args),
}

pub fn run(args: Args) -> ExitCode {
    match args.scenario {
        Scenario::LatencyMin(args) => latency::run("latency-min", args),
        Scenario::FindRecord(args) => latency::run("find-record", args),
        Scenario::Matching(args) => matching::run(args),
        Scenario::VsBullet(args) => vs_bullet::run(args),
        Scenario::MaxRawQueries(args) => max_raw_queries::run(args),
        Scenario::Eps(args) => eps::run(args),
        Scenario::QueryScaling(args) => query_scaling::run(args),
        Scenario::DataScaling(args) => data_scaling::run(args),
        Scenario::History(args) => history::run(args),
        Scenario::Ingest(args) => ingest::run(args),
    }
}
