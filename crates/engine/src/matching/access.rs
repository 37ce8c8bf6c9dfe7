//! What one query offers the matching index: the index terms read from its filter (a necessary
//! condition: if the filter holds for a record, at least one term matches it), the top-level
//! fields it reads, and whether it needs whole records.
//!
//! Terms come from the compiled filter (constants already folded), so they follow the engine's
//! own comparison rules exactly:
//! - `f = c` and `f IN (c, ...)` (also `f = ANY [..]`) give equality terms. A string constant
//!   matches only a string value with the same bytes; a number matches any numeric value equal
//!   to it (`5`, `5L` and `5.0` are equal), so numbers are keyed by their `f64` value (integers
//!   past 2^53 may collide: a false candidate, never a miss); booleans match booleans.
//! - `f < c`, `f <= c`, `f > c`, `f >= c`, `f BETWEEN (lo, hi)` with numeric constants give a
//!   range term, kept inclusive on `f64` (a superset of the strict and integer comparisons).
//! - `a AND b`: the terms of its most selective indexable side (equality before ranges, fewer
//!   terms first); ranges on one field are intersected first (`f > 1 AND f < 9`).
//! - `a OR b`: the union of both sides' terms, when both have some.
//! - Anything else (NOT, `!=`, RLIKE, IS NULL, functions, comparisons between fields, a field
//!   reached through a computed index `a[b]`) has no terms: such a query is a candidate for every
//!   record and its filter decides, as without an index. So is a query without a filter, and one
//!   that explodes records (its filter reads the exploded records, not the stream's).

use crate::eval::node::{ConstSet, FieldRef, Node, Step};
use crate::exec::CompiledQuery;
use needle_query::ast::{CompareOp, ExprKind, Quantifier};
use needle_record::Value;

/// The index key of a field reference: its name, constant path and type hint, as text.
pub(crate) fn field_key(field: &FieldRef) -> Option<String> {
    let mut key = field.name.clone();
    for step in &field.path {
        match step {
            Step::Key(k) => {
                key.push_str("\u{0}.");
                key.push_str(k);
            }
            Step::Index(i) => key.push_str(&format!("\u{0}[{i}")),
            Step::Expr(_) => return None,
        }
    }
    if let Some(hint) = &field.hint {
        key.push_str(&format!("\u{0}:{hint}"));
    }
    Some(key)
}

/// An equality key: what a value must be for `field = constant` to be TRUE.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EqKey {
    Str(Box<str>),
    /// The `f64` bits of a number (`-0.0` as `0.0`; never NaN).
    Num(u64),
    Bool(bool),
}

impl EqKey {
    /// The key a constant stands for; `None` for constants no value can equal in a way the
    /// index handles (NULL, NaN, lists, maps).
    pub fn of_const(v: &Value) -> Option<EqKey> {
        match v {
            Value::String(s) => Some(EqKey::Str(s.as_str().into())),
            Value::Bool(b) => Some(EqKey::Bool(*b)),
            v if v.is_numeric() => number_bits(v.as_f64()?).map(EqKey::Num),
            _ => None,
        }
    }
}

/// The bits a number is keyed by; `None` for NaN.
pub(crate) fn number_bits(x: f64) -> Option<u64> {
    if x.is_nan() {
        return None;
    }
    Some(if x == 0.0 { 0.0f64.to_bits() } else { x.to_bits() })
}

/// One necessary condition on one field.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Condition {
    Eq(EqKey),
    /// An inclusive numeric range.
    Range {
        low: f64,
        high: f64,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct Term {
    pub key: String,
    pub field: FieldRef,
    pub condition: Condition,
}

/// What the index and the decoder need to know about one query.
#[derive(Debug, Clone)]
pub(crate) struct Access {
    /// `None`: a candidate for every record.
    pub terms: Option<Vec<Term>>,
    /// Top-level fields the stream stage reads.
    pub fields: Vec<String>,
    /// RAW with `*`: a matching record is handed over whole.
    pub whole_record: bool,
    /// With `whole_record`: the filter can be tested on the fields in `fields` before the whole
    /// record is decoded (no EXPLODE).
    pub prefilter: bool,
}

impl Access {
    pub fn of(query: &CompiledQuery) -> Access {
        let stage = &query.plan().stage;
        let mut fields: Vec<String> = Vec::new();
        for expr in stage.input_expressions() {
            expr.visit(&mut |e| {
                if let ExprKind::Field(f) = &e.kind {
                    if !fields.contains(&f.name) {
                        fields.push(f.name.clone());
                    }
                }
            });
        }
        let explodes = query.explodes();
        let terms = match (&query.inner.filter, explodes) {
            (Some(filter), false) => terms(filter.root()).map(|t| t.terms),
            _ => None,
        };
        Access { terms, fields, whole_record: stage.reads_whole_records(), prefilter: !explodes }
    }
}

/// Terms read from one node, with a rank for choosing among the sides of an AND.
struct Terms {
    terms: Vec<Term>,
}

impl Terms {
    /// Lower is more selective: equality before ranges, then fewer terms.
    fn rank(&self) -> (bool, usize) {
        (
            self.terms.iter().any(|t| matches!(t.condition, Condition::Range { .. })),
            self.terms.len(),
        )
    }
}

fn indexable_field(node: &Node) -> Option<(&FieldRef, String)> {
    match node {
        Node::Field(f) => field_key(f).map(|k| (f, k)),
        _ => None,
    }
}

fn numeric(v: &Value) -> Option<f64> {
    let x = v.as_f64().filter(|_| v.is_numeric())?;
    (!x.is_nan()).then_some(x)
}

fn single(field: &FieldRef, key: String, condition: Condition) -> Terms {
    Terms { terms: vec![Term { key, field: field.clone(), condition }] }
}

fn eq_terms<'a>(
    field: &FieldRef,
    key: String,
    items: impl Iterator<Item = &'a Value>,
) -> Option<Terms> {
    let mut terms = Vec::new();
    for item in items {
        match item {
            Value::Null => {} // never equal to anything
            v => terms.push(Term {
                key: key.clone(),
                field: field.clone(),
                condition: Condition::Eq(EqKey::of_const(v)?),
            }),
        }
    }
    Some(Terms { terms })
}

fn flip(op: CompareOp) -> CompareOp {
    match op {
        CompareOp::Lt => CompareOp::Gt,
        CompareOp::Le => CompareOp::Ge,
        CompareOp::Gt => CompareOp::Lt,
        CompareOp::Ge => CompareOp::Le,
        other => other,
    }
}

fn terms(node: &Node) -> Option<Terms> {
    match node {
        Node::Compare(op, l, r) => {
            let (op, field, constant) = match (&**l, &**r) {
                (f, Node::Const(c)) => (*op, f, c),
                (Node::Const(c), f) => (flip(*op), f, c),
                _ => return None,
            };
            let (field, key) = indexable_field(field)?;
            match op {
                CompareOp::Eq => {
                    Some(single(field, key, Condition::Eq(EqKey::of_const(constant)?)))
                }
                CompareOp::Ne => None,
                CompareOp::Lt | CompareOp::Le => {
                    let high = numeric(constant)?;
                    Some(single(field, key, Condition::Range { low: f64::NEG_INFINITY, high }))
                }
                CompareOp::Gt | CompareOp::Ge => {
                    let low = numeric(constant)?;
                    Some(single(field, key, Condition::Range { low, high: f64::INFINITY }))
                }
            }
        }
        Node::Between(v, lo, hi) => {
            let (field, key) = indexable_field(v)?;
            let (Node::Const(lo), Node::Const(hi)) = (&**lo, &**hi) else { return None };
            let (low, high) = (numeric(lo)?, numeric(hi)?);
            Some(single(field, key, Condition::Range { low, high }))
        }
        Node::InSet { value, set, .. } => {
            let (field, key) = indexable_field(value)?;
            let terms = match set {
                ConstSet::Strings(items) => items
                    .iter()
                    .map(|s| Term {
                        key: key.clone(),
                        field: field.clone(),
                        condition: Condition::Eq(EqKey::Str(s.as_str().into())),
                    })
                    .collect(),
                ConstSet::Integers(items) => items
                    .iter()
                    .filter_map(|i| number_bits(*i as f64))
                    .map(|bits| Term {
                        key: key.clone(),
                        field: field.clone(),
                        condition: Condition::Eq(EqKey::Num(bits)),
                    })
                    .collect(),
            };
            Some(Terms { terms })
        }
        Node::Quantified(CompareOp::Eq, Quantifier::Any, value, list) => {
            let (field, key) = indexable_field(value)?;
            let Node::Const(Value::List(items)) = &**list else { return None };
            eq_terms(field, key, items.iter())
        }
        Node::All(children) => {
            let mut found: Vec<Terms> = children.iter().filter_map(terms).collect();
            intersect_ranges(&mut found);
            found.into_iter().min_by_key(Terms::rank)
        }
        Node::Any(children) => {
            let mut all = Vec::new();
            for child in children {
                all.extend(terms(child)?.terms);
            }
            Some(Terms { terms: all })
        }
        _ => None,
    }
}

/// Among the sides of an AND, replaces single range terms on the same field by their
/// intersection (kept on the first of them).
fn intersect_ranges(found: &mut Vec<Terms>) {
    let mut i = 0;
    while i < found.len() {
        if let [Term { key, condition: Condition::Range { .. }, .. }] = &found[i].terms[..] {
            let key = key.clone();
            let mut j = i + 1;
            while j < found.len() {
                let same = matches!(&found[j].terms[..],
                    [Term { key: k, condition: Condition::Range { .. }, .. }] if *k == key);
                if same {
                    let other = found.remove(j);
                    if let (
                        Condition::Range { low, high },
                        Condition::Range { low: l2, high: h2 },
                    ) = (&mut found[i].terms[0].condition, &other.terms[0].condition)
                    {
                        *low = low.max(*l2);
                        *high = high.min(*h2);
                    }
                } else {
                    j += 1;
                }
            }
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use needle_query::QueryConfig;

    fn access(bql: &str) -> Access {
        let plan = needle_query::compile(bql, &QueryConfig::default()).unwrap();
        Access::of(&CompiledQuery::compile(&plan).unwrap())
    }

    fn conditions(bql: &str) -> Option<Vec<(String, Condition)>> {
        access(bql)
            .terms
            .map(|ts| ts.into_iter().map(|t| (t.key.replace('\u{0}', ""), t.condition)).collect())
    }

    fn num(x: f64) -> Condition {
        Condition::Eq(EqKey::Num(x.to_bits()))
    }

    #[test]
    fn equality_in_and_nested_fields_give_equality_terms() {
        let s = |x: &str| Condition::Eq(EqKey::Str(x.into()));
        assert_eq!(
            conditions("SELECT * FROM STREAM() WHERE id = 'ab'"),
            Some(vec![("id".into(), s("ab"))])
        );
        assert_eq!(
            conditions("SELECT * FROM STREAM() WHERE 5 = n"),
            Some(vec![("n".into(), num(5.0))])
        );
        assert_eq!(
            conditions("SELECT * FROM STREAM() WHERE demographics.country IN ('US', 'FR', NULL)")
                .map(|v| v.len()),
            Some(2)
        );
        assert_eq!(
            conditions("SELECT * FROM STREAM() WHERE m['k'] = TRUE"),
            Some(vec![("m.k".into(), Condition::Eq(EqKey::Bool(true)))])
        );
    }

    #[test]
    fn ranges_and_between_give_inclusive_ranges_intersected_under_and() {
        assert_eq!(
            conditions("SELECT * FROM STREAM() WHERE t > 10 AND t <= 20.5"),
            Some(vec![("t".into(), Condition::Range { low: 10.0, high: 20.5 })])
        );
        assert_eq!(
            conditions("SELECT * FROM STREAM() WHERE t BETWEEN (1, 2)"),
            Some(vec![("t".into(), Condition::Range { low: 1.0, high: 2.0 })])
        );
        assert_eq!(
            conditions("SELECT * FROM STREAM() WHERE 3 > t"),
            Some(vec![("t".into(), Condition::Range { low: f64::NEG_INFINITY, high: 3.0 })])
        );
    }

    #[test]
    fn and_prefers_equality_and_or_needs_both_sides() {
        assert_eq!(
            conditions("SELECT * FROM STREAM() WHERE t > 1 AND id = 'x' AND name RLIKE 'a.*'"),
            Some(vec![("id".into(), Condition::Eq(EqKey::Str("x".into())))])
        );
        assert_eq!(
            conditions("SELECT * FROM STREAM() WHERE id = 'x' OR n = 1").map(|v| v.len()),
            Some(2)
        );
        assert_eq!(conditions("SELECT * FROM STREAM() WHERE id = 'x' OR name RLIKE 'a'"), None);
    }

    #[test]
    fn residual_filters_have_no_terms() {
        for bql in [
            "SELECT * FROM STREAM()",
            "SELECT * FROM STREAM() WHERE NOT id = 'x'",
            "SELECT * FROM STREAM() WHERE id != 'x'",
            "SELECT * FROM STREAM() WHERE id IS NULL",
            "SELECT * FROM STREAM() WHERE a = b",
            "SELECT * FROM STREAM() WHERE l[i] = 1",
            "SELECT * FROM STREAM() WHERE name > 'm'",
            "SELECT * FROM STREAM() WHERE id = NULL",
        ] {
            assert_eq!(conditions(bql), None, "{bql}");
        }
    }

    #[test]
    fn fields_and_whole_records() {
        let a = access("SELECT a, SUM(b) FROM STREAM() WHERE c.d = 1 GROUP BY a");
        assert_eq!(a.fields, ["c", "a", "b"]);
        assert!(!a.whole_record);
        let a = access("SELECT * FROM STREAM() WHERE id = 'x'");
        assert_eq!(a.fields, ["id"]);
        assert!(a.whole_record && a.prefilter);
    }
}
