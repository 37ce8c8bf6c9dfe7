//! Tables of per-query entries (boxed or shared) found by the query id each entry holds
//! ([`IdTable`]): a slot is the entry's pointer alone (8 bytes), not the id's 16-byte pointer
//! beside it. A million running queries make tables of two million slots: 32 MB less for each
//! such table.

use hashbrown::HashTable;
use std::hash::BuildHasher;
use std::ops::{Deref, DerefMut};

/// An entry that knows its query's id.
pub(crate) trait HasId {
    fn id(&self) -> &str;
}

/// Entries (`Box<T>`, `Arc<T>`) by the id they hold, one per id.
pub(crate) struct IdTable<P> {
    table: HashTable<P>,
    hasher: foldhash::fast::RandomState,
}

impl<P> Default for IdTable<P> {
    fn default() -> Self {
        Self { table: HashTable::new(), hasher: foldhash::fast::RandomState::default() }
    }
}

impl<P: std::fmt::Debug> std::fmt::Debug for IdTable<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.table.iter()).finish()
    }
}

/// The entry is the one for `id` (the same text; the same allocation is the quick answer).
fn is<P: Deref<Target: HasId>>(id: &str) -> impl Fn(&P) -> bool + '_ {
    move |entry| {
        let held = entry.id();
        std::ptr::eq(held.as_ptr(), id.as_ptr()) && held.len() == id.len() || held == id
    }
}

impl<P: Deref<Target: HasId>> IdTable<P> {
    fn hash(&self, id: &str) -> u64 {
        self.hasher.hash_one(id)
    }

    pub fn get(&self, id: &str) -> Option<&P::Target> {
        self.table.find(self.hash(id), is(id)).map(|entry| &**entry)
    }

    pub fn contains_key(&self, id: &str) -> bool {
        self.get(id).is_some()
    }

    /// Puts `entry` in; the entry it replaces (of the same id), if any.
    pub fn insert(&mut self, entry: P) -> Option<P> {
        let hasher = self.hasher.clone();
        let hash = self.hash(entry.id());
        match self.table.find_mut(hash, is(entry.id())) {
            Some(slot) => Some(std::mem::replace(slot, entry)),
            None => {
                self.table.insert_unique(hash, entry, |e| hasher.hash_one(e.id()));
                None
            }
        }
    }

    pub fn remove(&mut self, id: &str) -> Option<P> {
        let hash = self.hash(id);
        self.table.find_entry(hash, is(id)).ok().map(|entry| entry.remove().0)
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn values(&self) -> impl Iterator<Item = &P::Target> {
        self.table.iter().map(|entry| &**entry)
    }
}

impl<P: DerefMut<Target: HasId>> IdTable<P> {
    pub fn get_mut(&mut self, id: &str) -> Option<&mut P::Target> {
        let hash = self.hash(id);
        self.table.find_mut(hash, is(id)).map(|entry| &mut **entry)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut P::Target> {
        self.table.iter_mut().map(|entry| &mut **entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Entry {
        id: String,
        value: u32,
    }

    impl HasId for Entry {
        fn id(&self) -> &str {
            &self.id
        }
    }

    fn entry(id: &str, value: u32) -> Box<Entry> {
        Box::new(Entry { id: id.to_owned(), value })
    }

    #[test]
    fn entries_are_found_replaced_and_removed_by_the_id_they_hold() {
        let mut table = IdTable::<Box<Entry>>::default();
        for i in 0..10_000u32 {
            assert!(table.insert(entry(&format!("q-{i}"), i)).is_none());
        }
        assert_eq!(table.len(), 10_000);
        assert_eq!(table.get("q-1234").map(|e| e.value), Some(1234));
        assert_eq!(table.get("q-10000"), None);
        let replaced = table.insert(entry("q-7", 70)).expect("q-7 was there");
        assert_eq!((replaced.value, table.get("q-7").unwrap().value, table.len()), (7, 70, 10_000));
        table.get_mut("q-8").unwrap().value = 80;
        assert_eq!(table.get("q-8").unwrap().value, 80);
        for i in (0..10_000u32).step_by(2) {
            assert_eq!(table.remove(&format!("q-{i}")).map(|e| e.id), Some(format!("q-{i}")));
        }
        assert_eq!(table.remove("q-0"), None);
        assert_eq!(table.len(), 5_000);
        assert!(table.contains_key("q-9999") && !table.contains_key("q-9998"));
        let sum: u64 = table.values().map(|e| u64::from(e.value)).sum();
        let expected: u64 = (1..10_000u64).step_by(2).map(|i| if i == 7 { 70 } else { i }).sum();
        assert_eq!(sum, expected);
        table.values_mut().for_each(|e| e.value = 1);
        assert_eq!(table.values().map(|e| e.value).sum::<u32>(), 5_000);
    }
}
