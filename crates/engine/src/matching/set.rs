//! [`MatchSet`]: the active queries as one immutable snapshot that many worker threads read
//! without locks, and that is updated by building a new snapshot (read-copy-update: the runtime
//! swaps it in atomically).
//!
//! Updates are incremental: a snapshot is a large `base` index, a small `delta` index of the
//! members added since the base was built, and the serials removed from the base since. Adding
//! or removing a member rebuilds only the delta (or the removed set); when either outgrows
//! about the square root of the total, everything is folded into a new base. So a change costs
//! O(√n) amortized, a record costs two index lookups, and 100,000 queries arrive in seconds,
//! not hours.
//!
//! The snapshot also keeps what decoding needs: the union of the top-level fields the members
//! read, as a [`FieldSet`], rebuilt only when a field name comes or goes.

use super::index::PredicateIndex;
use super::Member;
use crate::eval::EvalContext;
use needle_record::{FieldSet, Record, RecordError};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

type Fast = foldhash::fast::FixedState;

#[derive(Debug, Clone)]
pub struct MatchSet {
    base: Arc<PredicateIndex>,
    delta: Arc<PredicateIndex>,
    removed: Arc<HashSet<u64, Fast>>,
    /// How many members read each top-level field.
    field_uses: Arc<HashMap<String, usize>>,
    fields: Arc<FieldSet>,
}

impl Default for MatchSet {
    fn default() -> Self {
        Self::new()
    }
}

impl MatchSet {
    pub fn new() -> Self {
        Self {
            base: Arc::default(),
            delta: Arc::default(),
            removed: Arc::default(),
            field_uses: Arc::default(),
            fields: Arc::new(FieldSet::default()),
        }
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.base.len() - self.removed.len() + self.delta.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, serial: u64) -> Option<&Arc<Member>> {
        self.delta
            .get(serial)
            .or_else(|| self.base.get(serial).filter(|_| !self.removed.contains(&serial)))
    }

    pub fn contains(&self, serial: u64) -> bool {
        self.get(serial).is_some()
    }

    pub fn members(&self) -> impl Iterator<Item = &Arc<Member>> {
        self.base
            .members()
            .filter(|m| !self.removed.contains(&m.serial))
            .chain(self.delta.members())
    }

    /// The top-level fields some member reads: what a worker decodes.
    pub fn fields(&self) -> &FieldSet {
        &self.fields
    }

    /// The set with `added` and without the members whose serials are in `removed` (also when
    /// they are in `added`). Members already present (by serial) are not added twice; unknown
    /// serials are ignored.
    pub fn update(&self, added: Vec<Arc<Member>>, removed: &[u64]) -> MatchSet {
        let gone: HashSet<u64, Fast> = removed.iter().copied().collect();
        let added: Vec<Arc<Member>> = added
            .into_iter()
            .filter(|m| !self.contains(m.serial) && !gone.contains(&m.serial))
            .collect();
        let removed: Vec<&Arc<Member>> = gone.iter().filter_map(|s| self.get(*s)).collect();
        if added.is_empty() && removed.is_empty() {
            return self.clone();
        }
        let mut field_uses = (*self.field_uses).clone();
        for m in &added {
            for f in &m.access.fields {
                *field_uses.entry(f.clone()).or_default() += 1;
            }
        }
        for m in &removed {
            for f in &m.access.fields {
                if let Some(n) = field_uses.get_mut(f) {
                    *n -= 1;
                    if *n == 0 {
                        field_uses.remove(f);
                    }
                }
            }
        }
        let fields = if field_uses.len() == self.field_uses.len()
            && field_uses.keys().all(|k| self.field_uses.contains_key(k))
        {
            self.fields.clone()
        } else {
            let mut names: Vec<&String> = field_uses.keys().collect();
            names.sort();
            Arc::new(FieldSet::new(names))
        };

        let mut delta: Vec<&Arc<Member>> =
            self.delta.members().filter(|m| !gone.contains(&m.serial)).collect();
        delta.extend(&added);
        let mut base_removed = (*self.removed).clone();
        base_removed
            .extend(removed.iter().filter(|m| self.base.get(m.serial).is_some()).map(|m| m.serial));

        let total = self.base.len() - base_removed.len() + delta.len();
        let limit = ((total as f64).sqrt() as usize).max(64);
        let (base, delta, removed) = if delta.len() > limit || base_removed.len() > limit {
            let all: Vec<&Arc<Member>> = self
                .base
                .members()
                .filter(|m| !base_removed.contains(&m.serial))
                .chain(delta)
                .collect();
            let mut all = all;
            all.sort_by_key(|m| m.serial);
            (Arc::new(PredicateIndex::build(all)), Arc::default(), Arc::default())
        } else {
            delta.sort_by_key(|m| m.serial);
            (self.base.clone(), Arc::new(PredicateIndex::build(delta)), Arc::new(base_removed))
        };
        MatchSet { base, delta, removed, field_uses: Arc::new(field_uses), fields }
    }

    /// The fields the index looks up, and how many members are candidates for every record
    /// (they have no index terms): what `needle bench matching` and the metrics report.
    pub fn shape(&self) -> (Vec<String>, usize) {
        let mut keys: Vec<String> = self.base.field_keys().chain(self.delta.field_keys()).collect();
        keys.sort();
        keys.dedup();
        (keys, self.base.unindexed() + self.delta.unindexed())
    }

    /// Decodes the fields the members read from one line (the whole record is decoded later,
    /// only for a member that wants it and matched).
    pub fn decode(&self, line: &[u8]) -> Result<Record, RecordError> {
        self.fields.decode(line)
    }

    /// The members a record may match, each once, in serial order: those whose index terms hold
    /// and those without terms. The caller runs each one's filter.
    pub fn candidates<'a>(
        &'a self,
        record: &Record,
        ctx: &EvalContext,
        out: &mut Vec<&'a Arc<Member>>,
    ) {
        self.base.candidates(record, ctx, out);
        if !self.removed.is_empty() {
            out.retain(|m| !self.removed.contains(&m.serial));
        }
        self.delta.candidates(record, ctx, out);
        if out.len() > 1 {
            out.sort_unstable_by_key(|m| m.serial);
            out.dedup_by_key(|m| m.serial);
        }
    }
}
