//! [`ResultQueue`]: the emissions of one query on their way to its subscriber (an HTTP response,
//! an SSE stream, a WebSocket, the CLI).
//!
//! The joiner must never wait for a subscriber, so the queue is bounded and pushing never
//! blocks: when a subscriber reads too slowly and the queue is full, the oldest emissions are
//! dropped, counted, and the next emission the subscriber does read carries
//! `"Dropped Emissions": n` in its metadata. The final emission is never dropped (it is always
//! the newest).
//!
//! The records RAW windows hold in the joiner before they are emitted count in the same
//! [`ResultBudget`] (a window that reaches the bound is emitted early; see
//! [`needle_engine::exec::join::WindowBytes`]), so the bytes of results anywhere in the process
//! stay under `runtime.max_result_bytes`.
//!
//! "Full" is counted three ways: emissions (`runtime.subscriber_buffer`), bytes of this query's
//! waiting emissions (`runtime.max_result_bytes_per_query`), and bytes waiting in every queue of
//! the process ([`ResultBudget`], `runtime.max_result_bytes`). Past a bound, the oldest
//! emissions of the queue being pushed to go first; an emission that still does not fit is
//! dropped too — unless its subscriber is waiting for it (it has read everything before:
//! handed over at once, it is not kept long), or it is the final one (which ends the query, and
//! is kept until read, or until the server forgets results nobody claimed). So a subscriber
//! that keeps up loses nothing however far behind the others are, and slow or absent ones
//! hold at most the bounds, plus their final emissions.
//!
//! Emissions are numbered from 1 in the order they were pushed, dropped ones included
//! ([`ResultQueue::next_numbered`]): the number is what a subscriber resumes after (an SSE
//! event's `id:`), and a gap in the numbers is what was dropped. A query adopted by another
//! api node after its own died numbers the emissions it makes again the same way.

use needle_engine::exec::join::WindowBytes;
use needle_engine::exec::Emission;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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

#[derive(Debug)]
pub struct ResultQueue {
    state: Mutex<QueueState>,
    notify: tokio::sync::Notify,
    capacity: usize,
    max_bytes: usize,
    budget: Arc<ResultBudget>,
    dropped_total: AtomicU64,
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
}

impl ResultQueue {
    /// A queue of at most `capacity` emissions, with no bound in bytes.
    pub fn new(capacity: usize) -> Arc<Self> {
        Self::bounded(capacity, usize::MAX, ResultBudget::unbounded())
    }

    /// A queue of at most `capacity` emissions and `max_bytes` bytes, its bytes counted in
    /// `budget` too (see the module doc).
    pub fn bounded(capacity: usize, max_bytes: usize, budget: Arc<ResultBudget>) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(QueueState::default()),
            notify: tokio::sync::Notify::new(),
            capacity: capacity.max(1),
            max_bytes,
            budget,
            dropped_total: AtomicU64::new(0),
        })
    }

    /// Adds an emission; never blocks. Returns how many older emissions were dropped to make
    /// room. A final emission closes the queue.
    pub fn push(&self, emission: Emission) -> u64 {
        let size = emission.approx_bytes();
        let mut dropped = 0;
        {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if state.closed {
                return 0;
            }
            state.pushed += 1;
            let number = state.pushed;
            while !state.items.is_empty()
                && (state.items.len() >= self.capacity
                    || state.bytes + size > self.max_bytes
                    || self.budget.used() + size > self.budget.limit)
            {
                if let Some((_, bytes, _)) = state.items.pop_front() {
                    state.bytes -= bytes;
                    self.budget.give_back(bytes);
                }
                state.dropped_unreported += 1;
                dropped += 1;
            }
            let fits = state.bytes + size <= self.max_bytes
                && self.budget.used() + size <= self.budget.limit;
            if fits || emission.is_final || state.waiting {
                state.closed = emission.is_final;
                state.items.push_back((emission, size, number));
                state.bytes += size;
                state.waiting = false;
                self.budget.take(size);
            } else {
                state.dropped_unreported += 1;
                dropped += 1;
            }
        }
        self.dropped_total.fetch_add(dropped, Ordering::Relaxed);
        self.notify.notify_one();
        dropped
    }

    /// Bytes of this query's emissions waiting to be read.
    pub fn bytes(&self) -> usize {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).bytes
    }

    /// Ends the stream without a final emission (the query was removed abnormally).
    pub fn close(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.notify.notify_one();
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
                self.budget.give_back(bytes);
                if state.dropped_unreported > 0 {
                    emission.meta.insert(DROPPED_EMISSIONS.into(), state.dropped_unreported.into());
                    state.dropped_unreported = 0;
                }
                Some(Some((number, emission)))
            }
            None if state.closed => Some(None),
            None => {
                state.waiting = true;
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
        self.budget.give_back(state.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
