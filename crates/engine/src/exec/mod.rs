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
//! `merge` first does what `tick` would (a due window is emitted before the partial joins the
//! next one), so a joiner may interleave merges and ticks freely; a partial belongs to the
//! window that is open when it is merged. A worker's RAW state holds at most `size` records
//! between flushes; the join keeps the first `size` overall.
//!
//! Time is always injected (`now_ms`); nothing here reads the system clock. Windows are in
//! [`window`], the join's decisions in [`join`], post-aggregation in [`post`], EXPLODE in
//! [`explode`]. The outer query of `SELECT ... FROM (inner)` runs in full over each inner
//! emission's records (explode, filter, aggregate, post) and its result is the emission.

pub mod explode;
pub mod join;
pub mod local;
pub mod post;
pub(crate) mod reads;
pub mod result;
pub mod stage;
pub mod window;
pub mod worker;

pub use join::QueryRun;
pub use local::LocalQuery;
pub use result::{Emission, JsonPieces, Meta, Notice};
pub use stage::CompiledStage;
pub use window::WindowPlan;
pub use worker::{Partial, WorkerState};

use crate::EngineError;
use needle_query::plan::{Aggregation, Plan};
use reads::Reads;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// A query compiled once and shared (`Arc`) by every worker and the joiner: immutable,
/// `Send + Sync`. It keeps what running needs of the plan, not the plan: 100,000 idle queries
/// are held at once, each for the length of its duration.
#[derive(Debug)]
pub struct CompiledQuery {
    /// The query text as received (shared with the runtime's status table).
    text: Arc<str>,
    duration_ms: u64,
    /// The plan has a window: the query emits more than once.
    windowed: bool,
    /// RAW with `*`: a matching record is handed over whole. Beside `windowed`, in its padding,
    /// rather than in `reads`: 8 bytes less, which keeps the query in the 256-byte class.
    whole_record: bool,
    /// What the stream stage reads of a record ([`crate::matching`]'s decoding and index).
    pub(crate) reads: Reads,
    pub(crate) inner: CompiledStage,
    /// Boxed: an outer query is rare, and a stage is large.
    pub(crate) outer: Option<Box<CompiledStage>>,
    pub(crate) window: WindowPlan,
    /// RAW: until when (ms since the epoch) the workers of this process keep none of its
    /// records, only count them ([`CompiledQuery::shed_raw_until`]).
    shed_until_ms: AtomicI64,
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
        // The WHERE as written is kept for the column paths only: reading stored blocks (a
        // query with HISTORY) and aggregating batches of points (a live aggregation). A live
        // RAW query never reads columns, and its copy of the filter was a sixth of what each of
        // a million idle queries held (it is not even made for one).
        let inner = if plan.history.is_none() && raw {
            CompiledStage::compile_without_source(&plan.stage)?
        } else {
            CompiledStage::compile(&plan.stage)?
        };
        // (an outer stage reads batches, never columns: compiled without its source)
        let outer = plan
            .outer
            .as_ref()
            .map(|outer| Ok::<_, EngineError>(Box::new(CompiledStage::compile_batch(outer)?)))
            .transpose()?;
        Ok(Self {
            text: plan.text.as_str().into(),
            duration_ms: plan.duration_ms,
            windowed: plan.window.is_some(),
            whole_record: plan.stage.reads_whole_records(),
            reads: Reads::of(&plan.stage),
            inner,
            outer,
            window,
            shed_until_ms: AtomicI64::new(i64::MIN),
        })
    }

    /// RAW: the workers of this process keep none of the query's records until `until_ms`
    /// (each matched one counted as matched and dropped, not copied): the joiner asks this
    /// while the records it is sent cannot go out (its subscriber reads slower than they come),
    /// so that a query whose results are being dropped anyway does not make the workers copy
    /// every record for it.
    pub fn shed_raw_until(&self, until_ms: i64) {
        self.shed_until_ms.fetch_max(until_ms, Ordering::Relaxed);
    }

    /// True while the workers are to keep none of a RAW query's records (at `now_ms`).
    pub fn sheds_raw(&self, now_ms: i64) -> bool {
        self.shed_until_ms.load(Ordering::Relaxed) > now_ms
    }

    /// The query text as received (BQL, or the JSON query's text).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// [`CompiledQuery::text`], shared.
    pub fn shared_text(&self) -> Arc<str> {
        self.text.clone()
    }

    /// How long the query runs, in ms.
    pub fn duration_ms(&self) -> u64 {
        self.duration_ms
    }

    /// True when the query has a window (it emits more than once).
    pub fn is_windowed(&self) -> bool {
        self.windowed
    }

    /// True for a RAW inner query: its matches should be flushed to the join at once.
    pub fn is_raw(&self) -> bool {
        self.inner.raw_size().is_some()
    }

    pub fn window(&self) -> WindowPlan {
        self.window
    }

    /// A RAW inner query's LIMIT: the most records it returns (per window, with a window).
    pub fn raw_limit(&self) -> Option<u64> {
        self.inner.raw_size()
    }

    /// RAW with `*`: a matching record is handed over whole.
    pub(crate) fn reads_whole_records(&self) -> bool {
        self.whole_record
    }

    /// The top-level fields the query reads of a record, in order of first use; `None` when it
    /// wants whole records (RAW with `*`). A store that keeps records column by column reads only
    /// these.
    pub fn fields_read(&self) -> Option<Vec<String>> {
        if self.whole_record {
            return None;
        }
        let mut names: Vec<String> = Vec::new();
        for read in self.reads.fields.iter() {
            let name = read.split(reads::PART).next().unwrap_or(read);
            if !names.iter().any(|n| n == name) {
                names.push(name.to_owned());
            }
        }
        Some(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A million idle queries each hold one `Arc<CompiledQuery>`: with its two counts it must
    /// stay within the allocator's 256-byte class (it was 288 bytes, in the 320-byte class).
    #[test]
    fn a_compiled_query_with_its_arc_s_counts_fits_in_256_bytes() {
        let counts = 2 * std::mem::size_of::<usize>();
        assert!(std::mem::size_of::<CompiledQuery>() + counts <= 256);
    }

    #[test]
    fn compiled_query_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<CompiledQuery>();
        check::<std::sync::Arc<CompiledQuery>>();
        check::<QueryRun>();
        check::<WorkerState>();
        check::<Partial>();
    }

    /// The WHERE as written is kept for the queries a column path may run (those reading the
    /// past, aggregations), not for a live RAW query; one without it never passes for a query
    /// without a WHERE.
    #[test]
    fn the_filter_as_written_is_kept_for_the_column_paths_only() {
        let compiled = |bql: &str| {
            let plan = needle_query::compile(bql, &needle_query::QueryConfig::default()).unwrap();
            CompiledQuery::compile(&plan).unwrap()
        };
        let live_raw = compiled("SELECT * FROM STREAM(1000, TIME) WHERE id = 'x'");
        assert!(live_raw.filter_expr().is_none(), "no column path reads a live RAW query");
        let unfiltered = compiled("SELECT * FROM STREAM(1000, TIME)");
        assert!(matches!(unfiltered.filter_expr(), Some(None)), "no WHERE at all");
        for bql in [
            "SELECT COUNT(*) FROM STREAM(1000, TIME) WHERE id = 'x'",
            "SELECT * FROM HISTORY('-1h') WHERE id = 'x'",
            "SELECT * FROM STREAM(1000, TIME) SINCE '-1h' WHERE id = 'x'",
        ] {
            assert!(matches!(compiled(bql).filter_expr(), Some(Some(_))), "{bql}");
        }
    }

    /// The runtime's shape: workers on their own threads share one compiled query, send
    /// partials over a channel, and the joiner merges them; the result equals one worker's.
    #[test]
    fn workers_on_threads_merge_to_the_single_worker_result() {
        use crate::eval::EvalContext;
        use needle_query::ast::{Expr, ExprKind, Field, Span, StreamDuration};
        use needle_query::plan::{AggregateFunction, NamedAggregate, NamedExpr, Stage};
        use needle_record::{Record, Value};
        use std::sync::{mpsc, Arc};

        let field = |n: &str| {
            Expr::new(
                ExprKind::Field(Field { name: n.into(), path: vec![], hint: None }),
                Span::default(),
            )
        };
        let plan = Plan {
            text: "SELECT k, COUNT(*), SUM(v) FROM STREAM() GROUP BY k".into(),
            duration_ms: 1000,
            requested_duration: StreamDuration::Millis(1000),
            window: None,
            stage: Stage {
                explode: vec![],
                filter: None,
                aggregation: Aggregation::GroupBy {
                    keys: vec![NamedExpr { name: "k".into(), expr: field("k") }],
                    aggregates: vec![
                        NamedAggregate {
                            name: "COUNT(*)".into(),
                            function: AggregateFunction::Count,
                            input: None,
                        },
                        NamedAggregate {
                            name: "SUM(v)".into(),
                            function: AggregateFunction::Sum,
                            input: Some(field("v")),
                        },
                    ],
                    max_groups: 1000,
                },
                post: Default::default(),
            },
            outer: None,
            history: None,
        };
        let records: Vec<Record> = (0..3000i64)
            .map(|i| {
                let mut r = Record::new();
                r.insert("k", Value::Long(i % 7));
                r.insert("v", Value::Long(i));
                r
            })
            .collect();
        let query = Arc::new(CompiledQuery::compile(&plan).unwrap());

        let mut one = LocalQuery::from_compiled(query.clone(), "one", 0);
        for r in &records {
            one.push(r, 0).unwrap();
        }
        let expected = one.finish(1).unwrap().pop().unwrap();

        let records = Arc::new(records);
        let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(4);
        let threads: Vec<_> = (0..3)
            .map(|t| {
                let (query, records, tx) = (query.clone(), records.clone(), tx.clone());
                std::thread::spawn(move || {
                    let mut w = query.new_worker();
                    for (i, r) in records.iter().enumerate().filter(|(i, _)| i % 3 == t) {
                        query.process(&mut w, r, &EvalContext::new(0));
                        if i % 500 == 0 {
                            if let Some(p) = query.flush(&mut w) {
                                tx.send(query.encode_partial(&p)).unwrap();
                            }
                        }
                    }
                    if let Some(p) = query.flush(&mut w) {
                        tx.send(query.encode_partial(&p)).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let mut run = QueryRun::new(query, "many", 0);
        for bytes in rx {
            assert!(run.merge_bytes(&bytes, 0).unwrap().is_empty());
        }
        threads.into_iter().for_each(|t| t.join().unwrap());
        let got = run.finish(1).unwrap();
        assert_eq!(got.records, expected.records);
        assert_eq!(got.records.len(), 7);
        assert_eq!(got.meta["Stats"]["Records Seen"], 3000);
    }
}
