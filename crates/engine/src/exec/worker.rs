//! The worker side of a query: explode → filter → partial aggregation, per record, with no
//! locks and no hand-off. Each worker thread keeps one [`WorkerState`] per active query and
//! flushes it into a [`Partial`] for the join side on a tick (at once for RAW matches).

use super::stage::CompiledStage;
use super::CompiledQuery;
use crate::aggregate::PartialState;
use crate::eval::EvalContext;
use crate::EngineError;
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

    /// True when the stream stage's filter holds for `record` (no filter: true). Only meaningful
    /// for a stage without EXPLODE (the filter then reads the record itself).
    pub(crate) fn filter_passes(&self, record: &Record, ctx: &EvalContext) -> bool {
        self.inner.filter.as_ref().is_none_or(|f| f.test(record, ctx))
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
