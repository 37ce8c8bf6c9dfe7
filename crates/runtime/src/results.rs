//! [`ResultQueue`]: the emissions of one query on their way to its subscriber (an HTTP response,
//! an SSE stream, a WebSocket, the CLI).
//!
//! The joiner must never wait for a subscriber, so the queue is bounded and pushing never
//! blocks: when a subscriber reads too slowly and the queue is full, the oldest emission is
//! dropped, counted, and the next emission the subscriber does read carries
//! `"Dropped Emissions": n` in its metadata. The final emission is never dropped (it is always
//! the newest).

use needle_engine::exec::Emission;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The metadata key telling a subscriber how many emissions it missed.
pub const DROPPED_EMISSIONS: &str = "Dropped Emissions";

#[derive(Debug)]
pub struct ResultQueue {
    state: Mutex<QueueState>,
    notify: tokio::sync::Notify,
    capacity: usize,
    dropped_total: AtomicU64,
}

#[derive(Debug, Default)]
struct QueueState {
    items: VecDeque<Emission>,
    dropped_unreported: u64,
    closed: bool,
}

impl ResultQueue {
    pub fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(QueueState::default()),
            notify: tokio::sync::Notify::new(),
            capacity: capacity.max(1),
            dropped_total: AtomicU64::new(0),
        })
    }

    /// Adds an emission; never blocks. Returns how many older emissions were dropped to make
    /// room (0 or 1). A final emission closes the queue.
    pub fn push(&self, emission: Emission) -> u64 {
        let mut dropped = 0;
        {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if state.closed {
                return 0;
            }
            if state.items.len() >= self.capacity {
                state.items.pop_front();
                state.dropped_unreported += 1;
                dropped = 1;
            }
            state.closed = emission.is_final;
            state.items.push_back(emission);
        }
        self.dropped_total.fetch_add(dropped, Ordering::Relaxed);
        self.notify.notify_one();
        dropped
    }

    /// Ends the stream without a final emission (the query was removed abnormally).
    pub fn close(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.notify.notify_one();
    }

    /// The next emission, waiting for one; `None` once the query is over and all were read.
    /// Meant for one reader at a time.
    pub async fn next(&self) -> Option<Emission> {
        loop {
            let notified = self.notify.notified();
            if let Some(result) = self.try_next() {
                return result;
            }
            notified.await;
        }
    }

    /// `Some(Some(e))`: an emission; `Some(None)`: the stream is over; `None`: nothing yet.
    pub fn try_next(&self) -> Option<Option<Emission>> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match state.items.pop_front() {
            Some(mut emission) => {
                if state.dropped_unreported > 0 {
                    emission.meta.insert(DROPPED_EMISSIONS.into(), state.dropped_unreported.into());
                    state.dropped_unreported = 0;
                }
                Some(Some(emission))
            }
            None if state.closed => Some(None),
            None => None,
        }
    }

    /// Emissions dropped so far because the reader was slow.
    pub fn dropped(&self) -> u64 {
        self.dropped_total.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    fn emission(n: u64, is_final: bool) -> Emission {
        let mut meta = Map::new();
        meta.insert("n".into(), n.into());
        Emission { records: Vec::new(), meta, is_final }
    }

    #[test]
    fn a_slow_reader_loses_the_oldest_and_is_told_how_many() {
        let q = ResultQueue::new(2);
        for n in 0..5 {
            q.push(emission(n, false));
        }
        q.push(emission(5, true));
        assert_eq!(q.dropped(), 4);
        let first = q.try_next().unwrap().unwrap();
        assert_eq!(first.meta["n"], 4);
        assert_eq!(first.meta[DROPPED_EMISSIONS], 4);
        let last = q.try_next().unwrap().unwrap();
        assert!(last.is_final && !last.meta.contains_key(DROPPED_EMISSIONS));
        assert!(q.try_next().unwrap().is_none(), "over after the final emission");
        q.push(emission(6, false));
        assert!(q.try_next().unwrap().is_none(), "nothing is accepted after the end");
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
