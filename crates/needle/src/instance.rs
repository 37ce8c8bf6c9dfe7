//! [`Builder`] and [`Needle`]: a running needle inside a program — its workers and joiner, fed
//! by [`Pusher`]s or by one source, answering [`Query`]s.

use crate::error::Error;
use crate::push::{Pusher, SharedSink};
use crate::query::Query;
use needle_runtime::metrics::Metrics;
use needle_runtime::source::{SourceOptions, SourceRegistry};
use needle_runtime::{NeedleConfig, QueryStatus, Runtime};
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Typed events a pusher gathers before handing them on, by default.
const DEFAULT_BATCH_EVENTS: usize = 1024;
/// Who the queries of [`Needle::query`] belong to (for `server.max_queries_per_client`).
const LIBRARY_OWNER: &str = "library";

/// How to start a [`Needle`]: the configuration (needle.toml's, or defaults), changed by the
/// builder's settings, and where records come from: pushed from code (the default) or a source.
///
/// ```
/// let needle = needle::Needle::builder().workers(2).max_queries(1_000).start()?;
/// # Ok::<(), needle::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    config: NeedleConfig,
    source: Option<String>,
    batch_events: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Self { config: NeedleConfig::default(), source: None, batch_events: DEFAULT_BATCH_EVENTS }
    }
}

impl Builder {
    /// The defaults: one worker per core, records pushed from code.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts from a whole configuration (what a needle.toml holds).
    pub fn config(mut self, config: NeedleConfig) -> Self {
        self.config = config;
        self
    }

    /// Starts from a needle.toml, overridden by `NEEDLE_*` environment variables, as
    /// `needle serve --config FILE` does. A source named in the file's `[source]` is not read:
    /// call [`Builder::source`] for that.
    pub fn config_file(mut self, path: impl AsRef<Path>) -> Result<Self, Error> {
        self.config = NeedleConfig::load(Some(path.as_ref()), std::env::vars())
            .map_err(|e| Error::Config(e.to_string()))?;
        Ok(self)
    }

    /// Worker threads matching records (0: one per core).
    pub fn workers(mut self, workers: usize) -> Self {
        self.config.runtime.workers = workers;
        self
    }

    /// Queries that may run at once (`runtime.max_queries`).
    pub fn max_queries(mut self, max_queries: usize) -> Self {
        self.config.runtime.max_queries = max_queries;
        self.config.server.max_queries_per_client = max_queries;
        self
    }

    /// How often partial results are merged and windows checked (`runtime.tick_ms`).
    pub fn tick(mut self, tick: Duration) -> Self {
        self.config.runtime.tick_ms = u64::try_from(tick.as_millis()).unwrap_or(u64::MAX).max(1);
        self
    }

    /// Keeps what is read in a history store in `dir`, so queries can look back
    /// (`FROM HISTORY(...)`, `SINCE`); `time_field` names the events' time in ms (or `""` for
    /// the time they were read).
    pub fn history(mut self, dir: impl Into<String>, time_field: impl Into<String>) -> Self {
        self.config.history.dir = dir.into();
        self.config.history.time_field = time_field.into();
        self
    }

    /// Reads records from a source instead of pushed events: `file:PATH`, `file:PATH?follow=true`,
    /// `stdin`, `tcp:HOST:PORT` (`?format=influx|opentsdb|graphite` for metrics agents' lines),
    /// `gen:bullet?rate=20000`, or
    /// `kafka://HOST:PORT/TOPIC?start=earliest` (`kafka:` alone reads the configuration's
    /// `[kafka]` brokers and data topic).
    pub fn source(mut self, spec: impl Into<String>) -> Self {
        self.source = Some(spec.into());
        self
    }

    /// Typed events a [`Pusher`] gathers before handing them to the workers (default 1,024;
    /// JSON lines go in 64 KiB batches).
    pub fn batch_events(mut self, events: usize) -> Self {
        self.batch_events = events.max(1);
        self
    }

    /// Starts the workers and the joiner, and the source if one was named.
    pub fn start(self) -> Result<Needle, Error> {
        let metrics = Arc::new(Metrics::new());
        let runtime = Runtime::start_role(self.config, needle_runtime::Role::All, metrics.clone())?;
        let sink: SharedSink = Arc::new(RwLock::new(None));
        match &self.source {
            Some(spec) => {
                let config = runtime.config();
                let options = SourceOptions {
                    max_line_bytes: config.runtime.max_line_bytes,
                    follow: config.source.follow,
                    ..SourceOptions::default()
                };
                let mut registry = SourceRegistry::default();
                needle_kafka::register(&mut registry, &config.kafka, metrics);
                let started = registry
                    .open(spec, &options)
                    .map_err(|e| Error::Config(e.to_string()))
                    .and_then(|source| runtime.run_source(source).map_err(Error::from));
                if let Err(error) = started {
                    // the workers and the joiner started: they stop with it
                    runtime.shutdown();
                    return Err(error);
                }
            }
            None => {
                let pushed = runtime.push_sink("events pushed from code")?;
                *sink.write().unwrap_or_else(|e| e.into_inner()) = Some(pushed);
            }
        }
        Ok(Needle { runtime, sink, batch_events: self.batch_events })
    }
}

/// needle running inside a program. Stops (ending every query with its final emission) when
/// [`Needle::shutdown`] is called or it is dropped.
pub struct Needle {
    runtime: Arc<Runtime>,
    sink: SharedSink,
    batch_events: usize,
}

impl std::fmt::Debug for Needle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Needle").field("source", &self.runtime.source_description()).finish()
    }
}

impl Needle {
    /// A [`Builder`] with the defaults.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// The configuration in force (defaults, the file, the builder's settings).
    pub fn config(&self) -> &needle_runtime::NeedleConfig {
        self.runtime.config()
    }

    /// A pusher for events from code; one per producing thread. Refused when needle reads a
    /// source, or is shutting down.
    pub fn pusher(&self) -> Result<Pusher, Error> {
        if self.sink.read().unwrap_or_else(|e| e.into_inner()).is_none() {
            return Err(Error::Closed(format!(
                "this needle reads {}; events are pushed only into one started without a source",
                self.runtime.source_description()
            )));
        }
        Ok(Pusher::new(self.sink.clone(), self.batch_events))
    }

    /// Starts a query (BQL, or a Bullet JSON query) over the records from now on (and, with
    /// history, over the past it names).
    ///
    /// ```
    /// let needle = needle::Needle::builder().start()?;
    /// let error = needle.query("SELECT COUNT(*) FROM STREAM(1000, TIME) WHERE temp > ").unwrap_err();
    /// assert!(matches!(error, needle::Error::Query { line: 1, .. }));
    /// # Ok::<(), needle::Error>(())
    /// ```
    pub fn query(&self, text: &str) -> Result<Query, Error> {
        self.query_for(text, LIBRARY_OWNER)
    }

    /// [`Needle::query`] on behalf of `owner`: each owner may run at most
    /// `server.max_queries_per_client` queries at once.
    pub fn query_for(&self, text: &str, owner: &str) -> Result<Query, Error> {
        let handle = self.runtime.submit(text, owner).map_err(Error::from_submit)?;
        Ok(Query::new(self.runtime.clone(), handle))
    }

    /// Ends a query by id (its final emission carries the results so far); false when no such
    /// query runs.
    pub fn kill(&self, id: &str) -> bool {
        self.runtime.kill(id)
    }

    /// The running queries, with what each has seen, matched and emitted.
    pub fn queries(&self) -> Vec<QueryStatus> {
        self.runtime.queries()
    }

    /// One query's status, running or ended lately.
    pub fn status(&self, id: &str) -> Option<QueryStatus> {
        self.runtime.query(id)
    }

    /// Records read, malformed and matched so far, and the queries running.
    pub fn counts(&self) -> Counts {
        let m = self.runtime.metrics();
        Counts {
            records_read: m.records_read.get(),
            records_malformed: m.records_malformed.get(),
            records_matched: m.records_matched.get(),
            queries_running: self.runtime.queries().len(),
        }
    }

    /// Every metric in the Prometheus text format (what `GET /metrics` serves).
    pub fn metrics_text(&self) -> String {
        self.runtime.metrics().render()
    }

    /// needle's HTTP API (queries, validation, schema, metrics, the web page when built) as an
    /// axum [`Router`](axum::Router) to serve or to nest in a program's own:
    /// `Router::new().route("/hello", ...).nest_service("/needle", needle.http_api())`.
    pub fn http_api(&self) -> axum::Router {
        needle_server::router(needle_server::AppState::new(self.runtime.clone()))
    }

    /// Stops reading, lets the workers finish what was pushed or read, ends every query with its
    /// final emission, and makes history durable. Pushers refuse events from then on.
    pub fn shutdown(self) {
        drop(self);
    }
}

impl Drop for Needle {
    fn drop(&mut self) {
        // waits for pushes under way; the workers end once they have read what was handed on
        self.sink.write().unwrap_or_else(|e| e.into_inner()).take();
        self.runtime.shutdown();
    }
}

/// What a [`Needle`] has read and matched so far ([`Needle::counts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Counts {
    /// Records read (pushed, or from the source).
    pub records_read: u64,
    /// Lines skipped because they were not JSON objects, or too long.
    pub records_malformed: u64,
    /// Records that matched at least one query.
    pub records_matched: u64,
    /// Queries running now.
    pub queries_running: usize,
}
