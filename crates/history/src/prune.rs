//! Zone maps: what a block's statistics prove about a query's WHERE clause.
//!
//! `may_be_true` answers "could any row of this block make the filter TRUE?" from the block's
//! min, max and null count per column (and, for `=` and `IN` on fields with a bloom filter, the
//! filter). Only a proof skips a block: anything it cannot reason about (functions, nested
//! fields, arithmetic, a literal of another type than the column) may be true. Negation is
//! pushed down through AND and OR with SQL's three-valued logic: `NOT e` is TRUE exactly when
//! `e` is FALSE, and a comparison is FALSE only for a non-null value that fails it.

use needle_engine::columnar::layout::Kind;
use needle_engine::columnar::ColumnStats;
use needle_query::ast::{BinaryOp, CompareOp, Expr, ExprKind, UnaryOp};
use needle_record::Value;
use std::cmp::Ordering;

/// What a block knows of its columns, for pruning.
pub(crate) trait Zone {
    /// The column of `field`: `None` when the block has no such column (every row's value is
    /// NULL); `Some(None)` when it has one but no usable statistics (JSON text, or missing).
    fn stats(&self, field: &str) -> Option<Option<ColumnStats>>;
    /// False when the bloom filter of `field` proves no row holds `value`.
    fn might_contain(&self, field: &str, value: &Value) -> bool;
}

/// How a literal compares with a column's bound: `None` when they cannot be compared here.
fn compare(literal: &Value, bound: &Value) -> Option<Ordering> {
    match (literal, bound) {
        (Value::String(a), Value::String(b)) => Some(a.as_str().cmp(b.as_str())),
        (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
        (a, b) if a.is_numeric() && b.is_numeric() => {
            // past 2^53 a double cannot tell neighbouring longs apart: no proof
            let exact = |v: &Value| v.as_f64().is_some_and(|f| f.abs() < 9.0e15);
            if let (Value::Long(a), Value::Long(b)) = (a, b) {
                return Some(a.cmp(b));
            }
            if !exact(a) || !exact(b) {
                return None;
            }
            a.as_f64()?.partial_cmp(&b.as_f64()?)
        }
        _ => None,
    }
}

/// A field of the record at the top level (no path), and its name.
fn top_field(expr: &Expr) -> Option<&str> {
    match &expr.kind {
        ExprKind::Field(f) if f.path.is_empty() => Some(f.name.as_str()),
        _ => None,
    }
}

fn literal(expr: &Expr) -> Option<&Value> {
    match &expr.kind {
        ExprKind::Literal(v) => Some(v),
        _ => None,
    }
}

/// Could some row of `zone` make `expr` TRUE?
pub(crate) fn may_be_true(expr: &Expr, zone: &dyn Zone) -> bool {
    may(expr, zone, false)
}

/// Could `expr` be TRUE (`negated`: FALSE) for some row?
fn may(expr: &Expr, zone: &dyn Zone, negated: bool) -> bool {
    match &expr.kind {
        ExprKind::Literal(Value::Bool(b)) => *b != negated,
        ExprKind::Literal(Value::Null) => false,
        ExprKind::Binary { op: BinaryOp::And, left, right } => {
            if negated {
                may(left, zone, true) || may(right, zone, true)
            } else {
                may(left, zone, false) && may(right, zone, false)
            }
        }
        ExprKind::Binary { op: BinaryOp::Or, left, right } => {
            if negated {
                may(left, zone, true) && may(right, zone, true)
            } else {
                may(left, zone, false) || may(right, zone, false)
            }
        }
        ExprKind::Unary { op: UnaryOp::Not, operand } => may(operand, zone, !negated),
        ExprKind::Compare { op, quantifier: None, left, right } => {
            let (field, op, value) =
                match (top_field(left), literal(right), top_field(right), literal(left)) {
                    (Some(f), Some(v), _, _) => (f, *op, v),
                    (_, _, Some(f), Some(v)) => (f, op.flipped(), v),
                    _ => return true,
                };
            let op = if negated { op.negated() } else { op };
            compare_may(zone, field, op, value)
        }
        ExprKind::Between { negated: not, value, low, high } => {
            let (Some(field), Some(lo), Some(hi)) = (top_field(value), literal(low), literal(high))
            else {
                return true;
            };
            if *not != negated {
                // v < lo OR v > hi
                compare_may(zone, field, CompareOp::Lt, lo)
                    || compare_may(zone, field, CompareOp::Gt, hi)
            } else {
                compare_may(zone, field, CompareOp::Ge, lo)
                    && compare_may(zone, field, CompareOp::Le, hi)
            }
        }
        ExprKind::In { negated: not, value, list } => {
            let (Some(field), ExprKind::List(items)) = (top_field(value), &list.kind) else {
                return true;
            };
            let Some(values) = items.iter().map(literal).collect::<Option<Vec<_>>>() else {
                return true;
            };
            if *not != negated {
                // NOT IN: TRUE for a non-null value outside the list
                values.iter().all(|v| compare_may(zone, field, CompareOp::Ne, v))
            } else {
                values.iter().any(|v| compare_may(zone, field, CompareOp::Eq, v))
            }
        }
        ExprKind::IsNull { negated: not, value } => {
            let Some(field) = top_field(value) else { return true };
            let want_null = *not == negated;
            match zone.stats(field) {
                None => want_null,
                Some(None) => true,
                Some(Some(s)) => {
                    if want_null {
                        s.null_count > 0
                    } else {
                        s.count > 0
                    }
                }
            }
        }
        _ => true,
    }
}

/// Could `field op value` be TRUE for some row of the block?
fn compare_may(zone: &dyn Zone, field: &str, op: CompareOp, value: &Value) -> bool {
    if value.is_null() {
        return false; // a comparison with NULL is NULL
    }
    let stats = match zone.stats(field) {
        None => return false, // no such column: every value is NULL
        Some(None) => return true,
        Some(Some(s)) => s,
    };
    if stats.count == 0 {
        return false;
    }
    let (Some(min), Some(max)) = (&stats.min, &stats.max) else { return true };
    let (Some(vs_min), Some(vs_max)) = (compare(value, min), compare(value, max)) else {
        return true;
    };
    match op {
        CompareOp::Eq => {
            vs_min != Ordering::Less
                && vs_max != Ordering::Greater
                && zone.might_contain(field, value)
        }
        CompareOp::Ne => !(vs_min == Ordering::Equal && vs_max == Ordering::Equal),
        CompareOp::Lt => vs_min == Ordering::Greater, // some v < value: min < value
        CompareOp::Le => vs_min != Ordering::Less,
        CompareOp::Gt => vs_max == Ordering::Less,
        CompareOp::Ge => vs_max != Ordering::Greater,
    }
}

/// A column kind's statistics as values.
pub(crate) fn stats_values(
    kind: Kind,
    stats: &parquet::file::statistics::Statistics,
) -> (Option<Value>, Option<Value>) {
    use parquet::file::statistics::Statistics as S;
    match (kind, stats) {
        (Kind::Bool, S::Boolean(s)) => {
            (s.min_opt().map(|v| Value::Bool(*v)), s.max_opt().map(|v| Value::Bool(*v)))
        }
        (Kind::Int, S::Int32(s)) => {
            (s.min_opt().map(|v| Value::Int(*v)), s.max_opt().map(|v| Value::Int(*v)))
        }
        (Kind::Long, S::Int64(s)) => {
            (s.min_opt().map(|v| Value::Long(*v)), s.max_opt().map(|v| Value::Long(*v)))
        }
        (Kind::Float, S::Float(s)) => {
            (s.min_opt().map(|v| Value::Float(*v)), s.max_opt().map(|v| Value::Float(*v)))
        }
        (Kind::Double, S::Double(s)) => {
            (s.min_opt().map(|v| Value::Double(*v)), s.max_opt().map(|v| Value::Double(*v)))
        }
        (Kind::Text, S::ByteArray(s)) => {
            // a truncated bound is not a value: only exact ones prove anything
            let text = |b: Option<&parquet::data_type::ByteArray>, exact: bool| {
                b.filter(|_| exact)
                    .and_then(|b| std::str::from_utf8(b.data()).ok())
                    .map(|t| Value::String(t.to_owned()))
            };
            (text(s.min_opt(), s.min_is_exact()), text(s.max_opt(), s.max_is_exact()))
        }
        _ => (None, None),
    }
}

/// The kind of a column from its Arrow type, unless it holds JSON text; the time column's
/// (a timestamp of ms) is [`Kind::Long`], its statistics being its ms.
pub(crate) fn kind_of(data_type: &arrow_schema::DataType, json: bool) -> Option<Kind> {
    use arrow_schema::DataType as D;
    Some(match data_type {
        _ if json => return None,
        D::Boolean => Kind::Bool,
        D::Int32 => Kind::Int,
        D::Int64 => Kind::Long,
        // the time column (a UTC timestamp of ms): its statistics are the INT64 ms
        D::Timestamp(arrow_schema::TimeUnit::Millisecond, _) => Kind::Long,
        D::Float32 => Kind::Float,
        D::Float64 => Kind::Double,
        D::Utf8 => Kind::Text,
        _ => return None,
    })
}
