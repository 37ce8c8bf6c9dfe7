//! Post-aggregation: what happens to a window's aggregated records before they are emitted, in
//! this order: computations (columns added in order, each able to read the ones before),
//! HAVING (keeps records for which it is TRUE), ORDER BY (a stable sort by
//! [`crate::compare::total_cmp`]: NULLs first ascending, last descending; ties keep the
//! aggregation's order), LIMIT, then the output columns (in the listed order; a listed column
//! the record lacks is NULL; columns computed only for HAVING or ORDER BY are dropped).

use crate::compare::total_cmp;
use crate::eval::{CompiledExpr, EvalContext};
use crate::EngineError;
use needle_query::plan::PostAggregation;
use needle_record::{Record, Value};
use std::cmp::Ordering;

/// A compiled [`PostAggregation`]: `None` when it changes nothing, the common case, so that a
/// query without post-aggregation (and 100,000 of them idle at once) holds one pointer for it.
#[derive(Debug)]
pub struct CompiledPost(Option<Box<Steps>>);

#[derive(Debug)]
struct Steps {
    computations: Vec<(String, CompiledExpr)>,
    having: Option<CompiledExpr>,
    order_by: Vec<(CompiledExpr, bool)>,
    limit: Option<u64>,
    output: Option<Vec<String>>,
}

impl CompiledPost {
    pub fn compile(post: &PostAggregation) -> Result<Self, EngineError> {
        let steps = Steps {
            computations: post
                .computations
                .iter()
                .map(|c| Ok((c.name.clone(), CompiledExpr::compile(&c.expr)?)))
                .collect::<Result<_, EngineError>>()?,
            having: post.having.as_ref().map(CompiledExpr::compile).transpose()?,
            order_by: post
                .order_by
                .iter()
                .map(|o| Ok((CompiledExpr::compile(&o.expr)?, o.descending)))
                .collect::<Result<_, EngineError>>()?,
            limit: post.limit,
            output: post.output.clone(),
        };
        let identity = steps.computations.is_empty()
            && steps.having.is_none()
            && steps.order_by.is_empty()
            && steps.limit.is_none()
            && steps.output.is_none();
        Ok(Self((!identity).then(|| Box::new(steps))))
    }

    /// True when it changes nothing (no computations, HAVING, ORDER BY, LIMIT or output list).
    pub fn is_identity(&self) -> bool {
        self.0.is_none()
    }

    pub fn apply(&self, mut records: Vec<Record>, ctx: &EvalContext) -> Vec<Record> {
        let Some(steps) = &self.0 else {
            return records;
        };
        for record in &mut records {
            for (name, expr) in &steps.computations {
                let value = expr.eval(record, ctx);
                record.insert(name.clone(), value);
            }
        }
        if let Some(having) = &steps.having {
            records.retain(|r| having.test(r, ctx));
        }
        if !steps.order_by.is_empty() {
            let mut keyed: Vec<(Vec<Value>, Record)> = records
                .into_iter()
                .map(|r| (steps.order_by.iter().map(|(e, _)| e.eval(&r, ctx)).collect(), r))
                .collect();
            keyed.sort_by(|(a, _), (b, _)| {
                for ((x, y), (_, descending)) in a.iter().zip(b).zip(&steps.order_by) {
                    let o = total_cmp(x, y);
                    let o = if *descending { o.reverse() } else { o };
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                Ordering::Equal
            });
            records = keyed.into_iter().map(|(_, r)| r).collect();
        }
        if let Some(limit) = steps.limit {
            records.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        }
        if let Some(columns) = &steps.output {
            records = records
                .into_iter()
                .map(|mut r| {
                    columns
                        .iter()
                        .map(|c| (c.clone(), r.remove(c).unwrap_or(Value::Null)))
                        .collect()
                })
                .collect();
        }
        records
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use needle_query::ast::{BinaryOp, CompareOp, Expr, ExprKind, Field, Span};
    use needle_query::plan::{NamedExpr, OrderBy};

    fn e(kind: ExprKind) -> Expr {
        Expr::new(kind, Span::default())
    }
    fn field(name: &str) -> Expr {
        e(ExprKind::Field(Field { name: name.into(), path: vec![], hint: None }))
    }
    fn lit(v: Value) -> Expr {
        e(ExprKind::Literal(v))
    }
    fn recs(lines: &[&str]) -> Vec<Record> {
        lines.iter().map(|l| needle_record::decode_record(l.as_bytes()).unwrap()).collect()
    }
    fn json(records: &[Record]) -> Vec<String> {
        records.iter().map(Record::to_json).collect()
    }
    const CTX: EvalContext = EvalContext { now_ms: 0 };

    #[test]
    fn computes_filters_sorts_limits_and_projects_in_order() {
        let post = PostAggregation {
            computations: vec![NamedExpr {
                name: "y".into(),
                expr: e(ExprKind::Binary {
                    op: BinaryOp::Add,
                    left: Box::new(field("c")),
                    right: Box::new(lit(Value::Long(5))),
                }),
            }],
            having: Some(e(ExprKind::Compare {
                op: CompareOp::Gt,
                quantifier: None,
                left: Box::new(field("y")),
                right: Box::new(lit(Value::Long(6))),
            })),
            order_by: vec![OrderBy { expr: field("y"), descending: true }],
            limit: Some(2),
            output: Some(vec!["k".into(), "y".into()]),
        };
        let post = CompiledPost::compile(&post).unwrap();
        let input = recs(&[
            r#"{"k":"a","c":1}"#,
            r#"{"k":"b","c":3}"#,
            r#"{"k":"c","c":null}"#,
            r#"{"k":"d","c":9}"#,
            r#"{"k":"e","c":2}"#,
        ]);
        assert_eq!(json(&post.apply(input, &CTX)), [r#"{"k":"d","y":14}"#, r#"{"k":"b","y":8}"#]);
    }

    #[test]
    fn order_by_puts_nulls_first_ascending_last_descending_and_is_stable() {
        let input = recs(&[
            r#"{"k":1,"v":2}"#,
            r#"{"k":2,"v":null}"#,
            r#"{"k":3,"v":1}"#,
            r#"{"k":4,"v":2}"#,
        ]);
        for (descending, want) in [(false, [2, 3, 1, 4]), (true, [1, 4, 3, 2])] {
            let post = CompiledPost::compile(&PostAggregation {
                order_by: vec![OrderBy { expr: field("v"), descending }],
                ..Default::default()
            })
            .unwrap();
            let keys: Vec<_> = post
                .apply(input.clone(), &CTX)
                .iter()
                .map(|r| r.get("k").and_then(Value::as_i64).unwrap())
                .collect();
            assert_eq!(keys, want, "descending={descending}");
        }
    }

    #[test]
    fn missing_output_columns_are_null_and_identity_changes_nothing() {
        let post = CompiledPost::compile(&PostAggregation {
            output: Some(vec!["b".into(), "a".into()]),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(json(&post.apply(recs(&[r#"{"a":1,"z":2}"#]), &CTX)), [r#"{"b":null,"a":1}"#]);
        let id = CompiledPost::compile(&PostAggregation::default()).unwrap();
        assert!(id.is_identity());
        assert_eq!(json(&id.apply(recs(&[r#"{"a":1}"#]), &CTX)), [r#"{"a":1}"#]);
    }
}
