//! The validated, normalized form of a query that the engine runs: one [`Plan`] per query,
//! whichever language it was written in.
//!
//! A plan is one or two [`Stage`]s. A stage reads records, explodes them (LATERAL VIEW or a table
//! function in SELECT), keeps those its filter holds TRUE for, aggregates them with exactly one
//! [`Aggregation`] kind, then post-aggregates the aggregated records ([`PostAggregation`]:
//! computations over aggregates, HAVING, ORDER BY, LIMIT, the output columns). An outer query is a
//! second stage that reads the inner stage's results each time the inner stage emits.
//!
//! Expressions in a plan are [`ast::Expr`]s. In post-aggregation, every aggregate has been
//! replaced by a reference to the column that holds it (a field named by
//! [`NamedAggregate::name`]) and every alias by what it names, so post-aggregation expressions
//! read only the aggregated record. Expressions serialize as their canonical BQL text.

use crate::ast::{self, DistributionKind, Expr, Points, StreamDuration, TableFunction, WindowKind};
use serde::{Serialize, Serializer};

/// A query ready to run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// The query text as received (BQL, or the JSON query's text).
    pub text: String,
    /// How long the query runs, in ms, after defaults and `MAX` are resolved; 0 for `FROM
    /// HISTORY(...)`, which ends when the stored range has been read.
    pub duration_ms: u64,
    /// What the query asked for, before resolution.
    pub requested_duration: StreamDuration,
    /// When results are emitted; `None`: once, when the query ends.
    pub window: Option<WindowKind>,
    /// The inner (or only) query.
    pub stage: Stage,
    /// The outer query of `SELECT ... FROM (inner)`, run over each emission of `stage`.
    pub outer: Option<Stage>,
    /// The stored past this query reads (`FROM HISTORY(...)` or `... SINCE ...`); `None`: live
    /// records only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryPlan>,
}

/// The stored past a query reads, with its times resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HistoryPlan {
    /// Start of the range, ms since the epoch, inclusive (relative times resolved when the query
    /// was compiled).
    pub from_ms: i64,
    /// End of the range, exclusive: `HISTORY(from, to)`, or the time of compiling for
    /// `HISTORY(from)`; `None` for `SINCE` (the past runs up to the live part, then the query
    /// goes on live for its duration).
    pub to_ms: Option<i64>,
    /// `SINCE`: live records follow the stored past.
    pub live: bool,
    /// Where the clause is in the text, for errors raised when the query is run (a server that
    /// keeps no history).
    #[serde(skip)]
    pub span: crate::ast::Span,
}

/// One SELECT: explode, filter, aggregate, post-aggregate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stage {
    /// Applied in order before the filter. `lateral: true` (LATERAL VIEW) adds the alias fields
    /// to the record; `lateral: false` (a table function in SELECT) replaces the record by the
    /// alias fields.
    pub explode: Vec<Explode>,
    /// Records are kept when this is TRUE (not NULL, not FALSE).
    pub filter: Option<Expr>,
    pub aggregation: Aggregation,
    pub post: PostAggregation,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explode {
    pub lateral: bool,
    pub outer: bool,
    pub expr: Expr,
    /// One name for a list's elements; key and value names for a map's entries.
    pub aliases: Vec<String>,
}

impl Explode {
    pub fn from_table_function(tf: &TableFunction, lateral: bool) -> Self {
        let aliases = match &tf.alias {
            ast::ExplodeAlias::Value(v) => vec![v.name.clone()],
            ast::ExplodeAlias::KeyValue(k, v) => vec![k.name.clone(), v.name.clone()],
        };
        Self { lateral, outer: tf.outer, expr: tf.expr.clone(), aliases }
    }
}

/// An expression and the column it fills.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NamedExpr {
    pub name: String,
    pub expr: Expr,
}

/// The simple aggregate functions of GROUP ALL and GROUP BY.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AggregateFunction {
    /// `COUNT(*)`: a LONG.
    Count,
    /// A DOUBLE; NULL when no non-null input.
    Sum,
    Min,
    Max,
    /// A DOUBLE; NULL when no non-null input.
    Avg,
}

/// One aggregate computed per group (or once, for GROUP ALL), into the column `name`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NamedAggregate {
    pub name: String,
    pub function: AggregateFunction,
    /// The aggregated expression; `None` for COUNT(*).
    pub input: Option<Expr>,
}

/// The one aggregation kind a stage runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Aggregation {
    /// The matching records, projected. The stage (and so the query, for the inner stage without
    /// a window) ends when `size` records have been emitted in total.
    Raw { projection: Projection, size: u64 },
    /// One record of aggregates over everything.
    GroupAll { aggregates: Vec<NamedAggregate> },
    /// A record per distinct value of `keys` (SELECT DISTINCT is a GROUP BY with no aggregates),
    /// exact up to `max_groups` groups.
    GroupBy { keys: Vec<NamedExpr>, aggregates: Vec<NamedAggregate>, max_groups: u64 },
    /// `COUNT(DISTINCT e, ...)` with a Theta sketch; one record with column `name`.
    CountDistinct { name: String, fields: Vec<Expr>, nominal_entries: u32 },
    /// QUANTILE / FREQ / CUMFREQ with a KLL sketch.
    Distribution { kind: DistributionKind, value: Expr, points: Points, k: u16 },
    /// TOP K with a frequent-items sketch: up to `k` records of the `fields` columns plus
    /// `count_name` (default `Count`), with count ≥ `threshold` when given.
    TopK {
        k: u64,
        threshold: Option<u64>,
        fields: Vec<NamedExpr>,
        count_name: String,
        max_map_size: u32,
    },
}

/// What a RAW record keeps.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Projection {
    /// `SELECT *`: the whole record.
    All,
    /// Only these columns.
    Fields { fields: Vec<NamedExpr> },
    /// `SELECT *, e AS x`: the whole record plus these columns.
    AllAnd { fields: Vec<NamedExpr> },
}

/// What happens to the aggregated records before they are emitted, in this order.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct PostAggregation {
    /// Columns computed from the aggregated record (`AVG(x) + 5 AS y`), added in order.
    pub computations: Vec<NamedExpr>,
    /// Keeps the aggregated records for which this is TRUE.
    pub having: Option<Expr>,
    /// Sorts the records; NULLs first ascending, last descending.
    pub order_by: Vec<OrderBy>,
    /// Keeps the first n records.
    pub limit: Option<u64>,
    /// The columns emitted, in order; `None` keeps every column. Columns computed only for
    /// HAVING or ORDER BY are not listed here and so are not emitted.
    pub output: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OrderBy {
    pub expr: Expr,
    pub descending: bool,
}

impl Serialize for Expr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl Stage {
    /// The expressions this stage evaluates on the records it reads (explode, filter,
    /// aggregation), not post-aggregation, which reads the aggregated records.
    pub fn input_expressions(&self) -> Vec<&Expr> {
        let mut out: Vec<&Expr> = self.explode.iter().map(|e| &e.expr).collect();
        out.extend(self.filter.as_ref());
        match &self.aggregation {
            Aggregation::Raw { projection, .. } => match projection {
                Projection::All => {}
                Projection::Fields { fields } | Projection::AllAnd { fields } => {
                    out.extend(fields.iter().map(|f| &f.expr))
                }
            },
            Aggregation::GroupAll { aggregates } => {
                out.extend(aggregates.iter().filter_map(|a| a.input.as_ref()))
            }
            Aggregation::GroupBy { keys, aggregates, .. } => {
                out.extend(keys.iter().map(|f| &f.expr));
                out.extend(aggregates.iter().filter_map(|a| a.input.as_ref()));
            }
            Aggregation::CountDistinct { fields, .. } => out.extend(fields),
            Aggregation::Distribution { value, .. } => out.push(value),
            Aggregation::TopK { fields, .. } => out.extend(fields.iter().map(|f| &f.expr)),
        }
        out
    }

    /// True when the stage reads whole records (RAW with `*`), not just named fields.
    pub fn reads_whole_records(&self) -> bool {
        matches!(
            self.aggregation,
            Aggregation::Raw { projection: Projection::All | Projection::AllAnd { .. }, .. }
        )
    }
}

impl Plan {
    /// The plan as pretty JSON (what `needle validate` prints).
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a plan always serializes")
    }
}
