//! A worker thread: takes batches of lines from the sources' queue, decodes each record once,
//! runs it through every active query's worker state (explode → filter → partial aggregation),
//! and hands partials to the joiner: at once when a RAW query matched (latency), otherwise on
//! the tick. Nothing is locked per record; the set of queries is the registry's snapshot,
//! loaded once per batch.
//!
//! Malformed lines (not JSON, not an object) are counted and skipped; a sample is logged to
//! stderr (the 1st, 2nd, 4th, 8th, ... of the process) so a flood of garbage cannot flood the
//! log.

use crate::framing::Batch;
use crate::joiner::JoinerMessage;
use crate::metrics::Metrics;
use crate::registry::{ActiveQuery, QuerySet};
use crate::schema::{SchemaTracker, IDLE_SAMPLE_EVERY, SAMPLE_EVERY};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use needle_engine::exec::WorkerState;
use needle_engine::EvalContext;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Malformed lines seen by all workers, for sampling the log.
static MALFORMED_SEEN: AtomicU64 = AtomicU64::new(0);

pub(crate) struct Worker {
    pub index: usize,
    pub queries: Arc<QuerySet>,
    pub batches: Receiver<Batch>,
    pub joiner: Sender<JoinerMessage>,
    pub metrics: Arc<Metrics>,
    pub schema: Arc<SchemaTracker>,
    pub tick: Duration,
    /// Lines this worker has read, for sampling.
    pub lines: u64,
}

struct Slot {
    query: ActiveQuery,
    state: WorkerState,
}

impl Worker {
    /// Runs until the sources are done and the queue is drained.
    pub fn run(mut self) {
        let mut slots: Vec<Slot> = Vec::new();
        let mut version = u64::MAX;
        let mut last_flush = Instant::now();
        loop {
            let wait = self.tick.saturating_sub(last_flush.elapsed());
            match self.batches.recv_timeout(wait) {
                Ok(batch) => {
                    self.metrics.source_queue_depth.set(self.batches.len() as i64);
                    self.sync(&mut slots, &mut version);
                    self.process(&batch, &mut slots);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.flush(&mut slots);
                    return;
                }
            }
            if last_flush.elapsed() >= self.tick {
                self.sync(&mut slots, &mut version);
                self.flush(&mut slots);
                last_flush = Instant::now();
            }
        }
    }

    /// Brings the worker's states in line with the registry: new queries get a fresh state,
    /// ended ones are dropped.
    fn sync(&self, slots: &mut Vec<Slot>, version: &mut u64) {
        let snapshot = self.queries.load();
        if snapshot.version == *version {
            return;
        }
        let mut old: HashMap<Arc<str>, Slot> =
            slots.drain(..).map(|s| (s.query.id.clone(), s)).collect();
        slots.extend(snapshot.queries.iter().map(|q| {
            old.remove(&q.id)
                .unwrap_or_else(|| Slot { query: q.clone(), state: q.compiled.new_worker() })
        }));
        *version = snapshot.version;
    }

    fn process(&mut self, batch: &Batch, slots: &mut [Slot]) {
        let mut records = 0u64;
        let mut malformed = 0u64;
        let mut matched_records = 0u64;
        let ctx = EvalContext::new(now_ms());
        for line in batch.lines() {
            records += 1;
            self.lines += 1;
            if slots.is_empty() {
                // Nobody is asking: decode only the odd line, for the schema.
                if self.lines.is_multiple_of(IDLE_SAMPLE_EVERY) {
                    if let Ok(record) = needle_record::decode_record(line) {
                        self.schema.observe(&record);
                    }
                }
                continue;
            }
            let record = match needle_record::decode_record(line) {
                Ok(record) => record,
                Err(error) => {
                    malformed += 1;
                    log_malformed(self.index, line, &error);
                    continue;
                }
            };
            if self.lines.is_multiple_of(SAMPLE_EVERY) {
                self.schema.observe(&record);
            }
            let mut matched_any = false;
            for slot in slots.iter_mut() {
                if slot.query.compiled.process(&mut slot.state, &record, &ctx) {
                    matched_any = true;
                    if slot.query.compiled.is_raw() {
                        self.send(slot);
                    }
                }
            }
            matched_records += u64::from(matched_any);
        }
        let m = &self.metrics;
        m.records_read.inc_by(records);
        m.bytes_read.inc_by(batch.bytes().len() as u64);
        m.records_malformed.inc_by(malformed);
        if matched_records > 0 {
            m.records_matched.inc_by(matched_records);
            Metrics::observe(&m.read_to_match_seconds, batch.read_at.elapsed());
        }
    }

    fn flush(&self, slots: &mut [Slot]) {
        for slot in slots.iter_mut() {
            self.send(slot);
        }
    }

    fn send(&self, slot: &mut Slot) {
        if let Some(partial) = slot.query.compiled.flush(&mut slot.state) {
            // Blocks when the joiner is behind: backpressure up to the sources.
            let _ = self.joiner.send(JoinerMessage::Partial {
                id: slot.query.id.clone(),
                partial: Box::new(partial),
            });
        }
    }
}

fn log_malformed(worker: usize, line: &[u8], error: &needle_record::RecordError) {
    let n = MALFORMED_SEEN.fetch_add(1, Ordering::Relaxed) + 1;
    if n.is_power_of_two() {
        let shown: String = String::from_utf8_lossy(&line[..line.len().min(120)]).into_owned();
        eprintln!("needle: worker {worker}: skipped malformed record #{n} ({error}): {shown}");
    }
}

/// Wall-clock time in ms since the epoch (the runtime's clock; the engine takes it injected).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
