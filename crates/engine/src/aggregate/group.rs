//! GROUP ALL and GROUP BY (and SELECT DISTINCT, a GROUP BY without aggregates): exact,
//! mergeable accumulators for COUNT, SUM, MIN, MAX and AVG, per group.
//!
//! - COUNT(*) counts records; COUNT(e) (not in BQL, but a plan may hold it) counts non-NULL `e`.
//! - SUM and AVG take numeric inputs; NULL is skipped silently, any other non-numeric value is
//!   skipped and counted in the metadata (`"Ignored Values": {column: n}`). INTEGER and LONG
//!   inputs are summed exactly in 128 bits, FLOAT and DOUBLE inputs in an `f64`; the result is a
//!   DOUBLE, NULL when no numeric input was seen. AVG keeps that sum and the count, so merging is
//!   exact (up to `f64` rounding of non-integral inputs).
//! - MIN and MAX order by [`crate::compare::total_cmp`] (numbers across numeric types, strings by
//!   bytes, booleans; across kinds NULL < booleans < numbers < strings < lists < maps), with ties
//!   between equal-comparing values of different types broken by type so that any merge order
//!   picks the same value. NULL and NaN inputs are skipped (NaN counted as ignored). The value
//!   keeps its type; NULL when there was none.
//! - GROUP BY keys are the [`super::key`] canonical keys; output records are the key columns then
//!   the aggregate columns, sorted by key. At most `max_groups` groups are kept: a record of a new
//!   group past the limit is dropped and counted, and the metadata says
//!   `"Groups": {"Limit": max_groups, "Dropped Records": n}`.

use super::codec::{corrupt, Reader, Writer};
use super::key::{canonical, cmp_tuples, strict_cmp, write_key};
use crate::eval::{CompiledExpr, EvalContext};
use crate::EngineError;
use needle_query::plan::{AggregateFunction, NamedAggregate, NamedExpr};
use needle_record::{Record, Value};
use std::cmp::Ordering;
use std::collections::HashMap;

/// The compiled aggregate columns shared by GROUP ALL and GROUP BY.
#[derive(Debug)]
pub struct Aggregates {
    columns: Vec<Column>,
}

#[derive(Debug)]
struct Column {
    name: String,
    function: AggregateFunction,
    input: Option<CompiledExpr>,
    /// The input is a top-level field as it is (no path, no cast): its statistics answer
    /// the aggregate ([`Aggregates::from_summary`]).
    field: Option<String>,
}

/// What is known of one field over a set of records (a stored block's column statistics):
/// enough to fold them into an aggregate without reading them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ColumnSummary {
    /// Records where the field is not NULL.
    pub count: u64,
    /// The sum of its values, for a numeric field.
    pub sum: Option<f64>,
    /// Its smallest and largest value (`None`: unknown, or every value NULL).
    pub min: Option<Value>,
    pub max: Option<Value>,
}

/// The records of one group, summarized instead of read (a stored block read column at a
/// time): the group's key values, how many records it has, and a summary of each field its
/// aggregates read (in the order of the field list the caller was given).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupRows {
    pub keys: Vec<Value>,
    pub rows: u64,
    pub fields: Vec<ColumnSummary>,
}

impl GroupRows {
    /// The summary of `field`, given the list `fields` the summaries follow.
    fn summary(&self, fields: &[&str], field: &str) -> Option<ColumnSummary> {
        let i = fields.iter().position(|f| *f == field)?;
        self.fields.get(i).cloned()
    }
}

/// Integers up to this magnitude add up exactly in an `f64`.
const EXACT_IN_F64: f64 = 9_007_199_254_740_992.0;

/// One aggregate's running value.
#[derive(Debug, Clone, PartialEq)]
pub enum Acc {
    Count(u64),
    /// SUM and AVG.
    Sum {
        ints: i128,
        floats: f64,
        n: u64,
    },
    /// MIN or MAX: the best value so far.
    Extreme(Option<Value>),
}

/// What one update did to an aggregate: counted, skipped (NULL) or ignored (wrong type).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Used,
    Skipped,
    Ignored,
}

impl Aggregates {
    pub fn compile(aggregates: &[NamedAggregate]) -> Result<Self, EngineError> {
        let columns = aggregates
            .iter()
            .map(|a| {
                let input = a.input.as_ref().map(CompiledExpr::compile).transpose()?;
                if input.is_none() && a.function != AggregateFunction::Count {
                    return Err(EngineError::Unsupported(format!(
                        "{:?} of nothing (column {:?})",
                        a.function, a.name
                    )));
                }
                let field = match a.input.as_ref().map(|e| &e.kind) {
                    Some(needle_query::ast::ExprKind::Field(f))
                        if f.path.is_empty() && f.hint.is_none() =>
                    {
                        Some(f.name.clone())
                    }
                    _ => None,
                };
                Ok(Column { name: a.name.clone(), function: a.function, input, field })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { columns })
    }

    pub fn count(&self) -> usize {
        self.columns.len()
    }

    /// The fields whose statistics answer every aggregate ([`Aggregates::from_summary`]);
    /// `None` when one of them needs the records (its input is not a plain field).
    pub fn summary_fields(&self) -> Option<Vec<&str>> {
        let mut fields = Vec::new();
        for column in &self.columns {
            match (&column.input, &column.field) {
                (None, _) => {} // COUNT(*)
                (Some(_), Some(field)) => fields.push(field.as_str()),
                (Some(_), None) => return None,
            }
        }
        Some(fields)
    }

    /// The accumulators that folding `rows` records would give, from their fields'
    /// summaries; `None` when a summary cannot stand in for the records exactly: unknown, a
    /// float column holding NaN (its sum is NaN; the records' NaN are ignored and counted), an
    /// integer sum too large to be exact in an `f64`, a non-numeric SUM or AVG (its inputs
    /// would be counted as ignored).
    pub fn from_summary(
        &self,
        rows: u64,
        summary: &dyn Fn(&str) -> Option<ColumnSummary>,
    ) -> Option<Vec<Acc>> {
        self.columns
            .iter()
            .map(|column| {
                let Some(field) = &column.field else {
                    return (column.input.is_none() && column.function == AggregateFunction::Count)
                        .then_some(Acc::Count(rows));
                };
                let s = summary(field)?;
                if s.count == 0 {
                    return Some(match column.function {
                        AggregateFunction::Count => Acc::Count(0),
                        AggregateFunction::Sum | AggregateFunction::Avg => {
                            Acc::Sum { ints: 0, floats: 0.0, n: 0 }
                        }
                        AggregateFunction::Min | AggregateFunction::Max => Acc::Extreme(None),
                    });
                }
                let (min, max) = (s.min.as_ref()?, s.max.as_ref()?);
                let float = match (min, max) {
                    (Value::Int(_) | Value::Long(_), Value::Int(_) | Value::Long(_)) => false,
                    (Value::Float(_) | Value::Double(_), Value::Float(_) | Value::Double(_)) => {
                        true
                    }
                    _ if column.function == AggregateFunction::Count => false,
                    (a, b) if !a.is_numeric() && !b.is_numeric() => {
                        // text or booleans: MIN and MAX only
                        return match column.function {
                            AggregateFunction::Min => Some(Acc::Extreme(Some(min.clone()))),
                            AggregateFunction::Max => Some(Acc::Extreme(Some(max.clone()))),
                            _ => None,
                        };
                    }
                    _ => return None,
                };
                // a float column's NaN make its sum NaN: then only the records tell
                if float && s.sum.is_none_or(f64::is_nan) {
                    return None;
                }
                Some(match column.function {
                    AggregateFunction::Count => Acc::Count(s.count),
                    AggregateFunction::Min => Acc::Extreme(Some(min.clone())),
                    AggregateFunction::Max => Acc::Extreme(Some(max.clone())),
                    AggregateFunction::Sum | AggregateFunction::Avg => {
                        let sum = s.sum?;
                        if float {
                            Acc::Sum { ints: 0, floats: sum, n: s.count }
                        } else {
                            let bound = min.as_f64()?.abs().max(max.as_f64()?.abs());
                            if bound * s.count as f64 >= EXACT_IN_F64 {
                                return None;
                            }
                            Acc::Sum { ints: sum as i128, floats: 0.0, n: s.count }
                        }
                    }
                })
            })
            .collect()
    }

    pub fn new_accs(&self) -> Vec<Acc> {
        self.columns
            .iter()
            .map(|c| match c.function {
                AggregateFunction::Count => Acc::Count(0),
                AggregateFunction::Sum | AggregateFunction::Avg => {
                    Acc::Sum { ints: 0, floats: 0.0, n: 0 }
                }
                AggregateFunction::Min | AggregateFunction::Max => Acc::Extreme(None),
            })
            .collect()
    }

    /// Folds one record into `accs`, counting wrong-typed inputs into `ignored`.
    pub fn update(
        &self,
        accs: &mut [Acc],
        ignored: &mut [u64],
        record: &Record,
        ctx: &EvalContext,
    ) {
        for ((column, acc), ignored) in self.columns.iter().zip(accs).zip(ignored) {
            let value = column.input.as_ref().map(|e| e.eval_cow(record, ctx));
            if column.fold(acc, value.as_deref()) == Outcome::Ignored {
                *ignored += 1;
            }
        }
    }

    pub fn merge(&self, into: &mut [Acc], other: &[Acc]) {
        for ((column, a), b) in self.columns.iter().zip(into).zip(other) {
            match (a, b) {
                (Acc::Count(x), Acc::Count(y)) => *x += y,
                (Acc::Sum { ints, floats, n }, Acc::Sum { ints: i2, floats: f2, n: n2 }) => {
                    *ints = ints.wrapping_add(*i2);
                    *floats += f2;
                    *n += n2;
                }
                (Acc::Extreme(a), Acc::Extreme(Some(b))) => column.offer(a, b),
                _ => {}
            }
        }
    }

    /// Appends the aggregate columns of `accs` to `record`.
    pub fn finish_into(&self, accs: &[Acc], record: &mut Record) {
        for (column, acc) in self.columns.iter().zip(accs) {
            let value = match (column.function, acc) {
                (_, Acc::Count(n)) => Value::Long(i64::try_from(*n).unwrap_or(i64::MAX)),
                (_, Acc::Sum { n: 0, .. }) => Value::Null,
                (AggregateFunction::Avg, Acc::Sum { ints, floats, n }) => {
                    Value::Double((*ints as f64 + floats) / *n as f64)
                }
                (_, Acc::Sum { ints, floats, .. }) => Value::Double(*ints as f64 + floats),
                (_, Acc::Extreme(v)) => v.clone().unwrap_or(Value::Null),
            };
            record.insert(column.name.clone(), value);
        }
    }

    /// Metadata for ignored inputs: `{"Ignored Values": {column: n}}` when any were ignored.
    pub fn ignored_meta(
        &self,
        ignored: &[u64],
        meta: &mut serde_json::Map<String, serde_json::Value>,
    ) {
        let counts: serde_json::Map<String, serde_json::Value> = self
            .columns
            .iter()
            .zip(ignored)
            .filter(|(_, n)| **n > 0)
            .map(|(c, n)| (c.name.clone(), (*n).into()))
            .collect();
        if !counts.is_empty() {
            meta.insert("Ignored Values".into(), counts.into());
        }
    }

    pub fn encode_accs(&self, accs: &[Acc], w: &mut Writer) {
        for acc in accs {
            match acc {
                Acc::Count(n) => w.varint(*n),
                Acc::Sum { ints, floats, n } => {
                    w.i128(*ints);
                    w.f64(*floats);
                    w.varint(*n);
                }
                Acc::Extreme(v) => match v {
                    None => w.u8(0),
                    Some(v) => {
                        w.u8(1);
                        w.value(v);
                    }
                },
            }
        }
    }

    pub fn decode_accs(&self, r: &mut Reader<'_>) -> Result<Vec<Acc>, EngineError> {
        self.new_accs()
            .into_iter()
            .map(|acc| {
                Ok(match acc {
                    Acc::Count(_) => Acc::Count(r.varint()?),
                    Acc::Sum { .. } => {
                        Acc::Sum { ints: r.i128()?, floats: r.f64()?, n: r.varint()? }
                    }
                    Acc::Extreme(_) => match r.u8()? {
                        0 => Acc::Extreme(None),
                        1 => Acc::Extreme(Some(r.value()?)),
                        t => return Err(corrupt(format!("bad MIN/MAX presence byte {t}"))),
                    },
                })
            })
            .collect()
    }
}

impl Column {
    fn fold(&self, acc: &mut Acc, value: Option<&Value>) -> Outcome {
        match acc {
            Acc::Count(n) => {
                if value.is_none_or(|v| !v.is_null()) {
                    *n += 1;
                }
                Outcome::Used
            }
            Acc::Sum { ints, floats, n } => match value.unwrap_or(&Value::Null) {
                Value::Null => Outcome::Skipped,
                Value::Int(x) => {
                    *ints += i128::from(*x);
                    *n += 1;
                    Outcome::Used
                }
                Value::Long(x) => {
                    *ints += i128::from(*x);
                    *n += 1;
                    Outcome::Used
                }
                Value::Float(x) => {
                    *floats += f64::from(*x);
                    *n += 1;
                    Outcome::Used
                }
                Value::Double(x) => {
                    *floats += x;
                    *n += 1;
                    Outcome::Used
                }
                _ => Outcome::Ignored,
            },
            Acc::Extreme(best) => match value.unwrap_or(&Value::Null) {
                Value::Null => Outcome::Skipped,
                v if v.as_f64().is_some_and(f64::is_nan) => Outcome::Ignored,
                v => {
                    self.offer(best, v);
                    Outcome::Used
                }
            },
        }
    }

    /// Keeps the smaller (MIN) or larger (MAX) of `best` and `candidate`.
    fn offer(&self, best: &mut Option<Value>, candidate: &Value) {
        let wanted = if self.function == AggregateFunction::Min {
            Ordering::Less
        } else {
            Ordering::Greater
        };
        match best {
            Some(b) if strict_cmp(candidate, b) != wanted => {}
            _ => *best = Some(candidate.clone()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// GROUP ALL

#[derive(Debug)]
pub struct GroupAll {
    aggregates: Aggregates,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GroupAllState {
    pub accs: Vec<Acc>,
    pub ignored: Vec<u64>,
}

impl GroupAll {
    pub fn new(aggregates: &[NamedAggregate]) -> Result<Self, EngineError> {
        Ok(Self { aggregates: Aggregates::compile(aggregates)? })
    }

    pub fn new_state(&self) -> GroupAllState {
        GroupAllState {
            accs: self.aggregates.new_accs(),
            ignored: vec![0; self.aggregates.count()],
        }
    }

    pub fn update(&self, state: &mut GroupAllState, record: &Record, ctx: &EvalContext) {
        self.aggregates.update(&mut state.accs, &mut state.ignored, record, ctx);
    }

    pub fn aggregates(&self) -> &Aggregates {
        &self.aggregates
    }

    /// The state folding `rows` records would give, from their fields' summaries (see
    /// [`Aggregates::from_summary`]).
    pub fn state_from_summary(
        &self,
        rows: u64,
        summary: &dyn Fn(&str) -> Option<ColumnSummary>,
    ) -> Option<GroupAllState> {
        let accs = self.aggregates.from_summary(rows, summary)?;
        Some(GroupAllState { accs, ignored: vec![0; self.aggregates.count()] })
    }

    /// The state folding summarized groups (at most one: a GROUP ALL has no keys) would give;
    /// `None` when a summary cannot stand in for its records.
    pub fn state_from_groups(
        &self,
        groups: &[GroupRows],
        fields: &[&str],
    ) -> Option<GroupAllState> {
        let mut state = self.new_state();
        for group in groups {
            let accs = self.aggregates.from_summary(group.rows, &|f| group.summary(fields, f))?;
            self.aggregates.merge(&mut state.accs, &accs);
        }
        Some(state)
    }

    pub fn merge(&self, into: &mut GroupAllState, other: &GroupAllState) {
        self.aggregates.merge(&mut into.accs, &other.accs);
        for (a, b) in into.ignored.iter_mut().zip(&other.ignored) {
            *a += b;
        }
    }

    pub fn finish(
        &self,
        state: &GroupAllState,
        meta: &mut serde_json::Map<String, serde_json::Value>,
    ) -> Vec<Record> {
        let mut record = Record::new();
        self.aggregates.finish_into(&state.accs, &mut record);
        self.aggregates.ignored_meta(&state.ignored, meta);
        vec![record]
    }

    pub fn encode(&self, state: &GroupAllState, w: &mut Writer) {
        self.aggregates.encode_accs(&state.accs, w);
        for n in &state.ignored {
            w.varint(*n);
        }
    }

    pub fn decode(&self, r: &mut Reader<'_>) -> Result<GroupAllState, EngineError> {
        let accs = self.aggregates.decode_accs(r)?;
        let ignored = (0..self.aggregates.count()).map(|_| r.varint()).collect::<Result<_, _>>()?;
        Ok(GroupAllState { accs, ignored })
    }
}

// ---------------------------------------------------------------------------------------------
// GROUP BY

/// The names of the keys' fields, when each key is a top-level field as it is.
fn keys_as_fields(keys: &[NamedExpr]) -> Option<Vec<String>> {
    keys.iter()
        .map(|k| match &k.expr.kind {
            needle_query::ast::ExprKind::Field(f) if f.path.is_empty() && f.hint.is_none() => {
                Some(f.name.clone())
            }
            _ => None,
        })
        .collect()
}

#[derive(Debug)]
pub struct GroupBy {
    keys: Vec<(String, CompiledExpr)>,
    /// The keys' top-level fields, when every key is one as it is (no path, cast or function).
    key_fields: Option<Vec<String>>,
    aggregates: Aggregates,
    max_groups: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// The canonical key values, one per key column.
    pub keys: Vec<Value>,
    pub accs: Vec<Acc>,
    /// Records folded into this group (what is dropped if it cannot be kept in a merge).
    pub records: u64,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct GroupByState {
    /// By encoded key; hashed with foldhash, seeded per process (keys come from the data).
    pub groups: HashMap<String, Group, foldhash::fast::RandomState>,
    pub ignored: Vec<u64>,
    /// Records not aggregated because their group was new past `max_groups`.
    pub dropped: u64,
    /// The key buffer reused by `update` (not part of the state's value).
    scratch: String,
}

impl GroupBy {
    pub fn new(
        keys: &[NamedExpr],
        aggregates: &[NamedAggregate],
        max_groups: u64,
    ) -> Result<Self, EngineError> {
        let key_fields = keys_as_fields(keys);
        let keys = keys
            .iter()
            .map(|k| Ok((k.name.clone(), CompiledExpr::compile(&k.expr)?)))
            .collect::<Result<Vec<_>, EngineError>>()?;
        Ok(Self { keys, key_fields, aggregates: Aggregates::compile(aggregates)?, max_groups })
    }

    /// The top-level fields the keys are, when every key is one as it is; `None` when a key is
    /// computed.
    pub fn key_fields(&self) -> Option<Vec<&str>> {
        Some(self.key_fields.as_ref()?.iter().map(String::as_str).collect())
    }

    pub fn aggregates(&self) -> &Aggregates {
        &self.aggregates
    }

    /// The state folding summarized groups would give (`fields`: what the summaries follow);
    /// `None` when a summary cannot stand in for its records. Groups are taken in key order, so
    /// which survive `max_groups` does not depend on the order they come in.
    pub fn state_from_groups(&self, groups: &[GroupRows], fields: &[&str]) -> Option<GroupByState> {
        let mut state = self.new_state();
        let mut ordered: Vec<(Vec<Value>, &GroupRows)> =
            groups.iter().map(|g| (g.keys.iter().map(canonical).collect(), g)).collect();
        ordered.sort_by(|a, b| cmp_tuples(&a.0, &b.0));
        let mut key = String::new();
        for (keys, group) in ordered {
            let accs = self.aggregates.from_summary(group.rows, &|f| group.summary(fields, f))?;
            write_key(&mut key, group.keys.iter());
            if let Some(mine) = state.groups.get_mut(key.as_str()) {
                self.aggregates.merge(&mut mine.accs, &accs);
                mine.records += group.rows;
            } else if self.room(&state) {
                state.groups.insert(key.clone(), Group { keys, accs, records: group.rows });
            } else {
                state.dropped += group.rows;
            }
        }
        Some(state)
    }

    pub fn new_state(&self) -> GroupByState {
        GroupByState { ignored: vec![0; self.aggregates.count()], ..Default::default() }
    }

    fn room(&self, state: &GroupByState) -> bool {
        (state.groups.len() as u64) < self.max_groups
    }

    pub fn update(&self, state: &mut GroupByState, record: &Record, ctx: &EvalContext) {
        let mut key = std::mem::take(&mut state.scratch);
        write_key(&mut key, self.keys.iter().map(|(_, e)| e.eval_cow(record, ctx)));
        if let Some(group) = state.groups.get_mut(key.as_str()) {
            group.records += 1;
            self.aggregates.update(&mut group.accs, &mut state.ignored, record, ctx);
        } else if self.room(state) {
            // A new group (rare next to hits): evaluate the keys again for their typed values.
            let mut group = Group {
                keys: self.keys.iter().map(|(_, e)| canonical(&e.eval_cow(record, ctx))).collect(),
                accs: self.aggregates.new_accs(),
                records: 1,
            };
            self.aggregates.update(&mut group.accs, &mut state.ignored, record, ctx);
            state.groups.insert(key.clone(), group);
        } else {
            state.dropped += 1;
        }
        state.scratch = key;
    }

    pub fn merge(&self, into: &mut GroupByState, other: &GroupByState) {
        // Visit the other side's groups in key order so that which groups survive a full merge
        // does not depend on hash order.
        let mut incoming: Vec<(&String, &Group)> = other.groups.iter().collect();
        incoming.sort_by(|a, b| cmp_tuples(&a.1.keys, &b.1.keys).then_with(|| a.0.cmp(b.0)));
        for (key, group) in incoming {
            self.merge_group(into, key, group, |g| g.clone());
        }
        Self::merge_counters(into, other);
    }

    /// [`GroupBy::merge`] of a state given away: its groups are moved, not copied, and into a
    /// state with none yet (a joiner's first partial) its whole table is taken as it is.
    pub fn merge_owned(&self, into: &mut GroupByState, mut other: GroupByState) {
        let groups = std::mem::take(&mut other.groups);
        if into.groups.is_empty() && groups.len() as u64 <= self.max_groups {
            into.groups = groups;
        } else if (into.groups.len() + groups.len()) as u64 <= self.max_groups {
            // room for every incoming group: which comes first cannot matter (the sort below
            // only decides which are dropped), and sorting 10,000 groups was a sixteenth of a
            // per-series MAX over the store
            for (key, group) in groups {
                self.merge_group(into, &key, group, |g| g);
            }
        } else {
            let mut incoming: Vec<(String, Group)> = groups.into_iter().collect();
            incoming.sort_by(|a, b| cmp_tuples(&a.1.keys, &b.1.keys).then_with(|| a.0.cmp(&b.0)));
            for (key, group) in incoming {
                self.merge_group(into, &key, group, |g| g);
            }
        }
        Self::merge_counters(into, &other);
    }

    /// One incoming group: folded into the same group, kept as new while there is room
    /// (`own` makes it `into`'s), or counted as dropped.
    fn merge_group<G: std::borrow::Borrow<Group>>(
        &self,
        into: &mut GroupByState,
        key: &str,
        group: G,
        own: impl FnOnce(G) -> Group,
    ) {
        let incoming = group.borrow();
        if let Some(mine) = into.groups.get_mut(key) {
            self.aggregates.merge(&mut mine.accs, &incoming.accs);
            mine.records += incoming.records;
        } else if self.room(into) {
            into.groups.insert(key.to_owned(), own(group));
        } else {
            into.dropped = into.dropped.saturating_add(incoming.records);
        }
    }

    fn merge_counters(into: &mut GroupByState, other: &GroupByState) {
        into.dropped = into.dropped.saturating_add(other.dropped);
        for (a, b) in into.ignored.iter_mut().zip(&other.ignored) {
            *a = a.saturating_add(*b);
        }
    }

    pub fn finish(
        &self,
        state: &GroupByState,
        meta: &mut serde_json::Map<String, serde_json::Value>,
    ) -> Vec<Record> {
        let mut groups: Vec<(&String, &Group)> = state.groups.iter().collect();
        groups.sort_by(|a, b| cmp_tuples(&a.1.keys, &b.1.keys).then_with(|| a.0.cmp(b.0)));
        let records = groups
            .into_iter()
            .map(|(_, group)| {
                let fields = self.keys.len() + self.aggregates.count();
                let mut record = Record::from_map(needle_record::map_with_capacity(fields));
                for ((name, _), value) in self.keys.iter().zip(&group.keys) {
                    record.insert(name.clone(), value.clone());
                }
                self.aggregates.finish_into(&group.accs, &mut record);
                record
            })
            .collect();
        self.aggregates.ignored_meta(&state.ignored, meta);
        if state.dropped > 0 {
            meta.insert(
                "Groups".into(),
                serde_json::json!({"Limit": self.max_groups, "Dropped Records": state.dropped}),
            );
        }
        records
    }

    pub fn encode(&self, state: &GroupByState, w: &mut Writer) {
        w.varint(state.dropped);
        for n in &state.ignored {
            w.varint(*n);
        }
        let mut groups: Vec<(&String, &Group)> = state.groups.iter().collect();
        groups.sort_by(|a, b| a.0.cmp(b.0));
        w.varint(groups.len() as u64);
        for (key, group) in groups {
            w.str(key);
            for v in &group.keys {
                w.value(v);
            }
            w.varint(group.records);
            self.aggregates.encode_accs(&group.accs, w);
        }
    }

    pub fn decode(&self, r: &mut Reader<'_>) -> Result<GroupByState, EngineError> {
        let dropped = r.varint()?;
        let ignored = (0..self.aggregates.count()).map(|_| r.varint()).collect::<Result<_, _>>()?;
        let n = r.len(2)?;
        let mut groups = HashMap::with_capacity_and_hasher(n, Default::default());
        for _ in 0..n {
            let key = r.string()?;
            let keys = (0..self.keys.len()).map(|_| r.value()).collect::<Result<Vec<_>, _>>()?;
            let records = r.varint()?;
            let accs = self.aggregates.decode_accs(r)?;
            if groups.insert(key, Group { keys, accs, records }).is_some() {
                return Err(corrupt("duplicate group"));
            }
        }
        Ok(GroupByState { groups, ignored, dropped, scratch: String::new() })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use needle_query::plan::AggregateFunction::{Avg, Count, Max, Min, Sum};
    use needle_query::plan::{Aggregation, NamedAggregate};
    use needle_record::{Record, Value};

    fn all_five(input: &str) -> Vec<NamedAggregate> {
        vec![
            agg("COUNT(*)", Count, None),
            agg("s", Sum, Some(input)),
            agg("lo", Min, Some(input)),
            agg("hi", Max, Some(input)),
            agg("avg", Avg, Some(input)),
        ]
    }

    fn records() -> Vec<Record> {
        vec![
            rec(&[("x", Value::Long(4)), ("g", "a".into())]),
            rec(&[("x", Value::Double(1.5)), ("g", "b".into())]),
            rec(&[("x", Value::Null), ("g", "a".into())]),
            rec(&[("g", Value::Null)]),
            rec(&[("x", "oops".into()), ("g", "b".into())]),
            rec(&[("x", Value::Int(-2)), ("g", "a".into())]),
        ]
    }

    #[test]
    fn group_all_is_exact_and_skips_nulls_and_wrong_types() {
        let aggregation = Aggregation::GroupAll { aggregates: all_five("x") };
        for out in [run(&aggregation, &records()), run_split(&aggregation, &records())] {
            let r = &out.records[0];
            assert_eq!(out.records.len(), 1);
            assert_eq!(r.get("COUNT(*)"), Some(&Value::Long(6)));
            assert_eq!(r.get("s"), Some(&Value::Double(3.5)));
            assert_eq!(r.get("lo"), Some(&Value::Int(-2)));
            // "oops" is not numeric but MIN/MAX order every kind: strings sort after numbers.
            assert_eq!(r.get("hi"), Some(&Value::from("oops")));
            assert_eq!(r.get("avg"), Some(&Value::Double(3.5 / 3.0)));
            assert_eq!(out.meta["Ignored Values"], serde_json::json!({"s": 1, "avg": 1}));
        }
    }

    #[test]
    fn group_all_of_nothing_counts_zero_and_the_rest_is_null() {
        let out = run(&Aggregation::GroupAll { aggregates: all_five("x") }, &[]);
        let r = &out.records[0];
        assert_eq!(r.get("COUNT(*)"), Some(&Value::Long(0)));
        for column in ["s", "lo", "hi", "avg"] {
            assert_eq!(r.get(column), Some(&Value::Null), "{column}");
        }
        assert!(out.meta.is_empty());
    }

    #[test]
    fn min_and_max_compare_strings_and_across_numeric_types() {
        let rs = vec![
            rec(&[("x", "pear".into())]),
            rec(&[("x", "apple".into())]),
            rec(&[("x", "zoo".into())]),
        ];
        let aggregates = vec![agg("lo", Min, Some("x")), agg("hi", Max, Some("x"))];
        let out = run(&Aggregation::GroupAll { aggregates: aggregates.clone() }, &rs);
        assert_eq!(out.records[0].get("lo"), Some(&Value::from("apple")));
        assert_eq!(out.records[0].get("hi"), Some(&Value::from("zoo")));
        let rs = vec![
            rec(&[("x", Value::Double(2.5))]),
            rec(&[("x", Value::Long(3))]),
            rec(&[("x", Value::Double(f64::NAN))]),
        ];
        let out = run(&Aggregation::GroupAll { aggregates }, &rs);
        assert_eq!(out.records[0].get("lo"), Some(&Value::Double(2.5)));
        assert_eq!(out.records[0].get("hi"), Some(&Value::Long(3)));
        assert_eq!(out.meta["Ignored Values"], serde_json::json!({"lo": 1, "hi": 1}));
    }

    #[test]
    fn sums_of_large_longs_do_not_lose_exactness_before_the_end() {
        let rs = vec![
            rec(&[("x", Value::Long(i64::MAX))]),
            rec(&[("x", Value::Long(i64::MAX))]),
            rec(&[("x", Value::Long(-i64::MAX))]),
            rec(&[("x", Value::Long(-i64::MAX))]),
            rec(&[("x", Value::Long(1))]),
        ];
        let out = run(&Aggregation::GroupAll { aggregates: vec![agg("s", Sum, Some("x"))] }, &rs);
        assert_eq!(out.records[0].get("s"), Some(&Value::Double(1.0)));
    }

    #[test]
    fn group_by_gives_a_record_per_key_sorted_with_null_first() {
        let aggregation = Aggregation::GroupBy {
            keys: vec![named("g")],
            aggregates: all_five("x"),
            max_groups: 100,
        };
        for out in [run(&aggregation, &records()), run_split(&aggregation, &records())] {
            let got: Vec<String> = out.records.iter().map(Record::to_json).collect();
            assert_eq!(
                got,
                [
                    r#"{"g":null,"COUNT(*)":1,"s":null,"lo":null,"hi":null,"avg":null}"#,
                    r#"{"g":"a","COUNT(*)":3,"s":2.0,"lo":-2,"hi":4,"avg":1.0}"#,
                    r#"{"g":"b","COUNT(*)":2,"s":1.5,"lo":1.5,"hi":"oops","avg":1.5}"#,
                ]
            );
            assert!(!out.meta.contains_key("Groups"));
        }
    }

    #[test]
    fn distinct_keeps_long_and_double_apart_and_widens_int() {
        let rs = vec![
            rec(&[("k", Value::Long(1))]),
            rec(&[("k", Value::Double(1.0))]),
            rec(&[("k", Value::Int(1))]),
            rec(&[("k", Value::Long(1))]),
        ];
        let aggregation =
            Aggregation::GroupBy { keys: vec![named("k")], aggregates: vec![], max_groups: 10 };
        let out = run(&aggregation, &rs);
        // Equal by value, so the tie is broken by the key text: "[1.0]" < "[1]".
        assert_eq!(
            out.records,
            vec![rec(&[("k", Value::Double(1.0))]), rec(&[("k", Value::Long(1))])]
        );
    }

    #[test]
    fn groups_past_the_limit_are_dropped_and_reported() {
        let rs: Vec<Record> = (0..10).map(|i| rec(&[("k", Value::Long(i % 5))])).collect();
        let aggregation = Aggregation::GroupBy {
            keys: vec![named("k")],
            aggregates: vec![agg("n", Count, None)],
            max_groups: 3,
        };
        let out = run(&aggregation, &rs);
        // Keys 0, 1, 2 arrive first; 3 and 4 (two records each) are dropped.
        let keys: Vec<&Value> = out.records.iter().map(|r| r.get("k").unwrap()).collect();
        assert_eq!(keys, [&Value::Long(0), &Value::Long(1), &Value::Long(2)]);
        assert!(out.records.iter().all(|r| r.get("n") == Some(&Value::Long(2))));
        assert_eq!(out.meta["Groups"], serde_json::json!({"Limit": 3, "Dropped Records": 4}));

        // Merging two partials that each hold 3 groups: the union has 5, so 2 groups' records
        // (counted from both sides) are dropped.
        let a = super::super::Aggregator::new(&aggregation).unwrap();
        let left: Vec<Record> = (0..3).map(|i| rec(&[("k", Value::Long(i))])).collect();
        let right: Vec<Record> = (2..5).map(|i| rec(&[("k", Value::Long(i))])).collect();
        let mut s = state_of(&a, &left);
        a.merge(&mut s, &state_of(&a, &right)).unwrap();
        let out = a.finish(&s);
        assert_eq!(out.records.len(), 3);
        assert_eq!(out.meta["Groups"]["Dropped Records"], 2);
    }

    #[test]
    fn a_merge_of_a_state_given_away_is_the_merge_of_a_copy() {
        // into an empty state (taken whole), into a full one, and past the limit
        for max_groups in [2, 3, 100] {
            let aggregation = Aggregation::GroupBy {
                keys: vec![named("g")],
                aggregates: all_five("x"),
                max_groups,
            };
            let a = super::super::Aggregator::new(&aggregation).unwrap();
            let all = records();
            let (left, right) = all.split_at(2);
            for (first, second) in [(left, right), (right, left)] {
                let mut copied = a.new_state();
                let mut owned = a.new_state();
                for part in [first, second] {
                    a.merge(&mut copied, &state_of(&a, part)).unwrap();
                    a.merge_owned(&mut owned, state_of(&a, part)).unwrap();
                }
                assert_eq!(a.finish(&owned), a.finish(&copied), "max_groups {max_groups}");
            }
        }
    }
}
