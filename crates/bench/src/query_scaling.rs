//! `needle bench query-scaling` (Bullet test 7): read → filter latency against the number of
//! concurrent RAW queries, at a fixed input rate; where the curve bends (the knee); a chart.
//!
//! One server in this process (runtime with a `tcp:` source and the HTTP API on loopback) is fed
//! `--rate` Bullet-shaped records/s (1.8 KiB each; a pool of generated records written over and
//! over by a feeder thread) for the whole run. For each count N of `--queries`, ascending, the
//! running queries are topped up to N through one WebSocket — Bullet test 7's shape,
//! `SELECT * FROM STREAM(600000, TIME) WHERE id = '<random>' LIMIT 10`, with ids no record has,
//! so each is a needle hunt that never ends early — and, after a second to settle, latency is
//! measured for `--seconds` with probes: `--probe-rate` times a second, a Bullet-shaped record
//! with `id` `qs-probe` and its write time (`sent_us`) is written into the source, where one
//! more query, `SELECT * ... WHERE id = 'qs-probe' WINDOWING TUMBLING(600000, TIME) LIMIT 1`
//! (a RAW window of one record: emitted the moment it matches), sends it back on a second
//! WebSocket. So N counts the load queries; the probe query is one more.
//!
//! Two latencies per N:
//! - **write → result**: from writing a probe into the source socket to its result arriving on
//!   the WebSocket (exact, per probe): what a user waits.
//! - **read → match**: the runtime's histogram (`needle_read_to_match_seconds`, what `/metrics`
//!   exports; Bullet's "read → filter"): from the source reading a batch to its records having
//!   been matched, for batches where something matched (here: the probes), quantiles
//!   interpolated inside the histogram's power-of-two buckets.
//!
//! The knee: the first N whose write → result p50 is more than twice the p50 at the smallest N
//! (and at least 1 ms more, so that noise on a sub-millisecond figure is no knee). The largest
//! N with p99 under Bullet's 200 ms is reported too. Bullet on Storm: 650 queries on 32 filter
//! cores at 68.4k records/s.

use super::chart::{draw_svg, Chart, Series};
use super::live::{
    latency_of_latest, live_config, now_us, Feeder, Histogram, LiveServer, Pool, WsClient,
};
use super::{Outcome, Output, Summary};
use comfy_table::Table;
use needle_workload::WorkloadKind;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use serde_json::Value;
use std::io::Write;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The options of `needle bench query-scaling`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The numbers of concurrent queries, comma-separated (measured in ascending order).
    #[arg(long, value_delimiter = ',', default_value = "1,10,100,1000,10000,100000")]
    pub queries: Vec<usize>,
    /// Background Bullet-shaped records per second.
    #[arg(long, default_value_t = 20_000.0)]
    pub rate: f64,
    /// Seconds of probing per query count.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Probe records per second.
    #[arg(long, default_value_t = 20.0)]
    pub probe_rate: f64,
    /// Worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
    #[command(flatten)]
    pub output: Output,
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub scenario: &'static str,
    pub queries: usize,
    pub refused: usize,
    /// Time to submit the queries added for this N.
    pub submit_seconds: f64,
    pub probes_sent: u64,
    pub probes_back: usize,
    pub write_to_result: Summary,
    pub read_to_match_p50_ms: f64,
    pub read_to_match_p99_ms: f64,
    pub read_to_match_observations: u64,
    /// Records/s the runtime read while probing (should be the offered rate).
    pub records_per_sec: f64,
    pub rss_mib: f64,
}

#[derive(Debug, Serialize)]
pub struct QueryScalingResult {
    pub rows: Vec<Row>,
    pub rate: f64,
    pub workers: usize,
    /// The first N where latency bends (see the module doc); `None`: flat to the end.
    pub knee: Option<usize>,
    /// The largest N with write → result p99 under 200 ms.
    pub largest_under_200ms: Option<usize>,
    pub chart: String,
    pub bullet_reference: &'static str,
}

pub fn run(args: Args) -> std::process::ExitCode {
    if args.queries.is_empty()
        || args.queries.contains(&0)
        || !(args.rate > 0.0 && args.rate.is_finite())
        || !(args.seconds > 0.0 && args.seconds.is_finite())
        || !(args.probe_rate > 0.0 && args.probe_rate <= 1000.0)
    {
        return super::usage_error(
            "--queries needs counts ≥ 1; --rate and --seconds must be > 0, --probe-rate in (0, 1000]",
        );
    }
    super::report("query-scaling", &args.output, measure(&args))
}

const PROBE_ID: &str = "qs-probe";
const DURATION_MS: u64 = 600_000;

fn measure(args: &Args) -> Result<QueryScalingResult, String> {
    let mut counts = args.queries.clone();
    counts.sort_unstable();
    counts.dedup();
    let progress = super::progress_bar(counts.len() as u64);
    progress.set_message("starting");
    let pool = Arc::new(Pool::generate(WorkloadKind::Bullet, 5_000, 5)?);
    let server = LiveServer::tcp(live_config(args.workers))?;
    let data = server.data.ok_or("no data address")?;
    let feeder = Feeder::start(data, pool.clone(), Some(args.rate), None)?;

    let mut probe_ws = WsClient::connect(server.url())?;
    let probe_query = format!(
        "SELECT * FROM STREAM({DURATION_MS}, TIME) WHERE id = '{PROBE_ID}' \
         WINDOWING TUMBLING({DURATION_MS}, TIME) LIMIT 1"
    );
    let started = probe_ws.start_all(&[probe_query], &mut |_| {})?;
    if started.count() != 1 {
        return Err(format!("the probe query was refused: {:?}", started.errors));
    }
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let probe_reader = probe_ws.spawn_reader(latencies.clone(), |latencies, text| {
        let message: Value = serde_json::from_str(text).unwrap_or_default();
        if message["type"] == "result" {
            let records = message["result"]["records"].as_array().map_or(&[][..], Vec::as_slice);
            if let Some(ms) = latency_of_latest(records) {
                latencies.lock().unwrap_or_else(|e| e.into_inner()).push(ms);
            }
        }
        true
    });

    let mut load_ws = WsClient::connect(server.url())?;
    let mut probes = TcpStream::connect(data).map_err(|e| e.to_string())?;
    probes.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut running = 0usize;
    let mut rows = Vec::new();
    for &n in &counts {
        progress.set_message(format!("{n} queries"));
        let texts: Vec<String> = (running..n)
            .map(|_| {
                let id: String = (0..11)
                    .map(|_| char::from_digit(rng.random_range(0..16), 16).unwrap_or('0'))
                    .collect();
                format!("SELECT * FROM STREAM({DURATION_MS}, TIME) WHERE id = '{id}' LIMIT 10")
            })
            .collect();
        let added = load_ws.start_all(&texts, &mut |_| {})?;
        running += added.count();
        std::thread::sleep(Duration::from_secs(1));

        let histogram_before = Histogram::read_to_match(&server.runtime);
        let read_before = server.records_read();
        latencies.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let start = Instant::now();
        let sent = send_probes(&mut probes, pool.line(0), args.probe_rate, args.seconds)?;
        let elapsed = start.elapsed().as_secs_f64();
        let records = server.records_read() - read_before;
        // the last probes' results
        std::thread::sleep(Duration::from_millis(300));
        let histogram = Histogram::read_to_match(&server.runtime).since(&histogram_before);
        let back = std::mem::take(&mut *latencies.lock().unwrap_or_else(|e| e.into_inner()));
        rows.push(Row {
            scenario: "query-scaling",
            queries: running,
            refused: texts.len() - added.count(),
            submit_seconds: added.elapsed.as_secs_f64(),
            probes_sent: sent,
            probes_back: back.len(),
            write_to_result: Summary::of_ms(&back),
            read_to_match_p50_ms: histogram.quantile_ms(0.5),
            read_to_match_p99_ms: histogram.quantile_ms(0.99),
            read_to_match_observations: histogram.count(),
            records_per_sec: records as f64 / elapsed,
            rss_mib: super::matching::resident_bytes().unwrap_or(f64::NAN) / (1024.0 * 1024.0),
        });
        progress.inc(1);
    }
    progress.finish_and_clear();
    feeder.stop()?;
    drop(probe_reader.finish(Instant::now()));
    drop(server);

    let knee = knee(&rows);
    let largest_under_200ms =
        rows.iter().filter(|r| r.write_to_result.p99_ms < 200.0).map(|r| r.queries).max();
    std::fs::create_dir_all(&args.output.out).map_err(|e| e.to_string())?;
    let chart = args.output.out.join("query-scaling.svg");
    draw_chart(&chart, &rows, knee, args)?;
    Ok(QueryScalingResult {
        rows,
        rate: args.rate,
        workers: live_config(args.workers).worker_threads(),
        knee,
        largest_under_200ms,
        chart: chart.display().to_string(),
        bullet_reference: "650 queries on 32 filter cores at 68.4k records/s",
    })
}

/// Writes a probe record `rate` times a second for `seconds`; how many were written.
fn send_probes(
    socket: &mut TcpStream,
    template: &[u8],
    rate: f64,
    seconds: f64,
) -> Result<u64, String> {
    let start = Instant::now();
    let every = Duration::from_secs_f64(1.0 / rate);
    let mut sent = 0u64;
    while start.elapsed().as_secs_f64() < seconds {
        let line = with_id(template, PROBE_ID, now_us());
        socket.write_all(&line).map_err(|e| format!("writing a probe: {e}"))?;
        sent += 1;
        let next = start + every * sent as u32;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    Ok(sent)
}

/// A copy of a Bullet record (`{"id":"…",…}`) with another id and a `sent_us` field, as a line.
fn with_id(record: &[u8], id: &str, sent_us: u64) -> Vec<u8> {
    let rest = record
        .strip_prefix(b"{\"id\":\"")
        .and_then(|r| r.iter().position(|&b| b == b'"').map(|end| &r[end + 2..]))
        .unwrap_or(b"}");
    let mut line = format!("{{\"id\":\"{id}\",\"sent_us\":{sent_us},").into_bytes();
    line.extend_from_slice(rest);
    line.push(b'\n');
    line
}

/// The first N whose write → result p50 is more than twice the smallest N's (and 1 ms more).
fn knee(rows: &[Row]) -> Option<usize> {
    let base = rows.first()?.write_to_result.p50_ms;
    rows.iter()
        .find(|r| {
            let p50 = r.write_to_result.p50_ms;
            p50 > 2.0 * base && p50 > base + 1.0
        })
        .map(|r| r.queries)
}

fn draw_chart(
    path: &std::path::Path,
    rows: &[Row],
    knee: Option<usize>,
    args: &Args,
) -> Result<(), String> {
    let line = |name: &str, y: fn(&Row) -> f64| Series {
        name: name.to_owned(),
        points: rows.iter().map(|r| (r.queries as f64, y(r))).collect(),
    };
    let title = format!(
        "needle query-scaling: latency against concurrent RAW queries ({} records/s)",
        args.rate
    );
    draw_svg(
        path,
        &Chart {
            title: &title,
            x_label: "concurrent RAW queries (log)",
            y_label: "latency, ms (log)",
            log_x: true,
            log_y: true,
            series: vec![
                line("write → result p50", |r| r.write_to_result.p50_ms),
                line("write → result p99", |r| r.write_to_result.p99_ms),
                line("read → match p50", |r| r.read_to_match_p50_ms),
                line("read → match p99", |r| r.read_to_match_p99_ms),
            ],
            marks: knee.map(|n| (n as f64, format!("knee: {n}"))).into_iter().collect(),
        },
    )
}

impl Outcome for QueryScalingResult {
    fn scenario(&self) -> &str {
        "query-scaling"
    }

    fn json_lines(&self) -> Vec<Value> {
        super::json_lines_of(&self.rows)
    }

    fn print_table(&self) {
        let mut table = Table::new();
        table.set_header([
            "queries",
            "submit s",
            "probes back",
            "write→result p50 ms",
            "p99 ms",
            "read→match p50 ms",
            "p99 ms",
            "records/s",
            "RSS MiB",
        ]);
        for r in &self.rows {
            table.add_row([
                r.queries.to_string(),
                format!("{:.2}", r.submit_seconds),
                format!("{}/{}", r.probes_back, r.probes_sent),
                format!("{:.2}", r.write_to_result.p50_ms),
                format!("{:.2}", r.write_to_result.p99_ms),
                format!("{:.2}", r.read_to_match_p50_ms),
                format!("{:.2}", r.read_to_match_p99_ms),
                format!("{:.0}", r.records_per_sec),
                format!("{:.0}", r.rss_mib),
            ]);
        }
        println!("query-scaling: {} background records/s, {} workers", self.rate, self.workers);
        println!("{table}");
        match self.knee {
            Some(n) => println!("knee: latency bends at {n} queries"),
            None => println!("knee: none, latency flat up to the largest count"),
        }
        if let Some(n) = self.largest_under_200ms {
            println!(
                "largest count with p99 < 200 ms: {n}; Bullet on Storm: {}",
                self.bullet_reference
            );
        }
        println!("chart: {}", self.chart);
    }
}
