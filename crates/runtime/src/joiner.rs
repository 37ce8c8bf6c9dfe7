//! The joiner thread: owns every query's join side ([`QueryRun`]): merges the workers' partials,
//! ticks windows and durations, and pushes emissions to each query's [`QueryResults`] (every
//! client following it). When a query is done it leaves the registry (so workers stop working
//! for it) and its results close.
//!
//! Starting, killing and partials all arrive on one FIFO channel, so a query's start is always
//! seen before any partial for it.
//!
//! Records read are counted once for all queries: a worker's `JoinerMessage::Progress` only
//! adds to a running total (O(1), however many queries run), and each query is credited the
//! difference since its last credit when it is next touched — before a merge, an end, or its
//! tick. The status table (what `GET /api/v1/queries` shows) counts a live query's records
//! from the running total when it is read (`QueryStatus::live_from`), and what the queries
//! that changed matched is brought into it every `STATUS_REFRESH`: O(changed), not O(running).
//!
//! Ticks touch only the queries that have something due — a time window to emit, or their
//! end — from a schedule of deadlines ([`QueryRun::next_deadline_ms`]), so a tick costs
//! O(due), not O(running): 100,000 queries waiting for their needles cost nothing per tick.
//!
//! A query that ends leaves the joiner and the status table at once, and the registry (the
//! workers' snapshot) with the others that ended in the same run of waiting messages or tick, in
//! one new snapshot.
//!
//! On an api node ([`crate::remote::Role::Api`]) the partials arrive encoded, from worker nodes
//! (`JoinerMessage::Encoded`), and are merged the same way; a query's end is announced (so the
//! workers forget it) when it leaves the joiner. A query adopted from an api node that died
//! first *catches up*: the partials sent since it started are handed to it again, held until a
//! cut of its first api node says which emission they belong to (where that node cut an
//! emission of a windowed query, recorded before delivering it: see
//! [`crate::remote::QueryAnnouncer::cut`]), merged and cut there; none of its deadlines is
//! scheduled meanwhile, and from `JoinerMessage::CaughtUp` on it runs on this node's clock,
//! the partials no cut covered merged at the times they were sent. One that reads the past
//! first gathers it again (record time), then goes live where its first api node did: the
//! cuts read back while the past was gathered wait for it.

use crate::clock::now_ms;
use crate::history::replay::record_range;
use crate::history::{Gathered, WorkerHistory};
use crate::id_table::{HasId, IdTable};
use crate::messages::{JoinerMessage, RemotePast};
use crate::metrics::Metrics;
use crate::registry::QuerySet;
use crate::remote::QueryAnnouncer;
use crate::results::QueryResults;
use crate::status::{EndedTable, StatusTable};
use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};
use needle_engine::exec::{Emission, Partial, QueryRun};
use serde_json::json;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::messages::EndReason;
pub use crate::status::QueryStatus;

/// How often the workers an api node's reads of the past wait for are checked for being alive.
const WORKERS_CHECK: Duration = Duration::from_secs(1);

struct Running {
    /// Inline: the running table holds each query boxed already.
    run: QueryRun,
    results: Arc<QueryResults>,
    first_result: bool,
    /// When the joiner took it ([`mono_us`]).
    received_us: u64,
    rate: RateWindow,
    /// The joiner's records total when this query was last credited with records seen.
    credited_at: u64,
    /// Records seen credited to the query but not yet to its status-table entry.
    seen_unpublished: u64,
    /// Records matched (from its partials) not yet in its status-table entry: the entry is
    /// brought up to date when an emission goes out, on the status refresh and at the end,
    /// not per partial (a lock and a lookup per partial were a tenth of the joiner's time
    /// when 100,000 queries found their needles).
    matched_unpublished: u64,
    /// The deadline this query has in the joiner's schedule ([`NOT_SCHEDULED`]: none).
    scheduled: i64,
    /// The query reads live records (false for `HISTORY`: the records the workers read are
    /// not its to count).
    live: bool,
    /// What only a query reading its past, or adopted, needs; `None` for the others.
    aside: Option<Box<Aside>>,
    /// Emissions delivered so far (the number of the last one).
    emitted: u64,
    /// The time of its last merge or tick: when its next emission is cut.
    clock_ms: i64,
    /// Its final emission waits for its cut to be recorded: that delivery ends its results,
    /// not its leaving the joiner.
    final_deferred: bool,
}

/// What few queries need, kept apart (boxed) from the entry every query has: a million live
/// queries need none of it, and it was a fifth of each one's entry.
struct Aside {
    /// While its stored past is read: the live partials that arrived meanwhile, merged after
    /// the past (`SINCE`). `None` once the query runs live (or never read the past).
    held: Option<Vec<Kept>>,
    /// What reading its stored past cost: told in its final emission's metadata.
    past: Option<Box<crate::history::ReplayReport>>,
    /// On an api node, while its worker nodes read their stores.
    remote: Option<Box<RemotePast>>,
    /// An adopted query merging its partials since it started (see the module doc).
    catching_up: bool,
    /// While catching up: the partials read back, with their offsets and send times, until a
    /// cut of its first api node says which emission they belong to.
    pending: Vec<Kept>,
    /// While catching up and its past is still being gathered: the cuts read back meanwhile,
    /// replayed once the past is read (they cut its live windows, after the past).
    cuts_waiting: Vec<crate::remote::Cut>,
    /// While catching up: the time of the last cut replayed (at first, the query's start).
    last_cut_ms: i64,
    /// The highest offset of its results partition among the partials merged (-1: none): only
    /// partials from worker nodes have one.
    through: i64,
}

impl Aside {
    fn new(started_ms: i64) -> Self {
        Self {
            held: None,
            past: None,
            remote: None,
            catching_up: false,
            pending: Vec::new(),
            cuts_waiting: Vec::new(),
            last_cut_ms: started_ms,
            through: -1,
        }
    }
}

/// A partial kept for later: its offset on the query's results partition (-1: not from one),
/// when it was sent (or arrived), the partial.
type Kept = (i64, i64, Partial);

/// The running queries by id. Each is boxed, found by the id its run holds: a million queries
/// make a table of two million slots, half a gigabyte with the entries inline. Hashed with
/// foldhash: SipHash of the id was a few percent of the joiner's time at 100,000 queries.
type Table = IdTable<Box<Running>>;

impl HasId for Running {
    fn id(&self) -> &str {
        self.run.id()
    }
}

/// When queries next need a tick (a time window to emit, or their end), earliest first, those
/// due at the same millisecond in the order they were scheduled. Entries of queries that ended
/// or were rescheduled are skipped when they come up.
///
/// Ordered by (time, a sequence number), never by id: queries started together share their
/// deadlines, and a heap of (time, id) compared the ids of every tie, a string each (most of
/// the joiner's time while 300,000 queries were being submitted).
#[derive(Default)]
struct Deadlines {
    heap: BinaryHeap<Reverse<Due>>,
    scheduled: u64,
}

struct Due {
    at: i64,
    seq: u64,
    id: Arc<str>,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Due {}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl Deadlines {
    fn push(&mut self, at: i64, id: Arc<str>) {
        self.scheduled += 1;
        self.heap.push(Reverse(Due { at, seq: self.scheduled, id }));
    }

    /// The earliest deadline if it is at or before `now_ms`, taken off the schedule.
    fn pop_due(&mut self, now_ms: i64) -> Option<(i64, Arc<str>)> {
        if self.heap.peek()?.0.at > now_ms {
            return None;
        }
        self.heap.pop().map(|Reverse(due)| (due.at, due.id))
    }
}

impl Running {
    /// Its [`Aside`], made when it is first needed.
    fn aside_mut(&mut self) -> &mut Aside {
        let started_ms = self.run.receive_ms();
        self.aside.get_or_insert_with(|| Box::new(Aside::new(started_ms)))
    }

    /// True while its stored past is read and the live partials are held.
    fn holding(&self) -> bool {
        self.aside.as_ref().is_some_and(|a| a.held.is_some())
    }

    /// The live partials held while its past is read.
    fn held_mut(&mut self) -> Option<&mut Vec<Kept>> {
        self.aside.as_mut()?.held.as_mut()
    }

    /// True for an adopted query still catching up.
    fn catching_up(&self) -> bool {
        self.aside.as_ref().is_some_and(|a| a.catching_up)
    }

    /// True on an api node while its worker nodes read their stores for it.
    fn gathering(&self) -> bool {
        self.aside.as_ref().is_some_and(|a| a.remote.is_some())
    }

    fn remote_mut(&mut self) -> Option<&mut RemotePast> {
        self.aside.as_mut()?.remote.as_deref_mut()
    }

    /// Moves what the query saw and matched since the last time into its status-table entry.
    fn publish(&mut self, status: Option<&mut QueryStatus>) {
        if let Some(s) = status {
            s.records_seen += self.seen_unpublished;
            s.records_matched += self.matched_unpublished;
            // an entry made again after the query started (an adopted query's)
            if self.live && s.live_from.is_none() {
                s.live_from = Some(self.credited_at);
            }
        }
        self.seen_unpublished = 0;
        self.matched_unpublished = 0;
    }

    /// Credits the query with the records read since its last credit.
    fn credit(&mut self, records_total: u64) {
        if !self.live {
            self.credited_at = records_total;
            return;
        }
        let seen = records_total - self.credited_at;
        if seen > 0 {
            // (the status table counts these when it is read: see `QueryStatus::live_from`)
            self.run.add_seen(seen);
            self.credited_at = records_total;
        }
    }
}

/// How often the status table's "records seen" is brought up to date.
const STATUS_REFRESH: Duration = Duration::from_millis(500);

/// A query's [`Running::scheduled`] when it has no deadline in the schedule.
const NOT_SCHEDULED: i64 = i64::MIN;

/// Microseconds on a monotonic clock (from the first call): the times a running query keeps,
/// in 8 bytes rather than an `Instant`'s 16 (a million entries).
fn mono_us() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_micros() as u64
}

/// The most messages handled between two looks at the tick and the registry.
const DRAIN: usize = 256;

/// RAW records one query emitted in the current one-second window, for
/// `runtime.raw_records_per_sec`.
struct RateWindow {
    /// When the window started ([`mono_us`]).
    started_us: u64,
    emitted: u64,
}

impl RateWindow {
    /// How many of `offered` records may go out now under `limit` per second.
    fn admit(&mut self, offered: u64, limit: u64) -> u64 {
        let now = mono_us();
        if now.saturating_sub(self.started_us) >= 1_000_000 {
            self.started_us = now;
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
    pub ended: EndedTable,
    pub metrics: Arc<Metrics>,
    pub tick: Duration,
    /// RAW records a query may emit per second.
    pub raw_records_per_sec: u64,
    /// On an api node: where a query's end is announced.
    pub announcer: Option<Arc<dyn QueryAnnouncer>>,
    /// Its count of records read, for the status table's readers ([`QueryStatus::counted_through`]).
    pub records_total: Arc<std::sync::atomic::AtomicU64>,
    /// The queries with matches or past records not yet in their status-table entries: the
    /// refresh publishes these, not every running query (a million entries visited every
    /// 500 ms held the joiner a quarter of a second each time).
    pub unpublished: std::cell::RefCell<Vec<Arc<str>>>,
}

impl Joiner {
    pub fn run(self) {
        let mut running = Table::default();
        let mut deadlines = Deadlines::default();
        let mut last_tick = Instant::now();
        let mut last_refresh = Instant::now();
        // Queries that ended since the last tick, to leave the registry together on the tick
        // (until then workers may still match them; the joiner drops those partials).
        let mut leaving: Vec<Arc<str>> = Vec::new();
        // Records the workers read, in all (every running query has seen those read after it
        // started).
        let mut records_total = 0u64;
        // On an api node: the queries whose worker nodes are reading their stores.
        let mut gathering: Vec<Arc<str>> = Vec::new();
        let mut last_workers_check = Instant::now();
        loop {
            let wait = self.tick.saturating_sub(last_tick.elapsed());
            let mut next = self.messages.recv_timeout(wait);
            // The messages already waiting are handled together (up to `DRAIN`), then the tick
            // and the registry's change: the queries that many messages ended leave the
            // workers' snapshot in one change, not one each.
            let mut handled = 0;
            loop {
                // The query a message touched: checked for being done (or rescheduled) after it.
                let mut touched: Option<Arc<str>> = None;
                match next {
                    Ok(JoinerMessage::Start { run, results, live, remote, catching_up }) => {
                        // the same allocation as its member's id: a partial's lookup in the
                        // running table compares addresses, not text (comparing the text of
                        // 100,000 ids was most of the joiner's time while queries waited)
                        let id: Arc<str> = run.shared_id().clone();
                        // (not its end less its duration: a run on record time has no end yet)
                        let started_ms = run.receive_ms();
                        let held = run.is_on_record_time().then(Vec::new);
                        let aside =
                            (held.is_some() || remote.is_some() || catching_up).then(|| {
                                Box::new(Aside {
                                    held,
                                    remote,
                                    catching_up,
                                    ..Aside::new(started_ms)
                                })
                            });
                        let now = mono_us();
                        let rate = RateWindow { started_us: now, emitted: 0 };
                        let q = Running {
                            run: *run,
                            results,
                            first_result: true,
                            received_us: now,
                            rate,
                            credited_at: records_total,
                            seen_unpublished: 0,
                            matched_unpublished: 0,
                            scheduled: NOT_SCHEDULED,
                            live,
                            aside,
                            emitted: 0,
                            clock_ms: started_ms,
                            final_deferred: false,
                        };
                        if q.gathering() {
                            gathering.push(id.clone());
                        }
                        if q.live {
                            let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
                            if let Some(s) = status.get_mut(&id) {
                                s.live_from = Some(records_total);
                            }
                        }
                        running.insert(Box::new(q));
                        touched = Some(id);
                    }
                    Ok(JoinerMessage::Partials { partials, in_flight: _held }) => {
                        for (member, partial) in partials {
                            let Some(q) = running.get_mut(&member.id) else { continue };
                            q.credit(records_total);
                            match q.held_mut() {
                                Some(held) => held.push((-1, now_ms(), partial)),
                                None => self.merge(&member.id, q, partial),
                            }
                            self.settle(&mut running, &mut deadlines, &member.id, &mut leaving);
                        }
                    }
                    Ok(JoinerMessage::History { id, piece }) => {
                        if let Some(q) = running.get_mut(&id) {
                            touched = Some(id.clone());
                            let piece = *piece;
                            self.merge_past(&id, q, piece.at_ms, piece.partial);
                        }
                    }
                    Ok(JoinerMessage::HistoryDone { id, end_ms, report }) => {
                        if let Some(q) = running.get_mut(&id) {
                            touched = Some(id.clone());
                            q.credit(records_total);
                            self.past_read(&id, q, end_ms, report);
                        }
                    }
                    Ok(JoinerMessage::RemoteHistory { id, worker, event }) => {
                        if let Some(q) = running.get_mut(&id) {
                            touched = Some(id.clone());
                            q.credit(records_total);
                            self.gather(&id, q, &worker, *event);
                        }
                    }
                    Ok(JoinerMessage::Encoded { id, bytes, offset, at_ms }) => {
                        if let Some(q) = running.get_mut(&id) {
                            touched = Some(id.clone());
                            q.credit(records_total);
                            match q.run.query().decode_partial(&bytes) {
                                Ok(partial) => self.take_remote(&id, q, partial, offset, at_ms),
                                Err(error) => log_unmerged(&id, &error),
                            }
                        }
                    }
                    Ok(JoinerMessage::SeenBefore { id, records, offset, at_ms }) => {
                        if let Some(q) = running.get_mut(&id) {
                            touched = Some(id.clone());
                            q.credit(records_total);
                            // in order with the query's partials, as a partial of no records
                            let partial = q.run.query().seen_partial(records);
                            self.take_remote(&id, q, partial, offset, at_ms);
                        }
                    }
                    Ok(JoinerMessage::Cut { id, cut }) => {
                        if let Some(q) = running.get_mut(&id).filter(|q| q.catching_up()) {
                            touched = Some(id.clone());
                            if q.holding() {
                                // it cuts windows after the past, which is still being read
                                q.aside_mut().cuts_waiting.push(cut);
                            } else {
                                self.replay_cut(&id, q, cut);
                            }
                        }
                    }
                    Ok(JoinerMessage::Forget { id }) => {
                        if let Some(q) = running.remove(&id) {
                            q.results.close();
                            self.status.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                            self.metrics.queries_active.dec();
                        }
                    }
                    Ok(JoinerMessage::CaughtUp { id }) => {
                        if let Some(q) = running.get_mut(&id) {
                            if let Some(aside) = q.aside.as_mut() {
                                aside.catching_up = false;
                            }
                            self.release_pending(&id, q);
                            touched = Some(id);
                        }
                    }
                    // receipts are dropped here: the partials sent before them have been merged
                    Ok(JoinerMessage::Progress { records, receipts: _ }) => {
                        records_total += records;
                        self.records_total
                            .store(records_total, std::sync::atomic::Ordering::Relaxed);
                    }
                    Ok(JoinerMessage::End { id, reason }) => {
                        touched = Some(id.clone());
                        if let Some(q) = running.get_mut(&id) {
                            q.credit(records_total);
                            q.clock_ms = now_ms();
                            let last = q.run.finish(q.clock_ms).map(|e| annotate_end(e, reason));
                            self.deliver(&id, q, last.into_iter().collect());
                        }
                    }
                    Ok(JoinerMessage::Shutdown) | Err(RecvTimeoutError::Disconnected) => {
                        for q in running.values_mut() {
                            let id = q.run.shared_id().clone();
                            q.credit(records_total);
                            q.clock_ms = now_ms();
                            let last = q
                                .run
                                .finish(q.clock_ms)
                                .map(|e| annotate_end(e, EndReason::Shutdown));
                            self.deliver(&id, q, last.into_iter().collect());
                        }
                        let ids: Vec<Arc<str>> =
                            running.values().map(|q| q.run.shared_id().clone()).collect();
                        for id in ids {
                            self.retire(&mut running, &id, &mut leaving);
                        }
                        self.queries.remove_soon(&leaving);
                        return;
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                }
                if let Some(id) = touched {
                    self.settle(&mut running, &mut deadlines, &id, &mut leaving);
                }
                handled += 1;
                if handled == DRAIN {
                    break;
                }
                next = match self.messages.try_recv() {
                    Ok(message) => Ok(message),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
                };
            }
            if last_tick.elapsed() >= self.tick {
                // only the queries with a window or their end due: O(due), not O(running)
                let now = now_ms();
                while let Some((at, id)) = deadlines.pop_due(now) {
                    let Some(q) = running.get_mut(&id) else { continue };
                    if q.scheduled != at {
                        continue; // rescheduled since
                    }
                    q.scheduled = NOT_SCHEDULED;
                    q.credit(records_total);
                    q.clock_ms = now;
                    let emissions = q.run.tick(now);
                    self.deliver(&id, q, emissions);
                    self.settle(&mut running, &mut deadlines, &id, &mut leaving);
                }
                last_tick = Instant::now();
                if !gathering.is_empty() && last_workers_check.elapsed() >= WORKERS_CHECK {
                    last_workers_check = last_tick;
                    self.check_workers(&mut running, &mut gathering, &mut deadlines, &mut leaving);
                }
                if last_refresh.elapsed() >= STATUS_REFRESH {
                    self.publish_seen(&mut running);
                    last_refresh = last_tick;
                }
            }
            // The queries that ended leave the workers' snapshot at once — one ended by its
            // LIMIT must not keep the workers busy (a `SELECT *` decodes every record whole) —
            // and the many that a tick ends, in one new snapshot.
            if !leaving.is_empty() {
                self.queries.remove_soon(&leaving);
                leaving.clear();
            }
        }
    }

    /// After a query changed: retires it when it is done, else makes sure its next deadline is
    /// scheduled.
    fn settle(
        &self,
        running: &mut Table,
        deadlines: &mut Deadlines,
        id: &Arc<str>,
        leaving: &mut Vec<Arc<str>>,
    ) {
        let Some(q) = running.get_mut(id) else { return };
        if q.run.is_done() {
            self.retire(running, id, leaving);
            return;
        }
        if q.holding() || q.run.is_on_record_time() || q.catching_up() {
            // its clock is the stored records' time until the past is read, or the times its
            // partials were sent until it caught up
            return;
        }
        let next = q.run.next_deadline_ms().unwrap_or(NOT_SCHEDULED);
        if next != q.scheduled {
            q.scheduled = next;
            if next != NOT_SCHEDULED {
                deadlines.push(next, id.clone());
            }
        }
    }

    /// Brings every query's status-table entry up to date (records seen and matched).
    fn publish_seen(&self, running: &mut Table) {
        let ids = std::mem::take(&mut *self.unpublished.borrow_mut());
        if ids.is_empty() {
            return;
        }
        let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        for id in ids {
            if let Some(q) = running.get_mut(&id) {
                q.publish(status.get_mut(&id));
            }
        }
    }

    /// A piece of the stored past, merged at the record time it belongs at.
    fn merge_past(&self, id: &str, q: &mut Running, at_ms: i64, partial: Partial) {
        progress(&self.unpublished, id, q, partial.seen, partial.matched);
        match q.run.merge(partial, at_ms) {
            Ok(emissions) => self.deliver(id, q, emissions),
            Err(error) => log_unmerged(id, &error),
        }
    }

    /// The stored past has been read (up to `end_ms`, record time): a `HISTORY` query ends; a
    /// `SINCE` query goes on live: the windows due by now are cut (with the past alone), then
    /// the live partials that arrived meanwhile are merged, each at its offset, so the cuts
    /// recorded from here on say which of them each live window holds. A query catching up
    /// does not go live at this node's now but where its first api node did: its held partials
    /// wait, with the others, for the cuts read back (those read while the past was gathered
    /// first).
    fn past_read(
        &self,
        id: &str,
        q: &mut Running,
        end_ms: i64,
        report: Box<crate::history::ReplayReport>,
    ) {
        q.run.add_seen(report.seen_after);
        progress(&self.unpublished, id, q, report.seen_after, 0);
        let aside = q.aside_mut();
        aside.past = Some(report);
        let held = aside.held.take().unwrap_or_default();
        let cuts = std::mem::take(&mut aside.cuts_waiting);
        if !q.live {
            let mut emissions = q.run.tick(end_ms);
            emissions.extend(q.run.finish(end_ms));
            return self.deliver(id, q, emissions);
        }
        q.run.continue_live();
        if q.catching_up() || !cuts.is_empty() {
            q.aside_mut().pending.extend(held);
            for cut in cuts {
                self.replay_cut(id, q, cut);
            }
            if !q.catching_up() {
                self.release_pending(id, q);
            }
            return;
        }
        let now = now_ms();
        q.clock_ms = now;
        let due = q.run.tick(now);
        self.deliver(id, q, due);
        for (offset, _, partial) in held {
            self.merge_at(id, q, partial, now, offset);
        }
    }

    /// On an api node: takes what a worker node sent of its read of the past, and merges what
    /// the gather lets go on (see [`crate::history::Gather`]).
    fn gather(&self, id: &str, q: &mut Running, worker: &str, event: WorkerHistory<Vec<u8>>) {
        let event = match event {
            WorkerHistory::Planned { data } => WorkerHistory::Planned { data },
            WorkerHistory::Done { report } => WorkerHistory::Done { report },
            WorkerHistory::Piece { at_ms, partial } => {
                match q.run.query().decode_partial(&partial) {
                    Ok(partial) => WorkerHistory::Piece { at_ms, partial },
                    Err(error) => return log_unmerged(id, &error),
                }
            }
        };
        let Some(remote) = q.remote_mut() else { return };
        let out = remote.gather.take(worker, event);
        self.gathered(id, q, out);
    }

    fn gathered(&self, id: &str, q: &mut Running, out: Vec<Gathered<Partial>>) {
        for next in out {
            match next {
                Gathered::Range(data) => {
                    let Some(remote) = q.aside.as_mut().and_then(|a| a.remote.as_mut()) else {
                        return;
                    };
                    let (start, end) =
                        record_range(q.run.query(), data, remote.from_ms, remote.to_ms);
                    remote.end_ms = end;
                    q.run.place_on_record_time(start, end);
                }
                Gathered::Piece { at_ms, partial } => self.merge_past(id, q, at_ms, partial),
                Gathered::Done(report) => {
                    let Some(remote) = q.aside.as_mut().and_then(|a| a.remote.take()) else {
                        return;
                    };
                    self.past_read(id, q, remote.end_ms, report);
                }
            }
        }
    }

    /// On an api node: gives up on the worker nodes its reads of the past wait for that
    /// stopped answering; forgets the reads that are over.
    fn check_workers(
        &self,
        running: &mut Table,
        gathering: &mut Vec<Arc<str>>,
        deadlines: &mut Deadlines,
        leaving: &mut Vec<Arc<str>>,
    ) {
        let Some(announcer) = &self.announcer else { return };
        gathering.retain(|id| running.get(id).is_some_and(|q| q.gathering()));
        for id in gathering.clone() {
            let Some(q) = running.get_mut(&id) else { continue };
            let Some(remote) = q.remote_mut() else { continue };
            let gone: Vec<String> = remote
                .gather
                .waiting_for()
                .filter(|w| !announcer.worker_alive(w))
                .map(str::to_owned)
                .collect();
            for worker in gone {
                eprintln!(
                    "needle: query {id}: worker node {worker} stopped answering before its \
                     history was read; the result goes on without its part"
                );
                let Some(remote) = q.remote_mut() else { break };
                let out = remote.gather.lose(&worker);
                self.gathered(&id, q, out);
            }
            self.settle(running, deadlines, &id, leaving);
        }
    }

    fn merge(&self, id: &str, q: &mut Running, partial: Partial) {
        self.merge_at(id, q, partial, now_ms(), -1);
    }

    /// For a query catching up: merges the partials read back up to where its first api node
    /// cut an emission, as if they arrived before the cut (after the one before), then cuts
    /// there, unless merging already made that emission (a LIMIT reached, a full window).
    fn replay_cut(&self, id: &str, q: &mut Running, cut: crate::remote::Cut) {
        let aside = q.aside_mut();
        let last_cut_ms = aside.last_cut_ms;
        let (before, after): (Vec<_>, Vec<_>) =
            std::mem::take(&mut aside.pending).into_iter().partition(|(o, _, _)| *o <= cut.through);
        aside.pending = after;
        for (offset, _, partial) in before {
            self.merge_at(id, q, partial, last_cut_ms, offset);
        }
        if q.emitted < cut.emission {
            q.clock_ms = cut.at_ms;
            let emissions = q.run.tick(cut.at_ms);
            self.deliver(id, q, emissions);
        }
        let aside = q.aside_mut();
        aside.last_cut_ms = aside.last_cut_ms.max(cut.at_ms);
    }

    /// A query that caught up: the partials its first api node had not put in an emission yet,
    /// merged by the time they were sent (no client has seen those windows).
    fn release_pending(&self, id: &str, q: &mut Running) {
        let Some(aside) = q.aside.as_mut() else { return };
        let last_cut_ms = aside.last_cut_ms;
        for (offset, at_ms, partial) in std::mem::take(&mut aside.pending) {
            let at_ms = at_ms.max(last_cut_ms);
            self.merge_at(id, q, partial, at_ms, offset);
        }
    }

    /// Merges a partial as if it arrived at `at_ms`: the windows due by then are emitted first,
    /// without it (their cuts say so: `through` moves to the partial's `offset` only after).
    /// A partial from a worker node (at `offset` of the query's results partition, sent at
    /// `at_ms`): held while the query waits for its past, kept for a cut while it catches up,
    /// else merged now.
    fn take_remote(
        &self,
        id: &str,
        q: &mut Running,
        partial: Partial,
        offset: Option<i64>,
        at_ms: Option<i64>,
    ) {
        let catching_up = q.catching_up();
        match (q.held_mut(), at_ms.filter(|_| catching_up)) {
            (Some(held), at_ms) => {
                held.push((offset.unwrap_or(-1), at_ms.unwrap_or_else(now_ms), partial))
            }
            (None, Some(at_ms)) => {
                // merged when a cut says which emission it is in
                q.aside_mut().pending.push((offset.unwrap_or(-1), at_ms, partial));
            }
            (None, None) => self.merge_at(id, q, partial, now_ms(), offset.unwrap_or(-1)),
        }
    }

    fn merge_at(&self, id: &str, q: &mut Running, partial: Partial, at_ms: i64, offset: i64) {
        q.clock_ms = at_ms;
        let due = q.run.tick(at_ms);
        self.deliver(id, q, due);
        if offset >= 0 {
            let aside = q.aside_mut();
            aside.through = aside.through.max(offset);
        }
        progress(&self.unpublished, id, q, partial.seen, partial.matched);
        match q.run.merge(partial, at_ms) {
            Ok(emissions) => self.deliver(id, q, emissions),
            Err(error) => log_unmerged(id, &error),
        }
    }

    fn deliver(&self, id: &str, q: &mut Running, emissions: Vec<Emission>) {
        if emissions.is_empty() {
            return;
        }
        if q.first_result {
            q.first_result = false;
            let waited = Duration::from_micros(mono_us().saturating_sub(q.received_us));
            Metrics::observe(&self.metrics.query_first_result_seconds, waited);
        }
        let count = emissions.len() as u64;
        let raw = q.run.query().is_raw();
        // an api node records where it cut a windowed query's emissions before delivering them
        // (one adopting the query catches up without: it cuts where they were recorded)
        let journal = self
            .announcer
            .as_ref()
            .filter(|_| !q.catching_up() && q.run.query().is_windowed() && !q.gathering());
        for mut emission in emissions {
            let past = q.aside.as_ref().and_then(|a| a.past.as_ref());
            if let (true, Some(report)) = (emission.is_final, past) {
                crate::history::replay::annotate(&mut emission, report);
            }
            if raw {
                self.rate_limit(q, &mut emission);
            }
            q.emitted += 1;
            let Some(announcer) = journal else {
                let pushed = q.results.push(emission);
                self.metrics.results_dropped.inc_by(pushed.dropped);
                if raw && pushed.all_behind() {
                    // its followers read slower than its records come: the workers keep
                    // none for a tick rather than copy records that would be dropped here
                    q.run.query().shed_raw_until(now_ms() + self.tick.as_millis() as i64);
                }
                continue;
            };
            q.final_deferred |= emission.is_final;
            let through = q.aside.as_ref().map_or(-1, |a| a.through);
            let cut = crate::remote::Cut { emission: q.emitted, through, at_ms: q.clock_ms };
            let (results, metrics) = (q.results.clone(), self.metrics.clone());
            let deliver = move || {
                let pushed = results.push(emission);
                metrics.results_dropped.inc_by(pushed.dropped);
            };
            announcer.cut(id, cut, Box::new(deliver));
        }
        let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        let entry = status.get_mut(id);
        if let Some(s) = entry {
            s.emissions += count;
            q.publish(Some(s));
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

    /// Ends a query here at once; it leaves the registry with the others of this tick
    /// (`leaving`), in one change of the workers' snapshot.
    fn retire(&self, running: &mut Table, id: &Arc<str>, leaving: &mut Vec<Arc<str>>) {
        let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
        let mut q = running.remove(id);
        if let Some(q) = &mut q {
            q.publish(status.as_deref_mut());
            // the live records it saw, counted for good: through its last credit
            if let Some(s) = status.as_deref_mut() {
                if let Some(from) = s.live_from.take() {
                    s.records_seen += q.credited_at.saturating_sub(from);
                }
            }
        }
        // among the ended before its stream closes: a client told of the end finds it ended
        if let Some(status) = status {
            self.ended.lock().unwrap_or_else(|e| e.into_inner()).keep(*status, now_ms());
        }
        if let Some(q) = q.filter(|q| !q.final_deferred) {
            q.results.close();
        }
        leaving.push(id.clone());
        if let Some(announcer) = &self.announcer {
            announcer.ended(id);
        }
        self.metrics.queries_active.dec();
    }
}

/// Counts what a partial (or a read of the past) saw and matched toward the query's
/// status-table entry, published with its next emission or the next status refresh (which
/// `unpublished` lists it for).
fn progress(
    unpublished: &std::cell::RefCell<Vec<Arc<str>>>,
    id: &str,
    q: &mut Running,
    seen: u64,
    matched: u64,
) {
    if seen + matched == 0 {
        return;
    }
    if q.seen_unpublished == 0 && q.matched_unpublished == 0 {
        unpublished.borrow_mut().push(Arc::from(id));
    }
    q.seen_unpublished += seen;
    q.matched_unpublished += matched;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every running query has an entry: at a million queries, each 64 bytes over the
    /// allocator's 384-byte class costs 64 MB. What only some queries need goes in `Aside`.
    #[test]
    fn a_running_query_s_entry_fits_in_384_bytes() {
        assert!(std::mem::size_of::<Running>() <= 384, "{}", std::mem::size_of::<Running>());
    }

    #[test]
    fn deadlines_come_due_earliest_first_and_ties_in_the_order_scheduled() {
        let mut deadlines = Deadlines::default();
        for (at, id) in [(300, "c"), (100, "z"), (100, "a"), (200, "b"), (100, "m")] {
            deadlines.push(at, Arc::from(id));
        }
        assert_eq!(deadlines.pop_due(99), None, "nothing is due before 100");
        let mut due = Vec::new();
        while let Some((at, id)) = deadlines.pop_due(200) {
            due.push((at, id.to_string()));
        }
        let expected = [(100, "z"), (100, "a"), (100, "m"), (200, "b")];
        assert_eq!(due, expected.map(|(at, id)| (at, id.to_owned())));
        assert_eq!(deadlines.pop_due(i64::MAX).map(|(at, _)| at), Some(300));
        assert_eq!(deadlines.pop_due(i64::MAX), None);
    }
}
