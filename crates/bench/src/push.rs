//! `needle bench eps --push typed` (Linea's claim for a runtime a program embeds): events pushed
//! from code as typed records through a query, per core, against bare bounded hand-offs of the
//! same events between two threads (crossbeam), measured in the same run.
//!
//! The events have the `small` workload's shape — `id` (LONG), `key` (one of 1,000 strings),
//! `value` (DOUBLE), `ts` (LONG) — held by the program as structs: `--pool` of them made once,
//! pushed `--events` times in all, round robin. needle runs as a library ([`needle::Needle`]); a
//! pusher thread hands each struct's fields over one by one (`Pusher::push_with`: no JSON; a
//! batch's events gathered as columns) and the workers run
//! `SELECT COUNT(*) AS events, SUM(value) AS total FROM STREAM(600000, TIME)` over them, column
//! at a time. Then again with a RAW query beside it that no event matches (a search for a
//! needle), so that the workers read every batch row by row, as records. Once every event was
//! read the query is killed; each run's final result must say exactly `--events` events and
//! their sum (to 1e-9).
//!
//! Timed: from the first push to the workers having read the last event. Per core: events ÷
//! the CPU seconds of the pusher thread, the workers and the joiner (`/proc/self/task`), with
//! the wall-clock rate beside it.
//!
//! Baselines, in the same run, each a producer thread and a consumer thread that sums `value`
//! (events ÷ both threads' CPU seconds):
//! - **hand-off, one event at a time**: each struct through a bounded crossbeam channel;
//! - **hand-off, batches of structs**: vectors of 1,024 structs through the channel;
//! - **hand-off, batches of records**: what needle's pusher does without the query — each
//!   struct written into a recycled [`needle::Record`] (`RecordWriter`), vectors of 1,024
//!   records through the channel and back, the consumer reading `value` from each record.
//!
//! Target (issue 16): ≥ 10M events/s per core. Linea: ~1M events/s on a 6-core node.

use super::live::{thread_cpu_seconds, wait_until};
use super::print_result_and_target;
use super::Outcome;
use comfy_table::Table;
use crossbeam_channel::bounded;
use needle::{Needle, Record, RecordWriter};
use serde::Serialize;
use std::time::{Duration, Instant};

/// Events per batch of the batched hand-offs (needle's pusher's default too).
const BATCH: usize = 1024;
/// Distinct keys.
const KEYS: usize = 1000;
/// The RAW query run beside the aggregation in the second run: a search for a needle no event
/// is, so that the workers read every batch row by row.
const NEEDLE_QUERY: &str = "SELECT * FROM STREAM(600000, TIME) WHERE id = -1 LIMIT 1";
/// needle's threads in this scenario, beside the pusher (which reports its own CPU).
const NEEDLE_WORKING: &[&str] = &["needle-worker", "needle-joiner"];

/// One event as the program holds it.
#[derive(Debug, Clone, Copy)]
struct Event {
    id: i64,
    key: u16,
    value: f64,
    ts: i64,
}

/// What `needle bench eps --push typed` measured.
#[derive(Debug, Serialize)]
pub struct PushResult {
    pub scenario: &'static str,
    pub push: &'static str,
    pub events: u64,
    pub workers: usize,
    pub batch_events: usize,
    pub seconds: f64,
    pub events_per_sec: f64,
    pub cpu_seconds: f64,
    /// Events per CPU second of the pusher, the workers and the joiner.
    pub events_per_core_sec: f64,
    pub result_events: u64,
    pub result_sum: f64,
    pub expected_sum: f64,
    /// Both runs' results are right.
    pub result_ok: bool,
    /// The same push with a RAW query beside the aggregation (`NEEDLE_QUERY`, which no event
    /// matches): the workers read every batch row by row.
    pub rows_seconds: f64,
    pub rows_cpu_seconds: f64,
    pub rows_events_per_core_sec: f64,
    pub rows_result_events: u64,
    pub rows_result_sum: f64,
    pub handoff_one_per_core_sec: f64,
    pub handoff_structs_per_core_sec: f64,
    pub handoff_records_per_core_sec: f64,
    /// needle per core ÷ each hand-off per core.
    pub ratio_handoff_one: f64,
    pub ratio_handoff_structs: f64,
    pub ratio_handoff_records: f64,
    pub target_per_core: f64,
    pub linea_reference: &'static str,
}

/// Measures the typed push and its baselines.
pub fn measure(
    events: u64,
    pool: usize,
    workers: usize,
    batch_events: usize,
) -> Result<PushResult, String> {
    let progress = super::progress_bar(5);
    let keys: Vec<String> = (0..KEYS).map(|k| format!("key-{k:04}")).collect();
    let pool: Vec<Event> = (0..pool.max(1))
        .map(|i| Event {
            id: i as i64,
            key: (i * 7919 % KEYS) as u16,
            value: ((i * 37) % 10_000) as f64 / 100.0,
            ts: 1_700_000_000_000 + i as i64,
        })
        .collect();
    let expected_sum: f64 = (0..events).map(|i| pool[(i % pool.len() as u64) as usize].value).sum();
    progress.set_message("baseline: one event at a time");
    let one = handoff_one(&pool, events)?;
    progress.inc(1);
    progress.set_message("baseline: batches of structs");
    let structs = handoff_structs(&pool, events)?;
    progress.inc(1);
    progress.set_message("baseline: batches of records");
    let records = handoff_records(&pool, &keys, events)?;
    progress.inc(1);
    progress.set_message("needle");
    let run = needle_push(&pool, &keys, events, workers, batch_events, None)?;
    progress.inc(1);
    progress.set_message("needle, row by row");
    let rows = needle_push(&pool, &keys, events, workers, batch_events, Some(NEEDLE_QUERY))?;
    progress.inc(1);
    progress.finish_and_clear();
    let per_core = events as f64 / run.cpu_seconds;
    Ok(PushResult {
        scenario: "eps",
        push: "typed",
        events,
        workers: run.workers,
        batch_events,
        seconds: run.seconds,
        events_per_sec: events as f64 / run.seconds,
        cpu_seconds: run.cpu_seconds,
        events_per_core_sec: per_core,
        result_events: run.result_events,
        result_sum: run.result_sum,
        expected_sum,
        result_ok: [&run, &rows].iter().all(|run| {
            run.result_events == events
                && (run.result_sum - expected_sum).abs() <= 1e-9 * expected_sum.abs().max(1.0)
        }),
        rows_seconds: rows.seconds,
        rows_cpu_seconds: rows.cpu_seconds,
        rows_events_per_core_sec: events as f64 / rows.cpu_seconds,
        rows_result_events: rows.result_events,
        rows_result_sum: rows.result_sum,
        handoff_one_per_core_sec: one,
        handoff_structs_per_core_sec: structs,
        handoff_records_per_core_sec: records,
        ratio_handoff_one: per_core / one,
        ratio_handoff_structs: per_core / structs,
        ratio_handoff_records: per_core / records,
        target_per_core: 10e6,
        linea_reference: super::LINEA_REFERENCE,
    })
}

/// Writes `event`'s fields through `$writer`, field by field: a [`RecordWriter`] (the records
/// baseline) or needle's `EventWriter` (the pusher), whose setters are the same.
macro_rules! write_event {
    ($writer:expr, $event:expr, $keys:expr) => {
        $writer
            .set_i64("id", $event.id)
            .set_str("key", &$keys[$event.key as usize])
            .set_f64("value", $event.value)
            .set_i64("ts", $event.ts)
    };
}

/// Runs `produce` and `consume` on two named threads; events per CPU second of both.
fn two_threads<T: Send + 'static>(
    events: u64,
    produce: impl FnOnce() + Send + 'static,
    consume: impl FnOnce() -> T + Send + 'static,
) -> Result<(f64, T), String> {
    let consumer = std::thread::Builder::new()
        .name("bench-consumer".into())
        .spawn(move || {
            let out = consume();
            (out, thread_cpu_seconds(&["bench-consumer"]))
        })
        .map_err(|e| e.to_string())?;
    let producer = std::thread::Builder::new()
        .name("bench-producer".into())
        .spawn(move || {
            produce();
            thread_cpu_seconds(&["bench-producer"])
        })
        .map_err(|e| e.to_string())?;
    let produced_cpu = producer.join().map_err(|_| "the producer panicked")?;
    let (out, consumed_cpu) = consumer.join().map_err(|_| "the consumer panicked")?;
    Ok((events as f64 / (produced_cpu + consumed_cpu), out))
}

fn handoff_one(pool: &[Event], events: u64) -> Result<f64, String> {
    let (tx, rx) = bounded::<Event>(BATCH);
    let pool = pool.to_vec();
    let (per_core, sum) = two_threads(
        events,
        move || {
            for i in 0..events {
                if tx.send(pool[(i % pool.len() as u64) as usize]).is_err() {
                    return;
                }
            }
        },
        move || rx.iter().map(|e| e.value).sum::<f64>(),
    )?;
    std::hint::black_box(sum);
    Ok(per_core)
}

fn handoff_structs(pool: &[Event], events: u64) -> Result<f64, String> {
    let (tx, rx) = bounded::<Vec<Event>>(64);
    let pool = pool.to_vec();
    let (per_core, sum) = two_threads(
        events,
        move || {
            let mut batch = Vec::with_capacity(BATCH);
            for i in 0..events {
                batch.push(pool[(i % pool.len() as u64) as usize]);
                if batch.len() == BATCH && tx.send(std::mem::take(&mut batch)).is_err() {
                    return;
                }
            }
            let _ = tx.send(batch);
        },
        move || rx.iter().map(|b| b.iter().map(|e| e.value).sum::<f64>()).sum::<f64>(),
    )?;
    std::hint::black_box(sum);
    Ok(per_core)
}

fn handoff_records(pool: &[Event], keys: &[String], events: u64) -> Result<f64, String> {
    let (tx, rx) = bounded::<Vec<Record>>(64);
    let (back_tx, back_rx) = bounded::<Vec<Record>>(8);
    let (pool, keys) = (pool.to_vec(), keys.to_vec());
    let (per_core, sum) = two_threads(
        events,
        move || {
            let mut batch: Vec<Record> = Vec::new();
            let mut used = 0;
            for i in 0..events {
                if used == batch.len() {
                    batch.push(Record::new());
                }
                let event = &pool[(i % pool.len() as u64) as usize];
                write_event!(RecordWriter::new(&mut batch[used]), event, keys);
                used += 1;
                if used == BATCH {
                    let next = back_rx.try_recv().unwrap_or_default();
                    if tx.send(std::mem::replace(&mut batch, next)).is_err() {
                        return;
                    }
                    used = 0;
                }
            }
            batch.truncate(used);
            let _ = tx.send(batch);
        },
        move || {
            let mut sum = 0.0;
            for batch in rx.iter() {
                sum += batch.iter().filter_map(|r| r.get("value")?.as_f64()).sum::<f64>();
                let _ = back_tx.try_send(batch);
            }
            sum
        },
    )?;
    std::hint::black_box(sum);
    Ok(per_core)
}

struct NeedleRun {
    workers: usize,
    seconds: f64,
    cpu_seconds: f64,
    result_events: u64,
    result_sum: f64,
}

fn needle_push(
    pool: &[Event],
    keys: &[String],
    events: u64,
    workers: usize,
    batch_events: usize,
    beside: Option<&str>,
) -> Result<NeedleRun, String> {
    let needle = Needle::builder()
        .workers(workers)
        .batch_events(batch_events)
        .start()
        .map_err(|e| e.to_string())?;
    let workers = needle.config().worker_threads();
    let query = needle
        .query("SELECT COUNT(*) AS events, SUM(value) AS total FROM STREAM(600000, TIME)")
        .map_err(|e| e.to_string())?;
    let _beside = beside.map(|text| needle.query(text)).transpose().map_err(|e| e.to_string())?;
    let mut pusher = needle.pusher().map_err(|e| e.to_string())?;
    let (pool, keys) = (pool.to_vec(), keys.to_vec());
    let cpu_before = thread_cpu_seconds(NEEDLE_WORKING);
    let start = Instant::now();
    let producer = std::thread::Builder::new()
        .name("bench-pusher".into())
        .spawn(move || -> Result<f64, String> {
            for i in 0..events {
                let event = &pool[(i % pool.len() as u64) as usize];
                pusher
                    .push_with(|writer| {
                        write_event!(writer, event, keys);
                    })
                    .map_err(|e| e.to_string())?;
            }
            pusher.flush().map_err(|e| e.to_string())?;
            Ok(super::thread_cpu_seconds())
        })
        .map_err(|e| e.to_string())?;
    let timeout = Duration::from_secs(600);
    let all_read = wait_until(timeout, || needle.counts().records_read >= events);
    let seconds = start.elapsed().as_secs_f64();
    let needle_cpu = thread_cpu_seconds(NEEDLE_WORKING) - cpu_before;
    let pusher_cpu = producer.join().map_err(|_| "the pusher panicked")??;
    let cpu_seconds = needle_cpu + pusher_cpu;
    if !all_read {
        return Err(format!("needle read {} of {events} events", needle.counts().records_read));
    }
    std::thread::sleep(Duration::from_millis(200));
    query.kill();
    let last = query.last().ok_or("the killed query gave no result")?;
    let record = last.records.first().ok_or("an empty result")?;
    Ok(NeedleRun {
        workers,
        seconds,
        cpu_seconds,
        result_events: record.get("events").and_then(|v| v.as_i64()).unwrap_or(0) as u64,
        result_sum: record.get("total").and_then(|v| v.as_f64()).unwrap_or(f64::NAN),
    })
}

impl Outcome for PushResult {
    fn scenario(&self) -> &str {
        self.scenario
    }

    fn print_table(&self) {
        let mut table = Table::new();
        table.set_header(["", "events/s per core", "needle ÷ this"]);
        let m = |v: f64| format!("{:.2}M", v / 1e6);
        table.add_row([
            format!("needle, typed push, {} workers (COUNT + SUM): columns", self.workers),
            m(self.events_per_core_sec),
            String::new(),
        ]);
        table.add_row([
            "the same beside a RAW query: row by row".to_owned(),
            m(self.rows_events_per_core_sec),
            format!("{:.3}", self.events_per_core_sec / self.rows_events_per_core_sec),
        ]);
        for (what, rate, ratio) in [
            (
                "hand-off, one event at a time",
                self.handoff_one_per_core_sec,
                self.ratio_handoff_one,
            ),
            (
                "hand-off, batches of 1,024 structs",
                self.handoff_structs_per_core_sec,
                self.ratio_handoff_structs,
            ),
            (
                "hand-off, batches of 1,024 records",
                self.handoff_records_per_core_sec,
                self.ratio_handoff_records,
            ),
        ] {
            table.add_row([what.to_owned(), m(rate), format!("{ratio:.3}")]);
        }
        println!(
            "eps --push typed: {} events pushed from code in {:.2} s ({}/s wall), {:.2} CPU s",
            self.events,
            self.seconds,
            m(self.events_per_sec),
            self.cpu_seconds
        );
        println!(
            "beside a RAW query: {:.2} s ({}/s wall), {:.2} CPU s; result {} events, sum {:.3}",
            self.rows_seconds,
            m(self.events as f64 / self.rows_seconds),
            self.rows_cpu_seconds,
            self.rows_result_events,
            self.rows_result_sum
        );
        println!("{table}");
        print_result_and_target(
            (self.result_events, self.result_sum, self.expected_sum, self.result_ok),
            self.events_per_core_sec,
            self.target_per_core,
        );
    }
}
