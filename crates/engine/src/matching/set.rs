//! [`MatchSet`]: the active queries as one immutable snapshot that many worker threads read
//! without locks, and that is updated by building a new snapshot (read-copy-update: the runtime
//! swaps it in atomically).
//!
//! Updates are cheap, so that 100,000 queries arrive (and leave) in seconds:
//! - **Adding** works like a log-structured merge: the members live in a few levels, each an
//!   immutable `PredicateIndex`, level `i` holding up to `FIRST_LEVEL × GROWTH^i` members (the
//!   last level is unbounded). New members go to the first level, which is rebuilt; a level
//!   that overflows is merged into the next, and a burst of additions is built once into the
//!   level it ends in. A member is rebuilt O(log n) times over its life, so an addition costs
//!   O(log n) amortized, and a record costs one lookup per non-empty level.
//! - **Removing** marks the member retired ([`Member::is_live`]) at once — a one-way flag every
//!   snapshot honours — and the level keeps it physically until more than half of its members
//!   are retired, when it is rebuilt without them: O(1) amortized per removal.
//!
//! The snapshot also keeps what decoding needs: the union of the top-level fields the members
//! read, as a [`FieldSet`], rebuilt only when a field name comes or goes.

use super::index::{Hit, PredicateIndex};
use super::Member;
use crate::eval::node::FieldRef;
use crate::eval::EvalContext;
use crate::exec::reads::PART;
use needle_record::{FieldSet, Record, RecordError, Validation, Value};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

type Fast = foldhash::fast::FixedState;

/// Members the first level holds before it is merged into the second.
const FIRST_LEVEL: usize = 32;
/// How much larger each level may grow than the one before it.
const GROWTH: usize = 8;
/// The number of levels; the last one is unbounded (32 × 8^5 ≈ 1M before it is reached).
const LEVELS: usize = 6;

fn capacity(level: usize) -> usize {
    if level + 1 == LEVELS {
        usize::MAX
    } else {
        FIRST_LEVEL * GROWTH.pow(level as u32)
    }
}

#[derive(Debug, Clone)]
pub struct MatchSet {
    levels: [Arc<PredicateIndex>; LEVELS],
    /// Retired members still held by each level.
    retired: [usize; LEVELS],
    /// The fields some level looks up, each once: a record's values are read once for all
    /// levels.
    keys: Arc<Vec<(String, FieldRef)>>,
    /// Per level, the position in `keys` of each of the level's own keys.
    slots: Arc<[Vec<usize>; LEVELS]>,
    /// How many live members read each top-level field.
    field_uses: Arc<HashMap<String, usize, Fast>>,
    fields: Arc<FieldSet>,
    /// How much of a line the decoder checks.
    validation: Validation,
}

impl Default for MatchSet {
    fn default() -> Self {
        Self::new()
    }
}

impl MatchSet {
    pub fn new() -> Self {
        Self {
            levels: Default::default(),
            retired: [0; LEVELS],
            keys: Arc::default(),
            slots: Arc::default(),
            field_uses: Arc::default(),
            fields: Arc::new(FieldSet::default()),
            validation: Validation::default(),
        }
    }

    /// An empty set whose decoder checks `validation` of each line ([`Validation`]: the whole
    /// line, the default, or only the fields read).
    pub fn with_validation(validation: Validation) -> Self {
        let mut set = Self::new();
        set.validation = validation;
        set.fields = Arc::new(FieldSet::default().with_validation(validation));
        set
    }

    /// The number of live members.
    pub fn len(&self) -> usize {
        self.levels.iter().map(|l| l.len()).sum::<usize>() - self.retired.iter().sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The live member with this serial.
    pub fn get(&self, serial: u64) -> Option<&Arc<Member>> {
        self.levels.iter().find_map(|l| l.get(serial)).filter(|m| m.is_live())
    }

    pub fn contains(&self, serial: u64) -> bool {
        self.get(serial).is_some()
    }

    /// The live members.
    pub fn members(&self) -> impl Iterator<Item = &Arc<Member>> {
        self.levels.iter().flat_map(|l| l.members()).filter(|m| m.is_live())
    }

    /// The top-level fields some member reads: what a worker decodes.
    pub fn fields(&self) -> &FieldSet {
        &self.fields
    }

    /// The set with `added` and without the members whose serials are in `removed` (also when
    /// they are in `added`). Members already present (by serial) are not added twice; unknown
    /// serials are ignored. Removed members are retired for every snapshot, this one included.
    pub fn update(&self, added: Vec<Arc<Member>>, removed: &[u64]) -> MatchSet {
        let gone: HashSet<u64, Fast> = removed.iter().copied().collect();
        let mut field_uses: Option<HashMap<String, usize, Fast>> = None;
        let mut uses = |fields: &[Box<str>], delta: isize| {
            let uses = field_uses.get_or_insert_with(|| (*self.field_uses).clone());
            for f in fields {
                let n = uses.entry(f.to_string()).or_default();
                *n = n.saturating_add_signed(delta);
                if *n == 0 {
                    uses.remove(&**f);
                }
            }
        };
        let mut retired = self.retired;
        for &serial in &gone {
            let found = self.levels.iter().enumerate().find_map(|(i, l)| Some((i, l.get(serial)?)));
            if let Some((level, member)) = found {
                if member.retire() {
                    retired[level] += 1;
                    uses(member.fields(), -1);
                }
            }
        }
        let added: Vec<Arc<Member>> = added
            .into_iter()
            .filter(|m| {
                let new = !gone.contains(&m.serial) && self.get(m.serial).is_none();
                if !new && gone.contains(&m.serial) {
                    m.retire();
                }
                new
            })
            .collect();
        for m in &added {
            uses(m.fields(), 1);
        }

        let mut levels = self.levels.clone();
        let mut rebuilt = !added.is_empty();
        if !added.is_empty() {
            // the members of the first levels and the new ones, built once into the first level
            // that holds them all
            let mut pending = added;
            let mut level = 0;
            loop {
                pending.extend(live(&levels[level]));
                retired[level] = 0;
                levels[level] = Arc::default();
                if pending.len() <= capacity(level) {
                    break;
                }
                level += 1;
            }
            levels[level] = Arc::new(PredicateIndex::build(pending));
        }
        for (level, index) in levels.iter_mut().enumerate() {
            if retired[level] > 0 && retired[level] * 2 > index.len() {
                *index = Arc::new(PredicateIndex::build(live(index).collect()));
                retired[level] = 0;
                rebuilt = true;
            }
        }
        let (keys, slots) = if rebuilt {
            let (keys, slots) = union_of_keys(&levels);
            (Arc::new(keys), Arc::new(slots))
        } else {
            (self.keys.clone(), self.slots.clone())
        };

        let fields = match field_uses {
            Some(uses) => {
                let same_names = uses.len() == self.field_uses.len()
                    && uses.keys().all(|k| self.field_uses.contains_key(k));
                let fields = if same_names {
                    self.fields.clone()
                } else {
                    let mut reads: Vec<&String> = uses.keys().collect();
                    reads.sort();
                    let set = FieldSet::with_parts(reads.into_iter().map(|read| {
                        match read.split_once(PART) {
                            Some((name, key)) => (name, Some(key)),
                            None => (read.as_str(), None),
                        }
                    }));
                    Arc::new(set.with_validation(self.validation))
                };
                (Arc::new(uses), fields)
            }
            None => (self.field_uses.clone(), self.fields.clone()),
        };
        MatchSet {
            levels,
            retired,
            keys,
            slots,
            field_uses: fields.0,
            fields: fields.1,
            validation: self.validation,
        }
    }

    /// The fields the index looks up, and how many live members are candidates for every
    /// record (they have no index terms): what `needle bench matching` and the metrics report.
    pub fn shape(&self) -> (Vec<String>, usize) {
        let mut keys: Vec<String> = self.levels.iter().flat_map(|l| l.field_keys()).collect();
        keys.sort();
        keys.dedup();
        (keys, self.levels.iter().map(|l| l.unindexed()).sum())
    }

    /// Decodes the fields the members read from one line into the record kept from the
    /// previous line ([`FieldSet::decode_into`]); the whole record is decoded later, only for a
    /// member that wants it and matched.
    pub fn decode_into(&self, line: &[u8], record: &mut Record) -> Result<(), RecordError> {
        self.fields.decode_into(line, record)
    }

    /// The whole record of a line [`MatchSet::decode_into`] has just accepted, for the queries
    /// that read every field: see [`needle_record::FieldSet::whole_record`].
    pub fn whole_record(&self, line: &[u8]) -> Result<Record, RecordError> {
        self.fields.whole_record(line)
    }

    /// The index's hits for one record, live members only, in serial order (a member once per
    /// conjunct that hit), and the members without conjuncts. The caller checks the hits
    /// ([`Hit::check`]) and runs the filters that remain.
    pub(crate) fn candidates<'a>(
        &'a self,
        record: &Record,
        ctx: &EvalContext,
        out: &mut Vec<Hit<'a>>,
    ) {
        let values: SmallVec<[Cow<'_, Value>; 8]> =
            self.keys.iter().map(|(_, field)| field.lookup(record, ctx)).collect();
        for (level, slots) in self.levels.iter().zip(self.slots.iter()) {
            if !level.is_empty() {
                level.candidates(&values, slots, out);
            }
        }
        if out.len() > 1 {
            out.sort_unstable_by_key(|h| (h.member.serial, h.conjunct));
            out.dedup_by_key(|h| (h.member.serial, h.conjunct));
        }
        if self.retired.iter().any(|&n| n > 0) {
            out.retain(|h| h.member.is_live());
        }
    }
}

/// The distinct keys of `levels`, and per level where each of its keys is among them.
fn union_of_keys(
    levels: &[Arc<PredicateIndex>; LEVELS],
) -> (Vec<(String, FieldRef)>, [Vec<usize>; LEVELS]) {
    let mut keys: Vec<(String, FieldRef)> = Vec::new();
    let mut positions: HashMap<&str, usize, Fast> = HashMap::default();
    let mut slots: [Vec<usize>; LEVELS] = Default::default();
    for (level, slots) in levels.iter().zip(slots.iter_mut()) {
        for (key, field) in level.keys() {
            let at = *positions.entry(key).or_insert_with(|| {
                keys.push((key.clone(), field.clone()));
                keys.len() - 1
            });
            slots.push(at);
        }
    }
    (keys, slots)
}

/// The live members of one level.
fn live(level: &PredicateIndex) -> impl Iterator<Item = Arc<Member>> + '_ {
    level.members().iter().filter(|m| m.is_live()).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matching::member_of as member;

    fn level_sizes(set: &MatchSet) -> Vec<usize> {
        set.levels.iter().map(|l| l.len()).collect()
    }

    #[test]
    fn additions_fill_the_first_level_and_overflow_into_larger_ones() {
        let mut set = MatchSet::new();
        for serial in 1..=FIRST_LEVEL as u64 {
            set = set.update(vec![member(serial, "SELECT * FROM STREAM() WHERE s = 'x'")], &[]);
        }
        assert_eq!(level_sizes(&set)[..2], [FIRST_LEVEL, 0]);
        let next = FIRST_LEVEL as u64 + 1;
        set = set.update(vec![member(next, "SELECT * FROM STREAM() WHERE s = 'x'")], &[]);
        assert_eq!(level_sizes(&set)[..2], [0, FIRST_LEVEL + 1]);
        // a burst is built once, into the level that holds it all
        let burst: Vec<Arc<Member>> =
            (100..100 + 3000).map(|s| member(s, "SELECT * FROM STREAM() WHERE n > 1")).collect();
        set = set.update(burst, &[]);
        assert_eq!(set.len(), 3000 + FIRST_LEVEL + 1);
        assert_eq!(level_sizes(&set)[..4], [0, 0, 0, 3000 + FIRST_LEVEL + 1]);
        assert_eq!(set.fields().names().collect::<Vec<_>>(), ["n", "s"]);
    }

    #[test]
    fn removals_retire_at_once_and_rebuild_a_level_once_half_is_gone() {
        let members: Vec<Arc<Member>> =
            (1..=100).map(|s| member(s, "SELECT * FROM STREAM() WHERE s = 'x'")).collect();
        let before = MatchSet::new().update(members.clone(), &[]);
        assert_eq!(level_sizes(&before)[1], 100);
        let after = before.update(vec![], &[1, 2, 3, 999]);
        assert_eq!(after.len(), 97);
        assert!(!members[0].is_live() && before.get(1).is_none(), "old snapshots honour it");
        assert_eq!(level_sizes(&after)[1], 100, "still held");
        let removed: Vec<u64> = (4..=51).collect();
        let after = after.update(vec![], &removed);
        assert_eq!(level_sizes(&after)[1], 49, "rebuilt without the retired");
        assert_eq!(after.len(), 49);
        // the last reader of a field takes it out of the decoded set
        let all: Vec<u64> = (52..=100).collect();
        let empty = after.update(vec![], &all);
        assert!(empty.is_empty() && empty.fields().is_empty());
    }

    #[test]
    fn a_member_added_and_removed_at_once_is_not_added() {
        let m = member(7, "SELECT * FROM STREAM()");
        let set = MatchSet::new().update(vec![m.clone()], &[7]);
        assert!(set.is_empty() && !m.is_live());
        let set = MatchSet::new().update(vec![member(8, "SELECT * FROM STREAM()")], &[]);
        let again = set.update(vec![member(8, "SELECT * FROM STREAM() WHERE s = 'y'")], &[]);
        assert_eq!(again.len(), 1, "a serial already present is not added twice");
    }
}
