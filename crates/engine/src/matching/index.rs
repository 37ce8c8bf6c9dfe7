//! `PredicateIndex`: an immutable index over a fixed list of members (one level of a
//! [`super::MatchSet`]). Each conjunct of a member's filter ([`super::access`]) is filed under
//! the part of it that rules out the most records:
//! - two or three equality clauses on different fields: a **composite** entry, keyed by the
//!   hash of the tuple of values (`country = 'US' AND device = 'ipad'` is found by one lookup of
//!   the record's `(country, device)`, not by every `device = 'ipad'` query);
//! - else one equality clause: per field, a hash map from string, number and boolean values;
//! - else a range clause (ranges on that field intersected): per field, ranges sorted for a
//!   lookup that visits few ranges that do not hold (see `RangeIndex`);
//! - members without conjuncts are listed apart: candidates for every record.
//!
//! A lookup reads the record's value of each indexed field once (the caller passes them in,
//! read through the engine's own field access, so paths and type hints behave exactly as in a
//! filter) and yields `Hit`s: a member, which conjunct, and whether the hit still needs the
//! conjunct's clauses checked (everything but a lone equality on an exact key does).

use super::access::{number_bits, Clause, Condition, EqKey};
use super::Member;
use crate::eval::node::FieldRef;
use needle_record::Value;
use smallvec::SmallVec;
use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

type Fast = foldhash::fast::FixedState;

/// The conjunct number of a member without conjuncts (its filter decides).
pub(crate) const NO_CONJUNCT: u32 = u32::MAX;
/// A composite entry covers at most this many fields...
const COMPOSITE_FIELDS: usize = 3;
/// ...and at most this many value combinations (`IN` lists multiply).
const COMPOSITE_COMBINATIONS: usize = 64;

/// One record's hit: `member` may match through its conjunct `conjunct`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hit<'a> {
    pub member: &'a Arc<Member>,
    pub conjunct: u32,
    /// The conjunct's clauses must still be checked on the record.
    pub check: bool,
}

#[derive(Debug)]
struct Entry {
    member: Arc<Member>,
    conjunct: u32,
    check: bool,
}

impl Entry {
    fn hit(&self) -> Hit<'_> {
        Hit { member: &self.member, conjunct: self.conjunct, check: self.check }
    }
}

/// Most keys are wanted by one conjunct: kept inline, without an allocation of its own.
type Entries = SmallVec<[Entry; 1]>;

#[derive(Debug, Default)]
pub(crate) struct PredicateIndex {
    /// The fields this level reads, by key; lookups refer to them by position.
    keys: Vec<(String, FieldRef)>,
    singles: Vec<SingleIndex>,
    composites: Vec<CompositeIndex>,
    always: Vec<Arc<Member>>,
    /// Every member, by serial.
    members: Vec<Arc<Member>>,
    /// `members`' serials, in the same order: what [`PredicateIndex::get`] searches (a search
    /// through the members themselves read one member per step, each a cache miss, on every
    /// level, for every query that ended: a quarter of the joiner's time when 100,000 queries
    /// completed within seconds).
    serials: Vec<u64>,
}

/// Equality and range entries on one field.
#[derive(Debug)]
struct SingleIndex {
    slot: usize,
    strings: HashMap<Box<str>, Entries, Fast>,
    numbers: HashMap<u64, Entries, Fast>,
    bools: [Entries; 2],
    ranges: RangeIndex,
}

/// Equality entries on a tuple of fields, keyed by [`tuple_hash`].
#[derive(Debug)]
struct CompositeIndex {
    slots: Vec<usize>,
    map: HashMap<u64, Entries, Fast>,
}

impl PredicateIndex {
    /// The index over `members` (each once).
    pub fn build(mut members: Vec<Arc<Member>>) -> Self {
        members.sort_unstable_by_key(|m| m.serial);
        let mut builder = Builder::default();
        for member in &members {
            match &member.access.conjuncts {
                None => builder.index.always.push(member.clone()),
                Some(conjuncts) => {
                    for (i, conjunct) in conjuncts.iter().enumerate() {
                        builder.file(member, i as u32, &conjunct.clauses);
                    }
                }
            }
        }
        let mut index = builder.index;
        for single in &mut index.singles {
            single.ranges.finish();
            single.strings.shrink_to_fit();
            single.numbers.shrink_to_fit();
        }
        index.serials = members.iter().map(|m| m.serial).collect();
        index.members = members;
        index
    }

    /// Members, retired ones included.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The member with this serial, retired or not.
    pub fn get(&self, serial: u64) -> Option<&Arc<Member>> {
        let (first, last) = (self.serials.first()?, self.serials.last()?);
        if serial < *first || serial > *last {
            return None;
        }
        let i = self.serials.binary_search(&serial).ok()?;
        Some(&self.members[i])
    }

    /// Every member, retired ones included, by serial.
    pub fn members(&self) -> &[Arc<Member>] {
        &self.members
    }

    /// The fields this level reads, with their keys.
    pub fn keys(&self) -> &[(String, FieldRef)] {
        &self.keys
    }

    /// Pushes the hits of one record (retired members included; a member more than once when
    /// several of its conjuncts hit), and the members without conjuncts. `values[slots[i]]` is
    /// the record's value of this level's `keys()[i]`.
    pub fn candidates<'a>(
        &'a self,
        values: &[Cow<'_, Value>],
        slots: &[usize],
        out: &mut Vec<Hit<'a>>,
    ) {
        let value = |slot: usize| -> &Value { &values[slots[slot]] };
        out.extend(self.always.iter().map(|member| Hit {
            member,
            conjunct: NO_CONJUNCT,
            check: false,
        }));
        for single in &self.singles {
            single.lookup(value(single.slot), out);
        }
        for composite in &self.composites {
            let mut hasher = TUPLE_HASH.build_hasher();
            if composite.slots.iter().all(|&s| hash_value(&mut hasher, value(s))) {
                if let Some(entries) = composite.map.get(&hasher.finish()) {
                    out.extend(entries.iter().map(Entry::hit));
                }
            }
        }
    }

    /// The indexed fields, as text (`name`, `name.key`, `name[0]`, with `:TYPE` for a hint).
    pub fn field_keys(&self) -> impl Iterator<Item = String> + '_ {
        self.keys.iter().map(|(key, _)| key.replace('\u{0}', ""))
    }

    /// Live members that are candidates for every record.
    pub fn unindexed(&self) -> usize {
        self.always.iter().filter(|m| m.is_live()).count()
    }
}

impl SingleIndex {
    fn lookup<'a>(&'a self, value: &Value, out: &mut Vec<Hit<'a>>) {
        let hits = |entries: &'a Entries, out: &mut Vec<Hit<'a>>| {
            out.extend(entries.iter().map(Entry::hit));
        };
        match value {
            Value::String(s) => {
                if let Some(entries) = self.strings.get(s.as_str()) {
                    hits(entries, out);
                }
            }
            Value::Bool(b) => hits(&self.bools[usize::from(*b)], out),
            Value::Int(_) | Value::Long(_) | Value::Float(_) | Value::Double(_) => {
                let Some(x) = value.as_f64().filter(|x| !x.is_nan()) else { return };
                if let Some(entries) = number_bits(x).and_then(|bits| self.numbers.get(&bits)) {
                    hits(entries, out);
                }
                self.ranges.lookup(x, out);
            }
            _ => {}
        }
    }
}

/// A range with both ends: `(low, high, entry)`.
type Bounded = (f64, f64, Entry);

/// Inclusive numeric ranges on one field, split so that a lookup visits few ranges that miss:
/// - `from`: `x >= low` only, sorted by `low`: the hits are a prefix;
/// - `upto`: `x <= high` only, sorted by `high`: the hits are a suffix;
/// - `bounded`: both ends, grouped by width (each group within a factor of 2 of its widest):
///   a group is scanned only where `low` lies within its widest width below `x`, so a lookup
///   visits the hits and, per group, at most as many misses as ranges start in that window.
#[derive(Debug, Default)]
struct RangeIndex {
    from: Vec<(f64, Entry)>,
    upto: Vec<(f64, Entry)>,
    /// (widest width, ranges sorted by `low`).
    bounded: Vec<(f64, Vec<Bounded>)>,
    /// Before [`RangeIndex::finish`]: the bounded ranges, in any order.
    pending: Vec<Bounded>,
}

impl RangeIndex {
    fn add(&mut self, low: f64, high: f64, entry: Entry) {
        if low > high {
            return; // holds for no value
        }
        match (low == f64::NEG_INFINITY, high == f64::INFINITY) {
            (_, true) => self.from.push((low, entry)),
            (true, false) => self.upto.push((high, entry)),
            (false, false) => self.pending.push((low, high, entry)),
        }
    }

    fn finish(&mut self) {
        self.from.sort_by(|a, b| a.0.total_cmp(&b.0));
        self.upto.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut groups: HashMap<i32, Vec<Bounded>> = HashMap::new();
        for range in self.pending.drain(..) {
            let width = range.1 - range.0;
            let class = if width > 0.0 && width.is_finite() {
                width.log2().floor() as i32
            } else if width == 0.0 {
                i32::MIN
            } else {
                i32::MAX
            };
            groups.entry(class).or_default().push(range);
        }
        let mut groups: Vec<(i32, Vec<Bounded>)> = groups.into_iter().collect();
        groups.sort_by_key(|g| g.0);
        self.bounded = groups
            .into_iter()
            .map(|(_, mut ranges)| {
                ranges.sort_by(|a, b| a.0.total_cmp(&b.0));
                let widest = ranges.iter().map(|r| r.1 - r.0).fold(0.0, f64::max);
                (widest, ranges)
            })
            .collect();
    }

    fn lookup<'a>(&'a self, x: f64, out: &mut Vec<Hit<'a>>) {
        let end = self.from.partition_point(|(low, _)| *low <= x);
        out.extend(self.from[..end].iter().map(|(_, e)| e.hit()));
        let start = self.upto.partition_point(|(high, _)| *high < x);
        out.extend(self.upto[start..].iter().map(|(_, e)| e.hit()));
        for (widest, ranges) in &self.bounded {
            let first = ranges.partition_point(|r| r.0 < x - widest);
            let end = ranges.partition_point(|r| r.0 <= x);
            if first < end {
                out.extend(ranges[first..end].iter().filter(|r| r.1 >= x).map(|r| r.2.hit()));
            }
        }
    }
}

/// The seed of the tuple hash: fixed, so keys built from constants and from records agree.
const TUPLE_HASH: Fast = Fast::with_seed(0x6e65_6564_6c65);

/// One element of a tuple as the tuple hash sees it: what a record's value and a constant's key
/// have in common, so both are hashed by one function ([`hash_part`]).
enum Part<'a> {
    Str(&'a str),
    /// `f64` bits, as [`number_bits`] gives them.
    Num(u64),
    Bool(bool),
}

fn hash_part(hasher: &mut impl Hasher, part: Part<'_>) {
    match part {
        Part::Str(s) => {
            hasher.write_u8(1);
            hasher.write(s.as_bytes());
            hasher.write_u8(0xff);
        }
        Part::Num(bits) => {
            hasher.write_u8(2);
            hasher.write_u64(bits);
        }
        Part::Bool(b) => {
            hasher.write_u8(3);
            hasher.write_u8(u8::from(b));
        }
    }
}

/// Feeds one value of a tuple to `hasher` as [`hash_key`] feeds the key it equals; false for
/// values no equality key matches (NULL, NaN, lists, maps).
fn hash_value(hasher: &mut impl Hasher, value: &Value) -> bool {
    let part = match value {
        Value::String(s) => Part::Str(s),
        Value::Bool(b) => Part::Bool(*b),
        v if v.is_numeric() => match v.as_f64().and_then(number_bits) {
            Some(bits) => Part::Num(bits),
            None => return false,
        },
        _ => return false,
    };
    hash_part(hasher, part);
    true
}

fn hash_key(hasher: &mut impl Hasher, key: &EqKey) {
    hash_part(
        hasher,
        match key {
            EqKey::Str(s) => Part::Str(s),
            EqKey::Num(bits) => Part::Num(*bits),
            EqKey::Bool(b) => Part::Bool(*b),
        },
    );
}

#[derive(Default)]
struct Builder {
    index: PredicateIndex,
    slots: HashMap<String, usize, Fast>,
    singles: HashMap<usize, usize, Fast>,
    composites: HashMap<Vec<usize>, usize, Fast>,
}

impl Builder {
    /// The position of the field `key` (of `clause`) among the looked-up fields.
    fn slot(&mut self, key: &str, clause: &Clause) -> usize {
        if let Some(&slot) = self.slots.get(key) {
            return slot;
        }
        let slot = self.index.keys.len();
        self.index.keys.push((key.to_owned(), clause.field.clone()));
        self.slots.insert(key.to_owned(), slot);
        slot
    }

    fn single(&mut self, slot: usize) -> &mut SingleIndex {
        let i = *self.singles.entry(slot).or_insert_with(|| {
            self.index.singles.push(SingleIndex {
                slot,
                strings: HashMap::default(),
                numbers: HashMap::default(),
                bools: Default::default(),
                ranges: RangeIndex::default(),
            });
            self.index.singles.len() - 1
        });
        &mut self.index.singles[i]
    }

    /// Files one conjunct of `member` under the clauses that rule out the most records.
    fn file(&mut self, member: &Arc<Member>, conjunct: u32, clauses: &[Clause]) {
        let entry = |check: bool| Entry { member: member.clone(), conjunct, check };
        let field_keys: Vec<String> = clauses.iter().map(Clause::key).collect();
        // the equality clauses, the one with the fewest keys per field
        let mut equalities: Vec<(&Clause, &str, &[EqKey])> = Vec::new();
        for (clause, field) in clauses.iter().zip(&field_keys) {
            if let Condition::Eq(keys) = &clause.condition {
                match equalities.iter_mut().find(|(_, f, _)| *f == field) {
                    Some(kept) if keys.len() < kept.2.len() => *kept = (clause, field, keys),
                    Some(_) => {}
                    None => equalities.push((clause, field, keys)),
                }
            }
        }
        equalities.sort_by_key(|(_, _, keys)| keys.len());
        let mut combinations = 1;
        let mut fields = 0;
        for (_, _, keys) in equalities.iter().take(COMPOSITE_FIELDS) {
            if combinations * keys.len() > COMPOSITE_COMBINATIONS {
                break;
            }
            combinations *= keys.len();
            fields += 1;
        }
        if fields >= 2 {
            let mut chosen: Vec<(usize, &[EqKey])> = equalities[..fields]
                .iter()
                .map(|(c, field, keys)| (self.slot(field, c), *keys))
                .collect();
            chosen.sort_by_key(|(slot, _)| *slot);
            let slots: Vec<usize> = chosen.iter().map(|(slot, _)| *slot).collect();
            let i = *self.composites.entry(slots.clone()).or_insert_with(|| {
                self.index.composites.push(CompositeIndex { slots, map: HashMap::default() });
                self.index.composites.len() - 1
            });
            let map = &mut self.index.composites[i].map;
            for_each_combination(&chosen, &mut Vec::new(), &mut |tuple| {
                let mut hasher = TUPLE_HASH.build_hasher();
                for key in tuple {
                    hash_key(&mut hasher, key);
                }
                map.entry(hasher.finish()).or_default().push(entry(true));
            });
            return;
        }
        if let Some((clause, field, keys)) = equalities.first() {
            let check = clauses.len() > 1 || !clause.hit_is_exact();
            let slot = self.slot(field, clause);
            let single = self.single(slot);
            for key in *keys {
                let list = match key {
                    EqKey::Str(s) => single.strings.entry(s.clone()).or_default(),
                    EqKey::Num(bits) => single.numbers.entry(*bits).or_default(),
                    EqKey::Bool(b) => &mut single.bools[usize::from(*b)],
                };
                // a member is listed once per key and conjunct, however often IN repeats it
                if list
                    .last()
                    .is_none_or(|e| e.member.serial != member.serial || e.conjunct != conjunct)
                {
                    list.push(entry(check));
                }
            }
            return;
        }
        // ranges only: the first ranged field, its ranges intersected
        let (Some(first), Some(first_key)) = (clauses.first(), field_keys.first()) else { return };
        let (mut low, mut high) = (f64::NEG_INFINITY, f64::INFINITY);
        for (clause, _) in clauses.iter().zip(&field_keys).filter(|(_, k)| *k == first_key) {
            if let Condition::Range { low: l, high: h } = clause.condition {
                low = low.max(l);
                high = high.min(h);
            }
        }
        let slot = self.slot(first_key, first);
        self.single(slot).ranges.add(low, high, entry(true));
    }
}

/// Calls `f` with every tuple of one key per field.
fn for_each_combination<'a>(
    fields: &[(usize, &'a [EqKey])],
    tuple: &mut Vec<&'a EqKey>,
    f: &mut impl FnMut(&[&'a EqKey]),
) {
    let Some(((_, keys), rest)) = fields.split_first() else {
        f(tuple);
        return;
    };
    for key in *keys {
        tuple.push(key);
        for_each_combination(rest, tuple, f);
        tuple.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_constants_hash_alike_across_numeric_types() {
        let of_value = |v: &Value| {
            let mut h = TUPLE_HASH.build_hasher();
            hash_value(&mut h, v).then(|| h.finish())
        };
        let of_key = |k: &EqKey| {
            let mut h = TUPLE_HASH.build_hasher();
            hash_key(&mut h, k);
            h.finish()
        };
        let five = EqKey::of_const(&Value::Int(5)).unwrap();
        for v in [Value::Int(5), Value::Long(5), Value::Double(5.0), Value::Float(5.0)] {
            assert_eq!(of_value(&v), Some(of_key(&five)), "{v:?}");
        }
        assert_eq!(of_value(&Value::from("a")), Some(of_key(&EqKey::Str("a".into()))));
        assert_ne!(of_value(&Value::from("5")), Some(of_key(&five)));
        assert_eq!(of_value(&Value::Null), None);
        assert_eq!(of_value(&Value::Double(f64::NAN)), None);
    }

    #[test]
    fn range_lookups_find_exactly_the_ranges_that_hold() {
        let member = {
            let plan =
                needle_query::compile("SELECT * FROM STREAM()", &Default::default()).unwrap();
            let query = Arc::new(crate::exec::CompiledQuery::compile(&plan).unwrap());
            Member::new(1, "q".into(), query)
        };
        let ranges = [
            (1.0, 3.0),
            (2.0, 2.0),
            (0.0, 1000.0),
            (f64::NEG_INFINITY, 2.5),
            (2.5, f64::INFINITY),
            (f64::NEG_INFINITY, f64::INFINITY),
            (-1e308, 1e308),
            (5.0, 4.0),
        ];
        let mut index = RangeIndex::default();
        for (i, (low, high)) in ranges.iter().enumerate() {
            index.add(
                *low,
                *high,
                Entry { member: member.clone(), conjunct: i as u32, check: true },
            );
        }
        index.finish();
        for x in [-1e300, -1.0, 0.0, 1.0, 2.0, 2.5, 3.0, 999.0, 1000.0, 1001.0, 1e300] {
            let mut out = Vec::new();
            index.lookup(x, &mut out);
            let mut got: Vec<u32> = out.iter().map(|h| h.conjunct).collect();
            got.sort();
            let expected: Vec<u32> = (0..ranges.len() as u32)
                .filter(|&i| ranges[i as usize].0 <= x && x <= ranges[i as usize].1)
                .collect();
            assert_eq!(got, expected, "x = {x}");
        }
    }
}
