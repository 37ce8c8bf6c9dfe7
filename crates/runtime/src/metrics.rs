//! The runtime's metrics, exposed on `/metrics` in the Prometheus text format.
//!
//! Counters are shared atomics: workers add their per-batch counts once per batch, never once
//! per record, so the hot path does not fight over cache lines. Latencies are histograms in
//! seconds, as Prometheus expects.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::time::Duration;

/// Every metric needle exports. Clone-cheap handles; share one `Metrics` per process.
pub struct Metrics {
    registry: Registry,
    /// Records read from all sources (decoded or not).
    pub records_read: Counter,
    /// Bytes read from all sources.
    pub bytes_read: Counter,
    /// Input lines that were not a JSON object, or too long, or not a line of the metrics
    /// protocol their source reads; skipped.
    pub records_malformed: Counter,
    /// Of those, the lines of a metrics protocol (`tcp:...?format=influx`) that were not, per
    /// protocol (label `protocol`).
    pub protocol_lines_malformed: Family<Vec<(String, String)>, Counter>,
    /// Records that matched at least one query.
    pub records_matched: Counter,
    /// Records the running queries read column at a time (every query an aggregation the
    /// column path folds), not one by one.
    pub records_by_columns: Counter,
    /// Queries running now.
    pub queries_active: Gauge,
    /// Queries started since the process began.
    pub queries_started: Counter,
    /// Queries refused (limits, invalid).
    pub queries_rejected: Counter,
    /// Time from a record being read to it matching a query: Bullet's "filter latency".
    pub read_to_match_seconds: Histogram,
    /// Time from a query being received to its first result going out.
    pub query_first_result_seconds: Histogram,
    /// Batches waiting between the sources and the workers.
    pub source_queue_depth: Gauge,
    /// Emissions dropped because a subscriber read too slowly.
    pub results_dropped: Counter,
    /// Bytes of results waiting for their subscribers (bounded by `runtime.max_result_bytes`).
    pub result_bytes: Gauge,
    /// RAW records not emitted because a query's emission rate limit was reached.
    pub raw_records_rate_limited: Counter,
    /// Partials that crossed a process boundary: shipped by a worker node, or received by an api
    /// node (distributed mode).
    pub partials_remote: Counter,
    /// Partitions of a partitioned source (Kafka) assigned to this process now.
    pub source_partitions: Gauge,
    /// Per partition read now (labels `topic`, `partition`): messages not committed yet,
    /// brought up to date from [`Metrics::cluster`] at each rendering.
    kafka_consumer_lag: Family<Vec<(String, String)>, Gauge>,
    /// What the source and the node wiring tell of this process for the cluster view
    /// (partitions and their lag, rebalances, adoptions).
    pub cluster: crate::cluster::Local,
    /// Records the history tap appended to the store's write buffer.
    pub history_records_appended: Counter,
    /// Records `history.filter` kept out of history.
    pub history_records_filtered: Counter,
    /// Records that could not be appended to history (the store refused them).
    pub history_records_lost: Counter,
    /// The store's own counters, read when the metrics are rendered ([`Metrics::watch_history`]).
    pub history: HistoryGauges,
    history_store: std::sync::OnceLock<needle_history::Store>,
    /// Bytes the process's allocator hands out now (live heap), when it can tell
    /// ([`Metrics::watch_heap`]).
    pub heap_allocated_bytes: Gauge,
    /// Bytes of memory the allocator holds mapped and resident (the live heap, freed memory it
    /// keeps for reuse, its own data), when it can tell.
    pub heap_resident_bytes: Gauge,
    heap: std::sync::OnceLock<HeapReader>,
}

/// Reads the allocator's (allocated, resident) bytes; `None` when it cannot.
pub type HeapReader = Box<dyn Fn() -> Option<(u64, u64)> + Send + Sync>;

/// The history store's state as gauges, brought up to date at each rendering.
#[derive(Debug, Clone, Default)]
pub struct HistoryGauges {
    pub records_written: Gauge,
    pub bytes_written: Gauge,
    pub parts_flushed: Gauge,
    pub merges: Gauge,
    pub corrupt_files: Gauge,
    pub missing_time: Gauge,
    pub dropped_records: Gauge,
    pub flush_errors: Gauge,
    /// 1 while writes are stopped (a full disk, an I/O error).
    pub writes_stopped: Gauge,
    /// Commits the Iceberg REST catalog accepted (`history.catalog_url`).
    pub catalog_commits: Gauge,
    /// Syncs of the REST catalog that failed (unreachable, or a request refused).
    pub catalog_errors: Gauge,
    /// 1 while the REST catalog's table is behind the store (its last sync failed).
    pub catalog_behind: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("needle");
        let latency = || Histogram::new(exponential_buckets(0.000_05, 2.0, 20));
        let metrics = Self {
            records_read: Counter::default(),
            bytes_read: Counter::default(),
            records_malformed: Counter::default(),
            protocol_lines_malformed: Family::default(),
            records_matched: Counter::default(),
            records_by_columns: Counter::default(),
            queries_active: Gauge::default(),
            queries_started: Counter::default(),
            queries_rejected: Counter::default(),
            read_to_match_seconds: latency(),
            query_first_result_seconds: latency(),
            source_queue_depth: Gauge::default(),
            results_dropped: Counter::default(),
            result_bytes: Gauge::default(),
            raw_records_rate_limited: Counter::default(),
            partials_remote: Counter::default(),
            source_partitions: Gauge::default(),
            kafka_consumer_lag: Family::default(),
            cluster: crate::cluster::Local::default(),
            history_records_appended: Counter::default(),
            history_records_filtered: Counter::default(),
            history_records_lost: Counter::default(),
            history: HistoryGauges::default(),
            history_store: std::sync::OnceLock::new(),
            heap_allocated_bytes: Gauge::default(),
            heap_resident_bytes: Gauge::default(),
            heap: std::sync::OnceLock::new(),
            registry: Registry::default(),
        };
        let m = &metrics;
        registry.register("records_read", "Records read from all sources", m.records_read.clone());
        registry.register("bytes_read", "Bytes read from all sources", m.bytes_read.clone());
        registry.register(
            "records_malformed",
            "Input lines skipped: not a JSON object, too long, or not a line of their protocol",
            m.records_malformed.clone(),
        );
        registry.register(
            "protocol_lines_malformed",
            "Lines of a metrics protocol (a tcp source's format=influx|opentsdb|graphite) skipped \
             as malformed, per protocol",
            m.protocol_lines_malformed.clone(),
        );
        registry.register(
            "records_matched",
            "Records that matched at least one query",
            m.records_matched.clone(),
        );
        registry.register(
            "records_by_columns",
            "Records the running queries read column at a time, not one by one",
            m.records_by_columns.clone(),
        );
        registry.register("queries_active", "Queries running now", m.queries_active.clone());
        registry.register("queries_started", "Queries started", m.queries_started.clone());
        registry.register(
            "queries_rejected",
            "Queries refused: invalid, or past a limit",
            m.queries_rejected.clone(),
        );
        registry.register(
            "read_to_match_seconds",
            "Time from a record being read to it matching a query",
            m.read_to_match_seconds.clone(),
        );
        registry.register(
            "query_first_result_seconds",
            "Time from a query being received to its first result",
            m.query_first_result_seconds.clone(),
        );
        registry.register(
            "source_queue_depth",
            "Batches waiting between the sources and the workers",
            m.source_queue_depth.clone(),
        );
        registry.register(
            "results_dropped",
            "Emissions dropped because a subscriber read too slowly",
            m.results_dropped.clone(),
        );
        registry.register(
            "result_bytes",
            "Bytes of results waiting for their subscribers",
            m.result_bytes.clone(),
        );
        registry.register(
            "raw_records_rate_limited",
            "RAW records held back by a query's emission rate limit",
            m.raw_records_rate_limited.clone(),
        );
        registry.register(
            "partials_remote",
            "Partials shipped to (worker node) or received from (api node) another process",
            m.partials_remote.clone(),
        );
        registry.register(
            "source_partitions",
            "Partitions of a partitioned source (Kafka) assigned to this process",
            m.source_partitions.clone(),
        );
        let h = &m.history;
        for (name, help, metric) in [
            (
                "history_records_appended",
                "Records appended to history",
                &m.history_records_appended,
            ),
            (
                "history_records_filtered",
                "Records history.filter kept out of history",
                &m.history_records_filtered,
            ),
            ("history_records_lost", "Records the history store refused", &m.history_records_lost),
        ] {
            registry.register(name, help, metric.clone());
        }
        for (name, help, gauge) in [
            (
                "history_records_written",
                "Records written to history parts (flushes and merges)",
                &h.records_written,
            ),
            ("history_bytes_written", "Bytes written to history parts", &h.bytes_written),
            ("history_parts_flushed", "History parts flushed", &h.parts_flushed),
            ("history_merges", "History merges done", &h.merges),
            ("history_corrupt_files", "History files skipped as unreadable", &h.corrupt_files),
            (
                "history_missing_time",
                "Records kept with their arrival time: no usable time field",
                &h.missing_time,
            ),
            (
                "history_dropped_records",
                "Records history dropped: its write buffer was full while writes were stopped",
                &h.dropped_records,
            ),
            ("history_flush_errors", "History flushes that failed", &h.flush_errors),
            (
                "history_writes_stopped",
                "1 while history writes are stopped (a full disk, an I/O error)",
                &h.writes_stopped,
            ),
            (
                "history_catalog_commits",
                "Commits (and registrations) the Iceberg REST catalog accepted for the table",
                &h.catalog_commits,
            ),
            (
                "history_catalog_errors",
                "Syncs of the Iceberg REST catalog that failed (unreachable, or refused)",
                &h.catalog_errors,
            ),
            (
                "history_catalog_behind",
                "1 while the REST catalog's table is behind the store (its last sync failed)",
                &h.catalog_behind,
            ),
        ] {
            registry.register(name, help, gauge.clone());
        }
        registry.register(
            "heap_allocated_bytes",
            "Bytes the allocator hands out now (live heap; 0 when it cannot tell)",
            m.heap_allocated_bytes.clone(),
        );
        registry.register(
            "heap_resident_bytes",
            "Bytes the allocator holds resident: live heap, freed memory kept for reuse, its own \
             data (0 when it cannot tell)",
            m.heap_resident_bytes.clone(),
        );
        registry.register(
            "kafka_consumer_lag",
            "Messages of a Kafka partition this process reads that the group has not committed \
             yet (high watermark minus committed offset, from librdkafka's statistics)",
            m.kafka_consumer_lag.clone(),
        );
        Self { registry, ..metrics }
    }

    /// Reports the allocator's allocated and resident bytes with every rendering: a resident
    /// size that grows while the live heap does not is memory the allocator keeps, not a leak.
    /// Set by the binary, which chooses the allocator.
    pub fn watch_heap(&self, read: HeapReader) {
        let _ = self.heap.set(read);
    }

    /// Reports `store`'s counters and health with every rendering.
    pub fn watch_history(&self, store: needle_history::Store) {
        let _ = self.history_store.set(store);
    }

    /// Records one latency observation.
    pub fn observe(histogram: &Histogram, elapsed: Duration) {
        histogram.observe(elapsed.as_secs_f64());
    }

    /// The Prometheus text exposition (`/metrics`).
    pub fn render(&self) -> String {
        if let Some(store) = self.history_store.get() {
            let c = store.counters();
            let h = &self.history;
            let get = |a: &std::sync::atomic::AtomicU64| {
                i64::try_from(a.load(std::sync::atomic::Ordering::Relaxed)).unwrap_or(i64::MAX)
            };
            h.records_written.set(get(&c.records_written));
            h.bytes_written.set(get(&c.bytes_written));
            h.parts_flushed.set(get(&c.parts_flushed));
            h.merges.set(get(&c.merges));
            h.corrupt_files.set(get(&c.corrupt_files));
            h.missing_time.set(get(&c.missing_time));
            h.dropped_records.set(get(&c.dropped_records));
            h.flush_errors.set(get(&c.flush_errors));
            h.writes_stopped.set(i64::from(!store.health().is_ok()));
            if let Some(catalog) = store.rest_catalog() {
                let gauge = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
                h.catalog_commits.set(gauge(catalog.commits + catalog.registrations));
                h.catalog_errors.set(gauge(catalog.errors));
                h.catalog_behind.set(i64::from(catalog.last_error.is_some()));
            }
        }
        if let Some((allocated, resident)) = self.heap.get().and_then(|read| read()) {
            let gauge = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            self.heap_allocated_bytes.set(gauge(allocated));
            self.heap_resident_bytes.set(gauge(resident));
        }
        self.kafka_consumer_lag.clear();
        for p in self.cluster.partitions() {
            if let Some(lag) = p.lag {
                let labels = vec![
                    ("topic".to_owned(), p.topic.clone()),
                    ("partition".to_owned(), p.partition.to_string()),
                ];
                self.kafka_consumer_lag.get_or_create(&labels).set(lag);
            }
        }
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rest_catalog_that_is_down_shows_as_errors_and_behind() {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut config = needle_history::StoreConfig::new(dir.path());
        config.catalog =
            Some(needle_history::RestCatalogConfig::new(format!("http://127.0.0.1:{port}")));
        // opening commits the table's first version: its sync fails, the store opens anyway
        let store = needle_history::Store::open(config).unwrap();
        let m = Metrics::new();
        m.watch_history(store);
        let text = m.render();
        assert!(text.contains("needle_history_catalog_errors 1"), "{text}");
        assert!(text.contains("needle_history_catalog_behind 1"), "{text}");
        assert!(text.contains("needle_history_catalog_commits 0"), "{text}");
    }

    #[test]
    fn renders_every_metric_with_its_current_value() {
        let m = Metrics::new();
        m.records_read.inc_by(41);
        m.records_read.inc();
        m.queries_active.set(3);
        m.cluster.assigned("clicks", &[3, 4]);
        m.cluster.lag("clicks", 3, 12);
        Metrics::observe(&m.read_to_match_seconds, Duration::from_micros(300));
        let text = m.render();
        assert!(text.contains("needle_records_read_total 42"), "{text}");
        assert!(text.contains("needle_queries_active 3"), "{text}");
        let lag = "needle_kafka_consumer_lag{topic=\"clicks\",partition=\"3\"} 12";
        assert!(text.contains(lag), "{text}");
        assert!(!text.contains("partition=\"4\""), "no lag reported yet: {text}");
        assert!(text.contains("needle_read_to_match_seconds_count 1"), "{text}");
        m.protocol_lines_malformed.get_or_create(&vec![("protocol".into(), "influx".into())]).inc();
        let text = m.render();
        let influx = "needle_protocol_lines_malformed_total{protocol=\"influx\"} 1";
        assert!(text.contains(influx), "{text}");
        assert!(text.contains("# HELP needle_results_dropped"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
