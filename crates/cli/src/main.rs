//! The `needle` command line: one subcommand per file under `commands/`.
//!
//! Its place in the flow: the top — `serve` starts the runtime and the HTTP API over a source
//! (or a node of the distributed mode), `query`/`ingest` run the library's layers over a file,
//! and `bench` hands over to the scenarios of `needle-bench`.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// jemalloc, not the system's allocator: needle's records and results are made on one thread
/// (a worker, the joiner) and freed on another (an HTTP thread), which glibc's allocator makes
/// slow (its arenas' locks and consolidation were a third of the HTTP threads' time with
/// 100,000 queries completing). Measured in `docs/benchmarks.md` (max-raw-queries, eps). A
/// program embedding the library chooses its own. Built with the `system-allocator` feature, the
/// binary keeps the system's allocator, which heap profilers (heaptrack, valgrind) can follow.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

mod commands;

/// jemalloc's (allocated, resident) bytes, as of now (its statistics refreshed first); none
/// with the system's allocator.
#[cfg(not(feature = "system-allocator"))]
fn heap_bytes() -> Option<(u64, u64)> {
    tikv_jemalloc_ctl::epoch::advance().ok()?;
    let allocated = tikv_jemalloc_ctl::stats::allocated::read().ok()?;
    let resident = tikv_jemalloc_ctl::stats::resident::read().ok()?;
    Some((allocated as u64, resident as u64))
}

#[cfg(feature = "system-allocator")]
fn heap_bytes() -> Option<(u64, u64)> {
    None
}

/// needle: a real-time query engine for live event streams.
#[derive(Parser)]
#[command(name = "needle", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check a query (BQL, or a Bullet JSON query); print its plan as JSON, or the error.
    Validate(commands::validate::Args),
    /// Describe in words what a query does.
    Explain(commands::explain::Args),
    /// Run one query over a finite NDJSON input.
    Query(commands::query::Args),
    /// Write a generated workload (bullet, iot, small; see docs/workloads.md) as NDJSON.
    Gen(commands::gen::Args),
    /// Read a live stream and answer queries over HTTP.
    Serve(commands::serve::Args),
    /// Load a finite source (an NDJSON file, or stdin) into a history store, and exit once it
    /// is durable.
    Ingest(commands::ingest::Args),
    /// What a history store holds: partitions, parts, records, bytes, time range, columns.
    History(commands::history::Args),
    /// Print the configuration in force (defaults, needle.toml, NEEDLE_* variables) as TOML.
    Config(commands::config::Args),
    /// List the queries running on a server.
    Queries(commands::queries::Args),
    /// Kill a query running on a server.
    Kill(commands::kill::Args),
    /// A whole cluster on this machine: a Kafka broker, worker nodes, api nodes and a generated
    /// stream (up), what runs (status), stop it all (down).
    Cluster(commands::cluster::Args),
    /// Run a benchmark scenario (see docs/workloads.md), with a same-run baseline.
    Bench(needle_bench::Args),
}

fn main() -> ExitCode {
    // a panic's message shows no secret the configuration gave
    needle_runtime::secrets::scrub_panic_messages();
    let cli = Cli::parse();
    match cli.command {
        Command::Validate(args) => commands::validate::run(args),
        Command::Explain(args) => commands::explain::run(args),
        Command::Query(args) => commands::query::run(args),
        Command::Gen(args) => commands::gen::run(args),
        Command::Serve(args) => commands::serve::run(args),
        Command::Ingest(args) => commands::ingest::run(args),
        Command::History(args) => commands::history::run(args),
        Command::Config(args) => commands::config::run(args),
        Command::Queries(args) => commands::queries::run(args),
        Command::Kill(args) => commands::kill::run(args),
        Command::Cluster(args) => commands::cluster::run(args),
        Command::Bench(args) => {
            needle_bench::set_heap_probe(heap_bytes);
            needle_bench::run(args)
        }
    }
}
