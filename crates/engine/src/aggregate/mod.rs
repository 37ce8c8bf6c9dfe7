//! Aggregations: every kind of [`Aggregation`] as a partial state that workers update, that
//! merges (in one process, or after travelling as bytes between machines) and that finishes into
//! result records and metadata. The sketches are Apache DataSketches' (`datasketches` crate).
//!
//! # API
//! ```text
//! Aggregator::new(&Aggregation) -> Result<Aggregator, EngineError>   // compiled once, Send + Sync
//! aggregator.new_state() -> PartialState                             // one per worker / joiner, Send
//! aggregator.update(&mut state, &record, &ctx)                       // fold one (filtered) record in
//! aggregator.merge(&mut into, &other) -> Result<(), EngineError>     // associative, commutative*
//! aggregator.encode(&state) -> Vec<u8>                               // versioned, checksummed
//! aggregator.decode(&bytes) -> Result<PartialState, EngineError>     // CorruptPartial, never panics
//! aggregator.finish(&state) -> AggregateOutput { records, meta }     // does not consume the state
//! aggregator.take_raw(&mut state) -> Vec<Record>                     // RAW: drain what is held
//! state.raw_len(), state.is_empty(), state.records_seen()
//! aggregator.raw_size() -> Option<u64>                               // RAW's per-state cap
//! ```
//! \* Exactly for GROUP ALL and GROUP BY (below `max_groups`; floating-point sums up to
//! rounding); up to the sketch's error bounds for COUNT DISTINCT, DISTRIBUTION and TOP K. RAW
//! keeps the receiving state's records first, then the other's (arrival order of merges).
//!
//! Merging a state into one of a different aggregation is [`EngineError::MergeMismatch`] (each
//! state carries its aggregator's fingerprint). Decoding checks the envelope's magic, version,
//! kind, fingerprint and checksum before the payload is read (see [`codec`]); the sketch
//! deserializers additionally run under `catch_unwind`, as a last resort against a panic on a
//! payload that passes the checksum yet is malformed (this needs `panic = "unwind"`, the
//! default). A crafted payload with a valid checksum that deserializes into an inconsistent
//! sketch is not otherwise defended against: the checksum detects corruption, not forgery.
//!
//! # The kinds (details in each module)
//! - [`raw`]: projected records, at most `size` per state.
//! - [`group`]: GROUP ALL and GROUP BY / DISTINCT, exact, up to `max_groups` groups, sorted by key.
//! - [`count_distinct`]: Theta sketch.
//! - [`distribution`]: KLL sketch (QUANTILE, FREQ, CUMFREQ).
//! - [`top_k`]: frequent-items sketch.
//! - [`key`]: how tuples of values become group/sketch keys (LONG `1` and DOUBLE `1.0` differ).
//!
//! The metadata an aggregation contributes is a JSON object merged into the result's `meta` by
//! the caller: `"Sketch"` for the sketch kinds (Bullet's names), `"Groups"` when GROUP BY dropped
//! records past `max_groups`, `"Ignored Values"` when inputs of the wrong type were skipped.

pub mod codec;
pub mod count_distinct;
pub mod distribution;
pub mod group;
pub mod key;
pub mod raw;
pub mod top_k;

use crate::eval::EvalContext;
use crate::EngineError;
use codec::{corrupt, Reader, Writer};
use needle_query::plan::Aggregation;
use needle_record::Record;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What [`Aggregator::finish`] produces: the aggregated records (before post-aggregation) and the
/// aggregation's metadata.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AggregateOutput {
    pub records: Vec<Record>,
    pub meta: serde_json::Map<String, serde_json::Value>,
}

/// A compiled aggregation, immutable and shared by every worker of a query.
#[derive(Debug)]
pub struct Aggregator {
    kind: Kind,
    fingerprint: u64,
}

#[derive(Debug)]
/// The larger kinds are boxed, so a compiled query of a small kind (RAW above all) is small:
/// 100,000 idle queries are held at once.
enum Kind {
    Raw(raw::Raw),
    GroupAll(group::GroupAll),
    GroupBy(Box<group::GroupBy>),
    CountDistinct(Box<count_distinct::CountDistinct>),
    Distribution(Box<distribution::Distribution>),
    TopK(Box<top_k::TopK>),
}

/// One worker's (or the joiner's) partial aggregate.
#[derive(Debug)]
pub struct PartialState {
    fingerprint: u64,
    /// Records folded in by `update` here or in the states merged in.
    seen: u64,
    inner: State,
}

/// The sketches and group tables are boxed, so the state of a RAW query (held by its run in the
/// joiner while it waits) is small.
#[derive(Debug)]
enum State {
    Raw(raw::RawState),
    GroupAll(group::GroupAllState),
    GroupBy(Box<group::GroupByState>),
    CountDistinct(Box<count_distinct::CountDistinctState>),
    Distribution(Box<distribution::DistributionState>),
    TopK(Box<top_k::TopKState>),
}

impl State {
    fn tag(&self) -> u8 {
        match self {
            State::Raw(_) => 1,
            State::GroupAll(_) => 2,
            State::GroupBy(_) => 3,
            State::CountDistinct(_) => 4,
            State::Distribution(_) => 5,
            State::TopK(_) => 6,
        }
    }
}

impl Kind {
    fn tag(&self) -> u8 {
        match self {
            Kind::Raw(_) => 1,
            Kind::GroupAll(_) => 2,
            Kind::GroupBy(_) => 3,
            Kind::CountDistinct(_) => 4,
            Kind::Distribution(_) => 5,
            Kind::TopK(_) => 6,
        }
    }
}

impl PartialState {
    /// RAW records held (0 for the other kinds).
    pub fn raw_len(&self) -> usize {
        match &self.inner {
            State::Raw(s) => s.records.len(),
            _ => 0,
        }
    }

    /// The records a RAW state holds (none for the other kinds).
    #[cfg(test)]
    pub(crate) fn raw_records(&self) -> &[needle_record::Record] {
        match &self.inner {
            State::Raw(s) => &s.records,
            _ => &[],
        }
    }

    /// Roughly the bytes of the records a RAW state holds (0 for any other kind).
    pub fn raw_bytes(&self) -> usize {
        match &self.inner {
            State::Raw(s) => s.records.iter().map(needle_record::Record::approx_bytes).sum(),
            _ => 0,
        }
    }

    /// Nothing to report: no record was folded in since the state was made (RAW: no record is
    /// held, e.g. after [`Aggregator::take_raw`]).
    pub fn is_empty(&self) -> bool {
        match &self.inner {
            State::Raw(s) => s.records.is_empty(),
            _ => self.seen == 0,
        }
    }

    /// Records folded into this state, directly or through merges (records that reached
    /// `update`, whether or not they could be kept).
    pub fn records_seen(&self) -> u64 {
        self.seen
    }
}

/// Runs a sketch deserializer, turning a panic into [`EngineError::CorruptPartial`].
fn guard<T>(f: impl FnOnce() -> T) -> Result<T, EngineError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|_| corrupt("sketch deserializer panicked"))
}

fn sketch_error(e: datasketches::error::Error) -> EngineError {
    EngineError::MergeMismatch(format!("sketch merge failed: {e}"))
}

impl Aggregator {
    pub fn new(aggregation: &Aggregation) -> Result<Aggregator, EngineError> {
        let kind = match aggregation {
            Aggregation::Raw { projection, size } => Kind::Raw(raw::Raw::new(projection, *size)?),
            Aggregation::GroupAll { aggregates } => {
                Kind::GroupAll(group::GroupAll::new(aggregates)?)
            }
            Aggregation::GroupBy { keys, aggregates, max_groups } => {
                Kind::GroupBy(Box::new(group::GroupBy::new(keys, aggregates, *max_groups)?))
            }
            Aggregation::CountDistinct { name, fields, nominal_entries } => Kind::CountDistinct(
                Box::new(count_distinct::CountDistinct::new(name, fields, *nominal_entries)?),
            ),
            Aggregation::Distribution { kind, value, points, k } => Kind::Distribution(Box::new(
                distribution::Distribution::new(*kind, value, points, *k)?,
            )),
            Aggregation::TopK { k, threshold, fields, count_name, max_map_size } => Kind::TopK(
                Box::new(top_k::TopK::new(*k, *threshold, fields, count_name, *max_map_size)?),
            ),
        };
        let plan = serde_json::to_string(aggregation).map_err(|e| {
            EngineError::Unsupported(format!("aggregation does not serialize: {e}"))
        })?;
        Ok(Aggregator { kind, fingerprint: codec::fnv1a64(plan.as_bytes()) })
    }

    /// RAW's per-state cap on records; `None` for the other kinds.
    pub fn raw_size(&self) -> Option<u64> {
        match &self.kind {
            Kind::Raw(r) => Some(r.size() as u64),
            _ => None,
        }
    }

    /// For a GROUP ALL whose aggregates read plain fields: those fields (see
    /// [`group::Aggregates::from_summary`]); `None` for every other aggregation.
    pub fn summary_fields(&self) -> Option<Vec<&str>> {
        match &self.kind {
            Kind::GroupAll(a) => a.aggregates().summary_fields(),
            _ => None,
        }
    }

    /// The state folding `rows` records would give, from their fields' summaries; `None` when
    /// the summaries cannot stand in for the records.
    pub fn state_from_summary(
        &self,
        rows: u64,
        summary: &dyn Fn(&str) -> Option<group::ColumnSummary>,
    ) -> Option<PartialState> {
        let Kind::GroupAll(a) = &self.kind else { return None };
        let inner = State::GroupAll(a.state_from_summary(rows, summary)?);
        Some(PartialState { fingerprint: self.fingerprint, seen: rows, inner })
    }

    /// For a GROUP ALL or GROUP BY that summaries of groups of records can answer: the
    /// top-level fields its keys are (none for a GROUP ALL) and the fields its aggregates read
    /// (see [`group::Aggregates::from_summary`]); `None` for every other aggregation.
    pub fn group_fields(&self) -> Option<(Vec<&str>, Vec<&str>)> {
        match &self.kind {
            Kind::GroupAll(a) => Some((vec![], a.aggregates().summary_fields()?)),
            Kind::GroupBy(a) => Some((a.key_fields()?, a.aggregates().summary_fields()?)),
            _ => None,
        }
    }

    /// The state folding the summarized groups' records would give; `None` when the
    /// aggregation has no [`Aggregator::group_fields`] or a summary cannot stand in for its
    /// records.
    pub fn state_from_groups(&self, groups: &[group::GroupRows]) -> Option<PartialState> {
        let (_, fields) = self.group_fields()?;
        let inner = match &self.kind {
            Kind::GroupAll(a) => State::GroupAll(a.state_from_groups(groups, &fields)?),
            Kind::GroupBy(a) => State::GroupBy(Box::new(a.state_from_groups(groups, &fields)?)),
            _ => return None,
        };
        let seen = groups.iter().map(|g| g.rows).sum();
        Some(PartialState { fingerprint: self.fingerprint, seen, inner })
    }

    pub fn new_state(&self) -> PartialState {
        let inner = match &self.kind {
            Kind::Raw(_) => State::Raw(raw::RawState::default()),
            Kind::GroupAll(a) => State::GroupAll(a.new_state()),
            Kind::GroupBy(a) => State::GroupBy(Box::new(a.new_state())),
            Kind::CountDistinct(a) => State::CountDistinct(Box::new(a.new_state())),
            Kind::Distribution(a) => State::Distribution(Box::new(a.new_state())),
            Kind::TopK(a) => State::TopK(Box::new(a.new_state())),
        };
        PartialState { fingerprint: self.fingerprint, seen: 0, inner }
    }

    /// Folds one record (already exploded and filtered) into `state`. A state of another
    /// aggregator is left unchanged (a caller bug; `debug_assert`ed).
    pub fn update(&self, state: &mut PartialState, record: &Record, ctx: &EvalContext) {
        debug_assert_eq!(state.fingerprint, self.fingerprint, "state of another aggregator");
        match (&self.kind, &mut state.inner) {
            (Kind::Raw(a), State::Raw(s)) => a.update(s, record, ctx),
            (Kind::GroupAll(a), State::GroupAll(s)) => a.update(s, record, ctx),
            (Kind::GroupBy(a), State::GroupBy(s)) => a.update(s, record, ctx),
            (Kind::CountDistinct(a), State::CountDistinct(s)) => a.update(s, record, ctx),
            (Kind::Distribution(a), State::Distribution(s)) => a.update(s, record, ctx),
            (Kind::TopK(a), State::TopK(s)) => a.update(s, record, ctx),
            _ => return,
        }
        state.seen += 1;
    }

    /// [`Aggregator::update`] with a record the caller gives away: a RAW state keeps it
    /// without copying it.
    pub fn update_owned(&self, state: &mut PartialState, record: Record, ctx: &EvalContext) {
        match (&self.kind, &mut state.inner) {
            (Kind::Raw(a), State::Raw(s)) if state.fingerprint == self.fingerprint => {
                a.update_owned(s, record, ctx);
                state.seen += 1;
            }
            _ => self.update(state, &record, ctx),
        }
    }

    /// Merges `other` into `into`. Errors: the states belong to different aggregations.
    pub fn merge(&self, into: &mut PartialState, other: &PartialState) -> Result<(), EngineError> {
        if into.fingerprint != self.fingerprint || other.fingerprint != self.fingerprint {
            return Err(EngineError::MergeMismatch("partials of different aggregations".into()));
        }
        match (&self.kind, &mut into.inner, &other.inner) {
            (Kind::Raw(a), State::Raw(s), State::Raw(o)) => a.merge(s, o),
            (Kind::GroupAll(a), State::GroupAll(s), State::GroupAll(o)) => a.merge(s, o),
            (Kind::GroupBy(a), State::GroupBy(s), State::GroupBy(o)) => a.merge(s, o),
            (Kind::CountDistinct(a), State::CountDistinct(s), State::CountDistinct(o)) => {
                a.merge(s, o)?
            }
            (Kind::Distribution(a), State::Distribution(s), State::Distribution(o)) => {
                a.merge(s, o)?
            }
            (Kind::TopK(a), State::TopK(s), State::TopK(o)) => a.merge(s, o)?,
            _ => return Err(EngineError::MergeMismatch("partials of different kinds".into())),
        }
        into.seen = into.seen.saturating_add(other.seen);
        Ok(())
    }

    /// [`Aggregator::merge`] of a state given away, which a GROUP BY moves rather than copies
    /// (a joiner's partials are its own once they arrive).
    pub fn merge_owned(
        &self,
        into: &mut PartialState,
        other: PartialState,
    ) -> Result<(), EngineError> {
        match (&self.kind, &mut into.inner, other.inner) {
            (Kind::GroupBy(a), State::GroupBy(s), State::GroupBy(o))
                if into.fingerprint == self.fingerprint
                    && other.fingerprint == self.fingerprint =>
            {
                a.merge_owned(s, *o);
                into.seen = into.seen.saturating_add(other.seen);
                Ok(())
            }
            (_, _, inner) => self.merge(into, &PartialState { inner, ..other }),
        }
    }

    /// The state as bytes: the [`codec`] envelope around `seen` and the kind's payload.
    pub fn encode(&self, state: &PartialState) -> Vec<u8> {
        let mut w = Writer::new();
        w.varint(state.seen);
        match (&self.kind, &state.inner) {
            (Kind::Raw(a), State::Raw(s)) => a.encode(s, &mut w),
            (Kind::GroupAll(a), State::GroupAll(s)) => a.encode(s, &mut w),
            (Kind::GroupBy(a), State::GroupBy(s)) => a.encode(s, &mut w),
            (Kind::CountDistinct(a), State::CountDistinct(s)) => a.encode(s, &mut w),
            (Kind::Distribution(a), State::Distribution(s)) => a.encode(s, &mut w),
            (Kind::TopK(a), State::TopK(s)) => a.encode(s, &mut w),
            // A state of another kind: seal it under its own tag, which decode will refuse.
            _ => return codec::seal(state.inner.tag(), state.fingerprint, &w.into_bytes()),
        }
        codec::seal(self.kind.tag(), self.fingerprint, &w.into_bytes())
    }

    /// Reads bytes made by [`Aggregator::encode`] of an aggregator of the same aggregation.
    pub fn decode(&self, bytes: &[u8]) -> Result<PartialState, EngineError> {
        let payload = codec::open(bytes, self.kind.tag(), self.fingerprint)?;
        let mut r = Reader::new(payload);
        let seen = r.varint()?;
        let inner = match &self.kind {
            Kind::Raw(a) => {
                let s = a.decode(&mut r)?;
                if s.records.len() > a.size() {
                    return Err(corrupt("more RAW records than the aggregation's size"));
                }
                State::Raw(s)
            }
            Kind::GroupAll(a) => State::GroupAll(a.decode(&mut r)?),
            Kind::GroupBy(a) => State::GroupBy(Box::new(a.decode(&mut r)?)),
            Kind::CountDistinct(a) => State::CountDistinct(Box::new(a.decode(&mut r)?)),
            Kind::Distribution(a) => State::Distribution(Box::new(a.decode(&mut r)?)),
            Kind::TopK(a) => State::TopK(Box::new(a.decode(&mut r)?)),
        };
        r.finish()?;
        Ok(PartialState { fingerprint: self.fingerprint, seen, inner })
    }

    /// The result records and metadata of everything in `state`, leaving it as it was (so
    /// `EVERY ... ALL` windows keep accumulating).
    pub fn finish(&self, state: &PartialState) -> AggregateOutput {
        let mut meta = serde_json::Map::new();
        let records = match (&self.kind, &state.inner) {
            (Kind::Raw(_), State::Raw(s)) => s.records.clone(),
            (Kind::GroupAll(a), State::GroupAll(s)) => a.finish(s, &mut meta),
            (Kind::GroupBy(a), State::GroupBy(s)) => a.finish(s, &mut meta),
            (Kind::CountDistinct(a), State::CountDistinct(s)) => a.finish(s, &mut meta),
            (Kind::Distribution(a), State::Distribution(s)) => a.finish(s, &mut meta),
            (Kind::TopK(a), State::TopK(s)) => a.finish(s, &mut meta),
            _ => Vec::new(),
        };
        AggregateOutput { records, meta }
    }

    /// RAW: one more record matched and not kept.
    pub(crate) fn count_dropped(&self, state: &mut PartialState) {
        if let State::Raw(s) = &mut state.inner {
            s.dropped = s.dropped.saturating_add(1);
        }
    }

    /// RAW: the records matched and not kept in `state` (past its cap, or shed).
    pub(crate) fn raw_dropped(&self, state: &PartialState) -> u64 {
        match &state.inner {
            State::Raw(s) => s.dropped,
            _ => 0,
        }
    }

    /// RAW: takes the records held, leaving the state empty (counters kept). Other kinds: nothing.
    pub fn take_raw(&self, state: &mut PartialState) -> Vec<Record> {
        match &mut state.inner {
            State::Raw(s) => std::mem::take(&mut s.records),
            _ => Vec::new(),
        }
    }
}

/// Helpers for the aggregation tests: field references, records and one-call runs.
#[cfg(test)]
pub(crate) mod testing {
    use super::{AggregateOutput, Aggregator, PartialState};
    use crate::eval::EvalContext;
    use needle_query::ast::{Expr, ExprKind, Field, Span};
    use needle_query::plan::{AggregateFunction, Aggregation, NamedAggregate, NamedExpr};
    use needle_record::{Record, Value};

    pub fn field(name: &str) -> Expr {
        Expr::new(
            ExprKind::Field(Field { name: name.into(), path: vec![], hint: None }),
            Span::default(),
        )
    }

    pub fn named(name: &str) -> NamedExpr {
        NamedExpr { name: name.into(), expr: field(name) }
    }

    pub fn agg(name: &str, function: AggregateFunction, input: Option<&str>) -> NamedAggregate {
        NamedAggregate { name: name.into(), function, input: input.map(field) }
    }

    pub fn rec(fields: &[(&str, Value)]) -> Record {
        fields.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    pub fn ctx() -> EvalContext {
        EvalContext { now_ms: 0 }
    }

    pub fn state_of(a: &Aggregator, records: &[Record]) -> PartialState {
        let mut s = a.new_state();
        for r in records {
            a.update(&mut s, r, &ctx());
        }
        s
    }

    pub fn run(aggregation: &Aggregation, records: &[Record]) -> AggregateOutput {
        let a = Aggregator::new(aggregation).unwrap();
        a.finish(&state_of(&a, records))
    }

    /// Runs through two partials, merged after an encode/decode round trip.
    pub fn run_split(aggregation: &Aggregation, records: &[Record]) -> AggregateOutput {
        let a = Aggregator::new(aggregation).unwrap();
        let (left, right) = records.split_at(records.len() / 2);
        let mut s = a.decode(&a.encode(&state_of(&a, left))).unwrap();
        let other = a.decode(&a.encode(&state_of(&a, right))).unwrap();
        a.merge(&mut s, &other).unwrap();
        a.finish(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use needle_query::ast::{DistributionKind, Points};
    use needle_query::plan::{AggregateFunction, Projection};
    use needle_record::Value;

    /// One aggregation of each kind.
    pub(crate) fn every_kind() -> Vec<Aggregation> {
        vec![
            Aggregation::Raw { projection: Projection::All, size: 50 },
            Aggregation::GroupAll {
                aggregates: vec![
                    agg("n", AggregateFunction::Count, None),
                    agg("s", AggregateFunction::Sum, Some("x")),
                    agg("m", AggregateFunction::Max, Some("x")),
                ],
            },
            Aggregation::GroupBy {
                keys: vec![named("g")],
                aggregates: vec![agg("a", AggregateFunction::Avg, Some("x"))],
                max_groups: 100,
            },
            Aggregation::CountDistinct {
                name: "d".into(),
                fields: vec![field("g")],
                nominal_entries: 4096,
            },
            Aggregation::Distribution {
                kind: DistributionKind::Quantile,
                value: field("x"),
                points: Points::Linear { count: 3 },
                k: 128,
            },
            Aggregation::TopK {
                k: 3,
                threshold: None,
                fields: vec![named("g")],
                count_name: "Count".into(),
                max_map_size: 32,
            },
        ]
    }

    fn some_records() -> Vec<Record> {
        (0..40)
            .map(|i| rec(&[("g", Value::Long(i % 6)), ("x", Value::Double(i as f64 / 4.0))]))
            .collect()
    }

    #[test]
    fn aggregators_are_shareable_and_states_sendable() {
        fn shared<T: Send + Sync>() {}
        fn sent<T: Send>() {}
        shared::<Aggregator>();
        sent::<PartialState>();
    }

    #[test]
    fn encode_then_decode_gives_the_same_result_for_every_kind() {
        for aggregation in every_kind() {
            let a = Aggregator::new(&aggregation).unwrap();
            let s = state_of(&a, &some_records());
            let back = a.decode(&a.encode(&s)).unwrap();
            assert_eq!(a.finish(&back), a.finish(&s), "{aggregation:?}");
            assert_eq!(back.records_seen(), 40);
            let empty = a.decode(&a.encode(&a.new_state())).unwrap();
            assert!(empty.is_empty());
            assert_eq!(a.finish(&empty), a.finish(&a.new_state()));
        }
    }

    #[test]
    fn finishing_does_not_consume_the_state() {
        for aggregation in every_kind() {
            let a = Aggregator::new(&aggregation).unwrap();
            let mut s = state_of(&a, &some_records()[..20]);
            let first = a.finish(&s);
            assert_eq!(a.finish(&s), first);
            for r in &some_records()[20..] {
                a.update(&mut s, r, &ctx());
            }
            assert_eq!(a.finish(&s), a.finish(&state_of(&a, &some_records())), "{aggregation:?}");
        }
    }

    #[test]
    fn garbage_truncations_and_other_kinds_are_corrupt_partials() {
        let kinds: Vec<Aggregator> =
            every_kind().iter().map(|k| Aggregator::new(k).unwrap()).collect();
        for (i, a) in kinds.iter().enumerate() {
            let bytes = a.encode(&state_of(a, &some_records()));
            for cut in [0, 1, 10, 29, bytes.len() / 2, bytes.len() - 1] {
                let err = a.decode(&bytes[..cut]).unwrap_err();
                assert!(matches!(err, EngineError::CorruptPartial(_)), "{err:?}");
            }
            let mut flipped = bytes.clone();
            let last = flipped.len() - 1;
            flipped[last] ^= 1;
            assert!(matches!(a.decode(&flipped), Err(EngineError::CorruptPartial(_))));
            for (j, b) in kinds.iter().enumerate() {
                if i != j {
                    assert!(matches!(b.decode(&bytes), Err(EngineError::CorruptPartial(_))));
                }
            }
        }
        // Same kind, different aggregation: the fingerprint differs.
        let a =
            Aggregator::new(&Aggregation::Raw { projection: Projection::All, size: 5 }).unwrap();
        let b =
            Aggregator::new(&Aggregation::Raw { projection: Projection::All, size: 6 }).unwrap();
        assert!(b.decode(&a.encode(&a.new_state())).is_err());
    }

    #[test]
    fn merging_states_of_different_aggregations_is_refused() {
        let kinds: Vec<Aggregator> =
            every_kind().iter().map(|k| Aggregator::new(k).unwrap()).collect();
        let mut s = kinds[1].new_state();
        let err = kinds[1].merge(&mut s, &kinds[2].new_state()).unwrap_err();
        assert!(matches!(err, EngineError::MergeMismatch(_)));
        let err = kinds[1].merge(&mut kinds[0].new_state(), &s).unwrap_err();
        assert!(matches!(err, EngineError::MergeMismatch(_)));
    }

    proptest::proptest! {
        /// Payloads that pass the envelope's checks (right kind, fingerprint and checksum) but
        /// hold garbage reach the payload readers and the sketch deserializers: still an error,
        /// never a panic or an abort.
        #[test]
        fn sealed_garbage_payloads_are_corrupt_partials(
            payload in proptest::collection::vec(proptest::arbitrary::any::<u8>(), 0..300),
            kind in 0usize..6,
        ) {
            let a = Aggregator::new(&every_kind()[kind]).unwrap();
            let bytes = codec::seal(a.kind.tag(), a.fingerprint, &payload);
            let _ = a.decode(&bytes);
        }

        /// A valid sketch payload with bytes changed inside, resealed.
        #[test]
        fn resealed_damaged_sketches_do_not_panic(
            kind in 3usize..6,
            at in proptest::arbitrary::any::<proptest::sample::Index>(),
            xor in 1u8..=255,
        ) {
            let a = Aggregator::new(&every_kind()[kind]).unwrap();
            let good = a.encode(&state_of(&a, &some_records()));
            let mut payload = good[26..].to_vec();
            let i = at.index(payload.len());
            payload[i] ^= xor;
            if let Ok(s) = a.decode(&codec::seal(a.kind.tag(), a.fingerprint, &payload)) {
                // Whatever was accepted must also be usable.
                let _ = a.finish(&s);
                let mut fresh = a.new_state();
                let _ = a.merge(&mut fresh, &s);
            }
        }
    }
}
