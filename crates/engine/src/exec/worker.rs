//! The worker side of a query: explode → filter → partial aggregation, per record, with no
//! locks and no hand-off. Each worker thread keeps one [`WorkerState`] per active query and
//! flushes it into a [`Partial`] for the join side on a tick (at once for RAW matches).

use super::stage::CompiledStage;
use super::CompiledQuery;
use crate::aggregate::group::GroupRows;
use crate::aggregate::PartialState;
use crate::eval::EvalContext;
use crate::EngineError;
use needle_query::ast::Expr;
use needle_record::Record;

/// One worker's running state for one query. Not shared: each worker owns its own.
#[derive(Debug)]
pub struct WorkerState {
    pub(crate) state: PartialState,
    seen: u64,
    matched: u64,
}

impl WorkerState {
    pub(crate) fn new(stage: &CompiledStage) -> Self {
        Self { state: stage.aggregator.new_state(), seen: 0, matched: 0 }
    }

    /// Input records processed since the last flush.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Records (after explode) that passed the filter since the last flush.
    pub fn matched(&self) -> u64 {
        self.matched
    }

    /// True when there is something to flush.
    pub fn is_dirty(&self) -> bool {
        self.seen > 0 || self.matched > 0
    }
}

/// What a worker hands the join side: its partial aggregation since its last flush, and counts.
#[derive(Debug)]
pub struct Partial {
    pub(crate) state: PartialState,
    /// Input records the worker processed for this query.
    pub seen: u64,
    /// Records (after explode) that passed the filter and were aggregated.
    pub matched: u64,
}

impl Partial {
    /// Roughly the bytes of the records a RAW partial carries (0 for any other kind).
    pub fn raw_bytes(&self) -> usize {
        self.state.raw_bytes()
    }
}

impl CompiledQuery {
    /// A fresh worker state for this query.
    pub fn new_worker(&self) -> WorkerState {
        WorkerState::new(&self.inner)
    }

    /// Explodes `record`, filters, and updates the worker's partial. Returns true when at least
    /// one (exploded) record matched: for a RAW query ([`CompiledQuery::is_raw`]) the caller
    /// should then [`flush`](CompiledQuery::flush) at once.
    pub fn process(&self, worker: &mut WorkerState, record: &Record, ctx: &EvalContext) -> bool {
        worker.seen += 1;
        let matched = self.inner.process(&mut worker.state, record, ctx);
        worker.matched += matched;
        matched > 0
    }

    /// [`CompiledQuery::process`] for a record the matching index chose
    /// ([`crate::matching`]): the same, except that the record is not counted as seen by this
    /// query — the caller counts the records it read once for all queries.
    pub fn process_candidate(
        &self,
        worker: &mut WorkerState,
        record: &Record,
        ctx: &EvalContext,
    ) -> bool {
        let matched = self.inner.process(&mut worker.state, record, ctx);
        worker.matched += matched;
        matched > 0
    }

    /// [`CompiledQuery::process_candidate`] for a record the matching index proved to pass the
    /// filter: aggregates it without running the filter again. Only for a stage without EXPLODE.
    pub(crate) fn process_matched(
        &self,
        worker: &mut WorkerState,
        record: &Record,
        ctx: &EvalContext,
    ) -> bool {
        debug_assert!(!self.explodes());
        self.inner.aggregator.update(&mut worker.state, record, ctx);
        worker.matched += 1;
        true
    }

    /// [`CompiledQuery::process_matched`] for a record the caller gives away: a RAW query
    /// keeps it without copying it.
    pub(crate) fn process_matched_owned(
        &self,
        worker: &mut WorkerState,
        record: Record,
        ctx: &EvalContext,
    ) -> bool {
        debug_assert!(!self.explodes());
        self.inner.aggregator.update_owned(&mut worker.state, record, ctx);
        worker.matched += 1;
        true
    }

    /// True when the stream stage's filter holds for `record` (no filter: true). Only meaningful
    /// for a stage without EXPLODE (the filter then reads the record itself).
    pub(crate) fn filter_passes(&self, record: &Record, ctx: &EvalContext) -> bool {
        self.inner.filter.as_ref().is_none_or(|f| f.test(record, ctx))
    }

    /// A record a RAW query matched while it sheds records: counted as matched and dropped.
    pub(crate) fn count_shed(&self, worker: &mut WorkerState) {
        self.inner.aggregator.count_dropped(&mut worker.state);
        worker.matched += 1;
    }

    /// True when the stream stage explodes records before filtering them.
    pub(crate) fn explodes(&self) -> bool {
        !self.inner.explode.is_empty()
    }

    /// Takes the worker's partial, leaving it empty; `None` when no record was processed (or, for
    /// [`CompiledQuery::process_candidate`], matched) since the last flush.
    pub fn flush(&self, worker: &mut WorkerState) -> Option<Partial> {
        if !worker.is_dirty() {
            return None;
        }
        let state = std::mem::replace(&mut worker.state, self.inner.aggregator.new_state());
        let partial = Partial { state, seen: worker.seen, matched: worker.matched };
        worker.seen = 0;
        worker.matched = 0;
        Some(partial)
    }

    /// A partial that only counts `records` as seen (none matched): what a worker that read
    /// them and matched none would send.
    pub fn seen_partial(&self, records: u64) -> Partial {
        Partial { state: self.inner.aggregator.new_state(), seen: records, matched: 0 }
    }

    /// For reading stored blocks from their statistics: the fields whose summaries answer
    /// this query without its records — a GROUP ALL of COUNT(*) and COUNT, SUM, AVG, MIN, MAX
    /// of top-level fields, with no WHERE and nothing exploded; `None` for any other query.
    pub fn summary_fields(&self) -> Option<Vec<&str>> {
        if self.inner.filter.is_some() || !self.inner.explode.is_empty() {
            return None;
        }
        self.inner.aggregator.summary_fields()
    }

    /// The partial a worker would build from `rows` records whose fields have these
    /// summaries (see [`CompiledQuery::summary_fields`]); `None` when they cannot stand in
    /// for the records exactly.
    pub fn partial_from_summary(
        &self,
        rows: u64,
        summary: &dyn Fn(&str) -> Option<crate::aggregate::group::ColumnSummary>,
    ) -> Option<Partial> {
        self.summary_fields()?;
        let state = self.inner.aggregator.state_from_summary(rows, summary)?;
        Some(Partial { state, seen: rows, matched: rows })
    }

    /// For reading stored blocks column at a time: the top-level fields a GROUP BY groups by
    /// (none for a GROUP ALL) and the fields its aggregates summarize, when the query is a
    /// GROUP ALL or GROUP BY of plain fields with COUNT, SUM, AVG, MIN and MAX of plain fields
    /// and nothing exploded; `None` for any other query. Its WHERE ([`CompiledQuery::
    /// filter_expr`]) is the caller's to apply.
    pub fn group_fields(&self) -> Option<(Vec<&str>, Vec<&str>)> {
        if !self.inner.explode.is_empty() {
            return None;
        }
        self.inner.aggregator.group_fields()
    }

    /// The partial a worker would build from `seen` records of which those of `groups` passed
    /// the filter (their summaries follow [`CompiledQuery::group_fields`]' fields); `None`
    /// when a summary cannot stand in for its records.
    pub fn partial_from_groups(&self, seen: u64, groups: &[GroupRows]) -> Option<Partial> {
        self.group_fields()?;
        let state = self.inner.aggregator.state_from_groups(groups)?;
        let matched = groups.iter().map(|g| g.rows).sum();
        Some(Partial { state, seen, matched })
    }

    /// Folds a partial the caller built for records it read another way (a batch of columns
    /// folded into groups: [`CompiledQuery::partial_from_groups`]) into a worker's state, as
    /// if [`CompiledQuery::process_candidate`] had processed those records one by one: the
    /// state takes its groups and its matched records (records seen are counted by the caller,
    /// once for all queries).
    pub fn absorb(&self, worker: &mut WorkerState, partial: Partial) -> Result<(), EngineError> {
        worker.matched = worker.matched.saturating_add(partial.matched);
        self.inner.aggregator.merge_owned(&mut worker.state, partial.state)
    }

    /// Folds `other` into `into`, as the joiner would fold both in turn: for a reader that
    /// gathers many partials of one window on its own thread before handing them on (the
    /// history's blocks), so that the joiner's thread merges one partial a reader, not one a
    /// block. Not for RAW partials, whose records the joiner admits one by one.
    pub fn combine(&self, into: &mut Partial, other: Partial) -> Result<(), EngineError> {
        into.seen = into.seen.saturating_add(other.seen);
        into.matched = into.matched.saturating_add(other.matched);
        self.inner.aggregator.merge_owned(&mut into.state, other.state)
    }

    /// The stream stage's WHERE as written, for a store that evaluates it over whole columns
    /// before building records: `Some(None)` when there is none, `None` when records are
    /// exploded before it (it then reads the exploded records, not the stored ones) or when it
    /// was not kept (a live RAW query: see [`CompiledQuery::compile`]).
    pub fn filter_expr(&self) -> Option<Option<&Expr>> {
        let inner = &self.inner;
        match (&inner.filter, &inner.filter_source) {
            _ if !inner.explode.is_empty() => None,
            (None, _) => Some(None),
            (Some(_), Some(source)) => Some(Some(source)),
            (Some(_), None) => None,
        }
    }

    /// Counts a record as read that the caller proved fails the WHERE (see
    /// [`CompiledQuery::filter_expr`]): what [`CompiledQuery::process`] would have done with it.
    pub fn skip(&self, worker: &mut WorkerState) {
        worker.seen += 1;
    }

    /// A partial as bytes, for a joiner in another process (the distributed mode):
    /// `seen` and `matched` (8 bytes each, little-endian) then the aggregator's encoding.
    pub fn encode_partial(&self, partial: &Partial) -> Vec<u8> {
        let body = self.inner.aggregator.encode(&partial.state);
        let mut out = Vec::with_capacity(16 + body.len());
        out.extend_from_slice(&partial.seen.to_le_bytes());
        out.extend_from_slice(&partial.matched.to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Reads back [`CompiledQuery::encode_partial`]'s bytes.
    pub fn decode_partial(&self, bytes: &[u8]) -> Result<Partial, EngineError> {
        if bytes.len() < 16 {
            return Err(EngineError::CorruptPartial("shorter than its header".into()));
        }
        let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        let state = self.inner.aggregator.decode(&bytes[16..])?;
        Ok(Partial { state, seen: word(0), matched: word(8) })
    }
}

#[cfg(test)]
mod summary_tests {
    use super::*;
    use crate::aggregate::group::ColumnSummary;
    use needle_record::{decode_record, Value};

    fn query(text: &str) -> CompiledQuery {
        let plan = needle_query::compile(text, &needle_query::QueryConfig::default()).unwrap();
        CompiledQuery::compile(&plan).unwrap()
    }

    fn by_records(query: &CompiledQuery, lines: &[&str]) -> Partial {
        let mut worker = query.new_worker();
        for line in lines {
            query.process(
                &mut worker,
                &decode_record(line.as_bytes()).unwrap(),
                &EvalContext::new(0),
            );
        }
        query.flush(&mut worker).unwrap()
    }

    fn longs(count: u64, sum: f64, min: i64, max: i64) -> ColumnSummary {
        let (min, max) = (Some(Value::Long(min)), Some(Value::Long(max)));
        ColumnSummary { count, sum: Some(sum), min, max }
    }

    #[test]
    fn a_summary_gives_the_partial_its_records_give() {
        let q = query("SELECT COUNT(*) AS n, SUM(x) AS s, MIN(x) AS lo, MAX(x) AS hi, AVG(x) AS a, MAX(t) AS t FROM STREAM()");
        assert_eq!(q.summary_fields(), Some(vec!["x", "x", "x", "x", "t"]));
        let lines = [
            r#"{"x": 3, "t": "b"}"#,
            r#"{"x": 9000000000001, "t": "a"}"#,
            r#"{"x": null}"#,
            r#"{"x": -4, "t": "c"}"#,
        ];
        let text = ColumnSummary {
            count: 3,
            sum: None,
            min: Some(Value::String("a".into())),
            max: Some(Value::String("c".into())),
        };
        let summary = |field: &str| match field {
            "x" => Some(longs(3, 9_000_000_000_000.0, -4, 9_000_000_000_001)),
            "t" => Some(text.clone()),
            _ => None,
        };
        let from_summary = q.partial_from_summary(4, &summary).expect("answered");
        // the same bytes: the same exact integer sum, counts, extremes, seen and matched
        assert_eq!(q.encode_partial(&from_summary), q.encode_partial(&by_records(&q, &lines)));
    }

    #[test]
    fn a_summary_that_cannot_stand_in_exactly_is_not_used() {
        let q = query("SELECT SUM(x) AS s, MIN(x) AS lo FROM STREAM()");
        let huge = |_: &str| Some(longs(4, 0.0, -(1 << 62), 1 << 62));
        assert!(q.partial_from_summary(4, &huge).is_none(), "an integer sum past 2^53");
        let nan = |_: &str| {
            let (min, max) = (Some(Value::Double(-1.0)), Some(Value::Double(1.0)));
            Some(ColumnSummary { count: 3, sum: Some(f64::NAN), min, max })
        };
        assert!(q.partial_from_summary(4, &nan).is_none(), "a float column holding NaN");
        let text = |_: &str| {
            let (min, max) = (Some(Value::String("a".into())), Some(Value::String("b".into())));
            Some(ColumnSummary { count: 2, sum: None, min, max })
        };
        assert!(q.partial_from_summary(4, &text).is_none(), "SUM of text counts ignored values");
        assert!(q.partial_from_summary(4, &|_| None).is_none(), "no statistics");
        for text in [
            "SELECT SUM(x) AS s FROM STREAM() WHERE x > 1",
            "SELECT g, SUM(x) AS s FROM STREAM() GROUP BY g",
            "SELECT SUM(x + 1) AS s FROM STREAM()",
            "SELECT COUNT(DISTINCT x) FROM STREAM()",
            "SELECT * FROM STREAM()",
        ] {
            assert_eq!(query(text).summary_fields(), None, "{text}");
        }
        let nulls = |_: &str| Some(ColumnSummary::default());
        let all_null = q.partial_from_summary(2, &nulls).expect("every value NULL");
        let lines = [r#"{"x": null}"#, r#"{"y": 1}"#];
        assert_eq!(q.encode_partial(&all_null), q.encode_partial(&by_records(&q, &lines)));
    }
}
