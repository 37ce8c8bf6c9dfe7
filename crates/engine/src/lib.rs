//! needle's engine: given a [`needle_query::Plan`] and records, produce exactly the results the
//! language promises. Expressions, aggregations with real sketches, windows, partials that merge
//! across workers, post-aggregation and result metadata. No I/O and no threads here: the runtime
//! drives it.
//!
//! Its place in the flow: between the query language and the runtime — a worker thread hands it
//! each record (`matching`: which of the active queries it may match, then their filters and
//! partial aggregations, `exec`), and the joiner merges the partials into emissions
//! (`exec::join`). Batches of records as Arrow columns (history's stored blocks, events pushed
//! as columns) are evaluated column at a time by [`columnar`].

pub mod aggregate;
pub mod columnar;
pub mod compare;
pub mod error;
pub mod eval;
pub mod exec;
pub mod matching;

pub use aggregate::{AggregateOutput, Aggregator, PartialState};
pub use error::EngineError;
pub use eval::{lookup_field, CompiledExpr, EvalContext};
pub use exec::{CompiledQuery, Emission, LocalQuery, Partial, QueryRun, WorkerState};
