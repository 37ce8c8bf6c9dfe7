//! What flows to the joiner, on one FIFO channel ([`JoinerMessage`]): the workers' partials and
//! progress (with their batches' receipts); the runtime's starts and ends of queries and what it
//! read of their stored past; on an api node, the encoded partials and reads of the past that
//! worker nodes sent. On a worker node the same channel goes to the shipper
//! ([`crate::remote`]) in the joiner's place.

use crate::framing::Receipt;
use crate::history::{Gather, Piece, ReplayReport, WorkerHistory};
use crate::results::ResultQueue;
use needle_engine::exec::{Partial, QueryRun};
use needle_engine::matching::Member;
use std::sync::Arc;

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
        results: Arc<ResultQueue>,
        /// It reads live records (every query but `FROM HISTORY(...)`).
        live: bool,
        /// On an api node, a query that looks back: its worker nodes' reads, to gather.
        remote: Option<Box<RemotePast>>,
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
