//! The set of running queries, as the workers see it: an immutable [`Snapshot`] (a version and
//! the engine's [`MatchSet`]: the predicate index and the fields to decode) swapped atomically
//! (read-copy-update with `arc-swap`) whenever queries start or end. A worker loads the current
//! snapshot once per batch with no lock; writers (the API starting a query, the joiner ending
//! one) take a mutex among themselves only, and a change costs O(log n) amortized per query
//! added and O(1) per query removed, not O(n) ([`MatchSet::update`]). Bursts of changes are
//! applied as one ([`QuerySet::add_many`], [`QuerySet::remove_many`]): one new snapshot for a
//! thousand queries started or ended together, not a thousand.
//!
//! The joiner never waits for a writer, nor rebuilds a level itself ([`QuerySet::remove_soon`]):
//! adding a burst of queries to a set of a million rebuilds its largest level, a second or so
//! with the mutex held, and so does removing half of that level's members; a joiner doing
//! either delivered no result meanwhile. The ids it removes go to a thread of the set's own,
//! which applies them as one change as soon as it has the mutex (until then the workers may
//! still offer the ended queries' records, which the joiner drops).

use crate::id_table::{HasId, IdTable};
use arc_swap::ArcSwap;
use needle_engine::exec::CompiledQuery;
use needle_engine::matching::{MatchSet, Member};
use needle_record::Validation;
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
    /// The members of the set by id (for their serials when they leave): the snapshot's own
    /// members, shared, in slots of one pointer.
    members: IdTable<Arc<Member>>,
}

impl HasId for Member {
    fn id(&self) -> &str {
        &self.id
    }
}

#[derive(Debug, Default)]
pub struct QuerySet {
    current: ArcSwap<Snapshot>,
    writer: Mutex<Writer>,
    /// To the thread that applies [`QuerySet::remove_soon`]'s removals (started by the first).
    removals: std::sync::OnceLock<crossbeam_channel::Sender<Vec<Arc<str>>>>,
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
                let member = Member::new(writer.next_serial, id, query);
                writer.members.insert(member.clone());
                member
            })
            .collect();
        self.publish(|set| set.update(members, &[]));
    }

    /// Removes queries without waiting for the writer's mutex, on the set's own thread (see the
    /// module doc); the workers stop offering their records within moments.
    pub fn remove_soon(self: &Arc<Self>, ids: &[Arc<str>]) {
        if ids.is_empty() {
            return;
        }
        let sender = self.removals.get_or_init(|| {
            let (sender, received) = crossbeam_channel::unbounded::<Vec<Arc<str>>>();
            let set = Arc::downgrade(self);
            // ends when the set does (its sender dropped with it)
            let spawned =
                std::thread::Builder::new().name("needle-removals".into()).spawn(move || {
                    while let Ok(mut ids) = received.recv() {
                        while let Ok(more) = received.try_recv() {
                            ids.extend(more);
                        }
                        let Some(set) = set.upgrade() else { return };
                        set.remove_many(&ids);
                    }
                });
            if let Err(e) = spawned {
                eprintln!("needle: no thread for removing ended queries ({e}): the joiner does");
            }
            sender
        });
        if sender.send(ids.to_vec()).is_err() {
            self.remove_many(ids);
        }
    }

    /// Removes a query; false when it was not there.
    pub fn remove(&self, id: &str) -> bool {
        self.remove_many(&[id]) == 1
    }

    /// Removes queries in one change of the snapshot; how many were there.
    pub fn remove_many<S: AsRef<str>>(&self, ids: &[S]) -> usize {
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let serials: Vec<u64> = ids
            .iter()
            .filter_map(|id| writer.members.remove(id.as_ref()))
            .map(|m| m.serial)
            .collect();
        if !serials.is_empty() {
            self.publish(|set| set.update(vec![], &serials));
        }
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
    fn a_removal_soon_does_not_wait_for_a_busy_writer() {
        let set = Arc::new(QuerySet::new());
        let query = compiled("SELECT * FROM STREAM(1000, TIME) WHERE id = 'x' LIMIT 1");
        let ids: Vec<Arc<str>> = (0..10).map(|i| Arc::from(format!("q{i}"))).collect();
        set.add_many(ids.iter().map(|id| (id.clone(), query.clone())).collect());
        let settled = |n: usize| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while set.len() != n && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            set.len()
        };
        set.remove_soon(&ids[..2]);
        assert_eq!(settled(8), 8);
        // the writer's mutex held: the call returns at once, the removal waits for the mutex
        let held = set.writer.lock().unwrap();
        set.remove_soon(&ids[2..5]);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(set.len(), 8, "not while the writer is busy");
        drop(held);
        assert_eq!(settled(5), 5);
        // the thread ends with the set
        let weak = Arc::downgrade(&set);
        drop(set);
        assert!(weak.upgrade().is_none());
    }
}
