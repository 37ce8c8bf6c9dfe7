//! What every handler can reach: the runtime (and through it the configuration and metrics), the
//! result queues of queries started without waiting (`POST /api/v1/queries`) until a first
//! client follows them (or, on an api node, of queries it adopted from one that died), where a
//! query held by another api node is, and the process start time. Any number of clients follow
//! a query ([`AppState::follow`]).

use needle_runtime::metrics::Metrics;
use needle_runtime::remote::Holder;
use needle_runtime::source::BatchSink;
use needle_runtime::{NeedleConfig, QueryHandle, ResultQueue, Runtime, SubmitError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// How long the results of a started query wait for a first follower after the query ended.
const UNCLAIMED_RESULTS_KEPT: Duration = Duration::from_secs(600);
/// How long a client following a query that is about to be adopted here waits for it.
const ADOPTION_WAIT: Duration = Duration::from_secs(30);

/// Shared by all handlers; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Arc<Runtime>,
    started: Instant,
    pending: Mutex<HashMap<String, Pending>>,
    /// Where HTTP writes go (`needle serve --ingest` or `--source http`); `None` when writes
    /// are not enabled, or no longer taken (shutting down).
    ingest: RwLock<Option<BatchSink>>,
    /// Whether the server was started to take writes.
    writes: bool,
}

struct Pending {
    /// `None` once a first follower took them.
    results: Option<Arc<ResultQueue>>,
    ends: Instant,
}

/// Why a query cannot be followed here.
#[derive(Debug, PartialEq, Eq)]
pub enum Unfollowable {
    /// No such query runs here (nor did lately).
    Unknown,
    /// It ended, and its results went to the clients that followed it.
    Ended,
}

impl AppState {
    pub fn new(runtime: Arc<Runtime>) -> Self {
        Self {
            inner: Arc::new(Inner {
                runtime,
                started: Instant::now(),
                pending: Mutex::default(),
                ingest: RwLock::new(None),
                writes: false,
            }),
        }
    }

    /// The state of a server that takes HTTP writes, handing them to the workers through
    /// `sink` (the runtime's [`needle_runtime::Runtime::push_sink`], or a clone of it).
    pub fn with_ingest(runtime: Arc<Runtime>, sink: BatchSink) -> Self {
        Self {
            inner: Arc::new(Inner {
                runtime,
                started: Instant::now(),
                pending: Mutex::default(),
                ingest: RwLock::new(Some(sink)),
                writes: true,
            }),
        }
    }

    /// Where writes go, if they are taken.
    pub fn ingest(&self) -> Option<BatchSink> {
        self.inner.ingest.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether this server was started to take writes (still after [`AppState::close_ingest`]).
    pub fn writes_enabled(&self) -> bool {
        self.inner.writes
    }

    /// Stops taking writes and lets go of the workers' queue, so that they can end (call it
    /// before shutting the runtime down; a write under way holds its clone for at most its
    /// patience).
    pub fn close_ingest(&self) {
        self.inner.ingest.write().unwrap_or_else(|e| e.into_inner()).take();
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.inner.runtime
    }

    /// Starts `texts` for `owner` ([`Runtime::submit_many`]: one answer each, in order) off the
    /// HTTP threads: admitting a burst takes as long as compiling it and waiting for the
    /// registry's writer (a second or so while it rebuilds the index of a million queries), and
    /// a worker thread blocked that long held up the result pumps and writers it had just
    /// woken — the results of the queries already running.
    pub async fn admit(
        &self,
        texts: Vec<String>,
        owner: &str,
    ) -> Vec<Result<QueryHandle, SubmitError>> {
        let (runtime, owner, count) = (self.runtime().clone(), owner.to_owned(), texts.len());
        let admitted = tokio::task::spawn_blocking(move || {
            let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
            runtime.submit_many(&texts, &owner)
        })
        .await;
        match admitted {
            Ok(answers) => answers,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // the runtime is shutting down
            Err(_) => {
                std::iter::repeat_with(|| Err(SubmitError::ShuttingDown)).take(count).collect()
            }
        }
    }

    pub fn config(&self) -> &NeedleConfig {
        self.inner.runtime.config()
    }

    pub fn metrics(&self) -> &Metrics {
        self.inner.runtime.metrics()
    }

    pub fn uptime_ms(&self) -> u128 {
        self.inner.started.elapsed().as_millis()
    }

    /// Keeps a started query's results until a first client follows it ([`AppState::follow`]).
    /// Results nobody claimed are forgotten some minutes after their query ended.
    pub fn keep_results(&self, id: &str, results: Arc<ResultQueue>, ends_in: Duration) {
        let mut pending = self.inner.pending.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        pending.retain(|_, p| p.ends + UNCLAIMED_RESULTS_KEPT > now);
        pending.insert(id.to_owned(), Pending { results: Some(results), ends: now + ends_in });
    }

    /// A queue of query `id`'s emissions for a new follower: for the first client of a started
    /// (or adopted) query, the queue its emissions have waited in since it started; for any
    /// other, while the query runs, its emissions from now on (numbered as the first's).
    pub fn follow(&self, id: &str) -> Result<Arc<ResultQueue>, Unfollowable> {
        let waiting = {
            let mut pending = self.inner.pending.lock().unwrap_or_else(|e| e.into_inner());
            pending.get_mut(id).and_then(|entry| entry.results.take())
        };
        let runtime = &self.inner.runtime;
        match waiting.or_else(|| runtime.claim_adopted(id)).or_else(|| runtime.follow(id)) {
            Some(results) => Ok(results),
            None if runtime.query(id).is_some() => Err(Unfollowable::Ended),
            None => Err(Unfollowable::Unknown),
        }
    }

    /// Where a client asking this node for query `id` is to go: `None` when the query is
    /// here (or not known to be anywhere), else the other api node holding it (in the
    /// distributed mode). A query whose api node died, about to be adopted here or by another
    /// node, is waited for first (up to half a minute), so that the client goes to its adopter;
    /// any other is answered at once.
    pub async fn locate(&self, id: &str) -> Option<Holder> {
        let runtime = &self.inner.runtime;
        let deadline = tokio::time::Instant::now() + ADOPTION_WAIT;
        loop {
            if runtime.query(id).is_some() {
                return None;
            }
            if let Some(holder) = runtime.holder(id) {
                return Some(holder);
            }
            if !runtime.awaits_adoption(id) || tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
