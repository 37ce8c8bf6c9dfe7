//! What the API shows of queries (`GET /api/v1/queries`): each running query's
//! [`QueryStatus`] in the [`StatusTable`], kept up to date by the joiner (by the shipper on a
//! worker node), and the last figures of the queries that ended lately ([`Ended`]).

use crate::id_table::{HasId, IdTable};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What the API shows of a running query (`GET /api/v1/queries`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct QueryStatus {
    /// Shared with the runtime's tables (one allocation per query, not one per table).
    pub id: Arc<str>,
    /// Shared with the compiled query.
    pub query: Arc<str>,
    pub owner: Arc<str>,
    pub received_ms: i64,
    pub ends_ms: i64,
    pub records_seen: u64,
    pub records_matched: u64,
    pub emissions: u64,
    /// When it ended (ms since the epoch); `None` while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<i64>,
    /// Where its emissions go, for a client that comes to follow it while it runs (`None` on
    /// a worker node, and once it ended).
    #[serde(skip)]
    pub(crate) results: Option<Arc<crate::results::QueryResults>>,
    /// A running query reading live records: the joiner's count of records read when it
    /// started. It sees every record read since, which is added to `records_seen` when the
    /// status is read ([`QueryStatus::counted_through`]) rather than written into a million entries
    /// every refresh.
    #[serde(skip)]
    pub(crate) live_from: Option<u64>,
}

impl QueryStatus {
    /// The status with the live records read through `records_total` (the joiner's count)
    /// counted in `records_seen`.
    pub(crate) fn counted_through(mut self, records_total: u64) -> Self {
        if let Some(from) = self.live_from.take() {
            self.records_seen += records_total.saturating_sub(from);
        }
        self
    }

    /// A live query's status that counts the records read after `records_total` (the count of
    /// the records read so far) as seen, when it is read.
    pub(crate) fn reading_live_from(mut self, records_total: u64) -> Self {
        self.live_from = Some(records_total);
        self
    }

    /// A query that has not read anything yet.
    pub(crate) fn new(
        id: Arc<str>,
        query: Arc<str>,
        owner: Arc<str>,
        received_ms: i64,
        ends_ms: i64,
    ) -> Self {
        Self {
            id,
            query,
            owner,
            received_ms,
            ends_ms,
            records_seen: 0,
            records_matched: 0,
            emissions: 0,
            ended_ms: None,
            results: None,
            live_from: None,
        }
    }

    /// The same, followed through `results`.
    pub(crate) fn followed_through(self, results: Arc<crate::results::QueryResults>) -> Self {
        Self { results: Some(results), ..self }
    }
}

/// A map by query id, hashed with foldhash: the joiner looks up a status for every query it
/// credits on a refresh (all 100,000 of them, every 500 ms, when that many run), and SipHash
/// of the ids was most of that.
pub(crate) type ById<V> = HashMap<Arc<str>, V, foldhash::fast::RandomState>;

/// The running queries' statuses, by the id each holds. Each is boxed: a million queries make a table of two million
/// slots, a quarter of a gigabyte with the statuses inline.
pub(crate) type StatusTable = Arc<Mutex<IdTable<Box<QueryStatus>>>>;

impl HasId for QueryStatus {
    fn id(&self) -> &str {
        &self.id
    }
}

/// The last statuses of the queries that ended most recently, so a client asking about one
/// after its end gets its final figures rather than "no such query".
#[derive(Debug, Default)]
pub(crate) struct Ended {
    by_id: ById<QueryStatus>,
    order: std::collections::VecDeque<Arc<str>>,
}

/// How many ended queries' statuses are kept.
const ENDED_KEPT: usize = 10_000;

impl Ended {
    pub(crate) fn keep(&mut self, mut status: QueryStatus, ended_ms: i64) {
        status.ended_ms = Some(ended_ms);
        status.results = None;
        let id = status.id.clone();
        if self.by_id.insert(id.clone(), status).is_none() {
            self.order.push_back(id);
        }
        while self.order.len() > ENDED_KEPT {
            if let Some(old) = self.order.pop_front() {
                self.by_id.remove(&old);
            }
        }
    }

    pub fn get(&self, id: &str) -> Option<&QueryStatus> {
        self.by_id.get(id)
    }
}

pub(crate) type EndedTable = Arc<Mutex<Ended>>;
