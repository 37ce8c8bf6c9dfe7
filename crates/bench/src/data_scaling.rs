//! `needle bench data-scaling` (Bullet tests 5–6): records/s and MiB/s per core with 400 RAW
//! queries running, for 1 and 2 worker threads, counting a rate only when read → filter latency
//! stays under 200 ms; a chart of records/s against workers.
//!
//! Each trial is a fresh server in this process (the runtime with `--workers` workers and the
//! HTTP API on loopback) reading Bullet-shaped records (1.8 KiB) from `--source`:
//! - `tcp` (default): a `tcp:` source fed by a feeder thread writing a pool of 20,000 generated
//!   records over and over, paced at the trial's rate or unpaced;
//! - `gen`: the runtime's own generator source, `gen:bullet?rate=R` (generation runs on the
//!   source thread, inside needle, and costs ~10 µs a record);
//! - `file`: a file source over `--file-records` generated records, read as fast as the
//!   workers take them (one unpaced pass per worker count: a file cannot be paced).
//!
//! The source is held back until the 400 queries run (submitted through the WebSocket):
//! `SELECT * FROM STREAM(…, TIME) WHERE timespent = <k> AND dl_bytes BETWEEN (<lo>, <lo+99>)
//! LIMIT 500`, each matching about one record in 356,000 (together ~0.11% of the records, each
//! of which is then decoded whole for `*`). After `--warmup` seconds, the trial measures for
//! `--seconds`: records and bytes read (the runtime's counters), the read → match histogram
//! (`needle_read_to_match_seconds`, Bullet's "read → filter": from the source reading a batch to
//! its records having matched, observed for batches where something matched; quantiles
//! interpolated inside its power-of-two buckets), and the CPU seconds of the worker threads.
//!
//! Per worker count: first an unpaced trial (the ceiling), then paced trials at `--fractions` of
//! that ceiling (one above 1, since an unpaced trial on a shared machine can come out low). A paced trial is **sustained** when the runtime read at least 97% of the
//! offered rate (otherwise the backlog grows outside needle, in the socket or generator, where
//! read → match cannot see it) and read → match p99 < `--latency-ms`. The figure is the highest
//! sustained rate; "per core" divides it by the workers (as Bullet divided by its cores), and
//! records per worker-CPU-second is reported beside it. Bullet on Storm: ~850 records/s and
//! 3.4 MiB/s per core.

use super::chart::{draw_svg, Chart, Series};
use super::live::{
    live_config, thread_cpu_seconds, wait_until, Feeder, Histogram, LiveServer, Pool, WsClient,
};
use super::{Outcome, Output};
use comfy_table::Table;
use needle_runtime::source::{FileSource, GeneratorSource, SourceOptions};
use needle_workload::WorkloadKind;
use serde::Serialize;
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The options of `needle bench data-scaling`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Worker thread counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub workers: Vec<usize>,
    /// Where records come from: `tcp`, `gen` or `file` (worker threads in this process), or
    /// `kafka` (worker processes in the distributed mode, reading a topic; see the kafka options).
    #[arg(long, default_value = "tcp", value_parser = ["tcp", "gen", "file", "kafka"])]
    pub source: String,
    /// RAW queries running.
    #[arg(long, default_value_t = 400)]
    pub queries: usize,
    /// Seconds measured per trial.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Seconds before measuring.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Paced trials, as fractions of the unpaced ceiling, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.5,0.7,0.85,1.0,1.15")]
    pub fractions: Vec<f64>,
    /// The read → match p99 a sustained rate must stay under, in ms (Bullet: 200).
    #[arg(long, default_value_t = 200.0)]
    pub latency_ms: f64,
    /// Records in the file of `--source file`.
    #[arg(long, default_value_t = 300_000)]
    pub file_records: usize,
    #[command(flatten)]
    pub kafka: super::kafka_scaling::KafkaOptions,
    #[command(flatten)]
    pub output: Output,
}

/// One trial.
#[derive(Debug, Clone, Serialize)]
pub struct Trial {
    pub scenario: &'static str,
    pub source: String,
    pub workers: usize,
    /// Records/s offered; `None`: unpaced.
    pub offered: Option<f64>,
    pub records_per_sec: f64,
    pub mib_per_sec: f64,
    pub records_per_sec_per_core: f64,
    pub mib_per_sec_per_core: f64,
    pub records_per_worker_cpu_sec: f64,
    pub read_to_match_p50_ms: f64,
    pub read_to_match_p99_ms: f64,
    pub read_to_match_observations: u64,
    pub records_matched: u64,
    pub keeps_up: bool,
    pub sustained: bool,
}

/// The figure of one worker count.
#[derive(Debug, Clone, Serialize)]
pub struct Best {
    pub workers: usize,
    pub unpaced_records_per_sec: f64,
    /// The highest sustained trial's records/s, and per core.
    pub sustained_records_per_sec: Option<f64>,
    pub sustained_records_per_sec_per_core: Option<f64>,
    pub sustained_mib_per_sec_per_core: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct DataScalingResult {
    pub source: String,
    pub queries: usize,
    pub record_bytes: f64,
    pub trials: Vec<Trial>,
    pub best: Vec<Best>,
    pub chart: String,
    pub bullet_reference: &'static str,
}

pub fn run(args: Args) -> std::process::ExitCode {
    if args.source == "kafka" {
        let kafka = super::kafka_scaling::Args { kafka: &args.kafka, workers: &args.workers };
        return super::kafka_scaling::run(kafka, &args.output);
    }
    if args.workers.is_empty()
        || args.workers.contains(&0)
        || args.queries == 0
        || !(args.seconds > 0.0 && args.seconds.is_finite())
        || !(args.warmup >= 0.0 && args.warmup.is_finite())
        || args.fractions.iter().any(|f| !(*f > 0.0 && f.is_finite()))
        || !(args.latency_ms > 0.0 && args.latency_ms.is_finite())
        || args.file_records == 0
    {
        return super::usage_error(
            "--workers needs counts ≥ 1; --queries, --seconds, --fractions, --latency-ms and \
             --file-records must be > 0, --warmup ≥ 0",
        );
    }
    super::report("data-scaling", &args.output, measure(&args))
}

fn measure(args: &Args) -> Result<DataScalingResult, String> {
    let paced = if args.source == "file" { 0 } else { args.fractions.len() };
    let progress = super::progress_bar((args.workers.len() * (1 + paced)) as u64);
    progress.set_message("generating records");
    let pool = Arc::new(Pool::generate(WorkloadKind::Bullet, 20_000, 9)?);
    let record_bytes = pool.bytes.len() as f64 / pool.lines() as f64;
    let file = (args.source == "file").then(|| write_file(args.file_records)).transpose()?;
    let input = Input { kind: args.source.clone(), pool, file: file.clone() };

    let mut trials = Vec::new();
    let mut best = Vec::new();
    for &workers in &args.workers {
        progress.set_message(format!("{workers} workers, unpaced"));
        let ceiling = trial(&input, workers, None, args)?;
        progress.inc(1);
        let mut mine = vec![ceiling.clone()];
        if paced > 0 {
            for &fraction in &args.fractions {
                let rate = (ceiling.records_per_sec * fraction).max(1.0);
                progress.set_message(format!("{workers} workers, {rate:.0} records/s"));
                mine.push(trial(&input, workers, Some(rate), args)?);
                progress.inc(1);
            }
        }
        let top = mine
            .iter()
            .filter(|t| t.sustained && (t.offered.is_some() || paced == 0))
            .max_by(|a, b| a.records_per_sec.total_cmp(&b.records_per_sec));
        best.push(Best {
            workers,
            unpaced_records_per_sec: ceiling.records_per_sec,
            sustained_records_per_sec: top.map(|t| t.records_per_sec),
            sustained_records_per_sec_per_core: top.map(|t| t.records_per_sec_per_core),
            sustained_mib_per_sec_per_core: top.map(|t| t.mib_per_sec_per_core),
        });
        trials.extend(mine);
    }
    progress.finish_and_clear();
    if let Some(path) = file {
        let _ = std::fs::remove_file(path);
    }
    std::fs::create_dir_all(&args.output.out).map_err(|e| e.to_string())?;
    let chart = args.output.out.join("data-scaling.svg");
    draw_chart(&chart, &best, &args.source)?;
    Ok(DataScalingResult {
        source: args.source.clone(),
        queries: args.queries,
        record_bytes,
        trials,
        best,
        chart: chart.display().to_string(),
        bullet_reference: "~850 records/s and 3.4 MiB/s per core",
    })
}

struct Input {
    kind: String,
    pool: Arc<Pool>,
    file: Option<PathBuf>,
}

fn write_file(records: usize) -> Result<PathBuf, String> {
    let path =
        std::env::temp_dir().join(format!("needle-data-scaling-{}.ndjson", std::process::id()));
    let pool = Pool::generate(WorkloadKind::Bullet, records, 9)?;
    let mut file = std::fs::File::create(&path).map_err(|e| e.to_string())?;
    file.write_all(&pool.bytes).map_err(|e| e.to_string())?;
    Ok(path)
}

/// The 400 queries: each wants one `timespent` (0–3600) and a band of 100 `dl_bytes` values
/// (100–9999).
fn query_texts(count: usize, duration_ms: u64) -> Vec<String> {
    (0..count)
        .map(|i| {
            let timespent = (i * 9) % 3601;
            let low = 100 + (i * 37 % 98) * 100;
            format!(
                "SELECT * FROM STREAM({duration_ms}, TIME) WHERE timespent = {timespent} \
                 AND dl_bytes BETWEEN ({low}, {}) LIMIT 500",
                low + 99
            )
        })
        .collect()
}

fn trial(input: &Input, workers: usize, rate: Option<f64>, args: &Args) -> Result<Trial, String> {
    let config = live_config(workers);
    let options = SourceOptions::default();
    let server = match input.kind.as_str() {
        "tcp" => LiveServer::tcp(config)?,
        "gen" => {
            let spec = match rate {
                Some(rate) => format!("bullet?seed=9&rate={rate}"),
                None => "bullet?seed=9".to_owned(),
            };
            let source = GeneratorSource::from_spec(&spec, &options).map_err(|e| e.to_string())?;
            LiveServer::gated(config, source)?
        }
        _ => {
            let path = input.file.as_ref().ok_or("no input file")?;
            // followed, so that the source (and so the workers) do not end with the file
            // before their CPU time is read
            let spec = format!("{}?follow=true", path.display());
            let source = FileSource::from_spec(&spec, &options).map_err(|e| e.to_string())?;
            LiveServer::gated(config, source)?
        }
    };
    let mut ws = WsClient::connect(server.url())?;
    let started = ws.start_all(&query_texts(args.queries, 600_000), &mut |_| {})?;
    if started.count() != args.queries {
        return Err(format!("queries were refused: {:?}", started.errors));
    }
    let feeder = match server.data {
        Some(data) => Some(Feeder::start(data, input.pool.clone(), rate, None)?),
        None => {
            server.open();
            None
        }
    };
    let file_records = input.file.as_ref().map(|_| args.file_records as u64);
    if file_records.is_none() {
        std::thread::sleep(Duration::from_secs_f64(args.warmup));
    }
    let before = Snapshot::take(&server);
    match file_records {
        Some(total) => {
            if !wait_until(Duration::from_secs(600), || server.records_read() >= total) {
                return Err(format!(
                    "read {} of {total} records of the file",
                    server.records_read()
                ));
            }
        }
        None => std::thread::sleep(Duration::from_secs_f64(args.seconds)),
    }
    let after = Snapshot::take(&server);
    if let Some(feeder) = feeder {
        feeder.stop()?;
    }
    drop(ws);
    drop(server);

    let seconds = after.at.duration_since(before.at).as_secs_f64();
    let records = (after.records - before.records) as f64;
    let mib = (after.bytes - before.bytes) as f64 / (1024.0 * 1024.0);
    let histogram = after.histogram.since(&before.histogram);
    let records_per_sec = records / seconds;
    let p99 = histogram.quantile_ms(0.99);
    let keeps_up = rate.is_none_or(|r| records_per_sec >= 0.97 * r);
    Ok(Trial {
        scenario: "data-scaling",
        source: input.kind.clone(),
        workers,
        offered: rate,
        records_per_sec,
        mib_per_sec: mib / seconds,
        records_per_sec_per_core: records_per_sec / workers as f64,
        mib_per_sec_per_core: mib / seconds / workers as f64,
        records_per_worker_cpu_sec: records / (after.worker_cpu - before.worker_cpu),
        read_to_match_p50_ms: histogram.quantile_ms(0.5),
        read_to_match_p99_ms: p99,
        read_to_match_observations: histogram.count(),
        records_matched: after.matched - before.matched,
        keeps_up,
        sustained: keeps_up && histogram.count() > 0 && p99 < args.latency_ms,
    })
}

struct Snapshot {
    at: Instant,
    records: u64,
    bytes: u64,
    matched: u64,
    histogram: Histogram,
    worker_cpu: f64,
}

impl Snapshot {
    fn take(server: &LiveServer) -> Self {
        Self {
            at: Instant::now(),
            records: server.records_read(),
            bytes: server.bytes_read(),
            matched: server.runtime.metrics().records_matched.get(),
            histogram: Histogram::read_to_match(&server.runtime),
            worker_cpu: thread_cpu_seconds(&["needle-worker"]),
        }
    }
}

fn draw_chart(path: &std::path::Path, best: &[Best], source: &str) -> Result<(), String> {
    let one = best.iter().find(|b| b.workers == 1).and_then(|b| b.sustained_records_per_sec);
    let mut series = vec![
        Series {
            name: "highest sustained (p99 read→match < 200 ms)".into(),
            points: best
                .iter()
                .filter_map(|b| Some((b.workers as f64, b.sustained_records_per_sec?)))
                .collect(),
        },
        Series {
            name: "unpaced ceiling".into(),
            points: best.iter().map(|b| (b.workers as f64, b.unpaced_records_per_sec)).collect(),
        },
    ];
    if let Some(one) = one {
        series.push(Series {
            name: "linear from 1 worker".into(),
            points: best.iter().map(|b| (b.workers as f64, one * b.workers as f64)).collect(),
        });
    }
    let title = format!("needle data-scaling: records/s with 400 RAW queries ({source} source)");
    draw_svg(
        path,
        &Chart {
            title: &title,
            x_label: "worker threads",
            y_label: "records/s",
            log_x: false,
            log_y: false,
            series,
            marks: Vec::new(),
        },
    )
}

impl Outcome for DataScalingResult {
    fn scenario(&self) -> &str {
        "data-scaling"
    }

    fn json_lines(&self) -> Vec<Value> {
        super::json_lines_of(&self.trials)
    }

    fn print_table(&self) {
        let mut table = Table::new();
        table.set_header([
            "workers",
            "offered/s",
            "records/s",
            "per core",
            "MiB/s per core",
            "per worker-CPU-s",
            "read→match p50 ms",
            "p99 ms",
            "sustained",
        ]);
        for t in &self.trials {
            table.add_row([
                t.workers.to_string(),
                t.offered.map_or("unpaced".into(), |r| format!("{r:.0}")),
                format!("{:.0}", t.records_per_sec),
                format!("{:.0}", t.records_per_sec_per_core),
                format!("{:.1}", t.mib_per_sec_per_core),
                format!("{:.0}", t.records_per_worker_cpu_sec),
                format!("{:.2}", t.read_to_match_p50_ms),
                format!("{:.2}", t.read_to_match_p99_ms),
                if t.sustained { "yes" } else { "no" }.to_owned(),
            ]);
        }
        println!(
            "data-scaling: {} RAW queries, {} source, records of {:.0} bytes",
            self.queries, self.source, self.record_bytes
        );
        println!("{table}");
        for b in &self.best {
            match (b.sustained_records_per_sec, b.sustained_records_per_sec_per_core) {
                (Some(total), Some(per_core)) => println!(
                    "{} workers: {total:.0} records/s sustained, {per_core:.0} per core \
                     ({:.1} MiB/s per core); Bullet on Storm: {}",
                    b.workers,
                    b.sustained_mib_per_sec_per_core.unwrap_or(f64::NAN),
                    self.bullet_reference
                ),
                _ => println!("{} workers: no trial was sustained", b.workers),
            }
        }
        println!("chart: {}", self.chart);
    }
}
