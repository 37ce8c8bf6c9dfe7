//! [`PredicateIndex`]: an immutable index over a fixed list of members' terms. Per indexed field:
//! a hash map from string, number and boolean values to the members that want them, and the
//! members' numeric ranges sorted by their low end. Members without terms are listed apart:
//! they are candidates for every record.
//!
//! A lookup evaluates each indexed field once per record (through the engine's own field
//! access, so paths and type hints behave exactly as in a filter) and collects the members whose
//! terms hold. The range lookup scans the ranges whose low end is at most the value, checking
//! the high end: linear in those, which is fine for the tens to thousands of ranges a field sees
//! in practice.

use super::access::{number_bits, Condition, EqKey};
use super::Member;
use crate::eval::node::FieldRef;
use crate::eval::EvalContext;
use needle_record::{Record, Value};
use std::collections::HashMap;
use std::sync::Arc;

type Fast = foldhash::fast::FixedState;

#[derive(Debug, Default)]
pub(crate) struct PredicateIndex {
    fields: Vec<FieldIndex>,
    always: Vec<Arc<Member>>,
    /// Every member, by serial.
    members: Vec<Arc<Member>>,
}

#[derive(Debug)]
struct FieldIndex {
    key: String,
    field: FieldRef,
    strings: HashMap<Box<str>, Vec<Arc<Member>>, Fast>,
    numbers: HashMap<u64, Vec<Arc<Member>>, Fast>,
    bools: [Vec<Arc<Member>>; 2],
    /// Sorted by `low`.
    ranges: Vec<(f64, f64, Arc<Member>)>,
}

impl FieldIndex {
    fn new(key: String, field: FieldRef) -> Self {
        Self {
            key,
            field,
            strings: HashMap::default(),
            numbers: HashMap::default(),
            bools: Default::default(),
            ranges: Vec::new(),
        }
    }

    fn lookup<'a>(&'a self, value: &Value, out: &mut Vec<&'a Arc<Member>>) {
        match value {
            Value::String(s) => {
                if let Some(members) = self.strings.get(s.as_str()) {
                    out.extend(members);
                }
            }
            Value::Bool(b) => out.extend(&self.bools[usize::from(*b)]),
            Value::Int(_) | Value::Long(_) | Value::Float(_) | Value::Double(_) => {
                let Some(x) = value.as_f64().filter(|x| !x.is_nan()) else { return };
                if let Some(members) = number_bits(x).and_then(|bits| self.numbers.get(&bits)) {
                    out.extend(members);
                }
                let end = self.ranges.partition_point(|(low, _, _)| *low <= x);
                out.extend(self.ranges[..end].iter().filter(|r| r.1 >= x).map(|r| &r.2));
            }
            _ => {}
        }
    }
}

impl PredicateIndex {
    /// The index over `members` (each once).
    pub fn build(mut members: Vec<Arc<Member>>) -> Self {
        members.sort_unstable_by_key(|m| m.serial);
        let mut index = PredicateIndex::default();
        let mut by_key: HashMap<&str, usize, Fast> = HashMap::default();
        for member in &members {
            let Some(terms) = &member.access.terms else {
                index.always.push(member.clone());
                continue;
            };
            for term in terms {
                let i = *by_key.entry(&term.key).or_insert_with(|| {
                    index.fields.push(FieldIndex::new(term.key.clone(), term.field.clone()));
                    index.fields.len() - 1
                });
                let field = &mut index.fields[i];
                let push = |list: &mut Vec<Arc<Member>>| {
                    // a member is listed once per key, however often its terms repeat it
                    if list.last().is_none_or(|m| m.serial != member.serial) {
                        list.push(member.clone());
                    }
                };
                match &term.condition {
                    Condition::Eq(EqKey::Str(s)) => {
                        push(field.strings.entry(s.clone()).or_default())
                    }
                    Condition::Eq(EqKey::Num(bits)) => {
                        push(field.numbers.entry(*bits).or_default())
                    }
                    Condition::Eq(EqKey::Bool(b)) => push(&mut field.bools[usize::from(*b)]),
                    Condition::Range { low, high } => {
                        if low <= high {
                            field.ranges.push((*low, *high, member.clone()))
                        }
                    }
                }
            }
        }
        for field in &mut index.fields {
            field.ranges.sort_by(|a, b| a.0.total_cmp(&b.0));
            field.strings.shrink_to_fit();
            field.numbers.shrink_to_fit();
        }
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
        let i = self.members.binary_search_by_key(&serial, |m| m.serial).ok()?;
        Some(&self.members[i])
    }

    /// Every member, retired ones included, by serial.
    pub fn members(&self) -> &[Arc<Member>] {
        &self.members
    }

    /// Pushes the members whose terms hold for `record` (possibly more than once each, retired
    /// ones included), and those without terms.
    pub fn candidates<'a>(
        &'a self,
        record: &Record,
        ctx: &EvalContext,
        out: &mut Vec<&'a Arc<Member>>,
    ) {
        out.extend(&self.always);
        for field in &self.fields {
            field.lookup(&field.field.lookup(record, ctx), out);
        }
    }

    /// The indexed fields, as text (`name`, `name.key`, `name[0]`, with `:TYPE` for a hint).
    pub fn field_keys(&self) -> impl Iterator<Item = String> + '_ {
        self.fields.iter().map(|f| f.key.replace("\u{0}", ""))
    }

    /// Live members that are candidates for every record.
    pub fn unindexed(&self) -> usize {
        self.always.iter().filter(|m| m.is_live()).count()
    }
}
