//! One compiled [`Stage`]: explode steps, filter, aggregator and post-aggregation, shared
//! read-only by every worker and the join side.
//!
//! RAW with ORDER BY: on the stream (the inner query) `LIMIT n` keeps the first n matching
//! records and ORDER BY sorts those (Bullet's behaviour: a live query cannot wait for every
//! record to pick the smallest). An outer query reads a finite batch (one inner emission), so
//! there it is SQL's: sort every record, then keep the first n.
//!
//! RAW with ORDER BY: on the stream (the inner query) `LIMIT n` keeps the first n matching
//! records and ORDER BY sorts those (Bullet's behaviour: a live query cannot wait for every
//! record to pick the smallest). An outer query reads a finite batch (one inner emission), so
//! there it is SQL's: sort every record, then keep the first n.

use super::explode::{for_each_exploded, CompiledExplode};
use super::post::CompiledPost;
use crate::aggregate::{Aggregator, PartialState};
use crate::eval::{CompiledExpr, EvalContext};
use crate::EngineError;
use needle_query::plan::{Aggregation, PostAggregation, Stage};
use needle_record::Record;
use serde_json::{Map, Value as Json};

#[derive(Debug)]
pub struct CompiledStage {
    pub(crate) explode: Box<[CompiledExplode]>,
    pub(crate) filter: Option<CompiledExpr>,
    /// The filter as written, for the column paths that evaluate it over whole columns (a
    /// store's blocks, a batch of metrics points); `None` for a query neither may run (see
    /// [`super::CompiledQuery::compile`]). Boxed: most queries have none.
    pub(crate) filter_source: Option<Box<needle_query::ast::Expr>>,
    pub(crate) aggregator: Aggregator,
    pub(crate) post: CompiledPost,
    /// RAW's `size` ([`CompiledStage::raw_size`]); [`NOT_RAW`] for the other kinds. Not an
    /// `Option`: its 8 bytes more put the compiled query of each of a million idle queries in
    /// the next allocation class (320 bytes, not 256).
    raw_size: u64,
}

/// [`CompiledStage::raw_size`] of a stage that is not RAW. A RAW size is at most one less: a
/// LIMIT of 2^64 - 1 records is kept as 2^64 - 2, a difference no query can reach.
const NOT_RAW: u64 = u64::MAX;

impl CompiledStage {
    /// Compiles the stage that reads the stream.
    pub fn compile(stage: &Stage) -> Result<Self, EngineError> {
        Self::compile_with(stage, &stage.aggregation, &stage.post, true)
    }

    /// [`CompiledStage::compile`] without the filter as written (its `filter_source`
    /// stays `None`): for a stage no column path runs.
    pub fn compile_without_source(stage: &Stage) -> Result<Self, EngineError> {
        Self::compile_with(stage, &stage.aggregation, &stage.post, false)
    }

    /// Compiles an outer query's stage, which reads finite batches (see the module doc).
    pub fn compile_batch(stage: &Stage) -> Result<Self, EngineError> {
        match &stage.aggregation {
            Aggregation::Raw { projection, size } if !stage.post.order_by.is_empty() => {
                let all = Aggregation::Raw { projection: projection.clone(), size: u64::MAX };
                let mut post = stage.post.clone();
                post.limit = Some(post.limit.map_or(*size, |l| l.min(*size)));
                let mut compiled = Self::compile_with(stage, &all, &post, false)?;
                compiled.raw_size = (*size).min(NOT_RAW - 1);
                Ok(compiled)
            }
            _ => Self::compile_without_source(stage),
        }
    }

    fn compile_with(
        stage: &Stage,
        aggregation: &Aggregation,
        post: &PostAggregation,
        keep_source: bool,
    ) -> Result<Self, EngineError> {
        Ok(Self {
            explode: stage
                .explode
                .iter()
                .map(CompiledExplode::compile)
                .collect::<Result<_, _>>()?,
            filter: stage.filter.as_ref().map(CompiledExpr::compile).transpose()?,
            filter_source: stage.filter.clone().filter(|_| keep_source).map(Box::new),
            aggregator: Aggregator::new(aggregation)?,
            post: CompiledPost::compile(post)?,
            raw_size: match aggregation {
                Aggregation::Raw { size, .. } => (*size).min(NOT_RAW - 1),
                _ => NOT_RAW,
            },
        })
    }

    /// RAW's `size` (its LIMIT, at most 2^64 - 2); `None` for the other kinds.
    pub(crate) fn raw_size(&self) -> Option<u64> {
        (self.raw_size != NOT_RAW).then_some(self.raw_size)
    }

    fn keep(&self, record: &Record, ctx: &EvalContext) -> bool {
        self.filter.as_ref().is_none_or(|f| f.test(record, ctx))
    }

    /// Explode → filter → update; the number of (exploded) records aggregated.
    pub fn process(&self, state: &mut PartialState, record: &Record, ctx: &EvalContext) -> u64 {
        if self.explode.is_empty() {
            if self.keep(record, ctx) {
                self.aggregator.update(state, record, ctx);
                return 1;
            }
            return 0;
        }
        let mut n = 0;
        for_each_exploded(&self.explode, record, ctx, &mut |r| {
            if self.keep(r, ctx) {
                self.aggregator.update(state, r, ctx);
                n += 1;
            }
        });
        n
    }

    /// The aggregated records of `state` after post-aggregation, and the aggregator's metadata.
    pub fn results(
        &self,
        state: &PartialState,
        ctx: &EvalContext,
    ) -> (Vec<Record>, Map<String, Json>) {
        let out = self.aggregator.finish(state);
        (self.post.apply(out.records, ctx), out.meta)
    }

    /// Runs this stage over a finite batch (an outer query over one inner emission).
    pub fn run_batch(
        &self,
        records: &[Record],
        ctx: &EvalContext,
    ) -> (Vec<Record>, Map<String, Json>) {
        let mut state = self.aggregator.new_state();
        for r in records {
            self.process(&mut state, r, ctx);
        }
        self.results(&state, ctx)
    }
}
