//! RAW: the matching records, projected, at most `size` per partial state, in arrival order.
//!
//! Projection: `All` keeps the whole record; `Fields` builds a record of only the named computed
//! columns, in order; `AllAnd` keeps the whole record and sets the computed columns on it (a
//! column named like an existing field replaces its value in place). A computed column whose
//! value is NULL is still present (as NULL), so every projected record has the same columns.
//!
//! A state never holds more than `size` records: past that, updates are ignored and counted
//! (`dropped`), and merges keep the first `size` (the state's own records first, then the
//! other's). The joiner enforces the query-wide total; RAW matches are meant to be drained with
//! [`super::Aggregator::take_raw`] as soon as they arrive.

use super::codec::{Reader, Writer};
use crate::eval::{CompiledExpr, EvalContext};
use crate::EngineError;
use needle_query::plan::{NamedExpr, Projection};
use needle_record::Record;

#[derive(Debug)]
pub struct Raw {
    projection: Compiled,
    size: usize,
}

/// Boxed slices, not vectors: a RAW query's aggregator is held by each of a million idle
/// queries, and these 8 bytes keep its compiled form in the 256-byte allocation class.
#[derive(Debug)]
enum Compiled {
    All,
    Fields(Box<[(String, CompiledExpr)]>),
    AllAnd(Box<[(String, CompiledExpr)]>),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct RawState {
    pub records: Vec<Record>,
    /// Records not kept because the state was full.
    pub dropped: u64,
}

fn compile(fields: &[NamedExpr]) -> Result<Box<[(String, CompiledExpr)]>, EngineError> {
    fields.iter().map(|f| Ok((f.name.clone(), CompiledExpr::compile(&f.expr)?))).collect()
}

impl Raw {
    pub fn new(projection: &Projection, size: u64) -> Result<Self, EngineError> {
        let projection = match projection {
            Projection::All => Compiled::All,
            Projection::Fields { fields } => Compiled::Fields(compile(fields)?),
            Projection::AllAnd { fields } => Compiled::AllAnd(compile(fields)?),
        };
        Ok(Self { projection, size: usize::try_from(size).unwrap_or(usize::MAX) })
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn project(&self, record: &Record, ctx: &EvalContext) -> Record {
        match &self.projection {
            Compiled::All => record.clone(),
            Compiled::Fields(fields) => {
                fields.iter().map(|(name, e)| (name.clone(), e.eval(record, ctx))).collect()
            }
            Compiled::AllAnd(fields) => {
                // Evaluate against the input record, so a column may not see another's value.
                let computed: Vec<_> = fields.iter().map(|(_, e)| e.eval(record, ctx)).collect();
                let mut out = record.clone();
                for ((name, _), value) in fields.iter().zip(computed) {
                    out.insert(name.clone(), value);
                }
                out
            }
        }
    }

    pub fn update(&self, state: &mut RawState, record: &Record, ctx: &EvalContext) {
        if state.records.len() < self.size {
            state.records.push(self.project(record, ctx));
        } else {
            state.dropped += 1;
        }
    }

    /// [`Raw::update`] keeping `record` itself where the projection is `*`.
    pub fn update_owned(&self, state: &mut RawState, record: Record, ctx: &EvalContext) {
        if state.records.len() >= self.size {
            state.dropped += 1;
        } else if let Compiled::All = self.projection {
            state.records.push(record);
        } else {
            state.records.push(self.project(&record, ctx));
        }
    }

    pub fn merge(&self, into: &mut RawState, other: &RawState) {
        let room = self.size.saturating_sub(into.records.len());
        let take = room.min(other.records.len());
        into.records.extend_from_slice(&other.records[..take]);
        let dropped = other.dropped.saturating_add((other.records.len() - take) as u64);
        into.dropped = into.dropped.saturating_add(dropped);
    }

    pub fn encode(&self, state: &RawState, w: &mut Writer) {
        w.varint(state.dropped);
        w.varint(state.records.len() as u64);
        for r in &state.records {
            w.record(r);
        }
    }

    pub fn decode(&self, r: &mut Reader<'_>) -> Result<RawState, EngineError> {
        let dropped = r.varint()?;
        let n = r.len(1)?;
        let mut records = Vec::with_capacity(n);
        for _ in 0..n {
            records.push(r.record()?);
        }
        Ok(RawState { records, dropped })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::Aggregator;
    use needle_query::plan::{Aggregation, NamedExpr, Projection};
    use needle_record::{Record, Value};

    fn records() -> Vec<Record> {
        (0..5).map(|i| rec(&[("a", Value::Long(i)), ("b", format!("s{i}").into())])).collect()
    }

    #[test]
    fn projections_keep_all_some_or_all_and_more() {
        let r = &records()[1];
        let all = run(
            &Aggregation::Raw { projection: Projection::All, size: 10 },
            std::slice::from_ref(r),
        );
        assert_eq!(all.records, vec![r.clone()]);

        let fields = vec![
            NamedExpr { name: "bee".into(), expr: field("b") },
            NamedExpr { name: "missing".into(), expr: field("zzz") },
        ];
        let some = run(
            &Aggregation::Raw {
                projection: Projection::Fields { fields: fields.clone() },
                size: 10,
            },
            std::slice::from_ref(r),
        );
        assert_eq!(some.records[0].to_json(), r#"{"bee":"s1","missing":null}"#);

        let more = run(
            &Aggregation::Raw { projection: Projection::AllAnd { fields }, size: 10 },
            std::slice::from_ref(r),
        );
        assert_eq!(more.records[0].to_json(), r#"{"a":1,"b":"s1","bee":"s1","missing":null}"#);
    }

    #[test]
    fn a_state_holds_at_most_size_records_and_drains() {
        let a =
            Aggregator::new(&Aggregation::Raw { projection: Projection::All, size: 3 }).unwrap();
        let mut s = state_of(&a, &records());
        assert_eq!(s.raw_len(), 3);
        assert_eq!(s.records_seen(), 5);
        let other = state_of(&a, &records()[4..]);
        let mut back = a.decode(&a.encode(&s)).unwrap();
        a.merge(&mut back, &other).unwrap();
        assert_eq!(a.finish(&back).records, records()[..3].to_vec());

        let taken = a.take_raw(&mut s);
        assert_eq!(taken, records()[..3].to_vec());
        assert!(s.is_empty());
        // After a drain there is room again; merges append in arrival order.
        a.merge(&mut s, &other).unwrap();
        assert_eq!(a.take_raw(&mut s), records()[4..].to_vec());
    }
}
