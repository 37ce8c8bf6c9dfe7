//! [`Runtime`]: needle in one process. It starts the source thread, one worker per core and the
//! joiner, and is what the API talks to: [`Runtime::submit`] a query (validated, compiled, checked
//! against the limits), [`Runtime::kill`] one, list them, and [`Runtime::shutdown`], which ends
//! every running query with a final emission.
//!
//! ```text
//! source thread ──Batch──▶ [bounded queue] ──▶ worker × N ──Partial──▶ [bounded] ──▶ joiner
//!                                                   ▲ snapshot (arc-swap)              │
//!                         submit / kill ──▶ QuerySet┘ and JoinerMessage ──────────────▶┘──▶ QueryResults
//! ```
//!
//! In the distributed mode a runtime is one half of that picture ([`Role`]): a worker node
//! (source, workers, and a shipper where the joiner was, sending partials to a
//! [`crate::remote::PartialOutlet`]; queries are [`Runtime::adopt`]ed from outside) or an api
//! node (no source or workers; queries are announced to a [`crate::remote::QueryAnnouncer`] and
//! partials arrive through [`Runtime::remote_partial`]). [`Runtime::start`] is the whole of it.

use crate::clock::now_ms;
use crate::config::NeedleConfig;
use crate::framing::Batch;
use crate::history::{
    Gather, HistoryStore, HistoryTap, Replay, ReplayReport, SharedRead, WorkerHistory,
};
use crate::joiner::Joiner;
use crate::messages::{EndReason, JoinerMessage, RemotePast};
use crate::metrics::Metrics;
use crate::registry::QuerySet;
use crate::remote::{Announcement, Cut, Role, Shipper};
use crate::results::{QueryResults, ResultBudget, ResultQueue};
use crate::schema::{SchemaReport, SchemaTracker};
use crate::source::{BatchSink, Source, SourceCounters, StopSignal};
use crate::status::{EndedTable, QueryStatus, StatusTable};
use crate::worker::Worker;
use crate::RuntimeError;
use crossbeam_channel::Sender;
use needle_engine::exec::{CompiledQuery, QueryRun};
use needle_engine::CompiledExpr;
use needle_query::{Plan, QueryError};
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

/// Why a query was not started.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The query itself is wrong (syntax, rules, or past a query limit such as the duration).
    #[error("{error}")]
    Invalid { error: QueryError, text: String },
    /// Valid, but the engine cannot run it.
    #[error("the engine cannot run this query: {0}")]
    Engine(String),
    /// Too many queries running: on the server, or for this client.
    #[error("{0}")]
    TooMany(String),
    /// The runtime is shutting down.
    #[error("the server is shutting down")]
    ShuttingDown,
    /// This node does not take queries (a worker node of the distributed mode).
    #[error("{0}")]
    WrongRole(String),
    /// The query could not be handed to the rest of the system (an api node could not announce
    /// it to the workers).
    #[error("{0}")]
    Unavailable(String),
}

/// A started query: its id, and where its results arrive.
#[derive(Debug, Clone)]
pub struct QueryHandle {
    pub id: String,
    /// The first follower's queue: every emission, from the first (other clients may follow
    /// the query too: [`Runtime::follow`]).
    pub results: Arc<ResultQueue>,
    /// True when the query has a window (it emits more than once).
    pub windowed: bool,
    /// When it ends by its duration (ms since the epoch).
    pub ends_ms: i64,
}

use crate::cluster::{ClusterEvent, ClusterView, HistoryReport, NodeReport};

pub struct Runtime {
    config: NeedleConfig,
    metrics: Arc<Metrics>,
    queries: Arc<QuerySet>,
    status: StatusTable,
    /// The last statuses of the queries that ended lately.
    ended: EndedTable,
    /// The joiner's count of records read ([`QueryStatus::counted_through`]).
    records_total: Arc<std::sync::atomic::AtomicU64>,
    joiner_tx: Sender<JoinerMessage>,
    stop: StopSignal,
    source_counters: Arc<SourceCounters>,
    source_description: OnceLock<String>,
    /// This node's name in the cluster view ([`Runtime::name_as`]).
    node_name: OnceLock<String>,
    /// When the runtime started (ms since the epoch).
    up_since_ms: i64,
    /// The workers' queue, until a source takes it ([`Runtime::run_source`]).
    batches: Mutex<Option<Sender<Batch>>>,
    role: Role,
    next_id: AtomicU64,
    id_prefix: String,
    threads: Mutex<Vec<JoinHandle<()>>>,
    joiner: Mutex<Option<JoinHandle<()>>>,
    /// Serializes submissions so the limits hold exactly.
    admission: Mutex<()>,
    /// The owner of the last query admitted: a client's burst of queries shares one copy of
    /// its name (written with `admission` held).
    last_owner: Mutex<Option<Arc<str>>>,
    schema: Arc<SchemaTracker>,
    /// History, when on: the store, the tap feeding it, and the store's background thread.
    history: Option<History>,
    /// On an api node whose workers share a store on object storage: what reads its manifest
    /// version, to plan history queries from.
    planner: Option<needle_history::manifest::Planner>,
    /// Replays of the stored past under way, by query id: raised to stop one (a kill).
    replays: Arc<Mutex<HashMap<Arc<str>, Arc<AtomicBool>>>>,
    /// The bytes of results waiting for subscribers, over every query.
    result_budget: Arc<ResultBudget>,
    /// The bounds of every query's followers' queues (in `result_budget`).
    result_limits: Arc<crate::results::QueueLimits>,
    /// On an api node: the results of the queries it adopted, until a client claims them, with
    /// each query's end.
    adopted: Mutex<HashMap<Arc<str>, Unclaimed>>,
}

/// An adopted query's results, until a client claims them, and when the query ends.
type Unclaimed = (Arc<ResultQueue>, i64);

/// How long after its end an adopted query's results wait for a client (as a started query's
/// do on the server).
const UNCLAIMED_ADOPTED_MS: i64 = 600_000;

/// Where a worker node's partial was read on an api node ([`Runtime::remote_partial`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Sent {
    /// Its offset on its query's results partition (a windowed query's cuts say which partials
    /// each emission holds).
    pub offset: Option<i64>,
    /// For an adopted query catching up: when it was sent.
    pub at_ms: Option<i64>,
}

/// A query an api node takes over ([`Runtime::adopt_remote`]).
pub struct Adoption<'a> {
    pub id: &'a str,
    /// Compiled from the text and configuration its first api node announced.
    pub query: CompiledQuery,
    /// Whose query it is (a token's name or a client's address).
    pub client: &'a str,
    /// When its first api node received it.
    pub received_ms: i64,
    /// A query that looks back: its past as its first api node resolved it.
    pub past: Option<AdoptedPast>,
}

/// The past an adopted query reads.
#[derive(Debug, Clone)]
pub struct AdoptedPast {
    /// The range, as its first api node resolved it (relative times on that node's clock).
    pub range: needle_query::plan::HistoryPlan,
    /// The worker nodes whose reads of their stores make up the past (those its first api node
    /// waited for). Their reads are on the results topic: the adopter gathers them again as it
    /// catches up.
    pub workers: Vec<String>,
}

/// History in a running runtime.
struct History {
    tap: Arc<HistoryTap>,
    background: Mutex<Option<needle_history::Background>>,
}

impl Runtime {
    /// Starts reading `source` with the configured number of workers: the whole of needle in
    /// this process ([`Role::All`]).
    pub fn start(
        config: NeedleConfig,
        source: Box<dyn Source>,
        metrics: Arc<Metrics>,
    ) -> Result<Arc<Self>, RuntimeError> {
        let runtime = Self::start_role(config, Role::All, metrics)?;
        runtime.run_source(source)?;
        Ok(runtime)
    }

    /// Starts the threads of `role` without a source: the workers (all, worker) wait for
    /// [`Runtime::run_source`]; the joiner (all, api) or the shipper (worker) runs at once.
    pub fn start_role(
        config: NeedleConfig,
        role: Role,
        metrics: Arc<Metrics>,
    ) -> Result<Arc<Self>, RuntimeError> {
        let tick = Duration::from_millis(config.runtime.tick_ms);
        let workers = match role {
            Role::Api { .. } => 0,
            _ => config.worker_threads(),
        };
        let (batch_tx, batch_rx) = crossbeam_channel::bounded(config.runtime.queue_batches);
        let (joiner_tx, joiner_rx) = crossbeam_channel::bounded(4096);
        let queries = Arc::new(QuerySet::with_validation(config.runtime.validate));
        let schema = Arc::new(SchemaTracker::new());
        let status: StatusTable = Arc::default();
        let ended: EndedTable = Arc::default();
        let records_total: Arc<std::sync::atomic::AtomicU64> = Arc::default();
        let stop = StopSignal::new();
        let source_counters = Arc::new(SourceCounters {
            malformed: metrics.records_malformed.clone(),
            protocol_malformed: metrics.protocol_lines_malformed.clone(),
            ..SourceCounters::default()
        });

        let mut threads = Vec::new();
        let records_in_flight = Arc::new(crate::messages::RecordsInFlight::default());
        for index in 0..workers {
            let worker = Worker {
                index,
                queries: queries.clone(),
                batches: batch_rx.clone(),
                joiner: crate::worker::ToJoiner {
                    tx: joiner_tx.clone(),
                    records: records_in_flight.clone(),
                },
                metrics: metrics.clone(),
                schema: schema.clone(),
                tick,
                lines: 0,
                unreported: 0,
                receipts: Vec::new(),
                outbox: Default::default(),
                columns: Default::default(),
                row: Default::default(),
                line_columns: crate::columns::ColumnsBuilder::new(1024),
            };
            threads.push(spawn(format!("needle-worker-{index}"), move || worker.run())?);
        }
        drop(batch_rx);
        let joiner = match &role {
            Role::Worker(outlet) => {
                let shipper = Shipper {
                    messages: joiner_rx,
                    outlet: outlet.clone(),
                    status: status.clone(),
                    records_total: records_total.clone(),
                    metrics: metrics.clone(),
                };
                spawn("needle-shipper".into(), move || shipper.run())?
            }
            Role::All | Role::Api { .. } => {
                let announcer = match &role {
                    Role::Api { announcer, .. } => Some(announcer.clone()),
                    _ => None,
                };
                let joiner = Joiner {
                    messages: joiner_rx,
                    queries: queries.clone(),
                    status: status.clone(),
                    ended: ended.clone(),
                    records_total: records_total.clone(),
                    unpublished: Default::default(),
                    metrics: metrics.clone(),
                    tick,
                    raw_records_per_sec: config.runtime.raw_records_per_sec,
                    announcer,
                };
                spawn("needle-joiner".into(), move || joiner.run())?
            }
        };
        let history = match (&role, config.history.is_on()) {
            (Role::All | Role::Worker(_), true) => Some(open_history(&config, &metrics)?),
            _ => None,
        };
        let planner = match (&role, config.history.store_config().remote) {
            (Role::Api { .. }, Some(remote)) => {
                match needle_history::manifest::Planner::open(&remote) {
                    Ok(planner) => Some(planner),
                    Err(e) => {
                        eprintln!(
                            "needle: history.dir {}: {e}; history queries are read by writers, \
                             each worker its own parts",
                            config.history.dir
                        );
                        None
                    }
                }
            }
            _ => None,
        };
        let started = format!("{:x}", now_ms() & 0xffff_ffff);
        let id_prefix = match &role {
            Role::Api { node, .. } => format!("{node}-{started}"),
            _ => started,
        };
        let result_budget =
            ResultBudget::new(config.runtime.max_result_bytes, metrics.result_bytes.clone());
        let result_limits = crate::results::QueueLimits::new(
            config.runtime.subscriber_buffer,
            config.runtime.max_result_bytes_per_query,
            result_budget.clone(),
        );
        Ok(Arc::new(Self {
            result_limits,
            config,
            metrics,
            queries,
            status,
            ended,
            records_total,
            joiner_tx,
            stop,
            source_counters,
            source_description: OnceLock::new(),
            node_name: OnceLock::new(),
            up_since_ms: now_ms(),
            batches: Mutex::new((workers > 0).then_some(batch_tx)),
            role,
            next_id: AtomicU64::new(1),
            id_prefix,
            threads: Mutex::new(threads),
            joiner: Mutex::new(Some(joiner)),
            admission: Mutex::new(()),
            last_owner: Mutex::new(None),
            schema,
            history,
            planner,
            replays: Arc::default(),
            result_budget,
            adopted: Mutex::default(),
        }))
    }

    /// Starts the source thread, feeding the workers. One source per runtime; none on an api
    /// node.
    pub fn run_source(&self, source: Box<dyn Source>) -> Result<(), RuntimeError> {
        let description = source.describe();
        let sink = self.push_sink(&description)?;
        self.run_source_with(source, sink)
    }

    /// Starts the source thread on `sink`, a clone of the one [`Runtime::push_sink`] gave: the
    /// source and whoever holds the other clones (`needle serve --ingest`'s HTTP writes) feed the
    /// same workers, which end once every clone is dropped.
    pub fn run_source_with(
        &self,
        source: Box<dyn Source>,
        sink: BatchSink,
    ) -> Result<(), RuntimeError> {
        let description = source.describe();
        let thread = spawn("needle-source".into(), move || {
            if let Err(error) = source.run(sink) {
                eprintln!("needle: source {description} stopped: {error}");
            }
        })?;
        self.threads.lock().unwrap_or_else(|e| e.into_inner()).push(thread);
        Ok(())
    }

    /// The workers' queue for a program that pushes records itself (needle embedded as a
    /// library) instead of a source: `description` says what feeds it. Like a source it is taken
    /// once; the workers end when every clone of the sink is dropped (or at shutdown, which
    /// the holder must let go of it for).
    pub fn push_sink(&self, description: &str) -> Result<BatchSink, RuntimeError> {
        let Some(batch_tx) = self.batches.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return Err(RuntimeError::bad_source(
                description,
                format!("a runtime of role {} takes no (further) source", self.role.name()),
            ));
        };
        let _ = self.source_description.set(description.to_string());
        let sink = BatchSink::new(batch_tx, self.stop.clone(), self.source_counters.clone());
        Ok(match &self.history {
            Some(history) => sink.with_history(history.tap.clone()),
            None => sink,
        })
    }

    /// What this node reads, for a node with no source of its own (an api node says where its
    /// partials come from). Ignored once set.
    pub fn describe_as(&self, description: impl Into<String>) {
        let _ = self.source_description.set(description.into());
    }

    /// This node's name in the cluster view (a node of the distributed mode: its
    /// `kafka.node_id`, or the name made up for it). Ignored once set; `local` until then.
    pub fn name_as(&self, name: impl Into<String>) {
        let _ = self.node_name.set(name.into());
    }

    /// This node as it describes itself to the others (see [`crate::cluster`]).
    pub fn cluster_report(&self) -> NodeReport {
        let now = now_ms();
        let name = self.node_name.get().map_or("local", String::as_str).to_owned();
        let local = &self.metrics.cluster;
        let events = local.events().into_iter().map(|e| ClusterEvent { node: name.clone(), ..e });
        let history = self.history_store().map(|store| {
            let (parts, bytes, records) = store.totals();
            HistoryReport { parts, bytes, records }
        });
        NodeReport {
            role: self.role.name().to_owned(),
            url: self.config.server.advertised_url.clone(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            up_since_ms: self.up_since_ms,
            last_heard_ms: now,
            alive: true,
            queries: u64::try_from(self.metrics.queries_active.get()).unwrap_or(0),
            records_read: self.metrics.records_read.get(),
            partitions: local.partitions(),
            history,
            events: events.collect(),
            name,
        }
    }

    /// The cluster as this node knows it: itself, and on an api node every node heard from on
    /// the results topic (see [`crate::cluster`]).
    pub fn cluster(&self) -> ClusterView {
        let others = match &self.role {
            Role::Api { announcer, .. } => announcer.cluster(),
            _ => Vec::new(),
        };
        ClusterView::assemble(self.cluster_report(), others)
    }

    /// What part of needle this runtime is.
    pub fn role(&self) -> &Role {
        &self.role
    }

    pub fn config(&self) -> &NeedleConfig {
        &self.config
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// What the source reads, e.g. `file /data/x.ndjson`.
    pub fn source_description(&self) -> &str {
        self.source_description.get().map_or("no source", String::as_str)
    }

    /// The fields seen in a sample of the stream.
    pub fn schema(&self) -> SchemaReport {
        self.schema.report()
    }

    /// Bytes and batches the source has handed to the workers.
    pub fn source_counters(&self) -> &SourceCounters {
        &self.source_counters
    }

    /// Validates, compiles and starts a query for `owner` (a token or client address, for the
    /// per-client limit). Blocks briefly when the joiner is behind.
    pub fn submit(&self, text: &str, owner: &str) -> Result<QueryHandle, SubmitError> {
        self.submit_many(&[text], owner).pop().unwrap_or(Err(SubmitError::ShuttingDown))
    }

    /// [`Runtime::submit`] for several queries at once, each answered in order: the ones
    /// accepted join the workers' snapshot in one change (a client starting thousands of
    /// queries together costs one update of the match set per call, not one per query).
    ///
    /// A burst ([`ADMITTED_APART`] queries or more) is compiled and indexed on a thread of its
    /// own at a lower priority (nice +[`ADMISSION_NICENESS`]) while the caller waits: a client
    /// starting 40,000 queries a second keeps a core busy compiling them and rebuilding the
    /// index, and the workers, the joiner and the result path, at their normal priority, go
    /// first meanwhile — the running queries' results are not held up by the new ones.
    pub fn submit_many(
        &self,
        texts: &[&str],
        owner: &str,
    ) -> Vec<Result<QueryHandle, SubmitError>> {
        if texts.len() < ADMITTED_APART {
            return self.submit_many_here(texts, owner);
        }
        std::thread::scope(|scope| {
            let admitting = std::thread::Builder::new()
                .name("needle-admission".into())
                .spawn_scoped(scope, || {
                    lower_this_thread_s_priority(ADMISSION_NICENESS);
                    self.submit_many_here(texts, owner)
                });
            match admitting {
                Ok(admitting) => {
                    admitting.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                }
                // no thread to be had: admitted here, at the caller's priority
                Err(_) => self.submit_many_here(texts, owner),
            }
        })
    }

    fn submit_many_here(
        &self,
        texts: &[&str],
        owner: &str,
    ) -> Vec<Result<QueryHandle, SubmitError>> {
        let compiled: Vec<Result<(Plan, CompiledQuery), SubmitError>> =
            texts.iter().map(|text| self.compile(text)).collect();
        let _admission = self.admission.lock().unwrap_or_else(|e| e.into_inner());
        let mut added = Vec::new();
        let answers = compiled
            .into_iter()
            .map(|compiled| {
                let (plan, compiled) = compiled?;
                if plan.history.is_some() {
                    return match self.role {
                        Role::Api { .. } => self.start_remote_history(&plan, compiled, owner),
                        _ => self.start_history(&plan, compiled, owner),
                    };
                }
                let (handle, id, query) = self.admit(&plan, compiled, owner, None)?;
                added.push((id, query));
                Ok(handle)
            })
            .collect();
        let count = added.len() as u64;
        // an api node's workers learn the queries from its announcements; it matches nothing
        if !matches!(self.role, Role::Api { .. }) {
            self.queries.add_many(added);
        }
        self.metrics.queries_started.inc_by(count);
        self.metrics.queries_active.inc_by(count as i64);
        answers
    }

    /// The query's plan (an api node announces it) and its compiled form.
    fn compile(&self, text: &str) -> Result<(Plan, CompiledQuery), SubmitError> {
        if self.stop.is_stopped() {
            return Err(SubmitError::ShuttingDown);
        }
        if let Role::Worker(_) = self.role {
            return Err(SubmitError::WrongRole(
                "this is a worker node: it runs the queries its api nodes publish; send queries \
                 to an api node (needle serve --role api)"
                    .into(),
            ));
        }
        let plan = needle_query::compile(text, &self.config.query).map_err(|error| {
            self.metrics.queries_rejected.inc();
            SubmitError::Invalid { error, text: text.to_owned() }
        })?;
        // (an api node keeps none: its worker nodes do, and it asks them)
        let asks_workers = matches!(self.role, Role::Api { .. });
        if let (Some(past), None, false) = (&plan.history, &self.history, asks_workers) {
            self.metrics.queries_rejected.inc();
            let error = QueryError::semantic(
                "this query reads history, and this server keeps none",
                Some(past.span),
            )
            .with_hint(
                "start needle serve with --history DIR (or set history.dir), or read only live \
                 records: FROM STREAM(...) without SINCE",
            );
            return Err(SubmitError::Invalid { error, text: text.to_owned() });
        }
        let compiled = CompiledQuery::compile(&plan).map_err(|e| {
            self.metrics.queries_rejected.inc();
            SubmitError::Engine(e.to_string())
        })?;
        Ok((plan, compiled))
    }

    /// Checks the limits and starts a compiled query at the joiner (with the admission lock
    /// held), and on an api node announces it to the workers; the caller adds it to the
    /// registry.
    fn admit(
        &self,
        plan: &Plan,
        compiled: CompiledQuery,
        owner: &str,
        past: Option<&PastRead>,
    ) -> Result<(QueryHandle, Arc<str>, Arc<CompiledQuery>), SubmitError> {
        {
            let status = self.status.lock().unwrap_or_else(|e| e.into_inner());
            let max = self.config.runtime.max_queries;
            if status.len() >= max {
                self.metrics.queries_rejected.inc();
                return Err(SubmitError::TooMany(format!(
                    "{max} queries are running, the most this server allows (runtime.max_queries); \
                     wait for one to end or kill one"
                )));
            }
            let server = &self.config.server;
            // a token of this owner with its own cap, or the cap of every client
            let own_cap =
                server.tokens.iter().find_map(|t| t.max_queries().filter(|_| t.owner() == owner));
            let per_client = own_cap.unwrap_or(server.max_queries_per_client);
            // (counted only when it could matter: the count is linear in the running queries)
            if status.len() >= per_client
                && status.values().filter(|s| &*s.owner == owner).count() >= per_client
            {
                self.metrics.queries_rejected.inc();
                let setting = match own_cap {
                    Some(_) => "its token's max_queries in server.tokens",
                    None => "server.max_queries_per_client",
                };
                return Err(SubmitError::TooMany(format!(
                    "you are running {per_client} queries, the most this client may ({setting}); \
                     wait for one to end or kill one"
                )));
            }
        }
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let id: Arc<str> = format!("{}-{n}", self.id_prefix).into();
        let received_ms = now_ms();
        let windowed = compiled.is_windowed();
        let compiled = Arc::new(compiled);
        let (mut run, ends_ms) = match past {
            Some(past) => {
                let run = QueryRun::on_record_time(
                    compiled.clone(),
                    id.clone(),
                    received_ms,
                    past.window_start_ms,
                    past.end_ms,
                );
                let duration = i64::try_from(compiled.duration_ms()).unwrap_or(i64::MAX);
                // a HISTORY query ends when read; a SINCE query's live part by its duration
                let ends =
                    if past.live { received_ms.saturating_add(duration) } else { received_ms };
                (run, ends)
            }
            None => {
                let run = QueryRun::new(compiled.clone(), id.clone(), received_ms);
                let ends = run.end_ms();
                (run, ends)
            }
        };
        if compiled.is_raw() {
            // the records a RAW window holds count against the results' bounds too
            run.bound_raw_bytes(
                self.config.runtime.max_result_bytes_per_query,
                self.result_budget.clone(),
            );
        }
        let live = past.is_none_or(|p| p.live);
        let remote = past.and_then(|p| {
            let workers = p.workers.clone()?;
            let (from_ms, to_ms) = (p.from_ms, p.to_ms);
            Some(Box::new(RemotePast { gather: Gather::new(workers), from_ms, to_ms, end_ms: 0 }))
        });
        let results = self.new_results();
        let first = results.follow().expect("a new query's results take followers");
        let owner = {
            let mut last = self.last_owner.lock().unwrap_or_else(|e| e.into_inner());
            match &*last {
                Some(name) if **name == *owner => name.clone(),
                _ => last.insert(Arc::from(owner)).clone(),
            }
        };
        let status = QueryStatus::new(
            id.clone(),
            compiled.shared_text(),
            owner.clone(),
            received_ms,
            ends_ms,
        )
        .followed_through(results.clone());
        self.status.lock().unwrap_or_else(|e| e.into_inner()).insert(Box::new(status));
        // The joiner learns of the query before any worker can produce a partial for it.
        if self
            .joiner_tx
            .send(JoinerMessage::Start {
                run: Box::new(run),
                results,
                live,
                remote,
                catching_up: false,
            })
            .is_err()
        {
            self.status.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            return Err(SubmitError::ShuttingDown);
        }
        if let Role::Api { announcer, .. } = &self.role {
            // a HISTORY query ends when its past is read, which the workers cannot know: they
            // keep it until its end is announced (or for the longest a query may run)
            let ends_ms = if live {
                ends_ms
            } else {
                received_ms.saturating_add(self.config.query.max_duration_ms as i64)
            };
            let history_workers = past.and_then(|p| p.workers.as_deref()).unwrap_or_default();
            let announcement = Announcement {
                id: &id,
                plan,
                received_ms,
                ends_ms,
                client: &owner,
                history_workers,
                history_version: past.and_then(|p| p.version),
            };
            if let Err(reason) = announcer.started(&announcement) {
                self.abandon(&id);
                return Err(SubmitError::Unavailable(format!(
                    "the query could not be sent to the workers: {reason}"
                )));
            }
        }
        let handle = QueryHandle { id: id.to_string(), results: first, windowed, ends_ms };
        Ok((handle, id, compiled))
    }

    /// Starts a query that reads the stored past (`FROM HISTORY(...)`, or `SINCE` then live):
    /// plans the read (the store's pruning), admits the query with a run on record time, makes
    /// the seam with the live records for `SINCE`, and reads the past on a thread of its own,
    /// handing the joiner its pieces in time order.
    fn start_history(
        &self,
        plan: &Plan,
        compiled: CompiledQuery,
        owner: &str,
    ) -> Result<QueryHandle, SubmitError> {
        let (Some(history), Some(past)) = (&self.history, &plan.history) else {
            return Err(SubmitError::Engine("history is off".into()));
        };
        let store = history.tap.store();
        let plan_read = |compiled: &CompiledQuery| match Replay::of_plan(store, plan, compiled) {
            Some(Ok(replay)) => Ok(replay),
            Some(Err(e)) => {
                Err(SubmitError::Unavailable(format!("history could not be read: {e}")))
            }
            None => Err(SubmitError::Engine("the query reads no history".into())),
        };
        let mut replay = plan_read(&compiled)?;
        let read = PastRead {
            window_start_ms: replay.window_start_ms,
            end_ms: replay.end_ms,
            live: past.live,
            from_ms: past.from_ms,
            to_ms: past.to_ms,
            workers: None,
            version: None,
        };
        let (handle, id, query) = self.admit(plan, compiled, owner, Some(&read))?;
        if past.live {
            let queries = self.queries.clone();
            let live = vec![(id.clone(), query.clone())];
            // the past is what the store holds at the seam: planned before it, a batch
            // appended meanwhile would be in neither part (the first plan placed the windows)
            replay = match history.tap.seam(move || queries.add_many(live), || plan_read(&query)) {
                Ok(replay) => replay,
                Err(error) => {
                    self.kill(&handle.id);
                    return Err(error);
                }
            };
        }
        self.metrics.queries_started.inc();
        self.metrics.queries_active.inc();
        let cancel = Arc::new(AtomicBool::new(false));
        self.replays.lock().unwrap_or_else(|e| e.into_inner()).insert(id.clone(), cancel.clone());
        let joiner = self.joiner_tx.clone();
        let replays = self.replays.clone();
        let threads = self.config.worker_threads();
        let received_ms = now_ms();
        let end_ms = replay.end_ms;
        let spawned = spawn(format!("needle-replay-{id}"), move || {
            let report = replay.run(&query, threads, received_ms, &cancel, |piece| {
                let piece = Box::new(piece);
                let _ = joiner.send(JoinerMessage::History { id: id.clone(), piece });
            });
            let report = Box::new(report);
            let _ = joiner.send(JoinerMessage::HistoryDone { id: id.clone(), end_ms, report });
            replays.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        });
        if let Err(error) = spawned {
            self.kill(&handle.id);
            return Err(SubmitError::Unavailable(error.to_string()));
        }
        Ok(handle)
    }

    /// On an api node: starts a query that looks back. Its worker nodes read their stores
    /// (and, for `SINCE`, make their own seams); the joiner gathers their pieces in time order
    /// ([`Gather`]) and places the run's windows once every worker has said where its records
    /// lie.
    fn start_remote_history(
        &self,
        plan: &Plan,
        compiled: CompiledQuery,
        owner: &str,
    ) -> Result<QueryHandle, SubmitError> {
        let (Role::Api { announcer, .. }, Some(past)) = (&self.role, &plan.history) else {
            return Err(SubmitError::Engine("not an api node".into()));
        };
        let workers = announcer.history_workers().map_err(|reason| {
            self.metrics.queries_rejected.inc();
            SubmitError::Unavailable(format!("this query reads history: {reason}"))
        })?;
        let read = PastRead {
            // placed when the workers have planned their reads
            window_start_ms: past.from_ms,
            end_ms: i64::MAX,
            live: past.live,
            from_ms: past.from_ms,
            to_ms: past.to_ms,
            workers: Some(workers),
            version: self.plan_version(),
        };
        let (handle, _, _) = self.admit(plan, compiled, owner, Some(&read))?;
        self.metrics.queries_started.inc();
        self.metrics.queries_active.inc();
        Ok(handle)
    }

    /// On an api node whose workers share a store on object storage: the newest manifest
    /// version, for the workers to read a history query by (`None`: none, or unreadable now,
    /// and they read by writers).
    fn plan_version(&self) -> Option<u64> {
        match self.planner.as_ref()?.latest_version() {
            Ok(0) => None,
            Ok(version) => Some(version),
            Err(e) => {
                eprintln!("needle: history: reading the manifest to plan a query: {e}");
                None
            }
        }
    }

    /// On a worker node: runs a query an api node announced that looks back. With history kept
    /// here, this node reads its store and sends what it read to the outlet (its plan, its
    /// pieces in time order, its end); for `SINCE` it first makes the seam that starts the live
    /// part right after the last stored record. Without history, a `SINCE` query runs live only
    /// and a `HISTORY` query is not this node's to answer. `shared`: the worker nodes the api
    /// node asked and the manifest version it planned from; on a store on object storage that
    /// the workers share, this node reads its share of it (see
    /// [`needle_history::Store::scan_shared`]).
    pub fn adopt_history(
        &self,
        id: &str,
        plan: &Plan,
        query: Arc<CompiledQuery>,
        owner: &str,
        (received_ms, ends_ms): (i64, i64),
        shared: &SharedRead<'_>,
    ) {
        let (Role::Worker(outlet), Some(past)) = (&self.role, &plan.history) else { return };
        let Some(history) = &self.history else {
            if past.live {
                self.adopt(id, query, owner, received_ms, ends_ms);
            }
            return;
        };
        let id: Arc<str> = id.into();
        let store = history.tap.store();
        let mut at_seam = None;
        {
            let _admission = self.admission.lock().unwrap_or_else(|e| e.into_inner());
            self.queries.remove(&id);
            let mut status = QueryStatus::new(
                id.clone(),
                query.shared_text(),
                owner.into(),
                received_ms,
                ends_ms,
            );
            if past.live {
                status = status.reading_live_from(self.records_total.load(Ordering::Relaxed));
            }
            let mut table = self.status.lock().unwrap_or_else(|e| e.into_inner());
            let replaced = table.insert(Box::new(status)).is_some();
            drop(table);
            if !replaced {
                self.metrics.queries_started.inc();
                self.metrics.queries_active.inc();
            }
            if past.live {
                let queries = self.queries.clone();
                let live = vec![(id.clone(), query.clone())];
                // the past is what the store holds at the seam
                at_seam = Some(history.tap.seam(
                    move || queries.add_many(live),
                    || Replay::of_plan_shared(store, plan, &query, shared).transpose(),
                ));
            }
        }
        // (the plan has a range: this is only called for plans that read history)
        let planned = at_seam
            .unwrap_or_else(|| Replay::of_plan_shared(store, plan, &query, shared).transpose());
        let replay = match planned {
            Ok(replay) => replay,
            Err(error) => {
                eprintln!("needle: query {id}: history could not be read: {error}");
                None
            }
        };
        outlet.history(&id, WorkerHistory::Planned { data: replay.as_ref().and_then(|r| r.data) });
        let Some(replay) = replay else {
            let report = ReplayReport { blocks_failed: 1, ..ReplayReport::default() };
            outlet.history(&id, WorkerHistory::Done { report });
            return;
        };
        let cancel = Arc::new(AtomicBool::new(false));
        self.replays.lock().unwrap_or_else(|e| e.into_inner()).insert(id.clone(), cancel.clone());
        let replays = self.replays.clone();
        let outlet = outlet.clone();
        let threads = self.config.worker_threads();
        let spawned = spawn(format!("needle-replay-{id}"), move || {
            let report = replay.run(&query, threads, received_ms, &cancel, |piece| {
                let partial = query.encode_partial(&piece.partial);
                outlet.history(&id, WorkerHistory::Piece { at_ms: piece.at_ms, partial });
            });
            outlet.history(&id, WorkerHistory::Done { report });
            replays.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        });
        if let Err(error) = spawned {
            eprintln!("needle: a query's history could not be read: {error}");
        }
    }

    /// The history store, when history is on.
    pub fn history_store(&self) -> Option<&HistoryStore> {
        self.history.as_ref().map(|h| h.tap.store())
    }

    /// Ends a running query now; its subscriber gets a final emission saying it was killed.
    /// False when no such query is running.
    pub fn kill(&self, id: &str) -> bool {
        if let Role::Worker(_) = self.role {
            return false;
        }
        if let Some(cancel) = self.replays.lock().unwrap_or_else(|e| e.into_inner()).get(id) {
            cancel.store(true, Ordering::Relaxed);
        }
        let known = self.status.lock().unwrap_or_else(|e| e.into_inner()).contains_key(id);
        known
            && self
                .joiner_tx
                .send(JoinerMessage::End { id: id.into(), reason: EndReason::Killed })
                .is_ok()
    }

    /// A query admitted but not announced: ended at once, silently (nobody reads its results).
    fn abandon(&self, id: &Arc<str>) {
        self.status.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
        let _ =
            self.joiner_tx.send(JoinerMessage::End { id: id.clone(), reason: EndReason::Killed });
        // (the joiner's retiring of it counts it down from the active queries)
        self.metrics.queries_active.inc();
    }

    /// On a worker node: starts running a query an api node announced. Its status (with this
    /// node's records read and matched) is listed like a local query's. A query already running
    /// under `id` is replaced.
    pub fn adopt(
        &self,
        id: &str,
        query: Arc<CompiledQuery>,
        owner: &str,
        received_ms: i64,
        ends_ms: i64,
    ) {
        let id: Arc<str> = id.into();
        let status =
            QueryStatus::new(id.clone(), query.shared_text(), owner.into(), received_ms, ends_ms)
                .reading_live_from(self.records_total.load(Ordering::Relaxed));
        let _admission = self.admission.lock().unwrap_or_else(|e| e.into_inner());
        let replaced = self.queries.remove(&id);
        self.status.lock().unwrap_or_else(|e| e.into_inner()).insert(Box::new(status));
        self.queries.add(id, query);
        if !replaced {
            self.metrics.queries_started.inc();
            self.metrics.queries_active.inc();
        }
    }

    /// On a worker node: stops running an adopted query (and its read of the past). False
    /// when it was not running.
    pub fn release(&self, id: &str) -> bool {
        if let Some(cancel) = self.replays.lock().unwrap_or_else(|e| e.into_inner()).get(id) {
            cancel.store(true, Ordering::Relaxed);
        }
        let _admission = self.admission.lock().unwrap_or_else(|e| e.into_inner());
        let known = self.status.lock().unwrap_or_else(|e| e.into_inner()).remove(id).is_some();
        self.queries.remove(id);
        if known {
            self.metrics.queries_active.dec();
        }
        known
    }

    /// On an api node: what worker node `worker` sent of its read of the past for query `id`
    /// (pieces as the engine's partial codec encoded them). Blocks while the joiner is behind.
    pub fn remote_history(&self, id: &str, worker: &str, event: WorkerHistory<Vec<u8>>) {
        let _ = self.joiner_tx.send(JoinerMessage::RemoteHistory {
            id: id.into(),
            worker: worker.into(),
            event: Box::new(event),
        });
    }

    /// On an api node: a partial of query `id` from a worker node, as the engine's partial codec
    /// encoded it, with where it was read (see [`Sent`]). Blocks
    /// while the joiner is behind (backpressure on the results reader). Partials of queries
    /// this node is not running are ignored.
    pub fn remote_partial(&self, id: &str, bytes: Vec<u8>, sent: Sent) {
        self.metrics.partials_remote.inc();
        let (offset, at_ms) = (sent.offset, sent.at_ms);
        let _ = self.joiner_tx.send(JoinerMessage::Encoded { id: id.into(), bytes, offset, at_ms });
    }

    /// On an api node: for an adopted query catching up, `records` read by the worker nodes
    /// after it started and before it was adopted (their progress, read back from the results
    /// topic in order with its partials): its "Records Seen" count them as its first api node
    /// did.
    pub fn remote_seen(&self, id: &str, records: u64, sent: Sent) {
        let (offset, at_ms) = (sent.offset, sent.at_ms);
        let _ = self.joiner_tx.send(JoinerMessage::SeenBefore {
            id: id.into(),
            records,
            offset,
            at_ms,
        });
    }

    /// On an api node: for an adopted query catching up, where its first api node cut one of
    /// its emissions (read back from the results topic, in order with its partials).
    pub fn remote_cut(&self, id: &str, cut: Cut) {
        let _ = self.joiner_tx.send(JoinerMessage::Cut { id: id.into(), cut });
    }

    /// On an api node: takes over query `id`, admitted by an api node that died, as it was
    /// admitted there: its start time (its windows and its duration count from it), its end,
    /// its client. It merges nothing live until [`Runtime::caught_up`]: the partials sent since
    /// it started come first, each with the time it was sent. Its results wait for a client
    /// to claim them ([`Runtime::claim_adopted`]). Not counted against `runtime.max_queries`
    /// (it was admitted already).
    pub fn adopt_remote(&self, adoption: Adoption) -> Result<(), SubmitError> {
        let Adoption { id, query, client, received_ms, past } = adoption;
        if self.stop.is_stopped() {
            return Err(SubmitError::ShuttingDown);
        }
        let id: Arc<str> = id.into();
        let query = Arc::new(query);
        let (mut run, ends_ms, live, remote) = match past {
            // as its first api node placed it (start_remote_history)
            Some(AdoptedPast { range: past, workers }) => {
                let run = QueryRun::on_record_time(
                    query.clone(),
                    id.clone(),
                    received_ms,
                    past.from_ms,
                    i64::MAX,
                );
                let duration = i64::try_from(query.duration_ms()).unwrap_or(i64::MAX);
                let ends =
                    if past.live { received_ms.saturating_add(duration) } else { received_ms };
                let (from_ms, to_ms) = (past.from_ms, past.to_ms);
                let gather = Gather::new(workers);
                let remote = Box::new(RemotePast { gather, from_ms, to_ms, end_ms: 0 });
                (run, ends, past.live, Some(remote))
            }
            None => {
                let run = QueryRun::new(query.clone(), id.clone(), received_ms);
                let ends = run.end_ms();
                (run, ends, true, None)
            }
        };
        if query.is_raw() {
            run.bound_raw_bytes(
                self.config.runtime.max_result_bytes_per_query,
                self.result_budget.clone(),
            );
        }
        let results = self.new_results();
        let first = results.follow().expect("a new query's results take followers");
        let _admission = self.admission.lock().unwrap_or_else(|e| e.into_inner());
        if self.status.lock().unwrap_or_else(|e| e.into_inner()).contains_key(&id) {
            return Ok(()); // adopted already
        }
        let status =
            QueryStatus::new(id.clone(), query.shared_text(), client.into(), received_ms, ends_ms)
                .followed_through(results.clone());
        self.status.lock().unwrap_or_else(|e| e.into_inner()).insert(Box::new(status));
        let start =
            JoinerMessage::Start { run: Box::new(run), results, live, remote, catching_up: true };
        if self.joiner_tx.send(start).is_err() {
            self.status.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            return Err(SubmitError::ShuttingDown);
        }
        let mut adopted = self.adopted.lock().unwrap_or_else(|e| e.into_inner());
        let now = now_ms();
        adopted.retain(|_, (_, ends)| ends.saturating_add(UNCLAIMED_ADOPTED_MS) > now);
        adopted.insert(id, (first, ends_ms));
        self.metrics.queries_started.inc();
        self.metrics.queries_active.inc();
        Ok(())
    }

    /// On an api node: another api node merges query `id` now (it adopted it while this one
    /// was taken for dead): it ends here without a final emission, and its end is not
    /// announced (it goes on there).
    pub fn forget(&self, id: &str) {
        let _ = self.joiner_tx.send(JoinerMessage::Forget { id: id.into() });
    }

    /// On an api node: an adopted query has been handed every partial sent before it was
    /// adopted; it runs on this node's clock from now on.
    pub fn caught_up(&self, id: &str) {
        let _ = self.joiner_tx.send(JoinerMessage::CaughtUp { id: id.into() });
    }

    /// The results of a query this node adopted, for the first client that asks (the
    /// emissions since it started); others follow it with [`Runtime::follow`].
    pub fn claim_adopted(&self, id: &str) -> Option<Arc<ResultQueue>> {
        let mut adopted = self.adopted.lock().unwrap_or_else(|e| e.into_inner());
        adopted.remove(id).map(|(results, _)| results)
    }

    /// A new follower of running query `id`: a queue of its emissions from now on, numbered as
    /// its other followers' are (see [`crate::results`]). `None` when no such query runs here
    /// (or it is ending: its final emission went to the followers it had).
    pub fn follow(&self, id: &str) -> Option<Arc<ResultQueue>> {
        let status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        let results = status.get(id)?.results.clone()?;
        drop(status);
        results.follow()
    }

    /// The results of a new query: each follower's queue bounded by the runtime's limits.
    fn new_results(&self) -> Arc<QueryResults> {
        QueryResults::within(&self.result_limits)
    }

    /// True while query `id` is about to be adopted (see [`crate::remote::QueryAnnouncer::adopting`]).
    pub fn awaits_adoption(&self, id: &str) -> bool {
        match &self.role {
            Role::Api { announcer, .. } => announcer.adopting(id),
            _ => false,
        }
    }

    /// On an api node: the other api node holding query `id`, when this node does not run it
    /// (see [`crate::remote::QueryAnnouncer::holder`]).
    pub fn holder(&self, id: &str) -> Option<crate::remote::Holder> {
        match &self.role {
            Role::Api { announcer, .. } if self.query(id).is_none() => announcer.holder(id),
            _ => None,
        }
    }

    /// On an api node: a worker node read `records` records (every running query has seen them).
    pub fn remote_progress(&self, records: u64) {
        let _ = self.joiner_tx.send(JoinerMessage::Progress { records, receipts: Vec::new() });
    }

    /// The running queries, oldest first.
    pub fn queries(&self) -> Vec<QueryStatus> {
        let total = self.records_total.load(Ordering::Relaxed);
        let mut list: Vec<QueryStatus> = self
            .status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|s| s.clone().counted_through(total))
            .collect();
        list.sort_by(|a, b| (a.received_ms, &a.id).cmp(&(b.received_ms, &b.id)));
        list
    }

    /// The number of queries the workers are matching records against (the registry's
    /// snapshot): the running queries, until each one's end has reached the workers.
    pub fn matching_queries(&self) -> usize {
        self.queries.len()
    }

    pub fn query(&self, id: &str) -> Option<QueryStatus> {
        let total = self.records_total.load(Ordering::Relaxed);
        let running = self
            .status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .map(|s| s.clone().counted_through(total));
        running.or_else(|| self.ended.lock().unwrap_or_else(|e| e.into_inner()).get(id).cloned())
    }

    /// Stops the source, lets the workers drain what was already read, ends every running query
    /// with a final emission, and waits for all threads. Idempotent.
    pub fn shutdown(&self) {
        self.stop.stop();
        for cancel in self.replays.lock().unwrap_or_else(|e| e.into_inner()).values() {
            cancel.store(true, Ordering::Relaxed);
        }
        // Workers waiting for a source that never came end too.
        self.batches.lock().unwrap_or_else(|e| e.into_inner()).take();
        let threads: Vec<JoinHandle<()>> =
            self.threads.lock().unwrap_or_else(|e| e.into_inner()).drain(..).collect();
        for thread in threads {
            let _ = thread.join();
        }
        let _ = self.joiner_tx.send(JoinerMessage::Shutdown);
        if let Some(joiner) = self.joiner.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = joiner.join();
        }
        // what the source read is appended, then made durable
        if let Some(history) = &self.history {
            history.tap.stop();
            if let Some(background) =
                history.background.lock().unwrap_or_else(|e| e.into_inner()).take()
            {
                background.stop();
            }
        }
    }
}

/// Queries submitted together from which they are admitted on a thread of lower priority
/// ([`Runtime::submit_many`]); fewer are admitted on the caller's thread (a thread made costs
/// tens of microseconds, nothing beside a burst's compiling and indexing).
pub const ADMITTED_APART: usize = 64;

/// How much nicer than the rest of the process the thread admitting a burst is.
pub const ADMISSION_NICENESS: i32 = 10;

/// Makes the calling thread nicer by `by` (Linux: a thread's nice value is its own; a process
/// may always lower its own priority). Elsewhere, or if refused, the thread keeps its priority.
fn lower_this_thread_s_priority(by: i32) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid and the priority calls take and return plain integers.
        unsafe {
            let thread = libc::syscall(libc::SYS_gettid) as libc::id_t;
            *libc::__errno_location() = 0;
            let now = libc::getpriority(libc::PRIO_PROCESS, thread);
            if now != -1 || *libc::__errno_location() == 0 {
                libc::setpriority(libc::PRIO_PROCESS, thread, (now + by).min(19));
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = by;
}

/// Where a query's read of the past puts its run's clock.
struct PastRead {
    window_start_ms: i64,
    end_ms: i64,
    live: bool,
    /// The range asked for (`to`: none for `SINCE`).
    from_ms: i64,
    to_ms: Option<i64>,
    /// On an api node: the worker nodes whose reads of their stores make up the past.
    workers: Option<Vec<String>>,
    /// On an api node over a shared store on object storage: the manifest version the
    /// workers read by.
    version: Option<u64>,
}

/// Opens the store, starts its background work (flushes, merges, retention) and the tap.
fn open_history(config: &NeedleConfig, metrics: &Arc<Metrics>) -> Result<History, RuntimeError> {
    let store = HistoryStore::open(config.history_store_config(&config.kafka.node_id))
        .map_err(|e| RuntimeError::History(format!("history.dir {}: {e}", config.history.dir)))?;
    let filter = history_filter(&config.history.filter)?;
    metrics.watch_history(store.clone());
    let background = store.spawn_background();
    let tap = HistoryTap::start(store, filter, metrics.clone())
        .map_err(|e| RuntimeError::io("starting the history thread", e))?;
    Ok(History { tap, background: Mutex::new(Some(background)) })
}

/// `history.filter` compiled: a BQL condition, checked as the WHERE of a query.
pub fn history_filter(text: &str) -> Result<Option<CompiledExpr>, RuntimeError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    const PREFIX: &str = "SELECT * FROM STREAM() WHERE ";
    let query = format!("{PREFIX}{text}");
    let plan =
        needle_query::compile(&query, &needle_query::QueryConfig::default()).map_err(|mut e| {
            // told against the condition as the user wrote it, not the query made around it
            e.span = e.span.map(|s| {
                let shift = |at: usize| at.saturating_sub(PREFIX.len()).min(text.len());
                needle_query::ast::Span::new(shift(s.start), shift(s.end))
            });
            RuntimeError::History(format!("history.filter {text:?}: {}", e.render(text).trim_end()))
        })?;
    let Some(filter) = plan.stage.filter else { return Ok(None) };
    CompiledExpr::compile(&filter)
        .map(Some)
        .map_err(|e| RuntimeError::History(format!("history.filter {text:?}: {e}")))
}

fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, RuntimeError> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .map_err(|e| RuntimeError::io(format!("starting thread {name}"), e))
}

#[cfg(test)]
mod tests {
    use super::history_filter;

    /// The thread admitting a burst is nicer by ADMISSION_NICENESS; the others keep theirs.
    #[cfg(target_os = "linux")]
    #[test]
    fn only_the_admitting_thread_is_made_nicer() {
        // SAFETY: plain integer calls
        let nice = || unsafe {
            libc::getpriority(libc::PRIO_PROCESS, libc::syscall(libc::SYS_gettid) as libc::id_t)
        };
        let before = nice();
        let (inside, after) = std::thread::spawn(move || {
            let start = nice();
            super::lower_this_thread_s_priority(super::ADMISSION_NICENESS);
            (start, nice())
        })
        .join()
        .unwrap();
        assert_eq!(after, (inside + super::ADMISSION_NICENESS).min(19));
        assert_eq!(nice(), before, "the calling thread keeps its priority");
    }

    #[test]
    fn a_bad_history_filter_is_shown_where_it_is_in_the_condition_written() {
        assert!(history_filter("  ").unwrap().is_none());
        assert!(history_filter("k = 'a' AND v > 3").unwrap().is_some());
        let error = history_filter("k = 'a' AND CONT(v) > 1").unwrap_err().to_string();
        assert!(error.contains("at line 1, column 13"), "{error}");
        assert!(error.contains("k = 'a' AND CONT(v) > 1\n"), "{error}");
        assert!(!error.contains("SELECT"), "{error}");
    }
}
