//! `needle bench max-raw-queries` (Bullet tests 3–4): how many RAW queries, each waiting for its
//! own needle, needle runs at once with every needle record found.
//!
//! For each N of `--queries`, a fresh server in this process (runtime with a `tcp:` source and
//! the HTTP API on loopback, `--workers` workers) is fed `--rate` Bullet-shaped records/s in the
//! background (a pool of generated records written over and over by a feeder thread). Then:
//!
//! 1. **Submit**: N queries `SELECT * FROM STREAM(30000, TIME) WHERE id = '<distinct>' LIMIT 10`
//!    go through one WebSocket (`GET /api/v1/ws`), pipelined (at most 4,096 unanswered). Timed
//!    from the first start message to the last `started` answer.
//! 2. **Inject**: as each query is answered `started`, an injector thread writes its needle
//!    record 10 times (`LIMIT` copies) into the `tcp:` source, copy k at (k + phase) ×
//!    `--inject-seconds` ÷ 10 after the query started (by default one a second for 10 s, well
//!    inside the query's 30 s; the phase, spread over [0, 1) by the query's number, keeps the
//!    queries started in the same millisecond from all completing in the same burst), while
//!    later queries are still being submitted. Needle records are small (~90
//!    bytes: `id`, `copy`, `sent_us`, two more fields) so that 2 million of them do not drown
//!    the background stream.
//! 3. **Collect**: a thread reads the WebSocket: every `result` and `complete` message, until
//!    every query ended (by its LIMIT, or by its duration with fewer records).
//!
//! Per N it reports: queries submitted (started), time to submit, records found / expected
//! (records in results whose `id` is the query's needle), queries complete (all 10 found),
//! injection → result latency — from writing a query's **last** needle copy into the source
//! socket to its result arriving on the WebSocket, p50/p99 over the complete queries (a
//! windowless RAW query answers once, when its LIMIT is reached) — and resident memory: the
//! process's growth from before the first query to after the last was submitted, per query
//! (the server's, with what the client adds while submitting: the ids it is answered, in a
//! table made before, and its queue of needles to inject, ~100 bytes a query; the query texts
//! are made before).
//!
//! Bullet on Storm: 200–300 queries, then 735 after tuning (where Storm's DRPC gave out). The
//! issue's target: at least 100,000 on this machine with every record found.

use super::live::{live_config, Feeder, LiveServer, Pool, WsClient};
use super::{Outcome, Output, Summary};
use comfy_table::Table;
use needle_workload::WorkloadKind;
use serde::Serialize;
use serde_json::Value;
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The options of `needle bench max-raw-queries`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The numbers of concurrent queries to try, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,50000,100000,200000")]
    pub queries: Vec<usize>,
    /// Needle records injected per query (each query's LIMIT).
    #[arg(long, default_value_t = 10)]
    pub copies: u64,
    /// Each query's duration in ms (Bullet: 30,000).
    #[arg(long, default_value_t = 30_000)]
    pub duration_ms: u64,
    /// Background Bullet-shaped records per second fed while the queries run (0: none).
    #[arg(long, default_value_t = 5_000.0)]
    pub rate: f64,
    /// Seconds over which each query's needle copies are written, from its start (copy k at
    /// k × this ÷ copies); less than the duration.
    #[arg(long, default_value_t = 10.0)]
    pub inject_seconds: f64,
    /// Worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
    #[command(flatten)]
    pub output: Output,
}

/// One N.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub scenario: &'static str,
    pub queries: usize,
    pub submitted: usize,
    pub refused: usize,
    pub submit_seconds: f64,
    pub submitted_per_sec: f64,
    pub records_expected: u64,
    /// Needle records written into the source.
    pub records_injected: u64,
    pub records_found: u64,
    /// Records in results that were not the query's needle (must be 0).
    pub records_wrong: u64,
    pub queries_complete: usize,
    pub queries_ended: usize,
    pub all_found: bool,
    pub inject_seconds: f64,
    /// Injection of a query's last needle → its result on the WebSocket.
    pub latency: Summary,
    /// The same, of the needles written while queries were still being submitted (the server
    /// compiling and indexing new queries beside finding the needles of the running ones).
    pub latency_while_submitting: Summary,
    /// The same, of the needles written after the last query was started.
    pub latency_after_submitting: Summary,
    pub rss_growth_mib: f64,
    pub bytes_per_query: f64,
    /// The growth of the bytes allocated (the allocator's count, when it gives one), per query:
    /// what the queries hold, without what the allocator keeps beside it.
    pub heap_bytes_per_query: Option<f64>,
    pub background_rate: f64,
    pub workers: usize,
}

#[derive(Debug, Serialize)]
pub struct MaxRawResult {
    pub rows: Vec<Row>,
    /// The largest N with every needle record found.
    pub largest_all_found: Option<usize>,
    pub target: usize,
    pub bullet_reference: &'static str,
}

pub fn run(args: Args) -> std::process::ExitCode {
    if args.queries.is_empty()
        || args.queries.contains(&0)
        || args.copies == 0
        || args.duration_ms < 2_000
        || !(args.rate >= 0.0 && args.rate.is_finite())
        || !(args.inject_seconds > 0.0 && args.inject_seconds * 1000.0 < args.duration_ms as f64)
    {
        return super::usage_error(
            "--queries needs counts ≥ 1, --copies ≥ 1, --duration-ms ≥ 2000, --rate ≥ 0 and \
             0 < --inject-seconds < the duration",
        );
    }
    super::report("max-raw-queries", &args.output, measure(&args))
}

fn measure(args: &Args) -> Result<MaxRawResult, String> {
    let pool = Arc::new(Pool::generate(WorkloadKind::Bullet, 5_000, 3)?);
    let progress = super::progress_bar(args.queries.len() as u64);
    let mut rows = Vec::new();
    for &n in &args.queries {
        progress.set_message(format!("{n} queries"));
        rows.push(one(n, args, &pool)?);
        progress.inc(1);
    }
    progress.finish_and_clear();
    let largest_all_found = rows.iter().filter(|r| r.all_found).map(|r| r.queries).max();
    Ok(MaxRawResult {
        rows,
        largest_all_found,
        target: 100_000,
        bullet_reference: "200–300 queries, then 735 (Storm DRPC limit)",
    })
}

/// What the WebSocket reader keeps.
struct Collect {
    /// query id → index of its needle
    index: HashMap<String, usize>,
    copies: u64,
    found: u64,
    wrong: u64,
    complete: usize,
    ended: usize,
    /// (when the needle was written, µs on [`super::live::now_us`]'s clock; its latency, ms)
    latencies_ms: Vec<(u64, f64)>,
}

/// The parts of a WebSocket message the collector reads.
#[derive(serde::Deserialize)]
struct Message<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    result: Option<ResultRecords<'a>>,
}

#[derive(serde::Deserialize)]
struct ResultRecords<'a> {
    #[serde(borrow)]
    records: Vec<Needle<'a>>,
}

#[derive(serde::Deserialize)]
struct Needle<'a> {
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    sent_us: Option<u64>,
}

fn on_message(c: &mut Collect, text: &str) -> bool {
    let Ok(message) = serde_json::from_str::<Message>(text) else { return true };
    let Some(&i) = message.id.as_deref().and_then(|id| c.index.get(id)) else { return true };
    match (message.kind.as_ref(), message.result) {
        ("result", Some(result)) => {
            let needle = needle_id(i);
            let mine = result.records.iter().filter(|r| r.id.as_deref() == Some(&needle));
            let mine = mine.count() as u64;
            c.found += mine;
            c.wrong += result.records.len() as u64 - mine;
            if mine == c.copies {
                c.complete += 1;
                if let Some(sent) = result.records.iter().filter_map(|r| r.sent_us).max() {
                    let ms = super::live::now_us().saturating_sub(sent) as f64 / 1e3;
                    c.latencies_ms.push((sent, ms));
                }
            }
        }
        ("complete", _) => c.ended += 1,
        _ => {}
    }
    c.ended < c.index.len()
}

fn needle_id(i: usize) -> String {
    format!("mrq-{i:07}")
}

fn one(n: usize, args: &Args, pool: &Arc<Pool>) -> Result<Row, String> {
    let server = LiveServer::tcp(live_config(args.workers))?;
    let data = server.data.ok_or("no data address")?;
    let feeder = (args.rate > 0.0)
        .then(|| Feeder::start(data, pool.clone(), Some(args.rate), None))
        .transpose()?;
    std::thread::sleep(Duration::from_millis(300));

    // the client's texts and table made before the measure starts: not the server's memory
    let texts: Vec<String> = (0..n)
        .map(|i| {
            format!(
                "SELECT * FROM STREAM({}, TIME) WHERE id = '{}' LIMIT {}",
                args.duration_ms,
                needle_id(i),
                args.copies
            )
        })
        .collect();
    let mut collect = Collect {
        index: HashMap::with_capacity(n),
        copies: args.copies,
        found: 0,
        wrong: 0,
        complete: 0,
        ended: 0,
        latencies_ms: Vec::with_capacity(n),
    };
    let rss_before = super::matching::resident_bytes().unwrap_or(f64::NAN);
    let heap_before = crate::heap_bytes();
    let mut ws = WsClient::connect(server.url())?;
    // copy k of a query's needle is written (k + phase) × every after the query started
    let every = Duration::from_secs_f64(args.inject_seconds / args.copies as f64);
    let (acks, acked) = std::sync::mpsc::channel::<(usize, Instant)>();
    let injector = spawn_injector(data, args.copies, every, acked)?;
    let started = ws.start_all(&texts, &mut |message| {
        if message["type"] == "started" {
            let tag = message["tag"].as_u64().map(|t| t as usize);
            if let (Some(id), Some(tag)) = (message["id"].as_str(), tag) {
                collect.index.insert(id.to_owned(), tag);
                let _ = acks.send((tag, Instant::now()));
            }
        } else {
            on_message(&mut collect, &message.to_string());
        }
    })?;
    drop(acks);
    let last_started = Instant::now();
    let last_started_us = super::live::now_us();
    let rss_after = super::matching::resident_bytes().unwrap_or(f64::NAN);
    let heap_after = crate::heap_bytes();
    let submitted = started.count();
    let reader = ws.spawn_reader(collect, on_message);
    let injected = injector.join().map_err(|_| "the injector panicked")??;
    let deadline = last_started + Duration::from_millis(args.duration_ms) + Duration::from_secs(5);
    let collected = reader.finish(deadline)?;
    if let Some(feeder) = feeder {
        feeder.stop()?;
    }
    drop(server);
    let expected = args.copies * submitted as u64;
    let latencies = |when: &dyn Fn(u64) -> bool| -> Vec<f64> {
        collected.latencies_ms.iter().filter(|(sent, _)| when(*sent)).map(|(_, ms)| *ms).collect()
    };
    let growth = rss_after - rss_before;
    Ok(Row {
        scenario: "max-raw-queries",
        queries: n,
        submitted,
        refused: n - submitted,
        submit_seconds: started.elapsed.as_secs_f64(),
        submitted_per_sec: submitted as f64 / started.elapsed.as_secs_f64(),
        records_expected: expected,
        records_injected: injected,
        records_found: collected.found,
        records_wrong: collected.wrong,
        queries_complete: collected.complete,
        queries_ended: collected.ended,
        all_found: submitted == n && collected.found == expected && collected.wrong == 0,
        inject_seconds: args.inject_seconds,
        latency: Summary::of_ms(&latencies(&|_| true)),
        latency_while_submitting: Summary::of_ms(&latencies(&|sent| sent < last_started_us)),
        latency_after_submitting: Summary::of_ms(&latencies(&|sent| sent >= last_started_us)),
        rss_growth_mib: growth / (1024.0 * 1024.0),
        bytes_per_query: growth / submitted.max(1) as f64,
        heap_bytes_per_query: heap_before.zip(heap_after).map(|((before, _), (after, _))| {
            (after as f64 - before as f64) / submitted.max(1) as f64
        }),
        background_rate: args.rate,
        workers: live_config(args.workers).worker_threads(),
    })
}

/// A thread writing each started query's needle `copies` times into the source at `data`:
/// copy k at `(k + phase) × every` after the query started, the phase in [0, 1) spreading the
/// queries started together over the interval (`acked`: needle index and start time, until the
/// sender is dropped). Returns how many records it wrote.
fn spawn_injector(
    data: std::net::SocketAddr,
    copies: u64,
    every: Duration,
    acked: std::sync::mpsc::Receiver<(usize, Instant)>,
) -> Result<std::thread::JoinHandle<Result<u64, String>>, String> {
    let mut socket = TcpStream::connect(data).map_err(|e| e.to_string())?;
    socket.set_nodelay(true).map_err(|e| e.to_string())?;
    let spawned = std::thread::Builder::new().name("bench-injector".into()).spawn(move || {
        let mut due: BinaryHeap<Reverse<(Instant, usize, u64)>> = BinaryHeap::new();
        let mut open = true;
        let mut written = 0u64;
        let mut buf = Vec::with_capacity(64 << 10);
        while open || !due.is_empty() {
            loop {
                match acked.try_recv() {
                    Ok((needle, started)) => {
                        let phase = (needle as f64 * 0.618_033_988_75).fract();
                        for copy in 0..copies {
                            let at = started + every.mul_f64(copy as f64 + phase);
                            due.push(Reverse((at, needle, copy)));
                        }
                    }
                    Err(std::sync::mpsc::TryRecvError::Empty) => break,
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                        open = false;
                        break;
                    }
                }
            }
            let now = Instant::now();
            buf.clear();
            while due.peek().is_some_and(|Reverse((at, _, _))| *at <= now) {
                let Some(Reverse((_, needle, copy))) = due.pop() else { break };
                let _ = writeln!(
                    buf,
                    "{{\"id\":\"{}\",\"copy\":{copy},\"sent_us\":{},\"device\":\"ipad\",\"timespent\":42}}",
                    needle_id(needle),
                    super::live::now_us()
                );
                written += 1;
            }
            if !buf.is_empty() {
                socket.write_all(&buf).map_err(|e| format!("injecting needles: {e}"))?;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(written)
    });
    spawned.map_err(|e| e.to_string())
}

impl Outcome for MaxRawResult {
    fn scenario(&self) -> &str {
        "max-raw-queries"
    }

    fn json_lines(&self) -> Vec<Value> {
        super::json_lines_of(&self.rows)
    }

    fn print_table(&self) {
        let mut table = Table::new();
        table.set_header([
            "queries",
            "started",
            "submit s",
            "found / expected",
            "complete",
            "p50 ms",
            "p99 ms",
            "RSS +MiB",
            "bytes/query",
            "heap bytes/query",
            "all found",
        ]);
        for r in &self.rows {
            table.add_row([
                r.queries.to_string(),
                r.submitted.to_string(),
                format!("{:.1}", r.submit_seconds),
                format!("{} / {}", r.records_found, r.records_expected),
                r.queries_complete.to_string(),
                format!("{:.1}", r.latency.p50_ms),
                format!("{:.1}", r.latency.p99_ms),
                format!("{:.0}", r.rss_growth_mib),
                format!("{:.0}", r.bytes_per_query),
                r.heap_bytes_per_query.map_or("-".to_owned(), |b| format!("{b:.0}")),
                if r.all_found { "yes" } else { "NO" }.to_owned(),
            ]);
        }
        let rate = self.rows.first().map_or(0.0, |r| r.background_rate);
        let copies =
            self.rows.first().map_or(0, |r| r.records_expected / r.submitted.max(1) as u64);
        println!("max-raw-queries: RAW queries each waiting for {copies} needle records, {rate} background records/s");
        println!("{table}");
        for r in &self.rows {
            let (during, after) = (&r.latency_while_submitting, &r.latency_after_submitting);
            println!(
                "{} queries, inject → result of the needles written while queries were being \
                 submitted: p50 {:.1} ms, p99 {:.1} ms ({} needles); after: p50 {:.1} ms, p99 \
                 {:.1} ms ({})",
                r.queries,
                during.p50_ms,
                during.p99_ms,
                during.runs,
                after.p50_ms,
                after.p99_ms,
                after.runs
            );
        }
        match self.largest_all_found {
            Some(n) => println!(
                "largest N with every record found: {n} (target ≥ {}; Bullet on Storm: {})",
                self.target, self.bullet_reference
            ),
            None => println!("no N had every record found (target ≥ {})", self.target),
        }
    }
}
