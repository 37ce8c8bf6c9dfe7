//! The set of running queries, as the workers see it: an immutable [`Snapshot`] swapped
//! atomically (read-copy-update with `arc-swap`) whenever a query starts or ends. A worker loads
//! the current snapshot once per batch with no lock; writers (the API starting a query, the
//! joiner ending one) take a mutex among themselves only.

use arc_swap::ArcSwap;
use needle_engine::exec::CompiledQuery;
use std::sync::{Arc, Mutex};

/// A query as the workers know it.
#[derive(Debug, Clone)]
pub struct ActiveQuery {
    pub id: Arc<str>,
    pub compiled: Arc<CompiledQuery>,
}

/// The queries running at one moment. `version` changes with every change of the set.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub version: u64,
    pub queries: Vec<ActiveQuery>,
}

#[derive(Debug, Default)]
pub struct QuerySet {
    current: ArcSwap<Snapshot>,
    writers: Mutex<()>,
}

impl QuerySet {
    pub fn new() -> Self {
        Self::default()
    }

    /// The current snapshot (lock-free).
    pub fn load(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    pub fn add(&self, query: ActiveQuery) {
        self.update(|queries| queries.push(query));
    }

    /// Removes a query; false when it was not there.
    pub fn remove(&self, id: &str) -> bool {
        let mut found = false;
        self.update(|queries| {
            let before = queries.len();
            queries.retain(|q| &*q.id != id);
            found = queries.len() != before;
        });
        found
    }

    fn update(&self, change: impl FnOnce(&mut Vec<ActiveQuery>)) {
        let _writer = self.writers.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.current.load();
        let mut queries = current.queries.clone();
        change(&mut queries);
        self.current.store(Arc::new(Snapshot { version: current.version + 1, queries }));
    }
}
