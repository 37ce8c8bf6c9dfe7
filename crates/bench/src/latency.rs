//! The latency scenarios, over HTTP against a server in this process fed at a steady rate:
//!
//! - **latency-min** (Bullet test 1): a RAW query with no filter, `LIMIT 1`: from sending the
//!   query to having its first record back (`POST /api/v1/query` answers when LIMIT 1 is
//!   reached). Bullet on Storm: 1.66 ms.
//! - **find-record** (Bullet test 2): a query waits for one id (`POST /api/v1/queries` and its
//!   SSE stream are open first); then that record is written into the source, and the time is
//!   measured from the write to its result arriving on the stream. Bullet on Storm: 10.3 ms.
//!
//! With `--stalled N`, find-record is measured again beside N stalled subscribers: queries each
//! sent 5 MB of results a second, their event streams opened and never read. With `--busy N`,
//! beside N queries that match every record of the background stream (`SELECT *` in one-second
//! windows), each read by its own client as fast as it comes: the joiner merges every record
//! once per query.
//!
//! The baseline, measured in the same run: an HTTP round trip to `GET /healthz` on the same
//! server (latency-min), and a bare loopback TCP write-and-echo through the kernel for the same
//! record size (find-record) — what any system pays to see a request and answer it. The ratio
//! is needle's p50 over the baseline's p50.

use super::harness::BenchServer;
use super::{Outcome, Output, Summary};
use comfy_table::Table;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

#[derive(Debug, serde::Serialize)]
pub struct LatencyResult {
    pub scenario: &'static str,
    pub rate: f64,
    pub needle: Summary,
    pub baseline: Summary,
    pub baseline_name: &'static str,
    pub ratio_p50: f64,
    pub bullet_reference_ms: f64,
    /// find-record with `--stalled`: how many stalled subscribers, and needle measured again
    /// beside them in the same run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stalled: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needle_beside_stalled: Option<Summary>,
    /// What the stall did, from `/metrics` after measuring beside it: emissions dropped for the
    /// subscribers that did not read, and result bytes held for them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stalled_results_dropped: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stalled_result_bytes: Option<f64>,
    /// find-record with `--busy`: how many queries matching every record, needle measured again
    /// beside them, and the bytes of results their clients read per second meanwhile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needle_beside_busy: Option<Summary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_bytes_per_sec: Option<f64>,
}

/// The options of `needle bench latency-min` and `find-record`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Measurements to take.
    #[arg(long, default_value_t = 200)]
    pub runs: usize,
    /// Background records per second fed into the server while measuring (0: idle).
    #[arg(long, default_value_t = 20_000.0)]
    pub rate: f64,
    /// find-record: then measure again beside this many stalled subscribers (queries matching
    /// every record whose event streams are opened and never read).
    #[arg(long, default_value_t = 0)]
    pub stalled: usize,
    /// find-record: then measure again beside this many queries matching every record of the
    /// background stream, each read as fast as it comes.
    #[arg(long, default_value_t = 0)]
    pub busy: usize,
    #[command(flatten)]
    pub output: Output,
}

/// Runs `scenario` (`latency-min` or `find-record`) and reports it.
pub fn run(scenario: &str, args: Args) -> std::process::ExitCode {
    if args.runs == 0 || !(args.rate >= 0.0 && args.rate.is_finite()) {
        return super::usage_error("--runs must be at least 1 and --rate a number ≥ 0");
    }
    let outcome = match scenario {
        "latency-min" => latency_min(args.runs, args.rate),
        _ => find_record(args.runs, args.rate, args.stalled, args.busy),
    };
    super::report(scenario, &args.output, outcome)
}

impl Outcome for LatencyResult {
    fn scenario(&self) -> &str {
        self.scenario
    }

    fn print_table(&self) {
        let mut table = Table::new();
        table.set_header(["", "runs", "p50 ms", "p90 ms", "p99 ms", "max ms"]);
        let beside = self.needle_beside_stalled.as_ref().map(|s| {
            (format!("needle beside {} stalled subscribers", self.stalled.unwrap_or(0)), s)
        });
        let busy = self.needle_beside_busy.as_ref().map(|s| {
            (format!("needle beside {} queries matching every record", self.busy.unwrap_or(0)), s)
        });
        let rows =
            [("needle".to_owned(), &self.needle), (self.baseline_name.to_owned(), &self.baseline)];
        for (name, s) in rows.into_iter().chain(beside).chain(busy) {
            table.add_row([
                name,
                s.runs.to_string(),
                format!("{:.3}", s.p50_ms),
                format!("{:.3}", s.p90_ms),
                format!("{:.3}", s.p99_ms),
                format!("{:.3}", s.max_ms),
            ]);
        }
        println!("{} at {} background records/s", self.scenario, self.rate);
        println!("{table}");
        println!(
            "needle p50 / baseline p50 = {:.2}; Bullet on Storm (reference): {} ms",
            self.ratio_p50, self.bullet_reference_ms
        );
        if let (Some(dropped), Some(bytes)) =
            (self.stalled_results_dropped, self.stalled_result_bytes)
        {
            println!(
                "beside the stalled subscribers: {dropped} emissions dropped for them, {:.1} MB of results held",
                bytes / 1e6
            );
        }
        if let Some(rate) = self.busy_bytes_per_sec {
            println!("the busy queries' clients read {:.1} MB of results a second", rate / 1e6);
        }
    }
}

pub fn latency_min(runs: usize, rate: f64) -> Result<LatencyResult, String> {
    let server = BenchServer::start(rate)?;
    let client = reqwest::blocking::Client::new();
    let query_url = format!("{}/api/v1/query", server.url);
    let health_url = format!("{}/healthz", server.url);
    // Warm up the connection pool and the code paths.
    for _ in 0..3 {
        client.get(&health_url).send().map_err(|e| e.to_string())?;
        run_limit_one(&client, &query_url)?;
    }
    let mut needle = Vec::with_capacity(runs);
    let mut baseline = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        client.get(&health_url).send().and_then(|r| r.bytes()).map_err(|e| e.to_string())?;
        baseline.push(start.elapsed());
        let start = Instant::now();
        run_limit_one(&client, &query_url)?;
        needle.push(start.elapsed());
    }
    Ok(result("latency-min", rate, &needle, &baseline, "HTTP GET /healthz round trip", 1.66))
}

fn run_limit_one(client: &reqwest::blocking::Client, url: &str) -> Result<(), String> {
    let body: serde_json::Value = client
        .post(url)
        .body("SELECT * FROM STREAM(10000, TIME) LIMIT 1")
        .send()
        .and_then(|r| r.json())
        .map_err(|e| e.to_string())?;
    match body["records"].as_array().map(Vec::len) {
        Some(1) => Ok(()),
        _ => Err(format!("expected one record, got {body}")),
    }
}

pub fn find_record(
    runs: usize,
    rate: f64,
    stalled: usize,
    busy: usize,
) -> Result<LatencyResult, String> {
    let server = BenchServer::start(rate)?;
    let client =
        reqwest::blocking::Client::builder().timeout(None).build().map_err(|e| e.to_string())?;
    let mut writer = TcpStream::connect(server.data).map_err(|e| e.to_string())?;
    writer.set_nodelay(true).map_err(|e| e.to_string())?;
    let record_bytes = needle_record_line("warmup").len();
    let needle = find_records(&server, &client, &mut writer, runs, "alone")?;
    let baseline = loopback_echo(runs, record_bytes)?;
    let mut result = result(
        "find-record",
        rate,
        &needle,
        &baseline,
        "loopback TCP write + echo of one record",
        10.3,
    );
    if stalled > 0 {
        let _held = stall_subscribers(&server, &client, stalled)?;
        let _feed = StallFeed::start(server.data)?;
        // let their sockets fill and their results pile up to the bounds before measuring
        std::thread::sleep(Duration::from_secs(5));
        let beside = find_records(&server, &client, &mut writer, runs, "beside")?;
        result.stalled = Some(stalled);
        result.needle_beside_stalled = Some(Summary::of(&beside));
        let metrics = client
            .get(format!("{}/metrics", server.url))
            .send()
            .and_then(|r| r.text())
            .map_err(|e| e.to_string())?;
        let metric = |name: &str| {
            metrics.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        };
        result.stalled_results_dropped = metric("needle_results_dropped_total");
        result.stalled_result_bytes = metric("needle_result_bytes");
    }
    if busy > 0 {
        let readers = BusyReaders::start(&server, &client, busy)?;
        // let the windows fill and the joiner reach its pace before measuring
        std::thread::sleep(Duration::from_secs(3));
        let (read_before, since) = (readers.bytes(), Instant::now());
        let beside = find_records(&server, &client, &mut writer, runs, "busy")?;
        // the busy queries emit once a window: a rate over less than two windows says little
        // (and over a few quick runs could catch none)
        std::thread::sleep(BUSY_MIN_MEASURE.saturating_sub(since.elapsed()));
        let read = readers.bytes() - read_before;
        result.busy = Some(busy);
        result.needle_beside_busy = Some(Summary::of(&beside));
        result.busy_bytes_per_sec = Some(read as f64 / since.elapsed().as_secs_f64());
    }
    Ok(result)
}

/// What each busy query runs: every record of the background stream, in one-second windows.
const BUSY_QUERY: &str = "SELECT * FROM STREAM(600000, TIME) WINDOWING TUMBLING(1000, TIME)";

/// The shortest time the busy queries' clients are measured over: two of their windows.
const BUSY_MIN_MEASURE: Duration = Duration::from_secs(2);

/// `count` queries ([`BUSY_QUERY`]), each with a client reading its event stream as it comes;
/// stopped (their connections closed, which ends the queries) when dropped.
struct BusyReaders {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    read: std::sync::Arc<std::sync::atomic::AtomicU64>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BusyReaders {
    fn start(
        server: &BenchServer,
        client: &reqwest::blocking::Client,
        count: usize,
    ) -> Result<Self, String> {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let read = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut threads = Vec::with_capacity(count);
        for mut s in open_event_streams(server, client, BUSY_QUERY, count)? {
            s.set_read_timeout(Some(Duration::from_millis(200))).map_err(|e| e.to_string())?;
            let (stop, read) = (stop.clone(), read.clone());
            threads.push(std::thread::spawn(move || {
                let mut buffer = vec![0u8; 256 << 10];
                while !stop.load(Ordering::Relaxed) {
                    match s.read(&mut buffer) {
                        Ok(0) => break,
                        Ok(n) => {
                            read.fetch_add(n as u64, Ordering::Relaxed);
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                        Err(_) => break,
                    }
                }
            }));
        }
        Ok(Self { stop, read, threads })
    }

    /// Bytes the clients have read so far.
    fn bytes(&self) -> u64 {
        self.read.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for BusyReaders {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// What each stalled subscriber runs: each 100 KB "stall" record, as it comes (the bench writes
/// 50 a second while it measures beside them: 5 MB/s for each subscriber that is never read,
/// and little matching work for the workers).
const STALLED_QUERY: &str =
    "SELECT * FROM STREAM(600000, TIME) WHERE id = 'stall' WINDOWING EVERY(1, RECORD, FIRST, 1, RECORD)";

/// Records a second of [`STALLED_QUERY`]'s records, and their size.
const STALL_RATE: u64 = 50;
const STALL_RECORD_BYTES: usize = 100_000;

/// Writes the stalled subscribers' records into the source until dropped.
struct StallFeed(
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    Option<std::thread::JoinHandle<()>>,
);

impl StallFeed {
    fn start(data: std::net::SocketAddr) -> Result<Self, String> {
        use std::sync::atomic::Ordering;
        let mut s = TcpStream::connect(data).map_err(|e| e.to_string())?;
        let running = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let flag = running.clone();
        let line =
            format!("{{\"id\":\"stall\",\"filler\":\"{}\"}}\n", "x".repeat(STALL_RECORD_BYTES));
        let handle = std::thread::spawn(move || {
            while flag.load(Ordering::Relaxed) && s.write_all(line.as_bytes()).is_ok() {
                std::thread::sleep(Duration::from_millis(1000 / STALL_RATE));
            }
        });
        Ok(Self(running, Some(handle)))
    }
}

impl Drop for StallFeed {
    fn drop(&mut self) {
        self.0.store(false, std::sync::atomic::Ordering::Relaxed);
        if let Some(h) = self.1.take() {
            let _ = h.join();
        }
    }
}

/// `count` queries ([`STALLED_QUERY`]), each with its event stream opened on a connection that
/// never reads: the server's writes to them stall once the socket's buffers are full.
fn stall_subscribers(
    server: &BenchServer,
    client: &reqwest::blocking::Client,
    count: usize,
) -> Result<Vec<TcpStream>, String> {
    open_event_streams(server, client, STALLED_QUERY, count)
}

/// Starts `query` `count` times, each with its event stream asked for on a connection of its
/// own (read by the caller, or not at all).
fn open_event_streams(
    server: &BenchServer,
    client: &reqwest::blocking::Client,
    query: &str,
    count: usize,
) -> Result<Vec<TcpStream>, String> {
    let address = server.url.trim_start_matches("http://").to_owned();
    let mut held = Vec::with_capacity(count);
    for _ in 0..count {
        let started: serde_json::Value = client
            .post(format!("{}/api/v1/queries", server.url))
            .body(query.to_owned())
            .send()
            .and_then(|r| r.json())
            .map_err(|e| e.to_string())?;
        let events =
            started["urls"]["events"].as_str().ok_or(format!("no events url in {started}"))?;
        let mut s = TcpStream::connect(&address).map_err(|e| e.to_string())?;
        write!(s, "GET {events} HTTP/1.1\r\nHost: {address}\r\nAccept: text/event-stream\r\n\r\n")
            .map_err(|e| e.to_string())?;
        held.push(s);
    }
    Ok(held)
}

/// find-record `runs` times (after 3 untimed), each with its own id.
fn find_records(
    server: &BenchServer,
    client: &reqwest::blocking::Client,
    writer: &mut TcpStream,
    runs: usize,
    round: &str,
) -> Result<Vec<Duration>, String> {
    let mut needle = Vec::with_capacity(runs);
    for run in 0..runs + 3 {
        let id = format!("needle-{round}-{run:06}");
        let started: serde_json::Value = client
            .post(format!("{}/api/v1/queries", server.url))
            .body(format!("SELECT id FROM STREAM(30000, TIME) WHERE id = '{id}' LIMIT 1"))
            .send()
            .and_then(|r| r.json())
            .map_err(|e| e.to_string())?;
        let events =
            started["urls"]["events"].as_str().ok_or(format!("no events url in {started}"))?;
        let stream =
            client.get(format!("{}{events}", server.url)).send().map_err(|e| e.to_string())?;
        let mut lines = BufReader::new(stream).lines();
        let start = Instant::now();
        writer.write_all(needle_record_line(&id).as_bytes()).map_err(|e| e.to_string())?;
        loop {
            match lines.next() {
                Some(Ok(line)) if line.starts_with("data:") && line.contains(&id) => break,
                Some(Ok(_)) => {}
                _ => return Err(format!("the event stream of {id} ended without the record")),
            }
        }
        if run >= 3 {
            needle.push(start.elapsed());
        }
    }
    Ok(needle)
}

/// A Bullet-shaped record (about the size of the workload's) with the given id.
fn needle_record_line(id: &str) -> String {
    let filler = "x".repeat(1700);
    format!("{{\"id\":\"{id}\",\"device\":\"ipad\",\"timespent\":42,\"filler\":\"{filler}\"}}\n")
}

/// The bare cost of getting a record's bytes to another thread and a reply back on loopback.
fn loopback_echo(runs: usize, bytes: usize) -> Result<Vec<Duration>, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let echo = std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let _ = s.set_nodelay(true);
            let mut buf = vec![0u8; bytes];
            while s.read_exact(&mut buf).is_ok() {
                if s.write_all(&buf[..1]).is_err() {
                    break;
                }
            }
        }
    });
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let payload = vec![b'x'; bytes];
    let mut ack = [0u8; 1];
    let mut samples = Vec::with_capacity(runs);
    for run in 0..runs + 3 {
        let start = Instant::now();
        s.write_all(&payload).and_then(|_| s.read_exact(&mut ack)).map_err(|e| e.to_string())?;
        if run >= 3 {
            samples.push(start.elapsed());
        }
    }
    drop(s);
    let _ = echo.join();
    Ok(samples)
}

fn result(
    scenario: &'static str,
    rate: f64,
    needle: &[Duration],
    baseline: &[Duration],
    baseline_name: &'static str,
    bullet_reference_ms: f64,
) -> LatencyResult {
    let needle = Summary::of(needle);
    let baseline = Summary::of(baseline);
    LatencyResult {
        scenario,
        rate,
        ratio_p50: needle.p50_ms / baseline.p50_ms,
        needle,
        baseline,
        baseline_name,
        bullet_reference_ms,
        stalled: None,
        needle_beside_stalled: None,
        stalled_results_dropped: None,
        stalled_result_bytes: None,
        busy: None,
        needle_beside_busy: None,
        busy_bytes_per_sec: None,
    }
}
