//! History in the runtime: what the source reads is kept in the store ([`HistoryTap`]), and
//! queries that look back read it through the engine ([`replay`]); in the distributed mode an
//! api node puts its worker nodes' reads back in time order ([`gather`]).
//!
//! # Feeding the store
//! Every batch a source hands to the workers passes the tap first ([`crate::source::BatchSink`]):
//! a copy of its bytes goes, in order, to the tap's thread, which decodes each line whole, keeps
//! the records `history.filter` holds TRUE for, and appends them (with the time they were read)
//! to the store's write buffer; a batch of events gathered as columns (a metrics protocol's
//! points, typed events pushed from code) goes as its columns, shared, and is appended as
//! columns, with no record made of its rows unless a filter must read them; the store's
//! background thread makes them durable every `history.flush_ms`. The hand-off is bounded: a store that falls behind slows the source, as
//! slow workers do. A batch's [`crate::framing::Receipt`] (Kafka's offsets) is shared by the
//! workers and the tap, and dropped — so the offsets committed — only once both are done with it:
//! the results went out *and* the records are durable in history.
//!
//! # The seam between past and live (`SINCE`)
//! A query that reads the past and then goes on live must count each record once. Each batch
//! is dispatched (to the tap and to the workers) under a shared gate; [`HistoryTap::seam`] takes
//! the gate exclusively, waits until the workers hold no batch dispatched before it, adds the
//! query to the workers' snapshot, and lets dispatch go on. Every batch before the seam was read
//! by workers that did not know the query (so it comes from history: the seam then waits until
//! the tap has appended all of those); every batch after it reaches the query live.

pub mod gather;
pub mod readers;
pub mod replay;

pub use gather::{Gather, Gathered, WorkerHistory};
pub use needle_history::{OffsetRange, OffsetRanges, Store as HistoryStore, StoreConfig};
pub use replay::{Piece, Replay, ReplayReport, SharedRead};

use crate::clock::now_ms;
use crate::framing::{Batch, InWorkers, Receipt};
use crate::metrics::Metrics;
use crossbeam_channel::{Receiver, Sender};
use needle_engine::{CompiledExpr, EvalContext};
use needle_record::{Record, Value};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

/// Batches waiting between the source and the tap's thread.
const TAP_QUEUE_BATCHES: usize = 64;
/// How long a seam waits for the source to finish reading records kept in history already.
pub const CATCH_UP_WAIT: Duration = Duration::from_secs(30);

/// The source's side of history: see the module doc.
pub struct HistoryTap {
    store: HistoryStore,
    tx: Mutex<Option<Sender<TapBatch>>>,
    /// Dispatch holds it shared; a seam holds it alone.
    gate: RwLock<()>,
    /// Batches handed to the tap.
    dispatched: AtomicU64,
    /// Batches the tap has appended to the store, with a condition to wait on.
    appended: Arc<(Mutex<u64>, Condvar)>,
    /// Batches the workers hold (queued or being read).
    in_workers: Arc<AtomicI64>,
    /// The source is reading records kept in history already (see [`HistoryTap::seam`]).
    catching_up: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct TapBatch {
    content: TapContent,
    arrival_ms: i64,
    receipt: Option<Arc<Receipt>>,
    offsets: OffsetRanges,
}

/// What the tap keeps of a batch: its events gathered as columns (shared, not copied), then its
/// lines (its records written as lines, for a batch built in code).
struct TapContent {
    columns: Vec<arrow_array::RecordBatch>,
    lines: Vec<u8>,
}

impl HistoryTap {
    /// Starts the tap's thread, appending to `store` the records `filter` keeps (all without
    /// one).
    pub fn start(
        store: HistoryStore,
        filter: Option<CompiledExpr>,
        metrics: Arc<Metrics>,
    ) -> std::io::Result<Arc<Self>> {
        let (tx, rx) = crossbeam_channel::bounded(TAP_QUEUE_BATCHES);
        let appended = Arc::new((Mutex::new(0u64), Condvar::new()));
        let thread = {
            let store = store.clone();
            let appended = appended.clone();
            std::thread::Builder::new()
                .name("needle-history".into())
                .spawn(move || run_tap(rx, store, filter, metrics, appended))?
        };
        Ok(Arc::new(Self {
            store,
            tx: Mutex::new(Some(tx)),
            gate: RwLock::new(()),
            dispatched: AtomicU64::new(0),
            appended,
            in_workers: Arc::new(AtomicI64::new(0)),
            catching_up: AtomicBool::new(false),
            thread: Mutex::new(Some(thread)),
        }))
    }

    pub fn store(&self) -> &HistoryStore {
        &self.store
    }

    /// Per source stream, the offset after the last record history keeps (see
    /// [`needle_history::Store::kept_offsets`]).
    pub fn kept_offsets(&self) -> Result<BTreeMap<String, i64>, needle_history::HistoryError> {
        self.store.kept_offsets()
    }

    /// The source says whether it is reading records kept in history already (or holds some
    /// not handed on yet): a seam waits until it is not.
    pub fn set_catching_up(&self, catching_up: bool) {
        self.catching_up.store(catching_up, Ordering::SeqCst);
    }

    /// Hands `batch` on under the gate: `send` gives it to the workers (and says whether they
    /// took it); when they did, a copy of it goes to the tap (unless its records are kept
    /// already). Returns what `send` returned.
    pub(crate) fn dispatch<T>(
        &self,
        mut batch: Batch,
        send: impl FnOnce(Batch) -> Result<(), (Batch, T)>,
    ) -> Result<(), (Batch, T)> {
        let _shared = self.gate.read().unwrap_or_else(|e| e.into_inner());
        if batch.is_kept_already() {
            // the workers' alone; held, so a seam waits for it as for any batch before it
            batch.hold(InWorkers::enter(&self.in_workers));
            return send(batch);
        }
        let offsets = batch.take_offsets();
        let content = if batch.columns().is_empty() {
            TapContent { columns: Vec::new(), lines: batch.to_ndjson() }
        } else {
            let mut lines = Vec::new();
            for record in batch.records() {
                record.write_json(&mut lines);
                lines.push(b'\n');
            }
            let columns = batch.columns().iter().map(|c| c.record_batch().clone()).collect();
            TapContent { columns, lines }
        };
        let receipt = batch.take_receipt().map(Arc::new);
        if let Some(shared) = &receipt {
            batch.set_receipt(Receipt::new(shared.clone()));
        }
        batch.hold(InWorkers::enter(&self.in_workers));
        match send(batch) {
            Ok(()) => {
                self.dispatched.fetch_add(1, Ordering::SeqCst);
                let tap = TapBatch { content, arrival_ms: now_ms(), receipt, offsets };
                if let Some(tx) = &*self.tx.lock().unwrap_or_else(|e| e.into_inner()) {
                    // blocks while the store is behind: backpressure up to the source
                    let _ = tx.send(tap);
                }
                Ok(())
            }
            Err((mut batch, why)) => {
                // it comes back to the source, whose receipt it is again
                if let Some(shared) = receipt {
                    batch.take_receipt();
                    if let Ok(receipt) = Arc::try_unwrap(shared) {
                        batch.set_receipt(receipt);
                    }
                }
                Err((batch, why))
            }
        }
    }

    /// Makes the seam for a query that reads the past then goes on live: runs `go_live` (which
    /// adds the query to the workers' snapshot) at a moment when no batch is held by the
    /// workers, waits until the tap has appended every batch dispatched before it, and then
    /// runs `read_past` (which plans the read of the store: its parts and write buffer as they
    /// are) and returns what it returned. Dispatch waits all along, so the store then holds
    /// exactly the records the query will not see live: a batch dispatched after the seam and
    /// appended before the read was planned would have been counted twice.
    ///
    /// While the source reads records kept in history already (a Kafka partition taken over
    /// from a process that kept them before it died), the seam waits for it to be done (at
    /// most [`CATCH_UP_WAIT`]): those records are in the past the query reads, and must not
    /// reach it live as well.
    pub fn seam<T>(&self, go_live: impl FnOnce(), read_past: impl FnOnce() -> T) -> T {
        let patience = std::time::Instant::now() + CATCH_UP_WAIT;
        loop {
            let _alone = self.gate.write().unwrap_or_else(|e| e.into_inner());
            if self.catching_up.load(Ordering::SeqCst) && std::time::Instant::now() < patience {
                drop(_alone);
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            while self.in_workers.load(Ordering::SeqCst) > 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
            go_live();
            self.wait_appended(self.dispatched.load(Ordering::SeqCst));
            return read_past();
        }
    }

    /// Waits until the tap has appended the first `count` batches (or has stopped).
    fn wait_appended(&self, count: u64) {
        let (lock, ready) = &*self.appended;
        let mut done = lock.lock().unwrap_or_else(|e| e.into_inner());
        while *done < count {
            let (next, timeout) = ready
                .wait_timeout(done, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner());
            done = next;
            if timeout.timed_out() && self.thread_finished() {
                return;
            }
        }
    }

    fn thread_finished(&self) -> bool {
        self.thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_none_or(|t| t.is_finished())
    }

    /// Ends the tap: what was handed to it is appended, then the thread ends. The store's
    /// background work is stopped by whoever owns it.
    pub fn stop(&self) {
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = thread.join();
        }
    }
}

impl Drop for HistoryTap {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The tap's thread: decode, filter, append; drop receipts once their records are durable.
fn run_tap(
    rx: Receiver<TapBatch>,
    store: HistoryStore,
    filter: Option<CompiledExpr>,
    metrics: Arc<Metrics>,
    appended: Arc<(Mutex<u64>, Condvar)>,
) {
    let mut waiting: VecDeque<(u64, Arc<Receipt>)> = VecDeque::new();
    let mut records: Vec<(Record, i64)> = Vec::new();
    // positions go on from the store's: a position a past process (or, on object storage,
    // another machine under this writer's name) made durable says nothing of this run's
    // batches, whose receipts were released at once when both counted from 0
    let base = store.durable_position().and_then(|p| p.parse::<u64>().ok()).unwrap_or(0);
    // batches appended: each one's position in the store is this count after it (batches from
    // several TCP clients reach the tap in the order they were handed on, not numbered before)
    let mut count = 0u64;
    loop {
        let batch = match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(batch) => Some(batch),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => None,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
        };
        if let Some(batch) = batch {
            let ctx = EvalContext::new(batch.arrival_ms);
            count += 1;
            let position = Some((base + count).to_string());
            let TapContent { columns, lines } = batch.content;
            // the position and offsets go with the last append of the batch: a flush between
            // two must not call the whole batch durable
            let lines_last = !lines.is_empty() || columns.is_empty();
            let no_offsets = OffsetRanges::new();
            if !columns.is_empty() {
                let columns: Vec<arrow_array::RecordBatch> = match &filter {
                    None => columns,
                    Some(filter) => columns
                        .iter()
                        .map(|batch| {
                            let kept = filter_columns(batch, filter, &ctx);
                            let left_out = batch.num_rows() - kept.num_rows();
                            metrics.history_records_filtered.inc_by(left_out as u64);
                            kept
                        })
                        .collect(),
                };
                let kept: u64 = columns.iter().map(|c| c.num_rows() as u64).sum();
                let (position, offsets) = match lines_last {
                    true => (None, &no_offsets),
                    false => (position.clone(), &batch.offsets),
                };
                let result = store.append_columns(&columns, batch.arrival_ms, position, offsets);
                count_append(&metrics, kept, result);
            }
            if lines_last {
                records.clear();
                for line in Batch::new(lines).lines() {
                    // malformed lines are the workers' to count and log
                    let Ok(record) = needle_record::decode_record(line) else { continue };
                    if let Some(filter) = &filter {
                        if filter.eval(&record, &ctx) != Value::Bool(true) {
                            metrics.history_records_filtered.inc();
                            continue;
                        }
                    }
                    records.push((record, batch.arrival_ms));
                }
                let kept = records.len() as u64;
                let result = store.append_from(records.drain(..), position, &batch.offsets);
                count_append(&metrics, kept, result);
            }
            if let Some(receipt) = batch.receipt {
                waiting.push_back((count, receipt));
            }
            let (lock, ready) = &*appended;
            *lock.lock().unwrap_or_else(|e| e.into_inner()) = count;
            ready.notify_all();
        }
        // receipts go (and Kafka commits) once their records are durable
        if !waiting.is_empty() {
            let durable = store
                .durable_position()
                .and_then(|p| p.parse::<u64>().ok())
                .unwrap_or(0)
                .saturating_sub(base);
            while waiting.front().is_some_and(|(seq, _)| *seq <= durable) {
                waiting.pop_front();
            }
        }
    }
    // what is not durable keeps its receipt forever: its offsets are never committed, and a
    // restarted consumer reads it again
    if !waiting.is_empty() && store.flush().is_err() {
        waiting.drain(..).for_each(std::mem::forget);
    }
}

/// Counts records appended, or lost when the store refused them.
fn count_append(metrics: &Metrics, kept: u64, result: Result<(), needle_history::HistoryError>) {
    match result {
        Ok(()) => {
            metrics.history_records_appended.inc_by(kept);
        }
        Err(error) => {
            metrics.history_records_lost.inc_by(kept);
            log_append_error(&error);
        }
    }
}

/// The rows of `columns` (a [`crate::columns::ColumnBatch`]'s) that `filter` holds TRUE for.
fn filter_columns(
    columns: &arrow_array::RecordBatch,
    filter: &CompiledExpr,
    ctx: &EvalContext,
) -> arrow_array::RecordBatch {
    let batch = crate::columns::ColumnBatch::new(columns.clone());
    let reader = batch.rows_reader();
    let mut record = Record::new();
    let keep: arrow_array::BooleanArray = (0..batch.rows())
        .map(|row| {
            reader.write(row, &mut record);
            Some(filter.eval(&record, ctx) == Value::Bool(true))
        })
        .collect();
    arrow_select::filter::filter_record_batch(columns, &keep)
        .expect("a mask of the batch's own length")
}

fn log_append_error(error: &needle_history::HistoryError) {
    static SEEN: AtomicU64 = AtomicU64::new(0);
    let n = SEEN.fetch_add(1, Ordering::Relaxed) + 1;
    if n.is_power_of_two() {
        eprintln!("needle: history: records could not be kept (#{n}): {error}");
    }
}
