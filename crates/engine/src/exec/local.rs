//! [`LocalQuery`]: one query, one worker and its join side on one thread, for `needle query`,
//! tests and examples. It follows the runtime's protocol exactly: records go through
//! [`CompiledQuery::process`], RAW matches are flushed to the join at once, other partials are
//! flushed when the clock moves (so the join sees each record at the time it arrived).

use super::{CompiledQuery, Emission, QueryRun, WorkerState};
use crate::eval::EvalContext;
use crate::EngineError;
use needle_query::Plan;
use needle_record::Record;
use std::sync::Arc;

#[derive(Debug)]
pub struct LocalQuery {
    query: Arc<CompiledQuery>,
    worker: WorkerState,
    run: QueryRun,
    now_ms: i64,
}

impl LocalQuery {
    /// Compiles `plan` and starts it at `now_ms`.
    pub fn new(plan: &Plan, id: impl Into<String>, now_ms: i64) -> Result<Self, EngineError> {
        let query = Arc::new(CompiledQuery::compile(plan)?);
        Ok(Self::from_compiled(query, id, now_ms))
    }

    pub fn from_compiled(query: Arc<CompiledQuery>, id: impl Into<String>, now_ms: i64) -> Self {
        Self {
            worker: query.new_worker(),
            run: QueryRun::new(query.clone(), id.into(), now_ms),
            query,
            now_ms,
        }
    }

    pub fn query(&self) -> &Arc<CompiledQuery> {
        &self.query
    }

    pub fn is_done(&self) -> bool {
        self.run.is_done()
    }

    /// See [`QueryRun::next_deadline_ms`].
    pub fn next_deadline_ms(&self) -> Option<i64> {
        self.run.next_deadline_ms()
    }

    fn flush(&mut self, at_ms: i64) -> Result<Vec<Emission>, EngineError> {
        match self.query.flush(&mut self.worker) {
            Some(partial) => self.run.merge(partial, at_ms),
            None => Ok(Vec::new()),
        }
    }

    /// Moves the clock to `now_ms` (never backwards): what the worker holds is merged at the
    /// time it arrived, then the join ticks.
    pub fn advance(&mut self, now_ms: i64) -> Result<Vec<Emission>, EngineError> {
        let mut out = Vec::new();
        if now_ms > self.now_ms {
            out.extend(self.flush(self.now_ms)?);
            self.now_ms = now_ms;
        }
        out.extend(self.run.tick(self.now_ms));
        Ok(out)
    }

    /// Runs one record arriving at `now_ms`; the emissions that became ready.
    pub fn push(&mut self, record: &Record, now_ms: i64) -> Result<Vec<Emission>, EngineError> {
        let mut out = self.advance(now_ms)?;
        if self.run.is_done() {
            return Ok(out);
        }
        let ctx = EvalContext::new(self.now_ms);
        if self.query.process(&mut self.worker, record, &ctx) && self.query.is_raw() {
            out.extend(self.flush(self.now_ms)?);
        }
        Ok(out)
    }

    /// Ends the query at `now_ms` (end of input): the remaining emissions, the final one last.
    pub fn finish(&mut self, now_ms: i64) -> Result<Vec<Emission>, EngineError> {
        let mut out = self.advance(now_ms)?;
        out.extend(self.flush(self.now_ms)?);
        out.extend(self.run.finish(self.now_ms));
        Ok(out)
    }
}
