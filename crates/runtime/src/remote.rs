//! The seams of the distributed mode: what a runtime that is only part of needle talks to instead
//! of its missing half. The runtime itself knows nothing of Kafka; the `needle-kafka` crate
//! implements these traits over its topics.
//!
//! - A **worker** node ([`Role::Worker`]) reads its source and matches as usual, but has no
//!   joiner: its workers' partials (encoded with the engine's partial codec) and its records-read
//!   progress go to a [`PartialOutlet`]. It learns the queries to run from outside
//!   ([`crate::Runtime::adopt`] / [`crate::Runtime::release`]).
//! - An **api** node ([`Role::Api`]) has no source and no workers: it validates and admits
//!   queries, announces them to a [`QueryAnnouncer`] (and their end), and its joiner merges the
//!   encoded partials and progress handed to [`crate::Runtime::remote_partial`] and
//!   [`crate::Runtime::remote_progress`] exactly as it merges local ones.
//! - [`Role::All`] is the single process, with neither.
//!
//! Failover: an api node may adopt a running query whose api node died
//! ([`crate::Runtime::adopt_remote`]); its partials since it started are handed to it again,
//! with the times they were sent, then [`crate::Runtime::caught_up`] lets it run live. So that
//! a windowed query's windows come out the same, an api node records where it cut each
//! emission before delivering it ([`QueryAnnouncer::cut`]), and the adopting node is handed
//! those cuts with the partials ([`crate::Runtime::remote_cut`]) and cuts at them.
//!
//! A client may ask any api node for a query: one that another live api node holds answers
//! with where that node is ([`QueryAnnouncer::holder`], read by the HTTP API's redirects).
//!
//! Queries that look back: each worker node that keeps history reads its own store (the records
//! it read) and sends its pieces to the outlet ([`PartialOutlet::history`]); the api node waits
//! for every such worker ([`QueryAnnouncer::history_workers`]) and puts their pieces back in
//! time order ([`crate::history::Gather`]). For `SINCE`, each worker makes its own seam between
//! its past and its live records.

use crate::framing::Receipt;
use crate::history::WorkerHistory;
pub use crate::messages::Cut;
use crate::messages::JoinerMessage;
use crate::metrics::Metrics;
use crate::status::{QueryStatus, StatusTable};
use crossbeam_channel::Receiver;
use needle_query::plan::Plan;
use std::sync::Arc;

/// Where a worker node's partials and progress go (the results topic).
pub trait PartialOutlet: Send + Sync {
    /// A partial of query `id`, as bytes from `CompiledQuery::encode_partial`. May block
    /// (backpressure) but must not drop it.
    fn partial(&self, id: &str, bytes: Vec<u8>);
    /// `records` were read since the last call (every running query has seen them). The
    /// receipts are those of the batches read; drop them once this and everything handed on
    /// before it have gone out.
    fn progress(&self, records: u64, receipts: Vec<Receipt>);
    /// This node's read of its stored past for query `id` (a query that looks back): its
    /// plan, its pieces (encoded partials) in time order, its end. Must not drop any.
    fn history(&self, id: &str, event: WorkerHistory<Vec<u8>>);
}

/// A query an api node admitted, as its workers must learn it.
#[derive(Debug, Clone, Copy)]
pub struct Announcement<'a> {
    pub id: &'a str,
    /// The validated plan (its text is what the workers compile).
    pub plan: &'a Plan,
    pub received_ms: i64,
    pub ends_ms: i64,
    /// Whose query it is (a token's name or a client's address): an api node that adopts it
    /// lets the same client follow and kill it.
    pub client: &'a str,
    /// A query that looks back: the worker nodes whose reads of their stores it waits for (an
    /// api node that adopts it gathers the same reads).
    pub history_workers: &'a [String],
    /// The manifest version of the shared store on object storage it was planned from.
    pub history_version: Option<u64>,
}

/// Where an api node announces the queries it starts and ends (the query topic).
pub trait QueryAnnouncer: Send + Sync {
    /// The query was admitted; workers should start running it. An error refuses the query.
    fn started(&self, query: &Announcement<'_>) -> Result<(), String>;
    /// The query ended (its time, its LIMIT, a kill, a shutdown); workers may forget it.
    fn ended(&self, id: &str);
    /// The worker nodes that keep history, heard from lately: a query that looks back waits
    /// for each one's read of its store. An error (none is known) refuses such a query.
    fn history_workers(&self) -> Result<Vec<String>, String>;
    /// False once worker node `worker` has not been heard from for a while: a read of the past
    /// waiting for it goes on without it.
    fn worker_alive(&self, worker: &str) -> bool;
    /// True while query `id`, not running here, runs on an api node that stopped answering:
    /// this node or another is about to adopt it, so a client following it may wait for that.
    fn adopting(&self, _id: &str) -> bool {
        false
    }
    /// The other api node that holds query `id` (the last notice of the query names it, and it
    /// has been heard from within seconds), with the URL clients reach it at: a client asking
    /// this node for the query is sent there. `None` when this node holds it, when no notice
    /// names a holder URL, or when the holder is silent (see [`QueryAnnouncer::adopting`]).
    fn holder(&self, _id: &str) -> Option<Holder> {
        None
    }
    /// Emission `cut.emission` of windowed query `id` is about to go to its subscriber: record
    /// where it was cut, durably, then call `deliver` (which hands it to the subscriber). An api
    /// node adopting the query after this one died cuts its windows at the same places. The
    /// default delivers at once.
    fn cut(&self, _id: &str, _cut: Cut, deliver: Box<dyn FnOnce() + Send>) {
        deliver();
    }
    /// The last report of every other node heard from (each marked alive or not): the cluster
    /// view of `GET /api/v1/cluster` ([`crate::Runtime::cluster`]). The default knows of none.
    fn cluster(&self) -> Vec<crate::cluster::NodeReport> {
        Vec::new()
    }
}

/// An api node holding a query, as [`QueryAnnouncer::holder`] names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its name (`kafka.node_id`).
    pub node: String,
    /// The base URL clients reach it at (its `server.advertised_url`), without a trailing `/`.
    pub url: String,
}

/// What part of needle a runtime is.
#[derive(Clone)]
pub enum Role {
    /// Source, workers and joiner in this process (`needle serve`, the default).
    All,
    /// Source and workers; partials go to the outlet.
    Worker(Arc<dyn PartialOutlet>),
    /// Joiner and API; queries are announced, partials arrive from outside. `node` names this
    /// api node: it prefixes its query ids, so several api nodes never give two queries one id.
    Api { announcer: Arc<dyn QueryAnnouncer>, node: String },
}

impl Role {
    /// `all`, `worker` or `api`.
    pub fn name(&self) -> &'static str {
        match self {
            Role::All => "all",
            Role::Worker(_) => "worker",
            Role::Api { .. } => "api",
        }
    }
}

impl std::fmt::Debug for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A worker node's stand-in for the joiner: reads the workers' messages, encodes each partial
/// with its query and hands it to the outlet, keeps the node's own status counters (so
/// `GET /api/v1/queries` on a worker shows what it read and matched), and passes progress and
/// receipts on in order.
pub(crate) struct Shipper {
    pub messages: Receiver<JoinerMessage>,
    pub outlet: Arc<dyn PartialOutlet>,
    pub status: StatusTable,
    /// Records the node's workers read, in all: a live query's status counts those read since
    /// it started when it is read ([`QueryStatus::counted_through`]), not in every entry at
    /// every progress report (a million entries).
    pub records_total: Arc<std::sync::atomic::AtomicU64>,
    pub metrics: Arc<Metrics>,
}

impl Shipper {
    pub fn run(self) {
        for message in self.messages.iter() {
            match message {
                JoinerMessage::Partials { partials, in_flight: _held } => {
                    for (member, partial) in partials {
                        if let Some(s) = self.lock_status().get_mut(&member.id) {
                            s.records_matched += partial.matched;
                        }
                        let bytes = member.query.encode_partial(&partial);
                        self.metrics.partials_remote.inc();
                        self.outlet.partial(&member.id, bytes);
                    }
                }
                JoinerMessage::Progress { records, receipts } => {
                    self.records_total.fetch_add(records, std::sync::atomic::Ordering::Relaxed);
                    self.outlet.progress(records, receipts);
                }
                JoinerMessage::Shutdown => return,
                // A worker node admits no queries and has no joiner: these are never sent to it.
                JoinerMessage::Start { .. }
                | JoinerMessage::End { .. }
                | JoinerMessage::Encoded { .. }
                | JoinerMessage::SeenBefore { .. }
                | JoinerMessage::CaughtUp { .. }
                | JoinerMessage::Cut { .. }
                | JoinerMessage::Forget { .. }
                | JoinerMessage::History { .. }
                | JoinerMessage::HistoryDone { .. }
                | JoinerMessage::RemoteHistory { .. } => {}
            }
        }
    }

    fn lock_status(&self) -> std::sync::MutexGuard<'_, crate::id_table::IdTable<Box<QueryStatus>>> {
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }
}
