//! Running a query: the worker side (explode → filter → partial aggregation), the join side
//! (merge, windows, post-aggregation, outer query, results and metadata) and a single-threaded
//! [`LocalQuery`] that wires one of each.
//!
//! # How the runtime drives it
//! ```text
//! let query = Arc::new(CompiledQuery::compile(&plan)?);       // once; Send + Sync, shared
//! // each worker thread, per active query:
//! let mut w = query.new_worker();
//! if query.process(&mut w, &record, &EvalContext::new(now)) && query.is_raw() {
//!     send(query.flush(&mut w));                               // RAW: at once
//! }
//! on_tick: if let Some(p) = query.flush(&mut w) { send(p) }    // others: on the tick
//! // the joiner, per query:
//! let mut run = QueryRun::new(query.clone(), id, received_ms);
//! out(run.merge(partial, now)?);   // may emit (RAW windows, RAW LIMIT, time up)
//! out(run.tick(now));              // due time windows, the end of the duration
//! if input_over { out(run.finish(now)) }   // the final emission
//! run.is_done()                    // then drop it (and the workers' states)
//! ```
//! - [`CompiledQuery`]: `compile(&Plan) -> Result<CompiledQuery, EngineError>`, `new_worker()`,
//!   `process(&self, &mut WorkerState, &Record, &EvalContext) -> bool` (true when a record
//!   matched), `flush(&self, &mut WorkerState) -> Option<Partial>`, `encode_partial` /
//!   `decode_partial` (bytes for the distributed mode), `is_raw()`, `plan()`.
//! - [`QueryRun`] (one per query on the join side): `new(Arc<CompiledQuery>, id, receive_ms)`,
//!   `merge(Partial, now_ms) -> Result<Vec<Emission>>`, `merge_bytes`, `tick(now_ms) ->
//!   Vec<Emission>`, `finish(now_ms) -> Option<Emission>`, `is_done()`, `next_deadline_ms()`.
//! - [`Emission`]: `records`, `meta` (keys in [`result`]), `is_final`, `to_json()`.
//!
//! Time is always injected (`now_ms`); nothing here reads the system clock. Windows are in
//! [`window`], the join's decisions in [`join`], post-aggregation in [`post`], EXPLODE in
//! [`explode`]. The outer query of `SELECT ... FROM (inner)` runs in full over each inner
//! emission's records (explode, filter, aggregate, post) and its result is the emission.

pub mod explode;
pub mod join;
pub mod local;
pub mod post;
pub mod result;
pub mod stage;
pub mod window;
pub mod worker;

pub use join::QueryRun;
pub use local::LocalQuery;
pub use result::{Emission, Notice};
pub use stage::CompiledStage;
pub use window::WindowPlan;
pub use worker::{Partial, WorkerState};

use crate::EngineError;
use needle_query::plan::{Aggregation, Plan};

/// A query compiled once and shared (`Arc`) by every worker and the joiner: immutable,
/// `Send + Sync`.
#[derive(Debug)]
pub struct CompiledQuery {
    pub(crate) plan: Plan,
    pub(crate) inner: CompiledStage,
    pub(crate) outer: Option<CompiledStage>,
    pub(crate) window: WindowPlan,
}

impl CompiledQuery {
    /// Compiles a validated plan. Errors: what the engine cannot run (see [`window`] for the
    /// windows it refuses; record windows need RAW), an invalid regular expression.
    pub fn compile(plan: &Plan) -> Result<Self, EngineError> {
        let window = WindowPlan::from_kind(plan.window.as_ref())?;
        let raw = matches!(plan.stage.aggregation, Aggregation::Raw { .. });
        if matches!(window, WindowPlan::Record { .. }) && !raw {
            return Err(EngineError::Unsupported(
                "a record window on an aggregation (record windows are for RAW queries)".into(),
            ));
        }
        Ok(Self {
            inner: CompiledStage::compile(&plan.stage)?,
            outer: plan.outer.as_ref().map(CompiledStage::compile_batch).transpose()?,
            window,
            plan: plan.clone(),
        })
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// True for a RAW inner query: its matches should be flushed to the join at once.
    pub fn is_raw(&self) -> bool {
        self.inner.raw_size.is_some()
    }

    pub fn window(&self) -> WindowPlan {
        self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiled_query_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<CompiledQuery>();
        check::<std::sync::Arc<CompiledQuery>>();
        check::<QueryRun>();
        check::<WorkerState>();
        check::<Partial>();
    }
}
