//! A worker thread: takes batches of lines from the sources' queue and runs each line through
//! the engine's matcher ([`MatchWorker`]): decode only the fields the active queries read, find
//! the candidate queries in the predicate index, run their filters and partial aggregations.
//! Partials go to the joiner when the batch is read if a RAW query matched (latency: the records
//! each RAW query took of the batch, in one partial), otherwise on the tick; either way in one
//! message per batch or tick.
//! Nothing is locked per record; the set of queries is the registry's snapshot, loaded once per
//! batch.
//!
//! Records read are counted once for all queries: each tick the worker tells the joiner how many
//! it read ([`JoinerMessage::Progress`]), and the joiner adds them to every running query's
//! "Records Seen" (a query that starts or ends mid-tick may be credited up to one tick of
//! records it did not see).
//!
//! A batch's [`Receipt`] (Kafka's offsets) is held until the flush after the batch was read, and
//! sent with that flush's progress message, after the partials: whoever handles that message has
//! handled everything the batch produced.
//!
//! Records pushed from code (a batch of [`needle_record::Record`]s) go through the same matcher
//! whole, without decoding. Events pushed as columns ([`crate::columns`]) are read column at a
//! time when every running query allows it, else row by row through the matcher; so are the
//! lines of a batch, their fields (those the queries read) gathered as columns as they are
//! decoded, when every running query allows it: no record goes through the matcher, and the
//! aggregates fold whole columns.
//!
//! Malformed lines (not JSON, not an object) are counted and skipped; a sample is logged to
//! stderr (the 1st, 2nd, 4th, 8th, ... of the process) so a flood of garbage cannot flood the
//! log.

use crate::clock::now_ms;
use crate::columns::run::ColumnRunner;
use crate::columns::{ColumnBatch, ColumnsBuilder};
use crate::framing::{Batch, Receipt};
use crate::messages::{JoinerMessage, RecordsInFlight};
use crate::metrics::Metrics;
use crate::registry::{QuerySet, Snapshot};
use crate::schema::{SchemaTracker, SAMPLE_EVERY, SAMPLE_FIRST};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use needle_engine::exec::Partial;
use needle_engine::matching::{MatchWorker, Member};
use needle_engine::EvalContext;
use needle_record::Record;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Malformed lines seen by all workers, for sampling the log.
static MALFORMED_SEEN: AtomicU64 = AtomicU64::new(0);

pub(crate) struct Worker {
    pub index: usize,
    pub queries: Arc<QuerySet>,
    pub batches: Receiver<Batch>,
    pub joiner: ToJoiner,
    pub metrics: Arc<Metrics>,
    pub schema: Arc<SchemaTracker>,
    pub tick: Duration,
    /// Lines this worker has read, for sampling.
    pub lines: u64,
    /// Lines read since the last [`JoinerMessage::Progress`].
    pub unreported: u64,
    /// Receipts of the batches read since the last [`JoinerMessage::Progress`].
    pub receipts: Vec<Receipt>,
    /// Partials made while reading a batch (RAW queries that matched) or flushing.
    pub outbox: Outbox,
    /// The column path's plans for the current queries.
    pub columns: ColumnRunner,
    /// A row of a column batch, or a line's decoded fields, as a record (kept from row to row).
    pub row: Record,
    /// Lines' fields gathered as columns, when every query reads columns.
    pub line_columns: ColumnsBuilder,
}

impl Worker {
    /// Runs until the sources are done and the queue is drained.
    pub fn run(mut self) {
        let mut matcher = MatchWorker::new();
        let mut last_flush = Instant::now();
        loop {
            let wait = self.tick.saturating_sub(last_flush.elapsed());
            match self.batches.recv_timeout(wait) {
                Ok(mut batch) => {
                    self.metrics.source_queue_depth.set(self.batches.len() as i64);
                    let snapshot = self.queries.load();
                    self.process(&batch, &snapshot, &mut matcher);
                    if let Some(receipt) = batch.take_receipt() {
                        self.receipts.push(receipt);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.flush(&mut matcher);
                    return;
                }
            }
            if last_flush.elapsed() >= self.tick {
                self.flush(&mut matcher);
                last_flush = Instant::now();
            }
        }
    }

    fn process(&mut self, batch: &Batch, snapshot: &Snapshot, matcher: &mut MatchWorker) {
        let ctx = EvalContext::new(now_ms());
        let set = &snapshot.set;
        let (mut records, malformed, mut matched_records) =
            self.process_lines(batch, snapshot, matcher, &ctx);
        for record in batch.records() {
            records += 1;
            if count_and_sample(&mut self.lines) {
                self.schema.observe(record);
            }
            if set.is_empty() {
                continue;
            }
            // built in code: whole already, and nothing to check
            let outcome = matcher.process_record(set, record, None, &ctx);
            matched_records += u64::from(outcome.matched > 0);
        }
        for columns in batch.columns() {
            records += columns.rows() as u64;
            matched_records += self.process_columns(columns, snapshot, matcher, &ctx);
        }
        // what RAW queries took of the batch, one partial each
        let (outbox, joiner) = (&mut self.outbox, &self.joiner);
        matcher.flush_raw(|member, partial| outbox.push(joiner, member, partial));
        self.outbox.send(&self.joiner);
        self.unreported += records;
        let m = &self.metrics;
        m.records_read.inc_by(records);
        m.bytes_read.inc_by(batch.byte_len() as u64);
        m.records_malformed.inc_by(malformed);
        if matched_records > 0 {
            m.records_matched.inc_by(matched_records);
            Metrics::observe(&m.read_to_match_seconds, batch.read_at.elapsed());
        }
    }

    /// Reads a batch's lines: (lines, malformed lines, lines some query matched). When every
    /// query reads columns, the fields the queries read are gathered as columns line by line
    /// and run column at a time (see the module doc); from a line whose fields do not fit the
    /// columns on (a field of another type than before, a list), row by row.
    fn process_lines(
        &mut self,
        batch: &Batch,
        snapshot: &Snapshot,
        matcher: &mut MatchWorker,
        ctx: &EvalContext,
    ) -> (u64, u64, u64) {
        let set = &snapshot.set;
        let (mut lines, mut malformed, mut matched) = (0u64, 0u64, 0u64);
        let mut by_columns = !set.is_empty() && self.columns.allows(snapshot);
        for line in batch.lines() {
            lines += 1;
            if count_and_sample(&mut self.lines) {
                if let Ok(record) = needle_record::decode_record(line) {
                    self.schema.observe(&record);
                }
            }
            if set.is_empty() {
                continue;
            }
            let outcome = if by_columns {
                match set.decode_into(line, &mut self.row) {
                    Err(error) => Err(error),
                    Ok(()) if self.line_columns.stage_record(&self.row) => {
                        self.line_columns.commit();
                        continue;
                    }
                    Ok(()) => {
                        // the lines before go by columns; this one and the rest row by row
                        self.line_columns.discard();
                        by_columns = false;
                        matched += self.run_line_columns(snapshot, matcher, ctx);
                        Ok(matcher.process_record(set, &self.row, Some(line), ctx))
                    }
                }
            } else {
                matcher.process(set, line, ctx)
            };
            match outcome {
                Ok(outcome) => matched += u64::from(outcome.matched > 0),
                Err(error) => {
                    malformed += 1;
                    log_malformed(self.index, line, &error);
                }
            }
        }
        if by_columns {
            matched += self.run_line_columns(snapshot, matcher, ctx);
        }
        (lines, malformed, matched)
    }

    /// Runs the lines gathered as columns through the queries; the rows some query matched.
    fn run_line_columns(
        &mut self,
        snapshot: &Snapshot,
        matcher: &mut MatchWorker,
        ctx: &EvalContext,
    ) -> u64 {
        match self.line_columns.finish() {
            Some(columns) => self.run_columns(&columns, snapshot, matcher, ctx),
            None => 0,
        }
    }

    /// Runs a batch of events pushed as columns through the queries (see the module doc); the
    /// rows some query matched.
    fn process_columns(
        &mut self,
        columns: &ColumnBatch,
        snapshot: &Snapshot,
        matcher: &mut MatchWorker,
        ctx: &EvalContext,
    ) -> u64 {
        let reader = columns.rows_reader();
        for row in 0..columns.rows() {
            if count_and_sample(&mut self.lines) {
                reader.write(row, &mut self.row);
                self.schema.observe(&self.row);
            }
        }
        if snapshot.set.is_empty() {
            return 0;
        }
        self.run_columns(columns, snapshot, matcher, ctx)
    }

    /// Runs columns through the queries, column at a time when they all allow it, else row by
    /// row; the rows some query matched.
    fn run_columns(
        &mut self,
        columns: &ColumnBatch,
        snapshot: &Snapshot,
        matcher: &mut MatchWorker,
        ctx: &EvalContext,
    ) -> u64 {
        let set = &snapshot.set;
        if let Some(matched) = self.columns.run(snapshot, columns, matcher) {
            self.metrics.records_by_columns.inc_by(columns.rows() as u64);
            return matched;
        }
        let reader = columns.rows_reader();
        let mut matched = 0;
        for row in 0..columns.rows() {
            reader.write(row, &mut self.row);
            // built in code: whole already, and nothing to check
            let outcome = matcher.process_record(set, &self.row, None, ctx);
            matched += u64::from(outcome.matched > 0);
        }
        matched
    }

    /// Sends every partial with something in it, then how many records were read: the joiner
    /// credits them to the queries running when it arrives.
    fn flush(&mut self, matcher: &mut MatchWorker) {
        let (outbox, joiner) = (&mut self.outbox, &self.joiner);
        matcher.flush(|member, partial| outbox.push(joiner, member, partial));
        self.outbox.send(&self.joiner);
        if self.unreported > 0 || !self.receipts.is_empty() {
            let receipts = std::mem::take(&mut self.receipts);
            let progress = JoinerMessage::Progress { records: self.unreported, receipts };
            let _ = self.joiner.tx.send(progress);
            self.unreported = 0;
        }
    }
}

/// Counts one more record read; true for one the schema samples: the first ones each, so the
/// schema is there as soon as a stream starts, then one in `SAMPLE_EVERY`.
fn count_and_sample(lines: &mut u64) -> bool {
    *lines += 1;
    *lines <= SAMPLE_FIRST || lines.is_multiple_of(SAMPLE_EVERY)
}

/// The workers' way to the joiner: its channel, and the bound on the bytes of records in flight
/// on it.
#[derive(Clone)]
pub(crate) struct ToJoiner {
    pub tx: Sender<JoinerMessage>,
    pub records: Arc<RecordsInFlight>,
}

/// Records of RAW partials a worker holds before sending them on: past this, the partials made
/// so far go at once, so that a batch whose records many `SELECT *` queries match is not held
/// whole (the bound on records in flight applies per message).
const OUTBOX_BYTES: usize = 64 << 10;

/// The partials a worker made and has not sent yet. They go to the joiner in one message at
/// the end of a batch or a flush (or sooner, past [`OUTBOX_BYTES`] of records): 100,000 queries
/// each matching a record a second made one message and wake-up per partial a good part of the
/// joiner's time.
#[derive(Default)]
pub(crate) struct Outbox {
    partials: Vec<(Arc<Member>, Partial)>,
    raw_bytes: usize,
}

impl Outbox {
    fn push(&mut self, joiner: &ToJoiner, member: &Arc<Member>, partial: Partial) {
        self.raw_bytes += partial.raw_bytes();
        self.partials.push((member.clone(), partial));
        if self.raw_bytes >= OUTBOX_BYTES {
            self.send(joiner);
        }
    }

    /// Sends what is waiting (nothing when nothing is).
    fn send(&mut self, joiner: &ToJoiner) {
        if self.partials.is_empty() {
            return;
        }
        let partials = std::mem::take(&mut self.partials);
        let bytes = std::mem::take(&mut self.raw_bytes);
        // Blocks when the joiner is behind (too many messages, or too many bytes of records):
        // backpressure up to the sources.
        let in_flight = (bytes > 0).then(|| joiner.records.enter(bytes, || !joiner.tx.is_empty()));
        let _ = joiner.tx.send(JoinerMessage::Partials { partials, in_flight });
    }
}

fn log_malformed(worker: usize, line: &[u8], error: &needle_record::RecordError) {
    let n = MALFORMED_SEEN.fetch_add(1, Ordering::Relaxed) + 1;
    if n.is_power_of_two() {
        let shown: String = String::from_utf8_lossy(&line[..line.len().min(120)]).into_owned();
        eprintln!("needle: worker {worker}: skipped malformed record #{n} ({error}): {shown}");
    }
}
