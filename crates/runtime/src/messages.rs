//! What flows to the joiner, on one FIFO channel ([`JoinerMessage`]): the workers' partials and
//! progress (with their batches' receipts); the runtime's starts and ends of queries and what it
//! read of their stored past; on an api node, the encoded partials and reads of the past that
//! worker nodes sent. On a worker node the same channel goes to the shipper
//! ([`crate::remote`]) in the joiner's place.

use crate::framing::Receipt;
use crate::history::{Gather, Piece, ReplayReport, WorkerHistory};
use crate::results::QueryResults;
use needle_engine::exec::{Partial, QueryRun};
use needle_engine::matching::Member;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The most bytes of records RAW partials may hold on their way from the workers to the joiner:
/// the channel's bound in messages (4,096) would let RAW partials of large records hold
/// hundreds of megabytes (50 `SELECT *` queries over 1.8 KB records held 136 MB there).
pub(crate) const MAX_RECORDS_IN_FLIGHT: usize = 16 << 20;

/// The bytes of records in RAW partials between the workers and the joiner (see
/// [`MAX_RECORDS_IN_FLIGHT`]). A worker waits for room before sending one, as it waits for a
/// slot of the channel; the joiner gives the room back when it is done with the message.
#[derive(Debug, Default)]
pub(crate) struct RecordsInFlight(AtomicUsize);

impl RecordsInFlight {
    /// Waits until `bytes` more fit (or nothing else is in flight, or the joiner has taken every
    /// message: what is in flight is then being merged), and counts them until the returned
    /// guard drops.
    pub(crate) fn enter(self: &Arc<Self>, bytes: usize, queued: impl Fn() -> bool) -> InFlight {
        loop {
            let now = self.0.load(Ordering::Acquire);
            if now == 0 || now + bytes <= MAX_RECORDS_IN_FLIGHT || !queued() {
                break;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        self.0.fetch_add(bytes, Ordering::AcqRel);
        InFlight { gate: self.clone(), bytes }
    }

    /// Bytes in flight now.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

/// A RAW partial's place in [`RecordsInFlight`], given back when dropped.
#[derive(Debug)]
pub(crate) struct InFlight {
    gate: Arc<RecordsInFlight>,
    bytes: usize,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.gate.0.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// Why a query ended before its time, as its final emission's metadata says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    Killed,
    Shutdown,
}

/// A message to the joiner (or, on a worker node, to the shipper): see the module doc.
pub(crate) enum JoinerMessage {
    Start {
        run: Box<QueryRun>,
        results: Arc<QueryResults>,
        /// It reads live records (every query but `FROM HISTORY(...)`).
        live: bool,
        /// On an api node, a query that looks back: its worker nodes' reads, to gather.
        remote: Option<Box<RemotePast>>,
        /// On an api node, a query adopted from one that died: its partials since it started
        /// are merged again at the times they were sent, until [`JoinerMessage::CaughtUp`].
        catching_up: bool,
    },
    /// A worker's partials: the RAW partials of one batch, sent when the batch is read, or the
    /// partials of one flush (in the order they were made). One message per batch, not one per
    /// partial: 100,000 queries each matching a record a second made the channel's wake-ups a
    /// good part of the joiner's time.
    Partials {
        partials: Vec<(Arc<Member>, Partial)>,
        /// The RAW partials' records, counted in flight until the message is handled.
        in_flight: Option<InFlight>,
    },
    /// A partial from a worker node, as the engine's partial codec encoded it; `at_ms`: when it
    /// was sent, for a query catching up.
    Encoded {
        id: Arc<str>,
        bytes: Vec<u8>,
        /// Its offset on the query's results partition.
        offset: Option<i64>,
        at_ms: Option<i64>,
    },
    /// For a query catching up: records the worker nodes read after it started and before it
    /// was adopted (their progress, read back from its results partition at `offset`, sent at
    /// `at_ms`), counted as seen in order with its partials.
    SeenBefore {
        id: Arc<str>,
        records: u64,
        offset: Option<i64>,
        at_ms: Option<i64>,
    },
    /// For a query catching up: where its first api node cut an emission.
    Cut {
        id: Arc<str>,
        cut: Cut,
    },
    /// An adopted query has merged every partial sent before its adoption: it runs on the
    /// joiner's clock from now on.
    CaughtUp {
        id: Arc<str>,
    },
    /// On an api node: another api node merges the query now; it ends here without a final
    /// emission and without announcing its end.
    Forget {
        id: Arc<str>,
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
    /// A piece of a query's stored past, at the record time it belongs at (in time order).
    History {
        id: Arc<str>,
        piece: Box<Piece>,
    },
    /// A query's stored past has been read: a `HISTORY` query ends (its last bucket at
    /// `end_ms`, record time); a `SINCE` query goes on live.
    HistoryDone {
        id: Arc<str>,
        end_ms: i64,
        report: Box<ReplayReport>,
    },
    /// On an api node: what a worker node sent of its read of the past for a query.
    RemoteHistory {
        id: Arc<str>,
        worker: Arc<str>,
        event: Box<WorkerHistory<Vec<u8>>>,
    },
    /// Finish every query and exit.
    Shutdown,
}

/// An api node's read of the past for one query: its worker nodes' pieces, gathered in time
/// order, and the range asked for (the run's windows are placed in it once every worker has
/// planned its read).
pub(crate) struct RemotePast {
    pub gather: Gather<Partial>,
    pub from_ms: i64,
    pub to_ms: Option<i64>,
    /// Where the query ends in record time, once placed.
    pub end_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_in_flight_wait_for_room_and_give_it_back() {
        let gate = Arc::new(RecordsInFlight::default());
        let first = gate.enter(MAX_RECORDS_IN_FLIGHT - 10, || true);
        let waiting = {
            let gate = gate.clone();
            std::thread::spawn(move || drop(gate.enter(100, || true)))
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!waiting.is_finished(), "100 more bytes do not fit while messages are queued");
        assert_eq!(gate.bytes(), MAX_RECORDS_IN_FLIGHT - 10);
        drop(first);
        waiting.join().unwrap();
        assert_eq!(gate.bytes(), 0, "every guard gave its bytes back");
        // the joiner has taken every message: what is in flight is being merged, no wait
        let all = gate.enter(MAX_RECORDS_IN_FLIGHT, || true);
        let one = gate.enter(1, || false);
        assert_eq!(gate.bytes(), MAX_RECORDS_IN_FLIGHT + 1);
        drop((all, one));
        assert_eq!(gate.bytes(), 0);
    }
}

/// Where an api node cut one emission of a windowed query: after merging its partials up to
/// offset `through` of the query's results partition (-1: none), at `at_ms` on its clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// The emission's number (from 1, as its result queue numbers it).
    pub emission: u64,
    pub through: i64,
    pub at_ms: i64,
}
