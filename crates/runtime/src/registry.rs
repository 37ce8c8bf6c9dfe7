//! The set of running queries, as the workers see it: an immutable [`Snapshot`] (a version and
//! the engine's [`MatchSet`]: the predicate index and the fields to decode) swapped atomically
//! (read-copy-update with `arc-swap`) whenever queries start or end. A worker loads the current
//! snapshot once per batch with no lock; writers (the API starting a query, the joiner ending
//! one) take a mutex among themselves only, and a change costs O(log n) amortized per query
//! added and O(1) per query removed, not O(n) ([`MatchSet::update`]). Bursts of changes are
//! applied as one ([`QuerySet::add_many`], [`QuerySet::remove_many`]): one new snapshot for a
//! thousand queries started or ended together, not a thousand.
//!
//! The joiner never waits for a writer ([`QuerySet::remove_soon`]): adding a burst of queries
//! to a set of a million rebuilds its largest level, a second or so with the mutex held, and a
//! joiner waiting that long to remove the queries that ended delivered no result meanwhile.
//! The ids wait in a list of their own, applied by whoever holds the mutex before it is let go.

use arc_swap::ArcSwap;
use needle_engine::exec::CompiledQuery;
use needle_engine::matching::{MatchSet, Member};
use needle_record::Validation;
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
    /// Ids to remove that found the writer's mutex held ([`QuerySet::remove_soon`]).
    pending_removals: Mutex<Vec<Arc<str>>>,
}

impl QuerySet {
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty set whose workers check `validation` of each line.
    pub fn with_validation(validation: Validation) -> Self {
        let set = Self::default();
        set.current
            .store(Arc::new(Snapshot { version: 0, set: MatchSet::with_validation(validation) }));
        set
    }

    /// The current snapshot (lock-free).
    pub fn load(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// Adds a query; workers see it from the next batch on.
    pub fn add(&self, id: Arc<str>, query: Arc<CompiledQuery>) {
        self.add_many(vec![(id, query)]);
    }

    /// Adds queries in one change of the snapshot: a burst of submissions (a client starting
    /// thousands of queries at once) costs one update of the match set, not one each.
    pub fn add_many(&self, queries: Vec<(Arc<str>, Arc<CompiledQuery>)>) {
        if queries.is_empty() {
            return;
        }
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let members = queries
            .into_iter()
            .map(|(id, query)| {
                writer.next_serial += 1;
                let serial = writer.next_serial;
                writer.serials.insert(id.clone(), serial);
                Member::new(serial, id, query)
            })
            .collect();
        self.publish(|set| set.update(members, &[]));
        drop(writer);
        self.apply_pending_removals();
    }

    /// Removes queries without waiting for the writer's mutex: at once when it is free, else
    /// by its holder before it lets go of it (see the module doc).
    pub fn remove_soon(&self, ids: &[Arc<str>]) {
        if ids.is_empty() {
            return;
        }
        self.pending_removals.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(ids);
        self.apply_pending_removals();
    }

    /// Applies the waiting removals when the writer's mutex is free; when it is not, its holder
    /// will (every holder calls this after letting go, so none is left waiting).
    fn apply_pending_removals(&self) {
        loop {
            if self.pending_removals.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
                return;
            }
            let Ok(mut writer) = self.writer.try_lock() else { return };
            let ids = std::mem::take(
                &mut *self.pending_removals.lock().unwrap_or_else(|e| e.into_inner()),
            );
            let serials: Vec<u64> =
                ids.iter().filter_map(|id| writer.serials.remove(id.as_ref())).collect();
            if !serials.is_empty() {
                self.publish(|set| set.update(vec![], &serials));
            }
            // let go, then look again: ids put on the list meanwhile found the mutex held
        }
    }

    /// Removes a query; false when it was not there.
    pub fn remove(&self, id: &str) -> bool {
        self.remove_many(&[id]) == 1
    }

    /// Removes queries in one change of the snapshot; how many were there.
    pub fn remove_many<S: AsRef<str>>(&self, ids: &[S]) -> usize {
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let serials: Vec<u64> =
            ids.iter().filter_map(|id| writer.serials.remove(id.as_ref())).collect();
        if !serials.is_empty() {
            self.publish(|set| set.update(vec![], &serials));
        }
        drop(writer);
        self.apply_pending_removals();
        serials.len()
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

#[cfg(test)]
mod tests {
    use super::*;
    use needle_query::QueryConfig;

    fn compiled(text: &str) -> Arc<CompiledQuery> {
        let plan = needle_query::compile(text, &QueryConfig::default()).unwrap();
        Arc::new(CompiledQuery::compile(&plan).unwrap())
    }

    #[test]
    fn a_batch_of_changes_is_one_new_snapshot() {
        let set = QuerySet::new();
        let query = compiled("SELECT * FROM STREAM(1000, TIME) WHERE id = 'x' LIMIT 1");
        let ids: Vec<Arc<str>> = (0..100).map(|i| Arc::from(format!("q{i}"))).collect();
        set.add_many(ids.iter().map(|id| (id.clone(), query.clone())).collect());
        assert_eq!((set.len(), set.load().version), (100, 1));
        set.add(Arc::from("one"), query);
        assert_eq!((set.len(), set.load().version), (101, 2));
        assert_eq!(set.remove_many(&ids[..60]), 60);
        assert_eq!((set.len(), set.load().version), (41, 3));
        assert_eq!(set.remove_many(&ids[..60]), 0, "already gone: no new snapshot");
        assert_eq!(set.load().version, 3);
        assert!(set.remove("one") && !set.remove("one"));
        assert_eq!(set.len(), 40);
    }

    #[test]
    fn a_removal_that_finds_the_writer_busy_is_applied_by_the_writer() {
        let set = QuerySet::new();
        let query = compiled("SELECT * FROM STREAM(1000, TIME) WHERE id = 'x' LIMIT 1");
        let ids: Vec<Arc<str>> = (0..10).map(|i| Arc::from(format!("q{i}"))).collect();
        set.add_many(ids.iter().map(|id| (id.clone(), query.clone())).collect());
        // free: at once
        set.remove_soon(&ids[..2]);
        assert_eq!(set.len(), 8);
        // held: the call returns without waiting, and the holder applies it as it lets go
        let held = set.writer.lock().unwrap();
        set.remove_soon(&ids[2..5]);
        assert_eq!(set.len(), 8, "not yet: the writer is busy");
        drop(held);
        set.add(Arc::from("new"), query);
        assert_eq!(set.len(), 6, "3 removed by the next writer, 1 added");
        assert!(set.pending_removals.lock().unwrap().is_empty());
        // a writer on another thread, a removal meanwhile: nothing is left waiting
        std::thread::scope(|s| {
            let busy = set.writer.lock().unwrap();
            let remover = s.spawn(|| set.remove_soon(&ids[5..]));
            remover.join().unwrap();
            drop(busy);
            set.remove_many(&["new"]);
        });
        assert_eq!(set.len(), 0);
    }
}
