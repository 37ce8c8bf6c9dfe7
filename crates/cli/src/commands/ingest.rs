//! `needle ingest`: load a finite source (an NDJSON file, or stdin) into a history store and
//! exit once all of it is durable.
//!
//! ```text
//! needle ingest --source file:iot.ndjson --history /data/needle --time-field ts --sort-by sensor
//! needle gen iot --sensors 300 --minutes 1440 | needle ingest --source stdin --history /data/needle --format json
//! ```
//! Lines are read on one thread and decoded on the others (one per core), each line into the
//! record kept from the line before and from it straight into columns
//! ([`needle_history::ColumnBuffer`]); every `INGEST_PART_RECORDS` records a thread writes what
//! it gathered as sorted parts, durable at once. At the end each partition's parts are merged
//! into one, so when the command exits 0 every record is in a renamed, fsynced part. A progress
//! bar shows on a terminal. The summary: records, points (numeric top-level values other than the time
//! field: the readings of a time series), bytes on disk, bytes per point, seconds; with `--format
//! json` one JSON object on one line. Lines that are not JSON objects are counted, skipped, and
//! the first few reported on stderr. Exit codes: 0 durable, 1 the input or the store failed,
//! 2 bad arguments.

use super::history::HistoryFlags;
use super::output::Format;
use std::io::{IsTerminal, Read};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// What to load: file:PATH (NDJSON) or stdin.
    #[arg(long)]
    source: String,
    #[command(flatten)]
    history: HistoryFlags,
    /// A needle.toml whose [history] section applies (flags override it).
    #[arg(long)]
    config: Option<std::path::PathBuf>,
    /// Decoding threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// How the summary prints.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

pub fn run(args: Args) -> ExitCode {
    let mut config = match super::config::load(args.config.clone()) {
        Ok(config) => config.history,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    args.history.apply(&mut config);
    if !config.is_on() {
        eprintln!("error: where should the history go? give --history DIR");
        return ExitCode::from(2);
    }
    let (reader, size): (Box<dyn Read + Send>, Option<u64>) = match args.source.as_str() {
        "stdin" | "-" => (Box::new(std::io::stdin()), None),
        spec => match spec.strip_prefix("file:").filter(|p| !p.is_empty()) {
            Some(path) => match std::fs::File::open(path) {
                Ok(f) => {
                    let size = f.metadata().ok().map(|m| m.len());
                    (Box::new(f), size)
                }
                Err(e) => {
                    eprintln!("error: cannot open {path}: {e}");
                    return ExitCode::from(1);
                }
            },
            None => {
                eprintln!("error: --source must be file:PATH or stdin, not {spec:?}");
                return ExitCode::from(2);
            }
        },
    };
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let bar = progress_bar(size);
    let progress = |bytes: u64| {
        if let Some(bar) = &bar {
            bar.inc(bytes);
        }
    };
    let ingested = needle::ingest::ingest(&config, reader, threads, &progress);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    match ingested {
        Ok(summary) => {
            if summary.malformed > 0 {
                eprintln!("warning: skipped {} malformed input line(s):", summary.malformed);
                for (line, why) in &summary.malformed_samples {
                    eprintln!("  line {line}: {why}");
                }
            }
            match args.format {
                Format::Json => match serde_json::to_string(&summary) {
                    Ok(line) => println!("{line}"),
                    Err(e) => eprintln!("error: {e}"),
                },
                Format::Table => println!(
                    "{} records ({} points) in {:.2} s: {:.0} records/s, {:.0} points/s; \
                     {} bytes on disk, {:.3} bytes per point{}",
                    summary.records,
                    summary.points,
                    summary.seconds,
                    summary.records_per_second,
                    summary.points_per_second,
                    summary.bytes,
                    summary.bytes_per_point,
                    if summary.malformed > 0 {
                        format!("; {} malformed lines skipped", summary.malformed)
                    } else {
                        String::new()
                    }
                ),
            }
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

fn progress_bar(size: Option<u64>) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = match size {
        Some(len) => indicatif::ProgressBar::new(len),
        None => indicatif::ProgressBar::new_spinner(),
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} ingesting {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left) {wide_bar}",
    ) {
        bar.set_style(style);
    }
    Some(bar)
}
