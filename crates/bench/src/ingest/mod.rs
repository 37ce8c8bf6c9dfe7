//! `needle bench ingest`: the metrics agents' protocols end to end into history, per protocol,
//! each beside JSON lines carrying the same points in the same run.
//!
//! 1. The points ([`workload`]): hosts × metrics series tagged `host` and `region`, a point a
//!    second each, rendered once per protocol into the bytes an agent sends: InfluxDB line
//!    protocol, OpenTSDB `put` lines and Graphite lines (and JSON lines) for the `tcp:` source,
//!    Prometheus remote write bodies (snappy protobuf, `--samples-per-request` samples each) and
//!    JSON lines in bodies of as many points for the HTTP write routes.
//! 2. End to end: a runtime in this process as `needle serve` starts it for that source, with
//!    history on in a temporary directory (`--history DIR --time-field timestamp`, every other
//!    setting its default, so the metrics protocols' parts are sorted by the series as serve
//!    sorts them, and so are HTTP writes' JSON lines; the `tcp:` JSON lines are not):
//!    `tcp:...?format=influx|opentsdb|graphite` or plain `tcp:...` for the lines (a
//!    client writes them over loopback), `--source http` for the bodies (the HTTP API on
//!    loopback, one client posting them one after the other: `POST /api/v1/write`,
//!    `POST /api/v1/records`). Timed from the first byte sent until the store holds every point
//!    and has made them durable (the history tap appended them all, then a flush). CPU: the
//!    process's user + system time over that span (`getrusage`, threads that ended included)
//!    less the sending client's own thread: needle's source, protocol conversion, HTTP server,
//!    workers, history tap and store.
//!    The CPU is also told by stage, from the clocks of needle's threads: the history tap
//!    (decoding each JSON line again and appending it; appending a protocol's columns as they
//!    are), the store (its flushes into Parquet
//!    parts, the last one included), the workers, the HTTP server (which decodes the bodies),
//!    and the rest — the `tcp:` source's client thread, which frames and converts the lines
//!    and ends before it can be read.
//! 3. The bare decode rates of the same bytes, in memory, one thread: each protocol's decoder
//!    alone (the line protocols into a reusable point, remote write into records); the decoder
//!    and what the source or the write route hands on (the points gathered as columns); for
//!    remote write also snappy + protobuf alone.
//! 4. Same results: after each run the store (opened again, read only) must hold exactly the
//!    workload's points — their count, the sum of their values and their first and last
//!    timestamps — or the bench fails.
//!
//! The ratio of each protocol is to the JSON lines of the same transport in the same run: over
//! the `tcp:` source for the line protocols, over `POST /api/v1/records` for remote write.

pub mod workload;

use crate::harness::HttpServer;
use crate::history::{machine, median, process_cpu_seconds, PreparedQuery};
use crate::live::{thread_cpu_seconds, wait_until};
use crate::{Outcome, Output};
use needle_protocols::{remote_write, Format, Precision};
use needle_query::QueryConfig;
use needle_record::Value;
use needle_runtime::config::HistoryConfig;
use needle_runtime::metrics::Metrics;
use needle_runtime::source::{SourceOptions, TcpSource};
use needle_runtime::{NeedleConfig, Role, Runtime};
use needle_server::AppState;
use serde::Serialize;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use workload::{Expected, Wire, Workload};

/// The target for line protocol, OpenTSDB and Graphite: Akumuli's per-thread figure.
const TARGET_PER_CORE: f64 = 3e6;
/// Bytes a `tcp:` client writes at a time.
const WRITE_BYTES: usize = 256 << 10;
/// HTTP threads, as `needle serve` runs them.
const HTTP_THREADS: usize = 2;
/// How long a client waits before sending a request refused with `503` again (Prometheus
/// waits `Retry-After`; counted in `retries`).
const RETRY_WAIT: Duration = Duration::from_millis(100);

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Protocols to measure: json, influx, opentsdb, graphite, remote-write, or all (repeat the
    /// option or separate with commas). JSON lines of the same points run beside them whatever
    /// is chosen: over TCP for the line protocols, over HTTP for remote write.
    #[arg(long = "protocol", value_name = "PROTOCOL", value_delimiter = ',', default_value = "all",
          value_parser = ["json", "influx", "opentsdb", "graphite", "remote-write", "all"])]
    protocols: Vec<String>,
    /// Hosts, each reporting every metric.
    #[arg(long, default_value_t = 200)]
    hosts: u64,
    /// Metrics per host (at most 10).
    #[arg(long, default_value_t = 5)]
    metrics: usize,
    /// Points per series, one a second, the last one a few seconds before the run starts.
    #[arg(long, default_value_t = 2000)]
    points: u64,
    /// Samples per remote write request (Prometheus's `max_samples_per_send`: 2,000), and
    /// points per JSON lines request beside it.
    #[arg(long, default_value_t = 2000)]
    samples_per_request: usize,
    /// Worker threads (0: one per core, as `needle serve` runs them).
    #[arg(long, default_value_t = 0)]
    workers: usize,
    /// Times each protocol is measured, the protocols interleaved; the median is reported.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Seed of the values.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    output: Output,
}

/// A protocol as the bench sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    /// JSON lines over the `tcp:` source: the line protocols' baseline.
    Json,
    Influx,
    OpenTsdb,
    Graphite,
    /// JSON lines over `POST /api/v1/records`: remote write's baseline.
    JsonHttp,
    RemoteWrite,
}

impl Protocol {
    fn name(self) -> &'static str {
        match self {
            Protocol::Json => "json",
            Protocol::Influx => "influx",
            Protocol::OpenTsdb => "opentsdb",
            Protocol::Graphite => "graphite",
            Protocol::JsonHttp => "json-http",
            Protocol::RemoteWrite => "remote-write",
        }
    }

    fn wire(self) -> Wire {
        match self {
            Protocol::Json => Wire::JsonLines,
            Protocol::Influx => Wire::Influx,
            Protocol::OpenTsdb => Wire::OpenTsdb,
            Protocol::Graphite => Wire::Graphite,
            Protocol::JsonHttp => Wire::JsonBodies,
            Protocol::RemoteWrite => Wire::RemoteWrite,
        }
    }

    /// The `--source` that `needle serve` is given for this protocol: its `tcp:` source at
    /// `addr`, or `http` for HTTP writes (`addr` unused). The runtime's settings follow from it
    /// as they do for serve: a metrics source's history is sorted by the series.
    fn source_spec(self, addr: SocketAddr) -> String {
        match self {
            Protocol::Influx => format!("tcp:{addr}?format=influx"),
            Protocol::OpenTsdb => format!("tcp:{addr}?format=opentsdb"),
            Protocol::Graphite => format!("tcp:{addr}?format=graphite"),
            Protocol::Json => format!("tcp:{addr}"),
            Protocol::JsonHttp | Protocol::RemoteWrite => "http".to_owned(),
        }
    }

    /// The `tcp:` source's `format=` (`Some(None)`: JSON lines); `None` for HTTP.
    fn tcp_format(self) -> Option<Option<Format>> {
        match self {
            Protocol::Json => Some(None),
            Protocol::Influx => Some(Some(Format::Influx(Precision::Nanoseconds))),
            Protocol::OpenTsdb => Some(Some(Format::OpenTsdb)),
            Protocol::Graphite => Some(Some(Format::Graphite)),
            Protocol::JsonHttp | Protocol::RemoteWrite => None,
        }
    }

    /// The HTTP route, content type and encoding a client posts with.
    fn route(self) -> (&'static str, &'static str, Option<&'static str>) {
        match self {
            Protocol::RemoteWrite => ("/api/v1/write", "application/x-protobuf", Some("snappy")),
            _ => ("/api/v1/records", "application/x-ndjson", None),
        }
    }

    fn transport(self) -> &'static str {
        match self {
            Protocol::JsonHttp => "HTTP POST /api/v1/records",
            Protocol::RemoteWrite => "HTTP POST /api/v1/write",
            _ => "tcp: source",
        }
    }

    /// The JSON lines run this protocol's ratio is to.
    fn baseline(self) -> Protocol {
        match self {
            Protocol::JsonHttp | Protocol::RemoteWrite => Protocol::JsonHttp,
            _ => Protocol::Json,
        }
    }
}

/// The protocols to run, in order, each one's baseline before it.
fn chosen(names: &[String]) -> Vec<Protocol> {
    let all = names.iter().any(|n| n == "all");
    let wants = |name: &str| all || names.iter().any(|n| n == name);
    let mut protocols = Vec::new();
    let line_protocols = [Protocol::Influx, Protocol::OpenTsdb, Protocol::Graphite];
    if wants("json") || line_protocols.iter().any(|p| wants(p.name())) {
        protocols.push(Protocol::Json);
    }
    protocols.extend(line_protocols.into_iter().filter(|p| wants(p.name())));
    if wants("remote-write") {
        protocols.extend([Protocol::JsonHttp, Protocol::RemoteWrite]);
    }
    protocols
}

#[derive(Debug, Serialize)]
pub struct IngestBench {
    scenario: &'static str,
    machine: String,
    hosts: u64,
    metrics: usize,
    points_per_series: u64,
    series: u64,
    points: u64,
    samples_per_request: usize,
    workers: usize,
    rounds: usize,
    /// What every protocol's store held (each was checked equal to it).
    expected: Expected,
    protocols: Vec<ProtocolFigures>,
    target_per_core: f64,
}

#[derive(Debug, Clone, Serialize)]
struct ProtocolFigures {
    protocol: &'static str,
    transport: &'static str,
    /// The JSON lines run `ratio_to_json` divides by.
    baseline: &'static str,
    /// Bytes sent (request bodies, without HTTP's headers).
    bytes: u64,
    bytes_per_point: f64,
    /// The median round's: first byte sent → every point durable in history.
    seconds: f64,
    /// needle's CPU over that span (the process's, less the sending client's thread).
    cpu_seconds: f64,
    /// Points per CPU-second (the median of the rounds): points/s per core.
    points_per_cpu_second: f64,
    /// Points per second of wall time (the median of the rounds).
    points_per_second: f64,
    /// `points_per_cpu_second` over the baseline's.
    ratio_to_json: f64,
    /// Every round's points per CPU-second.
    rounds_points_per_cpu_second: Vec<f64>,
    /// The decoder alone, bytes in memory → points (records for JSON lines), one thread.
    decode_per_cpu_second: f64,
    /// The decoder and what the source or the write route hands on: the points as columns;
    /// none for JSON lines, handed on as they are.
    handed_on_per_cpu_second: Option<f64>,
    /// Remote write: snappy and protobuf alone (no record built).
    snappy_protobuf_per_cpu_second: Option<f64>,
    /// Requests answered `503` and sent again (summed over the rounds).
    retries: u64,
    /// The median round's CPU by stage, in µs per point.
    us_per_point: Stages,
    /// What the store held after the median round.
    stored: Expected,
}

/// needle's CPU by stage (see the module doc).
#[derive(Debug, Clone, Copy, Default, Serialize)]
struct Stages {
    /// The `tcp:` source: framing, and converting a protocol's lines into JSON lines (the
    /// rest of the process's CPU once the others are told).
    source: f64,
    /// The HTTP server: reading requests, decoding the bodies into JSON lines.
    http: f64,
    /// The workers (and the joiner): counting the lines, no query running.
    workers: f64,
    /// The history tap: decoding each JSON line again into a record, appending it.
    tap: f64,
    /// The store: flushing the write buffer into sorted Parquet parts, merging them.
    store: f64,
}

impl Stages {
    /// The CPU clocks of needle's threads by stage, now (threads that ended are not counted).
    fn now() -> Self {
        let history = thread_cpu_seconds(&["needle-history"]);
        // (a thread's name is cut to 15 bytes: the store's thread is "needle-history-")
        let store = thread_cpu_seconds(&["needle-history-"]);
        Stages {
            source: 0.0,
            http: thread_cpu_seconds(&["tokio-rt-worker"]),
            workers: thread_cpu_seconds(&["needle-worker", "needle-joiner"]),
            tap: history - store,
            store,
        }
    }

    /// From `before` to `self`, with the rest of `total` as the source's, in µs per point.
    fn per_point(&self, before: &Stages, total: f64, points: u64) -> Stages {
        let us = |seconds: f64| seconds * 1e6 / points.max(1) as f64;
        let (http, workers, tap, store) = (
            self.http - before.http,
            self.workers - before.workers,
            self.tap - before.tap,
            self.store - before.store,
        );
        Stages {
            source: us(total - http - workers - tap - store),
            http: us(http),
            workers: us(workers),
            tap: us(tap),
            store: us(store),
        }
    }
}

impl Outcome for IngestBench {
    fn scenario(&self) -> &str {
        self.scenario
    }

    fn json_lines(&self) -> Vec<serde_json::Value> {
        self.protocols
            .iter()
            .map(|row| {
                let mut value = serde_json::to_value(row).unwrap_or_default();
                value["scenario"] = self.scenario.into();
                value["points"] = self.points.into();
                value["expected"] = serde_json::to_value(self.expected).unwrap_or_default();
                value
            })
            .collect()
    }

    fn print_table(&self) {
        println!(
            "ingest: {} points ({} hosts × {} metrics × {} points, a point a second), {} workers, \
             {} round(s); {}",
            self.points,
            self.hosts,
            self.metrics,
            self.points_per_series,
            self.workers,
            self.rounds,
            self.machine
        );
        let mut table = comfy_table::Table::new();
        table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
        table.set_header(vec![
            "protocol",
            "transport",
            "bytes/point",
            "points/CPU-s into history",
            "points/s (wall)",
            "÷ JSON lines",
            "decode only",
            "decode + handed on",
            "snappy + protobuf",
        ]);
        let m = |v: f64| format!("{:.3}M", v / 1e6);
        let maybe = |v: Option<f64>| v.map_or("-".to_owned(), m);
        for p in &self.protocols {
            table.add_row(vec![
                p.protocol.to_owned(),
                p.transport.to_owned(),
                format!("{:.1}", p.bytes_per_point),
                m(p.points_per_cpu_second),
                m(p.points_per_second),
                if p.protocol == p.baseline {
                    "(baseline)".to_owned()
                } else {
                    format!("{:.2} (of {})", p.ratio_to_json, p.baseline)
                },
                m(p.decode_per_cpu_second),
                maybe(p.handed_on_per_cpu_second),
                maybe(p.snappy_protobuf_per_cpu_second),
            ]);
        }
        println!("{table}");
        let mut stages = comfy_table::Table::new();
        stages.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
        stages.set_header(vec![
            "CPU µs per point",
            "all",
            "source (framing, conversion)",
            "HTTP (requests, decoding)",
            "workers",
            "history tap",
            "history store",
        ]);
        for p in &self.protocols {
            let s = &p.us_per_point;
            let us = |v: f64| format!("{v:.3}");
            stages.add_row(vec![
                p.protocol.to_owned(),
                us(p.cpu_seconds * 1e6 / self.points as f64),
                us(s.source),
                us(s.http),
                us(s.workers),
                us(s.tap),
                us(s.store),
            ]);
        }
        println!("{stages}");
        let e = &self.expected;
        println!(
            "result: every store held {} points, values summing to {:.2}, timestamps {}..{} ms: \
             right",
            e.points, e.sum, e.first_ms, e.last_ms
        );
        let retries: u64 = self.protocols.iter().map(|p| p.retries).sum();
        if retries > 0 {
            println!("HTTP requests answered 503 and sent again: {retries}");
        }
        let targeted: Vec<String> = self
            .protocols
            .iter()
            .filter(|p| matches!(p.protocol, "influx" | "opentsdb" | "graphite"))
            .map(|p| {
                let met =
                    if p.points_per_cpu_second >= self.target_per_core { "met" } else { "not met" };
                format!("{} {:.2}M ({met})", p.protocol, p.points_per_cpu_second / 1e6)
            })
            .collect();
        if !targeted.is_empty() {
            println!(
                "target ≥ {:.0}M points/s per core (Akumuli's per-thread figure): {}",
                self.target_per_core / 1e6,
                targeted.join(", ")
            );
        }
    }
}

pub fn run(args: Args) -> ExitCode {
    if args.hosts == 0 || args.metrics == 0 || args.points == 0 || args.rounds == 0 {
        return crate::usage_error("--hosts, --metrics, --points and --rounds must be at least 1");
    }
    if args.metrics > workload::METRICS.len() {
        return crate::usage_error(&format!(
            "--metrics is at most {} (the metrics a host reports)",
            workload::METRICS.len()
        ));
    }
    if args.samples_per_request == 0 {
        return crate::usage_error("--samples-per-request must be at least 1");
    }
    crate::report("ingest", &args.output.clone(), measure(&args))
}

/// One protocol's bytes, rendered for one run.
#[derive(Clone)]
enum Rendered {
    Lines(Arc<Vec<u8>>),
    Bodies(Arc<Vec<Vec<u8>>>),
}

impl Rendered {
    fn of(workload: &Workload, protocol: Protocol) -> Self {
        match protocol.tcp_format() {
            Some(_) => Rendered::Lines(Arc::new(workload.lines(protocol.wire()))),
            None => Rendered::Bodies(Arc::new(workload.bodies(protocol.wire()))),
        }
    }

    fn bytes(&self) -> u64 {
        match self {
            Rendered::Lines(bytes) => bytes.len() as u64,
            Rendered::Bodies(bodies) => bodies.iter().map(|b| b.len() as u64).sum(),
        }
    }
}

/// One end-to-end run of one protocol.
struct Run {
    seconds: f64,
    cpu_seconds: f64,
    us_per_point: Stages,
    retries: u64,
    stored: Expected,
}

/// The bare decode rates of one protocol's bytes.
struct Decoding {
    decode: f64,
    handed_on: Option<f64>,
    snappy_protobuf: Option<f64>,
}

fn measure(args: &Args) -> Result<IngestBench, String> {
    let protocols = chosen(&args.protocols);
    let now_s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    // the last point a few seconds before now, as an agent's: the store's background work
    // treats the partitions as the live ones they would be
    let start_s = now_s - args.points as i64 - 5;
    let workload = Workload::new(
        args.hosts,
        args.metrics,
        args.points,
        args.seed,
        start_s,
        args.samples_per_request,
    );
    let expected = workload.expected();
    let work = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    let mut config = NeedleConfig::default();
    config.runtime.workers = args.workers;
    let workers = config.worker_threads();
    let progress = crate::progress_bar((protocols.len() * args.rounds) as u64);
    let mut runs: Vec<Vec<Run>> = protocols.iter().map(|_| Vec::new()).collect();
    let mut decodings = Vec::new();
    let mut bytes = Vec::new();
    for round in 0..args.rounds {
        for (i, &protocol) in protocols.iter().enumerate() {
            progress.set_message(format!("{} (round {})", protocol.name(), round + 1));
            let rendered = Rendered::of(&workload, protocol);
            if round == 0 {
                bytes.push(rendered.bytes());
                decodings.push(decode_rates(protocol, &rendered, expected.points)?);
            }
            let dir = work.path().join(format!("{}-{round}", protocol.name()));
            let run = end_to_end(protocol, &rendered, workers, &dir, &expected)?;
            check(protocol, &run.stored, &expected)?;
            runs[i].push(run);
            let _ = std::fs::remove_dir_all(&dir);
            progress.inc(1);
        }
    }
    progress.finish_and_clear();
    let points = expected.points as f64;
    let mut figures: Vec<ProtocolFigures> = protocols
        .iter()
        .zip(&runs)
        .zip(decodings.into_iter().zip(bytes))
        .map(|((&protocol, runs), (decoding, bytes))| {
            let per_cpu: Vec<f64> = runs.iter().map(|r| points / r.cpu_seconds.max(1e-9)).collect();
            let median_cpu = median(&mut per_cpu.clone());
            let mut per_wall: Vec<f64> =
                runs.iter().map(|r| points / r.seconds.max(1e-9)).collect();
            let chosen = runs
                .iter()
                .zip(&per_cpu)
                .find(|(_, rate)| **rate == median_cpu)
                .map_or(&runs[0], |(run, _)| run);
            ProtocolFigures {
                protocol: protocol.name(),
                transport: protocol.transport(),
                baseline: protocol.baseline().name(),
                bytes,
                bytes_per_point: bytes as f64 / points,
                seconds: chosen.seconds,
                cpu_seconds: chosen.cpu_seconds,
                points_per_cpu_second: median_cpu,
                points_per_second: median(&mut per_wall),
                ratio_to_json: 1.0,
                rounds_points_per_cpu_second: per_cpu,
                decode_per_cpu_second: decoding.decode,
                handed_on_per_cpu_second: decoding.handed_on,
                snappy_protobuf_per_cpu_second: decoding.snappy_protobuf,
                retries: runs.iter().map(|r| r.retries).sum(),
                us_per_point: chosen.us_per_point,
                stored: chosen.stored,
            }
        })
        .collect();
    let rate_of = |figures: &[ProtocolFigures], name: &str| {
        figures.iter().find(|f| f.protocol == name).map(|f| f.points_per_cpu_second)
    };
    let baselines: Vec<Option<f64>> =
        figures.iter().map(|f| rate_of(&figures, f.baseline)).collect();
    for (f, baseline) in figures.iter_mut().zip(baselines) {
        f.ratio_to_json = baseline.map_or(f64::NAN, |b| f.points_per_cpu_second / b);
    }
    Ok(IngestBench {
        scenario: "ingest",
        machine: machine(),
        hosts: args.hosts,
        metrics: args.metrics,
        points_per_series: args.points,
        series: workload.series(),
        points: expected.points,
        samples_per_request: args.samples_per_request,
        workers,
        rounds: args.rounds,
        expected,
        protocols: figures,
        target_per_core: TARGET_PER_CORE,
    })
}

/// An error unless `stored` is exactly the workload's points.
fn check(protocol: Protocol, stored: &Expected, expected: &Expected) -> Result<(), String> {
    let sum_right = (stored.sum - expected.sum).abs() <= 1e-9 * expected.sum.abs().max(1.0);
    let right = stored.points == expected.points
        && sum_right
        && (stored.first_ms, stored.last_ms) == (expected.first_ms, expected.last_ms);
    if right {
        return Ok(());
    }
    Err(format!(
        "{}: the store holds {} points summing to {} from {} to {} ms; the workload is {} points \
         summing to {} from {} to {} ms",
        protocol.name(),
        stored.points,
        stored.sum,
        stored.first_ms,
        stored.last_ms,
        expected.points,
        expected.sum,
        expected.first_ms,
        expected.last_ms
    ))
}

/// Sends `rendered` into a runtime with history in `dir` (see the module doc) and times it
/// until every point is durable; then reads back what the store holds.
fn end_to_end(
    protocol: Protocol,
    rendered: &Rendered,
    workers: usize,
    dir: &Path,
    expected: &Expected,
) -> Result<Run, String> {
    let mut config = NeedleConfig::default();
    config.runtime.workers = workers;
    config.history.dir = dir.display().to_string();
    config.history.time_field = "timestamp".into();
    let history = config.history.clone();
    let metrics = Arc::new(Metrics::new());
    let (runtime, target, http) = match protocol.tcp_format() {
        Some(format) => {
            let options = SourceOptions {
                max_line_bytes: config.runtime.max_line_bytes,
                ..SourceOptions::default()
            };
            let source = TcpSource::bind("127.0.0.1:0", &options)
                .map_err(|e| e.to_string())?
                .with_format(format);
            let addr = source.local_addr().ok_or("the source has no address")?;
            config.source.spec = protocol.source_spec(addr);
            let runtime = Runtime::start(config, Box::new(source), metrics.clone())
                .map_err(|e| e.to_string())?;
            (runtime, addr, None)
        }
        None => {
            config.source.spec = protocol.source_spec(SocketAddr::from(([127, 0, 0, 1], 0)));
            let runtime = Runtime::start_role(config, Role::All, metrics.clone())
                .map_err(|e| e.to_string())?;
            let sink = runtime.push_sink("HTTP writes").map_err(|e| e.to_string())?;
            let state = AppState::with_ingest(runtime.clone(), sink);
            match HttpServer::serve(state.clone(), HTTP_THREADS) {
                Ok(server) => (runtime, server.addr, Some((state, server))),
                Err(error) => {
                    state.close_ingest();
                    runtime.shutdown();
                    return Err(error);
                }
            }
        }
    };
    let points = expected.points;
    let stages_before = Stages::now();
    let cpu_before = process_cpu_seconds();
    let started = Instant::now();
    let sender = {
        let rendered = rendered.clone();
        std::thread::Builder::new()
            .name("bench-client".into())
            .spawn(move || match rendered {
                Rendered::Lines(bytes) => send_lines(target, &bytes),
                Rendered::Bodies(bodies) => send_bodies(target, protocol, &bodies),
            })
            .map_err(|e| e.to_string())?
    };
    let sent = sender.join().unwrap_or_else(|_| Err("the client panicked".into()));
    // a generous bound: 10,000 points a second
    let timeout = Duration::from_secs(60) + Duration::from_micros(points.saturating_mul(100));
    let all_in = sent.is_ok()
        && wait_until(timeout, || {
            metrics.records_read.get() >= points && metrics.history_records_appended.get() >= points
        });
    // the last flush, on this thread: the store's work
    let flush_cpu = crate::thread_cpu_seconds();
    let flushed = match (all_in, runtime.history_store()) {
        (true, Some(store)) => store.flush().map(|_| ()).map_err(|e| e.to_string()),
        (true, None) => Err("history is off".to_owned()),
        (false, _) => Ok(()),
    };
    let flush_cpu = crate::thread_cpu_seconds() - flush_cpu;
    let seconds = started.elapsed().as_secs_f64();
    let process_cpu = process_cpu_seconds() - cpu_before;
    let mut stages_after = Stages::now();
    stages_after.store += flush_cpu;
    if let Some((state, server)) = http {
        // the workers end once nothing can hand them records: writes first
        state.close_ingest();
        drop(server);
    }
    runtime.shutdown();
    let (client_cpu, retries) = sent?;
    if !all_in {
        return Err(format!(
            "{}: after {timeout:?} the workers had read {} records and history appended {} of \
             {points} ({} malformed)",
            protocol.name(),
            metrics.records_read.get(),
            metrics.history_records_appended.get(),
            metrics.records_malformed.get()
        ));
    }
    flushed.map_err(|e| format!("{}: history could not be made durable: {e}", protocol.name()))?;
    let (malformed, lost) = (metrics.records_malformed.get(), metrics.history_records_lost.get());
    if malformed > 0 || lost > 0 {
        return Err(format!(
            "{}: {malformed} malformed lines, {lost} records lost",
            protocol.name()
        ));
    }
    let stored = read_back(&history, expected)?;
    let cpu_seconds = process_cpu - client_cpu;
    let us_per_point = stages_after.per_point(&stages_before, cpu_seconds, points);
    Ok(Run { seconds, cpu_seconds, us_per_point, retries, stored })
}

/// Writes `bytes` to a `tcp:` source as a client does, then closes; the client thread's CPU.
fn send_lines(target: SocketAddr, bytes: &[u8]) -> Result<(f64, u64), String> {
    let cpu = crate::thread_cpu_seconds();
    let mut socket = TcpStream::connect(target).map_err(|e| format!("connecting: {e}"))?;
    for chunk in bytes.chunks(WRITE_BYTES) {
        socket.write_all(chunk).map_err(|e| format!("writing to the source: {e}"))?;
    }
    socket.shutdown(Shutdown::Write).map_err(|e| e.to_string())?;
    Ok((crate::thread_cpu_seconds() - cpu, 0))
}

/// Posts every body to `protocol`'s route over one keep-alive connection, each after the
/// answer to the one before (a `503` is sent again); the client thread's CPU and the retries.
fn send_bodies(
    target: SocketAddr,
    protocol: Protocol,
    bodies: &[Vec<u8>],
) -> Result<(f64, u64), String> {
    let cpu = crate::thread_cpu_seconds();
    let (route, content_type, encoding) = protocol.route();
    let mut socket = TcpStream::connect(target).map_err(|e| format!("connecting: {e}"))?;
    socket.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut answers = BufReader::new(socket.try_clone().map_err(|e| e.to_string())?);
    let mut retries = 0u64;
    for body in bodies {
        loop {
            let mut head = format!(
                "POST {route} HTTP/1.1\r\nHost: {target}\r\nContent-Type: {content_type}\r\n\
                 Content-Length: {}\r\n",
                body.len()
            );
            if let Some(encoding) = encoding {
                head.push_str(&format!(
                    "Content-Encoding: {encoding}\r\nX-Prometheus-Remote-Write-Version: 0.1.0\r\n"
                ));
            }
            head.push_str("\r\n");
            socket.write_all(head.as_bytes()).map_err(|e| format!("posting: {e}"))?;
            socket.write_all(body).map_err(|e| format!("posting: {e}"))?;
            match read_answer(&mut answers)? {
                (204, _) => break,
                (503, _) => {
                    retries += 1;
                    std::thread::sleep(RETRY_WAIT);
                }
                (status, text) => return Err(format!("{route} answered {status}: {text}")),
            }
        }
    }
    Ok((crate::thread_cpu_seconds() - cpu, retries))
}

/// An HTTP/1.1 answer's status and body.
fn read_answer(answers: &mut impl BufRead) -> Result<(u16, String), String> {
    let bad = |e: std::io::Error| format!("reading the answer: {e}");
    let mut line = String::new();
    answers.read_line(&mut line).map_err(bad)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("not an HTTP answer: {line:?}"))?;
    let mut length = 0usize;
    loop {
        line.clear();
        if answers.read_line(&mut line).map_err(bad)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().map_err(|_| format!("a bad header: {line:?}"))?;
            }
        }
    }
    let mut body = vec![0; length];
    answers.read_exact(&mut body).map_err(bad)?;
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// What the store in `history`'s directory holds, opened again read only: the count of its
/// records (checked against the store's own total), the sum of `value`, the first and last
/// `timestamp`.
fn read_back(history: &HistoryConfig, expected: &Expected) -> Result<Expected, String> {
    let store = needle_history::Store::open_read_only(history.store_config())
        .map_err(|e| format!("reopening the store: {e}"))?;
    // a day around the points: a timestamp read wrong lands outside and is missed
    let (from, to) = (expected.first_ms - 86_400_000, expected.last_ms + 86_400_000);
    let text = format!(
        "SELECT COUNT(*) AS n, SUM(value) AS total, MIN(timestamp) AS first_ms, \
         MAX(timestamp) AS last_ms FROM HISTORY({from}, {to})"
    );
    let query = PreparedQuery::compile("stored points", &text, &QueryConfig::default())?;
    let run = query.run(&store, 1)?;
    let record = run
        .emissions
        .iter()
        .flat_map(|e| e.records.iter())
        .next_back()
        .ok_or("the store answered nothing")?;
    let long = |name: &str| record.get(name).and_then(Value::as_i64).unwrap_or(-1);
    let (_, _, total_records) = store.totals();
    let points = long("n") as u64;
    if total_records != points {
        return Err(format!(
            "the store holds {total_records} records, {points} of them around the points' times"
        ));
    }
    Ok(Expected {
        points,
        sum: record.get("total").and_then(Value::as_f64).unwrap_or(f64::NAN),
        first_ms: long("first_ms"),
        last_ms: long("last_ms"),
    })
}

/// The lines of `bytes` (without their newlines).
fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|b| *b == b'\n').filter(|line| !line.is_empty())
}

/// `points` over the CPU time of this thread running `work`, which must count `points`.
fn per_cpu_second(
    points: u64,
    what: &str,
    work: impl FnOnce() -> Result<u64, String>,
) -> Result<f64, String> {
    let cpu = crate::thread_cpu_seconds();
    let counted = work()?;
    let seconds = crate::thread_cpu_seconds() - cpu;
    if counted != points {
        return Err(format!("{what} gave {counted} records of {points}"));
    }
    Ok(points as f64 / seconds.max(1e-9))
}

/// The bare decode rates of `rendered` (see the module doc).
fn decode_rates(protocol: Protocol, rendered: &Rendered, points: u64) -> Result<Decoding, String> {
    let what = protocol.name();
    let now_ms = 0;
    match (rendered, protocol.tcp_format()) {
        (Rendered::Lines(bytes), Some(None)) => Ok(Decoding {
            decode: per_cpu_second(points, what, || {
                Ok(lines(bytes.as_slice())
                    .filter(|l| std::hint::black_box(needle_record::decode_record(l)).is_ok())
                    .count() as u64)
            })?,
            handed_on: None,
            snappy_protobuf: None,
        }),
        (Rendered::Lines(bytes), Some(Some(format))) => {
            let decode = per_cpu_second(points, what, || {
                let mut point = needle_protocols::Point::new();
                let mut n = 0;
                for line in lines(bytes.as_slice()) {
                    if let Ok(true) = format.parse_point(line, now_ms, &mut point) {
                        std::hint::black_box(point.check().is_ok());
                        n += 1;
                    }
                }
                Ok(n)
            })?;
            // as the source does: a batch of columns per shape every ~1,000 lines
            let handed_on = per_cpu_second(points, what, || {
                let mut batches = needle_runtime::columns::PointBatches::new();
                let mut n = 0;
                for (i, line) in lines(bytes.as_slice()).enumerate() {
                    if batches.push_line(format, line, now_ms).is_ok() {
                        n += 1;
                    }
                    if i % 1024 == 1023 {
                        std::hint::black_box(batches.finish());
                    }
                }
                std::hint::black_box(batches.finish());
                Ok(n)
            })?;
            Ok(Decoding { decode, handed_on: Some(handed_on), snappy_protobuf: None })
        }
        (Rendered::Bodies(bodies), _) if protocol == Protocol::RemoteWrite => {
            let bad = |e: needle_protocols::ProtocolError| e.to_string();
            let decode = per_cpu_second(points, what, || {
                let mut n = 0;
                for body in bodies.iter() {
                    let counts = remote_write::decode_points(body, |point| {
                        std::hint::black_box(point);
                    })
                    .map_err(bad)?;
                    n += counts.points;
                }
                Ok(n)
            })?;
            // as the write route does: a body's samples as points, into columns per shape
            let handed_on = per_cpu_second(points, what, || {
                let mut n = 0;
                for body in bodies.iter() {
                    let mut batches = needle_runtime::columns::PointBatches::for_one_request();
                    let counts = remote_write::decode_points(body, |point| {
                        let _ = batches.push_point(point);
                    })
                    .map_err(bad)?;
                    std::hint::black_box(batches.finish());
                    n += counts.points;
                }
                Ok(n)
            })?;
            let snappy_protobuf = per_cpu_second(points, what, || {
                let mut n = 0;
                for body in bodies.iter() {
                    let request = remote_write::decode_request(body).map_err(bad)?;
                    n += request.timeseries.iter().map(|s| s.samples.len()).sum::<usize>();
                }
                Ok(n as u64)
            })?;
            Ok(Decoding {
                decode,
                handed_on: Some(handed_on),
                snappy_protobuf: Some(snappy_protobuf),
            })
        }
        (Rendered::Bodies(bodies), _) => Ok(Decoding {
            decode: per_cpu_second(points, what, || {
                Ok(bodies
                    .iter()
                    .flat_map(|body| lines(body))
                    .filter(|l| std::hint::black_box(needle_record::decode_record(l)).is_ok())
                    .count() as u64)
            })?,
            handed_on: None,
            snappy_protobuf: None,
        }),
        (Rendered::Lines(_), None) => Err(format!("{what}: lines for an HTTP protocol")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_protocol_runs_after_its_json_baseline() {
        let names = |list: &[&str]| {
            let list: Vec<String> = list.iter().map(|s| (*s).to_owned()).collect();
            chosen(&list).into_iter().map(Protocol::name).collect::<Vec<_>>()
        };
        assert_eq!(
            names(&["all"]),
            ["json", "influx", "opentsdb", "graphite", "json-http", "remote-write"]
        );
        assert_eq!(names(&["graphite"]), ["json", "graphite"]);
        assert_eq!(names(&["json"]), ["json"]);
        assert_eq!(names(&["remote-write"]), ["json-http", "remote-write"]);
        assert_eq!(
            names(&["remote-write", "influx"]),
            ["json", "influx", "json-http", "remote-write"]
        );
    }

    #[test]
    fn the_metrics_protocols_are_stored_as_serve_stores_them_sorted_by_the_series() {
        let addr = SocketAddr::from(([127, 0, 0, 1], 2003));
        for protocol in chosen(&["all".to_owned()]) {
            let mut config = NeedleConfig::default();
            config.source.spec = protocol.source_spec(addr);
            let sorted = !config.history_store_config("bench").sort_by.is_empty();
            // JSON lines over tcp are not a metrics source; JSON lines written over HTTP are
            assert_eq!(sorted, protocol != Protocol::Json, "{}", protocol.name());
        }
    }

    #[test]
    fn an_http_answer_is_read_to_its_end() {
        let text = b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-length: 2\r\n\r\n{}HTTP/1.1 204 No Content\r\n\r\n";
        let mut answers = BufReader::new(&text[..]);
        assert_eq!(read_answer(&mut answers).unwrap(), (503, "{}".to_owned()));
        assert_eq!(read_answer(&mut answers).unwrap(), (204, String::new()));
    }
}
