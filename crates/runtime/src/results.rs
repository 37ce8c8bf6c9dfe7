//! A query's emissions on their way to the clients following it (an HTTP response, SSE streams,
//! WebSockets, the CLI): [`QueryResults`], which the joiner pushes to, hands each emission to
//! every follower's own [`ResultQueue`].
//!
//! The joiner must never wait for a follower, so each queue is bounded and pushing never
//! blocks: when a follower reads too slowly and its queue is full, its oldest emissions are
//! dropped, counted, and the next emission it does read carries `"Dropped Emissions": n` in its
//! metadata. The final emission is never dropped (it is always the newest). A slow follower
//! loses its own emissions, never another's.
//!
//! Any number of clients may follow one query ([`QueryResults::follow`]). The first queue is
//! made with the query, and holds what it emits until its client comes for it (a started
//! query's results wait for a client); a follower that comes later gets the emissions from
//! then on, numbered as the first gets them. A follower that goes away leaves
//! ([`ResultQueue::leave`]): its queue lets go of what it held, and it learns whether it was
//! the last one (a query nobody follows any more is ended by its server).
//!
//! The records RAW windows hold in the joiner before they are emitted count in the same
//! [`ResultBudget`] (a window that reaches the bound is emitted early; see
//! [`needle_engine::exec::join::WindowBytes`]), so the bytes of results anywhere in the process
//! stay under `runtime.max_result_bytes`.
//!
//! "Full" is counted three ways, for each follower's queue: emissions
//! (`runtime.subscriber_buffer`), bytes of its waiting emissions
//! (`runtime.max_result_bytes_per_query`), and bytes waiting in every queue of the process
//! ([`ResultBudget`], `runtime.max_result_bytes`, over every follower of every query). Past a
//! bound, the oldest emissions of the queue being pushed to go first; an emission that still
//! does not fit is dropped too — unless its follower is waiting for it (it has read everything
//! before: handed over at once, it is not kept long), or it is the final one (which ends the
//! query, and is kept until read, or until the server forgets results nobody claimed). So a
//! follower that keeps up loses nothing however far behind the others are, and slow or absent
//! ones hold at most the bounds, plus their final emissions.
//!
//! Emissions are numbered from 1 in the order they were pushed, dropped ones included
//! ([`ResultQueue::next_numbered`]), the same for every follower: the number is what a follower
//! resumes after (an SSE event's `id:`), and a gap in the numbers is what was dropped (or, for
//! one that came late, what was emitted before it came). A query adopted by another api node
//! after its own died numbers the emissions it makes again the same way.

use needle_engine::exec::join::WindowBytes;
use needle_engine::exec::Emission;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// The metadata key telling a subscriber how many emissions it missed.
pub const DROPPED_EMISSIONS: &str = "Dropped Emissions";

/// The bytes of results waiting in all the queues of a process, and the most there may be.
#[derive(Debug)]
pub struct ResultBudget {
    /// Shared with the `needle_result_bytes` metric.
    used: Gauge,
    limit: usize,
}

impl ResultBudget {
    /// At most `limit` bytes waiting in all; `used` counts them (a metric's gauge).
    pub fn new(limit: usize, used: Gauge) -> Arc<Self> {
        Arc::new(Self { used, limit })
    }

    /// No bound (tests, embedded uses that bound nothing).
    pub fn unbounded() -> Arc<Self> {
        Self::new(usize::MAX, Gauge::default())
    }

    /// Bytes waiting now.
    pub fn used(&self) -> usize {
        self.used.get().max(0) as usize
    }

    fn take(&self, bytes: usize) {
        self.used.inc_by(bytes as i64);
    }

    fn give_back(&self, bytes: usize) {
        self.used.dec_by(bytes as i64);
    }
}

/// The records RAW windows hold in the joiner count in the same budget as the results waiting
/// for subscribers: together they stay under `runtime.max_result_bytes`.
impl WindowBytes for ResultBudget {
    fn try_take(&self, bytes: usize) -> bool {
        // only the joiner's thread takes for windows: a check then an add is exact enough
        let fits = self.used() + bytes <= self.limit;
        if fits {
            self.take(bytes);
        }
        fits
    }

    fn give_back(&self, bytes: usize) {
        ResultBudget::give_back(self, bytes);
    }
}

/// The bounds of a follower's queue, shared by every queue of a process: at most `capacity`
/// emissions and `max_bytes` bytes, its bytes counted in `budget` too (see the module doc).
/// One allocation for them all, not 24 bytes in each of a million queries' queues and results.
#[derive(Debug)]
pub struct QueueLimits {
    capacity: usize,
    max_bytes: usize,
    budget: Arc<ResultBudget>,
}

impl QueueLimits {
    /// Bounds of `capacity` emissions (at least one) and `max_bytes` bytes a queue, in `budget`.
    pub fn new(capacity: usize, max_bytes: usize, budget: Arc<ResultBudget>) -> Arc<Self> {
        Arc::new(Self { capacity: capacity.max(1), max_bytes, budget })
    }
}

/// One query's emissions for every client following it (see the module doc): the joiner
/// pushes each emission here, and each follower reads its own [`ResultQueue`].
#[derive(Debug)]
pub struct QueryResults {
    followers: Mutex<Followers>,
    limits: Arc<QueueLimits>,
}

#[derive(Debug, Default)]
struct Followers {
    /// Emissions pushed so far (the number of the last one).
    pushed: u64,
    /// The final emission was pushed, or the query was removed: nobody new may follow.
    over: bool,
    /// Each follower's queue; a follower that dropped its queue, or left, is let go at the
    /// next push.
    queues: Vec<Weak<ResultQueue>>,
}

/// What pushing one emission did, over every follower.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pushed {
    /// Emissions dropped from the followers' queues to make room (or this one, where it did
    /// not fit).
    pub dropped: u64,
    /// The followers it was handed to.
    pub followers: usize,
    /// Those of them that are behind: their queues dropped an emission.
    pub behind: usize,
}

impl Pushed {
    /// Every follower is behind (and there is one): what the query emits is dropped somewhere
    /// for each of them.
    pub fn all_behind(&self) -> bool {
        self.followers > 0 && self.behind == self.followers
    }
}

impl QueryResults {
    /// A query's results: each follower's queue holds at most `capacity` emissions and
    /// `max_bytes` bytes, its bytes counted in `budget` too (see the module doc).
    pub fn new(capacity: usize, max_bytes: usize, budget: Arc<ResultBudget>) -> Arc<Self> {
        Self::within(&QueueLimits::new(capacity, max_bytes, budget))
    }

    /// A query's results whose followers' queues keep to `limits` (shared with other queries).
    pub fn within(limits: &Arc<QueueLimits>) -> Arc<Self> {
        Arc::new(Self { followers: Mutex::new(Followers::default()), limits: limits.clone() })
    }

    /// A new follower's queue: it gets every emission pushed from now on, numbered as every
    /// follower's are. `None` once the query is over (its final emission went to the followers
    /// it had).
    pub fn follow(self: &Arc<Self>) -> Option<Arc<ResultQueue>> {
        let mut followers = self.lock();
        if followers.over {
            return None;
        }
        let queue = Arc::new(ResultQueue {
            state: Mutex::new(QueueState { pushed: followers.pushed, ..QueueState::default() }),
            notify: tokio::sync::Notify::new(),
            limits: self.limits.clone(),
            dropped_total: AtomicU64::new(0),
            left: AtomicBool::new(false),
            query: Arc::downgrade(self),
        });
        // most queries have one follower: room for one, not the four a first push makes
        // (24 bytes of each of a million idle queries)
        if followers.queues.capacity() == 0 {
            followers.queues.reserve_exact(1);
        }
        followers.queues.push(Arc::downgrade(&queue));
        Some(queue)
    }

    /// Hands an emission to every follower's queue; never blocks (see the module doc). A final
    /// emission ends the query's results: nobody may follow it after.
    pub fn push(&self, emission: Emission) -> Pushed {
        let mut followers = self.lock();
        if followers.over {
            return Pushed::default();
        }
        followers.pushed += 1;
        followers.over = emission.is_final;
        // (in place, without a list of the queues: the joiner pushes every emission here)
        followers.queues.retain(|weak| weak.upgrade().is_some_and(|q| !q.has_left()));
        let mut pushed = Pushed::default();
        let mut emission = Some(emission);
        let last = followers.queues.len().saturating_sub(1);
        for (i, weak) in followers.queues.iter().enumerate() {
            let Some(queue) = weak.upgrade() else { continue };
            // the last follower takes the emission itself: one follower costs no copy
            let copy = match i == last {
                true => emission.take(),
                false => emission.clone(),
            };
            let Some(copy) = copy else { break };
            let dropped = queue.push(copy);
            pushed.dropped += dropped;
            pushed.followers += 1;
            pushed.behind += usize::from(dropped > 0);
        }
        pushed
    }

    /// Ends every follower's stream without a final emission (the query was removed
    /// abnormally).
    pub fn close(&self) {
        let mut followers = self.lock();
        followers.over = true;
        for queue in followers.queues.drain(..).filter_map(|weak| weak.upgrade()) {
            queue.close();
        }
    }

    /// The clients following the query now (a queue whose client has not come for it yet
    /// counts).
    pub fn followers(&self) -> usize {
        let followers = self.lock();
        followers.queues.iter().filter_map(Weak::upgrade).filter(|q| !q.has_left()).count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Followers> {
        self.followers.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One follower's emissions of a query (see the module doc).
#[derive(Debug)]
pub struct ResultQueue {
    state: Mutex<QueueState>,
    notify: tokio::sync::Notify,
    limits: Arc<QueueLimits>,
    dropped_total: AtomicU64,
    /// Its follower went away ([`ResultQueue::leave`]).
    left: AtomicBool,
    /// The query's results it follows (none for a queue made on its own).
    query: Weak<QueryResults>,
}

/// Wakes the one reader of many queues (a WebSocket connection's queries, all read by one task):
/// a queue watched with [`ResultQueue::watch`] puts its key on the list when it has something
/// new to read (an emission, or its end), once until its reader finds it empty again.
#[derive(Debug, Default)]
pub struct ReadyQueues {
    keys: Mutex<Vec<Arc<str>>>,
    notify: tokio::sync::Notify,
}

impl ReadyQueues {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn put(&self, key: Arc<str>) {
        self.keys.lock().unwrap_or_else(|e| e.into_inner()).push(key);
        self.notify.notify_one();
    }

    /// Waits until a watched queue has something to read, then moves the keys of those that
    /// do into `into` (which should be empty: what it holds is dropped).
    pub async fn wait(&self, into: &mut Vec<Arc<str>>) {
        loop {
            let notified = self.notify.notified();
            {
                let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
                if !keys.is_empty() {
                    into.clear();
                    std::mem::swap(&mut *keys, into);
                    return;
                }
            }
            notified.await;
        }
    }
}

/// Who is told when a watched queue has something new (see [`ReadyQueues`]).
#[derive(Debug)]
struct Watcher {
    ready: Weak<ReadyQueues>,
    key: Arc<str>,
    /// The key is on the list, not yet read: not put there again until the queue is found
    /// empty.
    marked: bool,
}

impl Watcher {
    fn mark(&mut self) {
        if !self.marked {
            if let Some(ready) = self.ready.upgrade() {
                self.marked = true;
                ready.put(self.key.clone());
            }
        }
    }
}

#[derive(Debug, Default)]
struct QueueState {
    /// Each emission with its size and number.
    items: VecDeque<(Emission, usize, u64)>,
    /// Emissions pushed so far (the number of the last one).
    pushed: u64,
    bytes: usize,
    dropped_unreported: u64,
    closed: bool,
    /// The subscriber found the queue empty and waits for the next emission.
    waiting: bool,
    /// Boxed: most queues are read with [`ResultQueue::next`], not watched.
    watcher: Option<Box<Watcher>>,
}

impl QueueState {
    /// Something new to read: a watching reader is told.
    fn changed(&mut self) {
        if let Some(watcher) = &mut self.watcher {
            watcher.mark();
        }
    }
}

impl ResultQueue {
    /// A queue of at most `capacity` emissions, with no bound in bytes.
    pub fn new(capacity: usize) -> Arc<Self> {
        Self::bounded(capacity, usize::MAX, ResultBudget::unbounded())
    }

    /// A queue of at most `capacity` emissions and `max_bytes` bytes, its bytes counted in
    /// `budget` too (see the module doc), for one reader and no query's other followers.
    pub fn bounded(capacity: usize, max_bytes: usize, budget: Arc<ResultBudget>) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(QueueState::default()),
            notify: tokio::sync::Notify::new(),
            limits: QueueLimits::new(capacity, max_bytes, budget),
            dropped_total: AtomicU64::new(0),
            left: AtomicBool::new(false),
            query: Weak::new(),
        })
    }

    /// Adds an emission; never blocks. Returns how many older emissions were dropped to make
    /// room. A final emission closes the queue.
    pub fn push(&self, emission: Emission) -> u64 {
        let size = emission.approx_bytes();
        let limits = &*self.limits;
        let mut dropped = 0;
        {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if state.closed {
                return 0;
            }
            state.pushed += 1;
            let number = state.pushed;
            while !state.items.is_empty()
                && (state.items.len() >= limits.capacity
                    || state.bytes + size > limits.max_bytes
                    || limits.budget.used() + size > limits.budget.limit)
            {
                if let Some((_, bytes, _)) = state.items.pop_front() {
                    state.bytes -= bytes;
                    limits.budget.give_back(bytes);
                }
                state.dropped_unreported += 1;
                dropped += 1;
            }
            let fits = state.bytes + size <= limits.max_bytes
                && limits.budget.used() + size <= limits.budget.limit;
            if fits || emission.is_final || state.waiting {
                state.closed = emission.is_final;
                state.items.push_back((emission, size, number));
                state.bytes += size;
                state.waiting = false;
                limits.budget.take(size);
            } else {
                state.dropped_unreported += 1;
                dropped += 1;
            }
            state.changed();
        }
        self.dropped_total.fetch_add(dropped, Ordering::Relaxed);
        self.notify.notify_one();
        dropped
    }

    /// Its follower goes away: the queue lets go of what it holds (and its bytes leave the
    /// budget) and takes nothing more. True when no other client follows the query (nor waits
    /// to: a started query's results not claimed yet count), so that the caller may end it.
    pub fn leave(&self) -> bool {
        self.left.store(true, Ordering::Relaxed);
        {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.items.clear();
            self.limits.budget.give_back(std::mem::take(&mut state.bytes));
            state.closed = true;
            state.changed();
        }
        self.notify.notify_one();
        self.query.upgrade().is_none_or(|query| query.followers() == 0)
    }

    fn has_left(&self) -> bool {
        self.left.load(Ordering::Relaxed)
    }

    /// Bytes of this query's emissions waiting to be read.
    pub fn bytes(&self) -> usize {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).bytes
    }

    /// Ends the stream without a final emission (the query was removed abnormally).
    pub fn close(&self) {
        {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.closed = true;
            state.changed();
        }
        self.notify.notify_one();
    }

    /// Has `ready` told whenever this queue has something new to read, under `key` (at once
    /// when it has something now): one reader then serves many queues, reading each with
    /// [`ResultQueue::try_next_numbered`] until it returns `None` or the end (see
    /// [`ReadyQueues`]). A queue has one watcher; watching again replaces it.
    pub fn watch(&self, ready: &Arc<ReadyQueues>, key: Arc<str>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut watcher = Box::new(Watcher { ready: Arc::downgrade(ready), key, marked: false });
        if !state.items.is_empty() || state.closed {
            watcher.mark();
        }
        state.watcher = Some(watcher);
    }

    /// The next emission, waiting for one; `None` once the query is over and all were read.
    /// Meant for one reader at a time.
    pub async fn next(&self) -> Option<Emission> {
        self.next_numbered().await.map(|(_, emission)| emission)
    }

    /// [`ResultQueue::next`] with the emission's number (see the module doc).
    pub async fn next_numbered(&self) -> Option<(u64, Emission)> {
        loop {
            let notified = self.notify.notified();
            if let Some(result) = self.try_next_numbered() {
                return result;
            }
            notified.await;
        }
    }

    /// `Some(Some(e))`: an emission; `Some(None)`: the stream is over; `None`: nothing yet.
    pub fn try_next(&self) -> Option<Option<Emission>> {
        self.try_next_numbered().map(|next| next.map(|(_, emission)| emission))
    }

    /// [`ResultQueue::try_next`] with the emission's number.
    pub fn try_next_numbered(&self) -> Option<Option<(u64, Emission)>> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match state.items.pop_front() {
            Some((mut emission, bytes, number)) => {
                state.bytes -= bytes;
                self.limits.budget.give_back(bytes);
                if state.dropped_unreported > 0 {
                    emission.meta.insert(DROPPED_EMISSIONS.into(), state.dropped_unreported.into());
                    state.dropped_unreported = 0;
                }
                Some(Some((number, emission)))
            }
            None if state.closed => Some(None),
            None => {
                state.waiting = true;
                if let Some(watcher) = &mut state.watcher {
                    watcher.marked = false;
                }
                None
            }
        }
    }

    /// Emissions dropped so far because the reader was slow.
    pub fn dropped(&self) -> u64 {
        self.dropped_total.load(Ordering::Relaxed)
    }
}

impl Drop for ResultQueue {
    /// Emissions nobody read leave the budget with their queue.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        self.limits.budget.give_back(state.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every running query has its results and (most) a follower's queue: at a million queries
    /// each allocator class they fall into (with their `Arc` counts, 16 bytes) is felt. The
    /// bounds they share are behind one pointer.
    #[test]
    fn a_query_s_results_and_queue_fit_80_and_160_byte_classes() {
        let arc = 2 * std::mem::size_of::<usize>();
        assert!(std::mem::size_of::<QueryResults>() + arc <= 80);
        assert!(std::mem::size_of::<ResultQueue>() + arc <= 160);
    }
    use serde_json::Map;

    fn emission(n: u64, is_final: bool) -> Emission {
        let mut meta = Map::new();
        meta.insert("n".into(), n.into());
        Emission { records: Vec::new(), meta: meta.into(), is_final }
    }

    #[test]
    fn a_slow_reader_loses_the_oldest_and_is_told_how_many() {
        let q = ResultQueue::new(2);
        for n in 0..5 {
            q.push(emission(n, false));
        }
        q.push(emission(5, true));
        assert_eq!(q.dropped(), 4);
        let (number, first) = q.try_next_numbered().unwrap().unwrap();
        assert_eq!(first.meta["n"], 4);
        assert_eq!(number, 5, "numbered from 1, the dropped ones counted");
        assert_eq!(first.meta[DROPPED_EMISSIONS], 4);
        let (number, last) = q.try_next_numbered().unwrap().unwrap();
        assert!(last.is_final && !last.meta.contains_key(DROPPED_EMISSIONS));
        assert_eq!(number, 6);
        assert!(q.try_next().unwrap().is_none(), "over after the final emission");
        q.push(emission(6, false));
        assert!(q.try_next().unwrap().is_none(), "nothing is accepted after the end");
    }

    fn sized(n: u64, records: usize) -> Emission {
        let mut e = emission(n, false);
        let mut record = needle_record::Record::new();
        record.insert("payload", needle_record::Value::String("x".repeat(1000)));
        e.records = vec![record; records];
        e
    }

    #[test]
    fn a_slow_reader_keeps_at_most_its_bytes_and_a_waiting_one_gets_what_comes() {
        let budget = ResultBudget::unbounded();
        let one = sized(0, 10).approx_bytes();
        let q = ResultQueue::bounded(1000, one * 3, budget.clone());
        for n in 0..10 {
            q.push(sized(n, 10));
            assert!(q.bytes() <= one * 3, "{} > {}", q.bytes(), one * 3);
        }
        assert_eq!(budget.used(), q.bytes());
        assert_eq!(q.dropped(), 7);
        let first = q.try_next().unwrap().unwrap();
        assert_eq!(
            (first.meta["n"].as_u64(), first.meta[DROPPED_EMISSIONS].as_u64()),
            (Some(7), Some(7))
        );
        for n in 8..10 {
            assert_eq!(q.try_next().unwrap().unwrap().meta["n"], n);
        }
        // one emission past the bound on its own: dropped while nobody waits for it, handed
        // over when the subscriber waits (it read everything before)
        q.push(sized(10, 40));
        assert_eq!(q.dropped(), 8);
        assert!(q.try_next().is_none(), "nothing waiting: the subscriber now waits");
        q.push(sized(11, 40));
        let got = q.try_next().unwrap().unwrap();
        assert_eq!(
            (got.meta["n"].as_u64(), got.meta[DROPPED_EMISSIONS].as_u64()),
            (Some(11), Some(1))
        );
        // the final emission is always kept
        q.push(sized(12, 40));
        let mut last = sized(13, 40);
        last.is_final = true;
        q.push(last);
        assert!(q.try_next().unwrap().unwrap().is_final);
        drop(q);
        assert_eq!(budget.used(), 0, "a queue dropped unread gives its bytes back");
    }

    #[test]
    fn past_the_process_bound_only_queues_holding_unread_emissions_drop() {
        let one = sized(0, 10).approx_bytes();
        let budget = ResultBudget::new(one * 4, Gauge::default());
        let stalled: Vec<_> =
            (0..3).map(|_| ResultQueue::bounded(1000, usize::MAX, budget.clone())).collect();
        let fast = ResultQueue::bounded(1000, usize::MAX, budget.clone());
        for n in 0..20 {
            for q in &stalled {
                q.push(sized(n, 10));
            }
            // (it waits for each emission, as a reader that keeps up does)
            assert!(fast.try_next().is_none());
            fast.push(sized(n, 10));
            let got = fast.try_next().unwrap().unwrap();
            assert_eq!(got.meta["n"], n, "the reader that keeps up loses nothing");
            assert!(!got.meta.contains_key(DROPPED_EMISSIONS));
            assert!(budget.used() <= one * 4, "the bound");
        }
        assert!(stalled.iter().all(|q| q.dropped() > 0));
    }

    fn numbers(q: &ResultQueue) -> Vec<(u64, u64)> {
        std::iter::from_fn(|| q.try_next_numbered().flatten())
            .map(|(number, e)| (number, e.meta["n"].as_u64().unwrap()))
            .collect()
    }

    #[test]
    fn every_follower_gets_every_emission_from_when_it_came_numbered_alike() {
        let results = QueryResults::new(100, usize::MAX, ResultBudget::unbounded());
        let first = results.follow().unwrap();
        results.push(emission(0, false));
        let second = results.follow().unwrap();
        let third = results.follow().unwrap();
        assert_eq!(results.followers(), 3);
        for n in 1..3 {
            let pushed = results.push(emission(n, false));
            assert_eq!(pushed, Pushed { dropped: 0, followers: 3, behind: 0 });
        }
        results.push(emission(3, true));
        assert!(results.follow().is_none(), "nobody follows a query that is over");
        assert_eq!(numbers(&first), [(1, 0), (2, 1), (3, 2), (4, 3)]);
        let later = [(2, 1), (3, 2), (4, 3)];
        assert_eq!(numbers(&second), later, "from when it came, numbered as the first's");
        assert_eq!(numbers(&third), later);
        for q in [&first, &second, &third] {
            assert!(q.try_next().unwrap().is_none(), "each stream ends after the final");
        }
    }

    #[test]
    fn a_slow_follower_loses_its_own_emissions_only_and_one_that_leaves_lets_go() {
        let one = sized(0, 10).approx_bytes();
        let budget = ResultBudget::new(one * 100, Gauge::default());
        let results = QueryResults::new(2, usize::MAX, budget.clone());
        let (fast, slow) = (results.follow().unwrap(), results.follow().unwrap());
        for n in 0..5 {
            assert!(fast.try_next().is_none());
            let pushed = results.push(sized(n, 10));
            assert_eq!((pushed.followers, pushed.behind), (2, usize::from(n >= 2)));
            assert!(!pushed.all_behind(), "one keeps up");
            assert_eq!(fast.try_next().unwrap().unwrap().meta["n"], n);
        }
        assert_eq!((fast.dropped(), slow.dropped()), (0, 3));
        assert_eq!(budget.used(), slow.bytes(), "each follower's bytes count in the budget");
        assert!(budget.used() > 0);
        assert!(!slow.leave(), "another follows still");
        assert_eq!(budget.used(), 0, "one that left holds nothing");
        assert_eq!(results.followers(), 1);
        assert_eq!(results.push(sized(5, 10)).followers, 1);
        assert!(slow.try_next().unwrap().is_none(), "one that left gets nothing more");
        assert!(fast.leave(), "the last one to leave");
        drop(fast);
        assert_eq!(results.push(sized(6, 10)), Pushed::default());
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn a_follower_that_never_reads_is_counted_until_its_queue_goes() {
        let results = QueryResults::new(8, usize::MAX, ResultBudget::unbounded());
        let waiting = results.follow().unwrap();
        let reader = results.follow().unwrap();
        assert!(!reader.leave(), "a queue whose client has not come yet counts");
        drop(waiting);
        assert_eq!(results.followers(), 0);
        results.close();
        assert!(results.follow().is_none());
    }

    #[test]
    fn a_waiting_reader_wakes_for_each_emission() {
        let q = ResultQueue::new(8);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let writer = {
            let q = q.clone();
            std::thread::spawn(move || {
                for n in 0..3 {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    q.push(emission(n, n == 2));
                }
            })
        };
        let got: Vec<u64> = rt.block_on(async {
            let mut got = Vec::new();
            while let Some(e) = q.next().await {
                got.push(e.meta["n"].as_u64().unwrap());
            }
            got
        });
        writer.join().unwrap();
        assert_eq!(got, [0, 1, 2]);
    }

    /// One reader serving many queues: each queue's key comes up when it has something, once
    /// until it is read empty, and every emission and end is read, in order, from a writer on
    /// another thread.
    #[test]
    fn one_reader_serves_many_watched_queues() {
        let ready = ReadyQueues::new();
        let queues: Vec<Arc<ResultQueue>> = (0..50).map(|_| ResultQueue::new(100)).collect();
        // a queue holding an emission when it is first watched comes up at once
        queues[0].push(emission(0, false));
        for (i, q) in queues.iter().enumerate() {
            q.watch(&ready, Arc::from(i.to_string()));
        }
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut keys = Vec::new();
        rt.block_on(ready.wait(&mut keys));
        assert_eq!(keys, [Arc::from("0")]);
        // pushed again before being read: not put on the list twice
        queues[0].push(emission(1, false));
        assert!(ready.keys.lock().unwrap().is_empty());
        let writer = {
            let queues = queues.clone();
            std::thread::spawn(move || {
                for n in 2..10 {
                    for q in &queues {
                        q.push(emission(n, n == 9));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            })
        };
        let mut got: Vec<Vec<u64>> = vec![Vec::new(); queues.len()];
        let mut ended = 0;
        rt.block_on(async {
            while ended < queues.len() {
                for key in std::mem::take(&mut keys) {
                    let i: usize = key.parse().unwrap();
                    loop {
                        match queues[i].try_next_numbered() {
                            None => break,
                            Some(Some((seq, e))) => {
                                let n = e.meta["n"].as_u64().unwrap();
                                assert!(i == 0 || seq == n - 1, "{i}: {seq} {n}");
                                got[i].push(n);
                            }
                            Some(None) => {
                                ended += 1;
                                break;
                            }
                        }
                    }
                }
                if ended < queues.len() {
                    ready.wait(&mut keys).await;
                }
            }
        });
        writer.join().unwrap();
        assert_eq!(got[0], (0..10).collect::<Vec<_>>());
        for g in &got[1..] {
            assert_eq!(*g, (2..10).collect::<Vec<_>>());
        }
    }
}
