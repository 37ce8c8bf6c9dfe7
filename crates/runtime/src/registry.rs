//! The set of running queries, as the workers see it: an immutable [`Snapshot`] (a version and
//! the engine's [`MatchSet`]: the predicate index and the fields to decode) swapped atomically
//! (read-copy-update with `arc-swap`) whenever queries start or end. A worker loads the current
//! snapshot once per batch with no lock; writers (the API starting a query, the joiner ending
//! one) take a mutex among themselves only, and a change costs O(√n), not O(n)
//! ([`MatchSet::update`]).

use arc_swap::ArcSwap;
use needle_engine::exec::CompiledQuery;
use needle_engine::matching::{MatchSet, Member};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The queries running at one moment. `version` changes with every change of the set.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub version: u64,
    pub set: MatchSet,
}

#[derive(Debug, Default)]
struct Writer {
    next_serial: u64,
    serials: HashMap<Arc<str>, u64>,
}

#[derive(Debug, Default)]
pub struct QuerySet {
    current: ArcSwap<Snapshot>,
    writer: Mutex<Writer>,
}

impl QuerySet {
    pub fn new() -> Self {
        Self::default()
    }

    /// The current snapshot (lock-free).
    pub fn load(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// Adds a query; workers see it from the next batch on.
    pub fn add(&self, id: Arc<str>, query: Arc<CompiledQuery>) {
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        writer.next_serial += 1;
        let serial = writer.next_serial;
        writer.serials.insert(id.clone(), serial);
        let member = Member::new(serial, id, query);
        self.publish(|set| set.update(vec![member], &[]));
    }

    /// Removes a query; false when it was not there.
    pub fn remove(&self, id: &str) -> bool {
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let Some(serial) = writer.serials.remove(id) else { return false };
        self.publish(|set| set.update(vec![], &[serial]));
        true
    }

    /// The number of queries in the current snapshot.
    pub fn len(&self) -> usize {
        self.current.load().set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Called with the writer mutex held.
    fn publish(&self, change: impl FnOnce(&MatchSet) -> MatchSet) {
        let current = self.current.load();
        let set = change(&current.set);
        self.current.store(Arc::new(Snapshot { version: current.version + 1, set }));
    }
}
