//! The latency scenarios, over HTTP against a server in this process fed at a steady rate:
//!
//! - **latency-min** (Bullet test 1): a RAW query with no filter, `LIMIT 1`: from sending the
//!   query to having its first record back (`POST /api/v1/query` answers when LIMIT 1 is
//!   reached). Bullet on Storm: 1.66 ms.
//! - **find-record** (Bullet test 2): a query waits for one id (`POST /api/v1/queries` and its
//!   SSE stream are open first); then that record is written into the source, and the time is
//!   measured from the write to its result arriving on the stream. Bullet on Storm: 10.3 ms.
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
        _ => find_record(args.runs, args.rate),
    };
    super::report(scenario, &args.output, outcome)
}

impl Outcome for LatencyResult {
    fn scenario(&self) -> &str {
        self.scenario
    }

    fn json_lines(&self) -> Vec<serde_json::Value> {
        vec![serde_json::to_value(self).expect("a result serializes")]
    }

    fn print_table(&self) {
        let mut table = Table::new();
        table.set_header(["", "runs", "p50 ms", "p90 ms", "p99 ms", "max ms"]);
        for (name, s) in [("needle", &self.needle), (self.baseline_name, &self.baseline)] {
            table.add_row([
                name.to_owned(),
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

pub fn find_record(runs: usize, rate: f64) -> Result<LatencyResult, String> {
    let server = BenchServer::start(rate)?;
    let client =
        reqwest::blocking::Client::builder().timeout(None).build().map_err(|e| e.to_string())?;
    let mut writer = TcpStream::connect(server.data).map_err(|e| e.to_string())?;
    writer.set_nodelay(true).map_err(|e| e.to_string())?;
    let record_bytes = needle_record_line("warmup").len();
    let mut needle = Vec::with_capacity(runs);
    for run in 0..runs + 3 {
        let id = format!("needle-{run:06}");
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
    let baseline = loopback_echo(runs, record_bytes)?;
    Ok(result(
        "find-record",
        rate,
        &needle,
        &baseline,
        "loopback TCP write + echo of one record",
        10.3,
    ))
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
    }
}
