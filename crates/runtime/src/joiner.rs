//! The joiner thread: owns every query's join side ([`QueryRun`]): merges the workers' partials,
//! ticks windows and durations, and pushes emissions to each query's [`ResultQueue`]. When a
//! query is done it leaves the registry (so workers stop working for it) and its queue closes.
//!
//! Starting, killing and partials all arrive on one FIFO channel, so a query's start is always
//! seen before any partial for it.
//!
//! On an api node ([`crate::remote::Role::Api`]) the partials arrive encoded, from worker nodes
//! ([`JoinerMessage::Encoded`]), and are merged the same way; a query's end is announced (so the
//! workers forget it) when it leaves the joiner.

use crate::framing::Receipt;
use crate::metrics::Metrics;
use crate::registry::QuerySet;
use crate::remote::QueryAnnouncer;
use crate::results::ResultQueue;
use crate::worker::now_ms;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use needle_engine::exec::{Emission, Partial, QueryRun};
use needle_engine::matching::Member;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Why a query ended before its time, as its final emission's metadata says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    Killed,
    Shutdown,
}

pub(crate) enum JoinerMessage {
    Start {
        run: Box<QueryRun>,
        results: Arc<ResultQueue>,
    },
    /// Boxed: partial states are large, the channel's slots should not be.
    Partial {
        member: Arc<Member>,
        partial: Box<Partial>,
    },
    /// A partial from a worker node, as the engine's partial codec encoded it.
    Encoded {
        id: Arc<str>,
        bytes: Vec<u8>,
    },
    End {
        id: Arc<str>,
        reason: EndReason,
    },
    /// A worker read this many records since its last progress message: every running query
    /// has seen them. The receipts of the batches they came from are dropped once this message
    /// is handled (everything the worker sent before it has been).
    Progress {
        records: u64,
        receipts: Vec<Receipt>,
    },
    /// Finish every query and exit.
    Shutdown,
}

/// What the API shows of a running query (`GET /api/v1/queries`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct QueryStatus {
    pub id: String,
    pub query: String,
    pub owner: String,
    pub received_ms: i64,
    pub ends_ms: i64,
    pub records_seen: u64,
    pub records_matched: u64,
    pub emissions: u64,
}

impl QueryStatus {
    /// A query that has not read anything yet.
    pub(crate) fn new(id: &str, query: &str, owner: &str, received_ms: i64, ends_ms: i64) -> Self {
        Self {
            id: id.to_owned(),
            query: query.to_owned(),
            owner: owner.to_owned(),
            received_ms,
            ends_ms,
            records_seen: 0,
            records_matched: 0,
            emissions: 0,
        }
    }
}

pub(crate) type StatusTable = Arc<Mutex<HashMap<Arc<str>, QueryStatus>>>;

struct Running {
    run: Box<QueryRun>,
    results: Arc<ResultQueue>,
    first_result: bool,
    received: Instant,
    rate: RateWindow,
}

/// RAW records one query emitted in the current one-second window, for
/// `runtime.raw_records_per_sec`.
struct RateWindow {
    started: Instant,
    emitted: u64,
}

impl RateWindow {
    /// How many of `offered` records may go out now under `limit` per second.
    fn admit(&mut self, offered: u64, limit: u64) -> u64 {
        if self.started.elapsed() >= Duration::from_secs(1) {
            self.started = Instant::now();
            self.emitted = 0;
        }
        let admitted = offered.min(limit.saturating_sub(self.emitted));
        self.emitted += admitted;
        admitted
    }
}

pub(crate) struct Joiner {
    pub messages: Receiver<JoinerMessage>,
    pub queries: Arc<QuerySet>,
    pub status: StatusTable,
    pub metrics: Arc<Metrics>,
    pub tick: Duration,
    /// RAW records a query may emit per second.
    pub raw_records_per_sec: u64,
    /// On an api node: where a query's end is announced.
    pub announcer: Option<Arc<dyn QueryAnnouncer>>,
}

impl Joiner {
    pub fn run(self) {
        let mut running: HashMap<Arc<str>, Running> = HashMap::new();
        let mut last_tick = Instant::now();
        // Queries a message touched, checked for being done after it (all are, on the tick).
        let mut touched: Option<Arc<str>> = None;
        loop {
            let wait = self.tick.saturating_sub(last_tick.elapsed());
            match self.messages.recv_timeout(wait) {
                Ok(JoinerMessage::Start { run, results }) => {
                    let id: Arc<str> = run.id().into();
                    let now = Instant::now();
                    let rate = RateWindow { started: now, emitted: 0 };
                    running.insert(
                        id,
                        Running { run, results, first_result: true, received: now, rate },
                    );
                }
                Ok(JoinerMessage::Partial { member, partial }) => {
                    if let Some(q) = running.get_mut(&member.id) {
                        touched = Some(member.id.clone());
                        self.merge(&member.id, q, *partial);
                    }
                }
                Ok(JoinerMessage::Encoded { id, bytes }) => {
                    if let Some(q) = running.get_mut(&id) {
                        touched = Some(id.clone());
                        match q.run.query().decode_partial(&bytes) {
                            Ok(partial) => self.merge(&id, q, partial),
                            Err(error) => log_unmerged(&id, &error),
                        }
                    }
                }
                Ok(JoinerMessage::Progress { records, receipts: _ }) => {
                    let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
                    for (id, q) in running.iter_mut() {
                        q.run.add_seen(records);
                        if let Some(s) = status.get_mut(id) {
                            s.records_seen += records;
                        }
                    }
                }
                Ok(JoinerMessage::End { id, reason }) => {
                    touched = Some(id.clone());
                    if let Some(q) = running.get_mut(&id) {
                        let last = q.run.finish(now_ms()).map(|e| annotate_end(e, reason));
                        self.deliver(&id, q, last.into_iter().collect());
                    }
                }
                Ok(JoinerMessage::Shutdown) | Err(RecvTimeoutError::Disconnected) => {
                    for (id, q) in running.iter_mut() {
                        let last =
                            q.run.finish(now_ms()).map(|e| annotate_end(e, EndReason::Shutdown));
                        self.deliver(id, q, last.into_iter().collect());
                    }
                    self.retire_done(&mut running);
                    return;
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            if last_tick.elapsed() >= self.tick {
                let now = now_ms();
                for (id, q) in running.iter_mut() {
                    let emissions = q.run.tick(now);
                    self.deliver(id, q, emissions);
                }
                last_tick = Instant::now();
                touched = None;
                self.retire_done(&mut running);
            } else if let Some(id) = touched.take() {
                if running.get(&id).is_some_and(|q| q.run.is_done()) {
                    self.retire(&mut running, &id);
                }
            }
        }
    }

    fn merge(&self, id: &str, q: &mut Running, partial: Partial) {
        self.progress(id, partial.seen, partial.matched);
        match q.run.merge(partial, now_ms()) {
            Ok(emissions) => self.deliver(id, q, emissions),
            Err(error) => log_unmerged(id, &error),
        }
    }

    fn progress(&self, id: &str, seen: u64, matched: u64) {
        if let Some(s) = self.status.lock().unwrap_or_else(|e| e.into_inner()).get_mut(id) {
            s.records_seen += seen;
            s.records_matched += matched;
        }
    }

    fn deliver(&self, id: &str, q: &mut Running, emissions: Vec<Emission>) {
        if emissions.is_empty() {
            return;
        }
        if q.first_result {
            q.first_result = false;
            Metrics::observe(&self.metrics.query_first_result_seconds, q.received.elapsed());
        }
        let count = emissions.len() as u64;
        let raw = q.run.query().is_raw();
        for mut emission in emissions {
            if raw {
                self.rate_limit(q, &mut emission);
            }
            let dropped = q.results.push(emission);
            self.metrics.results_dropped.inc_by(dropped);
        }
        if let Some(s) = self.status.lock().unwrap_or_else(|e| e.into_inner()).get_mut(id) {
            s.emissions += count;
        }
    }

    /// Holds a RAW emission to the query's records-per-second limit: records past it are not
    /// emitted, and the emission's metadata says how many and which setting to change.
    fn rate_limit(&self, q: &mut Running, emission: &mut Emission) {
        let offered = emission.records.len() as u64;
        let admitted = q.rate.admit(offered, self.raw_records_per_sec);
        if admitted == offered {
            return;
        }
        emission.records.truncate(admitted as usize);
        let held = offered - admitted;
        self.metrics.raw_records_rate_limited.inc_by(held);
        let notice = json!({
            "error": format!("{held} records were not emitted: this query emits more than {} records per second", self.raw_records_per_sec),
            "resolutions": ["make the WHERE clause more selective, or raise runtime.raw_records_per_sec"],
        });
        let warnings = emission.meta.entry("Warnings").or_insert_with(|| json!([]));
        if let Some(list) = warnings.as_array_mut() {
            list.push(notice);
        }
    }

    /// Takes finished queries out of the registry, the status table and the joiner.
    fn retire_done(&self, running: &mut HashMap<Arc<str>, Running>) {
        let done: Vec<Arc<str>> =
            running.iter().filter(|(_, q)| q.run.is_done()).map(|(id, _)| id.clone()).collect();
        for id in done {
            self.retire(running, &id);
        }
    }

    fn retire(&self, running: &mut HashMap<Arc<str>, Running>, id: &Arc<str>) {
        if let Some(q) = running.remove(id) {
            q.results.close();
        }
        self.queries.remove(id);
        if let Some(announcer) = &self.announcer {
            announcer.ended(id);
        }
        self.status.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
        self.metrics.queries_active.dec();
    }
}

/// A partial that could not be merged (corrupt bytes from another process, a plan that differs):
/// logged, the 1st, 2nd, 4th, 8th, ... of the process, so garbage cannot flood the log.
fn log_unmerged(id: &str, error: &needle_engine::EngineError) {
    static SEEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    if n.is_power_of_two() {
        eprintln!("needle: query {id}: a partial could not be merged (#{n}): {error}");
    }
}

fn annotate_end(mut emission: Emission, reason: EndReason) -> Emission {
    let text = match reason {
        EndReason::Killed => "the query was killed before its duration ended",
        EndReason::Shutdown => "the server shut down before the query's duration ended",
    };
    let warnings = emission.meta.entry("Warnings").or_insert_with(|| json!([]));
    if let Some(list) = warnings.as_array_mut() {
        list.push(json!({ "error": text, "resolutions": ["run the query again"] }));
    }
    emission
}
