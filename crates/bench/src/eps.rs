//! `needle bench eps` (Linea's "events per second"): small events end to end — from bytes on
//! the `tcp:` source's socket, through the workers, to a query's result — per core, against the
//! bare cost of reading and line-splitting the same bytes, measured in the same run.
//!
//! The events are the `small` workload (~100 bytes: `id`, `key`, `value`, `ts`): `--pool`
//! distinct events generated once, written `--events` in all by a feeder thread as fast as the
//! socket takes them (unpaced: the source's backpressure is the pace). One query runs over all
//! of them, `SELECT COUNT(*) AS events, SUM(value) AS total FROM STREAM(600000, TIME)`,
//! started through the WebSocket before the first byte; once the runtime has read every event
//! it is killed and its final result must say exactly `--events` events and the exact sum of
//! their values (to 1e-9): a result, not just a counter.
//!
//! Timed: from the feeder's first write to the runtime having read (and matched) the last
//! event. Per core: events ÷ the CPU seconds of needle's threads over that time (the source and
//! its connection thread, the workers, the joiner; from `/proc/self/task/*/schedstat`), so the
//! feeder thread's CPU on this shared machine is not charged to needle — and the wall-clock
//! rate is reported beside it.
//!
//! Baselines, in the same run:
//! - **read + split**: the same feeder writes the same bytes over loopback to a plain reader
//!   thread that reads 64 KiB at a time and counts newlines with `memchr` — events per CPU
//!   second of that thread. The physical floor of "reading small events".
//! - **parse only**: sonic-rs validating each event's JSON (`IgnoredAny`) in memory, one
//!   thread: what any consumer that looks inside the events pays at least.
//!
//! Target (issue 7): ≥ 5 million events/s per core. Linea: ~1M events/s on a 6-core node.
//!
//! `--push typed` measures events pushed from code instead ([`super::push`]).

use super::live::{
    live_config, thread_cpu_seconds, wait_until, Feeder, LiveServer, Pool, WsClient, NEEDLE_THREADS,
};
use super::{Outcome, Output};
use comfy_table::Table;
use needle_workload::WorkloadKind;
use serde::Serialize;
use serde_json::json;
use std::io::Read;
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The options of `needle bench eps`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Events to send in all.
    #[arg(long, default_value_t = 20_000_000)]
    pub events: u64,
    /// Distinct events generated (written over and over).
    #[arg(long, default_value_t = 1_000_000)]
    pub pool: usize,
    /// Worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
    #[command(flatten)]
    pub validate: super::ValidateOption,
    /// How events reach needle: `socket` (NDJSON over the tcp: source) or `typed` (structs
    /// pushed from code through needle as a library, against bare hand-offs between threads).
    #[arg(long, default_value = "socket", value_parser = ["socket", "typed"])]
    pub push: String,
    /// With `--push typed`: events a pusher gathers per batch (needle's default 1,024).
    #[arg(long, default_value_t = 1024)]
    pub batch_events: usize,
    #[command(flatten)]
    pub output: Output,
}

#[derive(Debug, Serialize)]
pub struct EpsResult {
    pub scenario: &'static str,
    /// How much of each event needle checked as JSON (`line`: all of it, its default).
    pub validate: needle_record::Validation,
    pub events: u64,
    pub event_bytes: f64,
    pub workers: usize,
    pub seconds: f64,
    pub events_per_sec: f64,
    pub needle_cpu_seconds: f64,
    /// Events per CPU second of needle's threads: events/s per core.
    pub events_per_core_sec: f64,
    pub mib_per_core_sec: f64,
    pub result_events: u64,
    pub result_sum: f64,
    pub expected_sum: f64,
    pub result_ok: bool,
    pub read_split_per_core_sec: f64,
    pub read_split_per_sec: f64,
    pub parse_only_per_core_sec: f64,
    /// needle per core ÷ read+split per core.
    pub ratio_read_split: f64,
    /// needle per core ÷ parse only.
    pub ratio_parse_only: f64,
    pub target_per_core: f64,
    pub linea_reference: &'static str,
}

pub fn run(args: Args) -> std::process::ExitCode {
    if args.events == 0 || args.pool == 0 {
        return super::usage_error("--events and --pool must be at least 1");
    }
    if args.push == "typed" {
        let outcome = super::push::measure(args.events, args.pool, args.workers, args.batch_events);
        return super::report("eps", &args.output, outcome);
    }
    super::report("eps", &args.output, measure(&args))
}

fn measure(args: &Args) -> Result<EpsResult, String> {
    let progress = super::progress_bar(4);
    progress.set_message("generating events");
    let pool = Arc::new(Pool::generate(WorkloadKind::Small, args.pool, 7)?);
    let expected_sum = expected_sum(&pool, args.events)?;
    progress.inc(1);
    progress.set_message("baseline: read + split");
    let (read_split_per_core_sec, read_split_per_sec) = read_split(&pool, args.events)?;
    progress.inc(1);
    progress.set_message("baseline: parse only");
    let parse_only_per_core_sec = parse_only(&pool, 1.0);
    progress.inc(1);
    progress.set_message("needle");
    let needle = needle(&pool, args)?;
    progress.inc(1);
    progress.finish_and_clear();

    let per_core = args.events as f64 / needle.cpu_seconds;
    let event_bytes = pool.bytes.len() as f64 / pool.lines() as f64;
    let result_ok = needle.result_events == args.events
        && (needle.result_sum - expected_sum).abs() <= 1e-9 * expected_sum.abs().max(1.0);
    Ok(EpsResult {
        scenario: "eps",
        validate: args.validate.validation(),
        events: args.events,
        event_bytes,
        workers: live_config(args.workers).worker_threads(),
        seconds: needle.seconds,
        events_per_sec: args.events as f64 / needle.seconds,
        needle_cpu_seconds: needle.cpu_seconds,
        events_per_core_sec: per_core,
        mib_per_core_sec: per_core * event_bytes / (1024.0 * 1024.0),
        result_events: needle.result_events,
        result_sum: needle.result_sum,
        expected_sum,
        result_ok,
        read_split_per_core_sec,
        read_split_per_sec,
        parse_only_per_core_sec,
        ratio_read_split: per_core / read_split_per_core_sec,
        ratio_parse_only: per_core / parse_only_per_core_sec,
        target_per_core: 5e6,
        linea_reference: super::LINEA_REFERENCE,
    })
}

/// The sum of `value` over the first `events` events of the pool repeated.
fn expected_sum(pool: &Pool, events: u64) -> Result<f64, String> {
    let values: Vec<f64> = (0..pool.lines())
        .map(|i| {
            let line = pool.line(i);
            let at = memchr::memmem::find(line, b"\"value\":").ok_or("an event without value")?;
            let rest = &line[at + 8..];
            let end = rest.iter().position(|&b| b == b',' || b == b'}').unwrap_or(rest.len());
            std::str::from_utf8(&rest[..end])
                .ok()
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or_else(|| "an unreadable value".to_owned())
        })
        .collect::<Result<_, String>>()?;
    let n = values.len() as u64;
    let whole: f64 = values.iter().sum();
    let rest: f64 = values[..(events % n) as usize].iter().sum();
    Ok(whole * (events / n) as f64 + rest)
}

/// Events/s per CPU second and per wall second of a plain loopback reader counting lines.
fn read_split(pool: &Arc<Pool>, events: u64) -> Result<(f64, f64), String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let lines = Arc::new(AtomicU64::new(0));
    let counted = lines.clone();
    let reader = std::thread::Builder::new()
        .name("bench-baseline".into())
        .spawn(move || {
            let Ok((mut socket, _)) = listener.accept() else { return f64::NAN };
            let mut buf = vec![0u8; 64 << 10];
            while let Ok(n) = socket.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let found = memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
                if counted.fetch_add(found, Ordering::Relaxed) + found >= events {
                    break;
                }
            }
            thread_cpu_seconds(&["bench-baseline"])
        })
        .map_err(|e| e.to_string())?;
    let start = Instant::now();
    let feeder = Feeder::start(addr, pool.clone(), None, Some(events))?;
    let cpu = reader.join().map_err(|_| "the baseline reader panicked")?;
    let seconds = start.elapsed().as_secs_f64();
    feeder.stop()?;
    let read = lines.load(Ordering::Relaxed);
    if read < events {
        return Err(format!("the baseline reader saw {read} of {events} events"));
    }
    Ok((events as f64 / cpu, events as f64 / seconds))
}

/// Events/s of sonic-rs validating each event, one thread, for at least `seconds`.
fn parse_only(pool: &Pool, seconds: f64) -> f64 {
    let start = Instant::now();
    let mut done = 0u64;
    while done == 0 || start.elapsed().as_secs_f64() < seconds {
        for i in 0..pool.lines() {
            let ok = sonic_rs::from_slice::<serde::de::IgnoredAny>(pool.line(i)).is_ok();
            std::hint::black_box(ok);
        }
        done += pool.lines() as u64;
    }
    done as f64 / start.elapsed().as_secs_f64()
}

struct NeedleRun {
    seconds: f64,
    cpu_seconds: f64,
    result_events: u64,
    result_sum: f64,
}

fn needle(pool: &Arc<Pool>, args: &Args) -> Result<NeedleRun, String> {
    let mut config = live_config(args.workers);
    config.runtime.validate = args.validate.validation();
    let server = LiveServer::tcp(config)?;
    let data = server.data.ok_or("no data address")?;
    let mut ws = WsClient::connect(server.url())?;
    let query = "SELECT COUNT(*) AS events, SUM(value) AS total FROM STREAM(600000, TIME)";
    let started = ws.start_all(&[query.to_owned()], &mut |_| {})?;
    let id =
        started.ids[0].clone().ok_or(format!("the query was refused: {:?}", started.errors))?;

    let cpu_before = thread_cpu_seconds(NEEDLE_THREADS);
    let start = Instant::now();
    let feeder = Feeder::start(data, pool.clone(), None, Some(args.events))?;
    let timeout = Duration::from_secs(600);
    let all_read = wait_until(timeout, || server.records_read() >= args.events);
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = thread_cpu_seconds(NEEDLE_THREADS) - cpu_before;
    if !all_read {
        return Err(format!(
            "needle read {} of {} events in {timeout:?} ({} written)",
            server.records_read(),
            args.events,
            feeder.written()
        ));
    }
    // the workers flush their partials on the next tick; then end the query for its result
    std::thread::sleep(Duration::from_millis(200));
    ws.send(&json!({"type": "kill", "id": id}))?;
    let mut result = None;
    while let Some(message) = ws.read(Duration::from_secs(10))? {
        if message["type"] == "result" && message["id"] == id.as_str() {
            result = Some(message["result"]["records"][0].clone());
        }
        if message["type"] == "complete" {
            break;
        }
    }
    feeder.stop()?;
    let record = result.ok_or("the killed query sent no result")?;
    Ok(NeedleRun {
        seconds,
        cpu_seconds,
        result_events: record["events"].as_u64().unwrap_or(0),
        result_sum: record["total"].as_f64().unwrap_or(f64::NAN),
    })
}

impl Outcome for EpsResult {
    fn scenario(&self) -> &str {
        self.scenario
    }

    fn print_table(&self) {
        let mut table = Table::new();
        table.set_header(["", "events/s per core", "events/s (wall)", "needle ÷ this"]);
        let m = |v: f64| format!("{:.2}M", v / 1e6);
        table.add_row([
            format!("needle, {} workers (COUNT + SUM)", self.workers),
            m(self.events_per_core_sec),
            m(self.events_per_sec),
            String::new(),
        ]);
        table.add_row([
            "read + split lines (loopback, memchr)".to_owned(),
            m(self.read_split_per_core_sec),
            m(self.read_split_per_sec),
            format!("{:.3}", self.ratio_read_split),
        ]);
        table.add_row([
            "parse only (sonic-rs validate, in memory)".to_owned(),
            m(self.parse_only_per_core_sec),
            String::new(),
            format!("{:.3}", self.ratio_parse_only),
        ]);
        println!(
            "eps: {} small events of {:.0} bytes in {:.2} s, {:.2} CPU s of needle threads \
             (checking {})",
            self.events,
            self.event_bytes,
            self.seconds,
            self.needle_cpu_seconds,
            match self.validate {
                needle_record::Validation::Line => "whole lines",
                needle_record::Validation::Fields => "the fields read",
            }
        );
        println!("{table}");
        super::print_result_and_target(
            (self.result_events, self.result_sum, self.expected_sum, self.result_ok),
            self.events_per_core_sec,
            self.target_per_core,
        );
    }
}
