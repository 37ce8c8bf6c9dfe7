//! What one query offers the matching index: its filter read as an OR of conjuncts (each an AND
//! of clauses on single fields) that the index can look up, and whether it needs whole records
//! (the top-level fields it reads are the compiled query's `crate::exec::reads`).
//!
//! The conjuncts are a necessary condition: when the filter is TRUE for a record, every clause
//! of at least one conjunct is TRUE. When the filter is *exactly* the OR of its conjuncts
//! (`Access::exact`), the converse holds too, and a record whose conjunct holds needs no
//! filter at all.
//!
//! Clauses come from the compiled filter (constants already folded), so they follow the engine's
//! own comparison rules exactly:
//! - `f = c` and `f IN (c, ...)` (also `f = ANY [..]`) give an equality clause. A string constant
//!   matches only a string value with the same bytes; a number matches any numeric value equal
//!   to it (`5`, `5L` and `5.0` are equal), so numbers are keyed by their `f64` value (integers
//!   past 2^53 may collide: a false candidate, never a miss); booleans match booleans.
//! - `f < c`, `f <= c`, `f > c`, `f >= c`, `f BETWEEN (lo, hi)` with numeric constants give a
//!   range clause, looked up as an inclusive `f64` range (a superset of the strict and integer
//!   comparisons).
//! - `a AND b`: every combination of a conjunct of `a` with one of `b` (at most
//!   `MAX_CONJUNCTS`; past that, only the most selective side, and the result is not exact).
//!   A side the index cannot read is left out (not exact).
//! - `a OR b`: the conjuncts of both sides, when both have some.
//! - Anything else (NOT, `!=`, RLIKE, IS NULL, functions, comparisons between fields, a field
//!   reached through a computed index `a[b]`) has no clauses: such a query is a candidate for
//!   every record and its filter decides, as without an index. So is a query without a filter,
//!   and one that explodes records (its filter reads the exploded records, not the stream's).
//!
//! Each clause keeps the sub-expression it stands for (`Clause::test`), so the matcher checks
//! a candidate's conjunct with the engine's own evaluation: only the index lookup itself relies
//! on the keys above, and only an equality on a string, a boolean or a number below 2^53 (where
//! a key match is the comparison's answer) is trusted without that check.

use crate::eval::node::{ConstSet, FieldRef, Node, Step};
use crate::exec::CompiledQuery;
use needle_query::ast::{CompareOp, Quantifier};
use needle_record::Value;
use smallvec::{smallvec, SmallVec};

/// Past this many conjuncts, an AND keeps only its most selective side.
pub(crate) const MAX_CONJUNCTS: usize = 16;

/// The index key of a field reference: its name, constant path and type hint, as text.
pub(crate) fn field_key(field: &FieldRef) -> Option<String> {
    let mut key = field.name.to_string();
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
        Self::of_value(v)
    }

    /// The key of a record's value (or a constant); `None` for NULL, NaN, lists and maps.
    pub fn of_value(v: &Value) -> Option<EqKey> {
        match v {
            Value::String(s) => Some(EqKey::Str(s.as_str().into())),
            Value::Bool(b) => Some(EqKey::Bool(*b)),
            v if v.is_numeric() => number_bits(v.as_f64()?).map(EqKey::Num),
            _ => None,
        }
    }

    /// True when a value with this key is certainly equal to the constant it came from: always
    /// for strings and booleans, and for numbers of magnitude below 2^53, where no integer rounds
    /// onto the constant.
    fn is_exact(&self) -> bool {
        match self {
            EqKey::Str(_) | EqKey::Bool(_) => true,
            EqKey::Num(bits) => f64::from_bits(*bits).abs() < 9_007_199_254_740_992.0,
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

/// What a clause asks of its field's value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Condition {
    /// Equal to one of these keys (never empty; one, inline, for a plain `=`).
    Eq(SmallVec<[EqKey; 1]>),
    /// A number within this inclusive range.
    Range { low: f64, high: f64 },
}

/// One field's part of a conjunct.
#[derive(Debug, Clone)]
pub(crate) struct Clause {
    pub field: FieldRef,
    pub condition: Condition,
    /// The sub-expression of the filter this clause stands for: the clause holds when it is TRUE.
    /// `None` for the lone clause of a conjunct whose index hit is its answer
    /// ([`Clause::hit_is_exact`]): nothing ever evaluates it, and 100,000 idle queries need not
    /// keep a copy of it.
    pub test: Option<Box<Node>>,
}

impl Clause {
    /// The index key of the clause's field ([`field_key`]).
    pub fn key(&self) -> String {
        field_key(&self.field).unwrap_or_default()
    }

    /// True when an index hit on this clause's keys is the clause's answer.
    pub fn hit_is_exact(&self) -> bool {
        matches!(&self.condition, Condition::Eq(keys) if keys.iter().all(EqKey::is_exact))
    }

    fn is_range(&self) -> bool {
        matches!(self.condition, Condition::Range { .. })
    }
}

/// Clauses that must all hold.
#[derive(Debug, Clone)]
pub(crate) struct Conjunct {
    /// Most conjuncts have one clause: kept inline.
    pub clauses: SmallVec<[Clause; 1]>,
}

/// What the index and the decoder need to know about one query.
#[derive(Debug, Clone)]
pub(crate) struct Access {
    /// `None`: a candidate for every record. Otherwise the filter is TRUE only when one of
    /// these holds. (A boxed slice: 8 bytes less in each member, which puts a member in the
    /// 80-byte allocation class, not 96.)
    pub conjuncts: Option<Box<[Conjunct]>>,
    /// The filter is TRUE exactly when one of `conjuncts` holds.
    pub exact: bool,
    /// RAW with `*`: a matching record is handed over whole.
    pub whole_record: bool,
    /// With `whole_record`: the filter can be tested on the fields in `fields` before the whole
    /// record is decoded (no EXPLODE).
    pub prefilter: bool,
}

impl Access {
    pub fn of(query: &CompiledQuery) -> Access {
        let explodes = query.explodes();
        let dnf = match (&query.inner.filter, explodes) {
            (Some(filter), false) => dnf(filter.root()),
            _ => None,
        };
        let (conjuncts, exact) = match dnf {
            Some(Dnf { mut conjuncts, exact }) => {
                for conjunct in &mut conjuncts {
                    if let [clause] = &mut conjunct.clauses[..] {
                        if clause.hit_is_exact() {
                            clause.test = None;
                        }
                    }
                }
                (Some(conjuncts.into_boxed_slice()), exact)
            }
            None => (None, false),
        };
        Access { conjuncts, exact, whole_record: query.reads_whole_records(), prefilter: !explodes }
    }
}

/// A node as an OR of conjuncts; `exact` when it is exactly that OR.
struct Dnf {
    conjuncts: Vec<Conjunct>,
    exact: bool,
}

impl Dnf {
    fn clause(field: &FieldRef, condition: Condition, test: &Node) -> Dnf {
        let clause = Clause { field: field.clone(), condition, test: Some(Box::new(test.clone())) };
        Dnf { conjuncts: vec![Conjunct { clauses: smallvec![clause] }], exact: true }
    }

    /// Lower is more selective: conjuncts without a range first (equalities), then fewer
    /// conjuncts.
    fn rank(&self) -> (bool, usize) {
        (
            self.conjuncts.iter().any(|c| c.clauses.iter().all(Clause::is_range)),
            self.conjuncts.len(),
        )
    }
}

/// The field a node reads when the index can look it up (a constant path).
fn indexable_field(node: &Node) -> Option<&FieldRef> {
    match node {
        Node::Field(f) if field_key(f).is_some() => Some(f),
        _ => None,
    }
}

fn numeric(v: &Value) -> Option<f64> {
    let x = v.as_f64().filter(|_| v.is_numeric())?;
    (!x.is_nan()).then_some(x)
}

/// The equality keys of a constant list, NULLs left out (they equal nothing); `None` when an
/// item has no key (a list or map) or none is left.
fn eq_keys<'a>(items: impl Iterator<Item = &'a Value>) -> Option<Vec<EqKey>> {
    let mut keys = Vec::new();
    for item in items.filter(|v| !v.is_null()) {
        keys.push(EqKey::of_const(item)?);
    }
    (!keys.is_empty()).then_some(keys)
}

fn dnf(node: &Node) -> Option<Dnf> {
    match node {
        Node::Compare(op, l, r) => {
            let (op, field, constant) = match (&**l, &**r) {
                (f, Node::Const(c)) => (*op, f, c),
                (Node::Const(c), f) => (op.flipped(), f, c),
                _ => return None,
            };
            let field = indexable_field(field)?;
            let condition = match op {
                CompareOp::Eq => Condition::Eq(smallvec![EqKey::of_const(constant)?]),
                CompareOp::Ne => return None,
                CompareOp::Lt | CompareOp::Le => {
                    Condition::Range { low: f64::NEG_INFINITY, high: numeric(constant)? }
                }
                CompareOp::Gt | CompareOp::Ge => {
                    Condition::Range { low: numeric(constant)?, high: f64::INFINITY }
                }
            };
            Some(Dnf::clause(field, condition, node))
        }
        Node::Between(v, lo, hi) => {
            let field = indexable_field(v)?;
            let (Node::Const(lo), Node::Const(hi)) = (&**lo, &**hi) else { return None };
            let (low, high) = (numeric(lo)?, numeric(hi)?);
            Some(Dnf::clause(field, Condition::Range { low, high }, node))
        }
        Node::InSet { value, set, .. } => {
            let field = indexable_field(value)?;
            let keys: Vec<EqKey> = match &**set {
                ConstSet::Strings(items) => {
                    items.iter().map(|s| EqKey::Str(s.as_str().into())).collect()
                }
                ConstSet::Integers(items) => {
                    items.iter().filter_map(|i| number_bits(*i as f64)).map(EqKey::Num).collect()
                }
            };
            if keys.is_empty() {
                return None;
            }
            Some(Dnf::clause(field, Condition::Eq(keys.into()), node))
        }
        Node::Quantified(CompareOp::Eq, Quantifier::Any, value, list) => {
            let field = indexable_field(value)?;
            let Node::Const(Value::List(items)) = &**list else { return None };
            Some(Dnf::clause(field, Condition::Eq(eq_keys(items.iter())?.into()), node))
        }
        Node::All(children) => {
            let sides: Vec<Option<Dnf>> = children.iter().map(dnf).collect();
            let mut exact = sides.iter().all(|s| s.as_ref().is_some_and(|d| d.exact));
            let mut sides: Vec<Dnf> = sides.into_iter().flatten().collect();
            if sides.is_empty() {
                return None;
            }
            let product = sides.iter().try_fold(1usize, |n, s| n.checked_mul(s.conjuncts.len()));
            if product.is_none_or(|n| n > MAX_CONJUNCTS) {
                let best = (0..sides.len()).min_by_key(|&i| sides[i].rank()).unwrap_or(0);
                let mut best = sides.swap_remove(best);
                best.exact = false;
                return Some(best);
            }
            let mut conjuncts = vec![Conjunct { clauses: SmallVec::new() }];
            for side in &sides {
                exact &= side.exact;
                conjuncts = conjuncts
                    .iter()
                    .flat_map(|left| {
                        side.conjuncts.iter().map(move |right| Conjunct {
                            clauses: left.clauses.iter().chain(&right.clauses).cloned().collect(),
                        })
                    })
                    .collect();
            }
            Some(Dnf { conjuncts, exact })
        }
        Node::Any(children) => {
            let mut conjuncts = Vec::new();
            let mut exact = true;
            for child in children {
                let side = dnf(child)?;
                exact &= side.exact;
                conjuncts.extend(side.conjuncts);
            }
            if conjuncts.len() > MAX_CONJUNCTS {
                return None;
            }
            Some(Dnf { conjuncts, exact })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::reads::Reads;
    use needle_query::QueryConfig;

    fn access(bql: &str) -> Access {
        let plan = needle_query::compile(bql, &QueryConfig::default()).unwrap();
        Access::of(&CompiledQuery::compile(&plan).unwrap())
    }

    /// A conjunct as (key, condition) pairs.
    type Text = Vec<(String, Condition)>;

    /// The conjuncts as `key condition` texts, and whether the access is exact.
    fn shape(bql: &str) -> Option<(Vec<Text>, bool)> {
        let a = access(bql);
        let conjuncts = a.conjuncts?;
        let text = Vec::from(conjuncts)
            .into_iter()
            .map(|c| {
                c.clauses.into_iter().map(|t| (t.key().replace('\u{0}', ""), t.condition)).collect()
            })
            .collect();
        Some((text, a.exact))
    }

    fn s(x: &str) -> Condition {
        Condition::Eq(smallvec![EqKey::Str(x.into())])
    }

    fn num(x: f64) -> Condition {
        Condition::Eq(smallvec![EqKey::Num(x.to_bits())])
    }

    fn one(key: &str, c: Condition) -> Text {
        vec![(key.to_owned(), c)]
    }

    #[test]
    fn equality_in_and_nested_fields_give_exact_equality_clauses() {
        assert_eq!(
            shape("SELECT * FROM STREAM() WHERE id = 'ab'"),
            Some((vec![one("id", s("ab"))], true))
        );
        assert_eq!(
            shape("SELECT * FROM STREAM() WHERE 5 = n"),
            Some((vec![one("n", num(5.0))], true))
        );
        let (conjuncts, exact) =
            shape("SELECT * FROM STREAM() WHERE demographics.country IN ('US', 'FR', NULL)")
                .unwrap();
        assert!(exact);
        assert!(matches!(&conjuncts[0][0].1, Condition::Eq(keys) if keys.len() == 2));
        assert_eq!(conjuncts[0][0].0, "demographics.country");
        assert_eq!(
            shape("SELECT * FROM STREAM() WHERE m['k'] = TRUE"),
            Some((vec![one("m.k", Condition::Eq(smallvec![EqKey::Bool(true)]))], true))
        );
    }

    #[test]
    fn ranges_and_between_give_inclusive_ranges() {
        assert_eq!(
            shape("SELECT * FROM STREAM() WHERE t BETWEEN (1, 2)"),
            Some((vec![one("t", Condition::Range { low: 1.0, high: 2.0 })], true))
        );
        assert_eq!(
            shape("SELECT * FROM STREAM() WHERE 3 > t"),
            Some((vec![one("t", Condition::Range { low: f64::NEG_INFINITY, high: 3.0 })], true))
        );
    }

    #[test]
    fn and_combines_its_sides_and_or_needs_both() {
        // every clause of an AND, in one conjunct; a side without clauses makes it inexact
        let (conjuncts, exact) =
            shape("SELECT * FROM STREAM() WHERE t > 1 AND id = 'x' AND name RLIKE 'a.*'").unwrap();
        assert_eq!(conjuncts.len(), 1);
        let keys: Vec<&str> = conjuncts[0].iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!((keys, exact), (vec!["t", "id"], false));
        // (a OR b) AND c: two conjuncts, exact
        let (conjuncts, exact) =
            shape("SELECT * FROM STREAM() WHERE (id = 'x' OR n = 1) AND d = 'y'").unwrap();
        assert_eq!((conjuncts.len(), exact), (2, true));
        assert!(conjuncts.iter().all(|c| c.len() == 2 && c[1].0 == "d"));
        assert_eq!(shape("SELECT * FROM STREAM() WHERE id = 'x' OR name RLIKE 'a'"), None);
    }

    #[test]
    fn and_past_the_conjunct_limit_keeps_its_most_selective_side() {
        let or = |f: &str| (0..5).map(|i| format!("{f} = {i}")).collect::<Vec<_>>().join(" OR ");
        let bql = format!("SELECT * FROM STREAM() WHERE ({}) AND ({}) AND t > 5", or("a"), or("b"));
        let (conjuncts, exact) = shape(&bql).unwrap();
        assert!(!exact);
        assert_eq!(conjuncts.len(), 5, "one side of 5 equalities, not 25 conjuncts");
    }

    #[test]
    fn residual_filters_have_no_clauses() {
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
            assert!(shape(bql).is_none(), "{bql}");
        }
    }

    #[test]
    fn only_exact_keys_skip_the_check() {
        let clause =
            |bql: &str| Vec::from(access(bql).conjuncts.unwrap()).remove(0).clauses.remove(0);
        assert!(clause("SELECT * FROM STREAM() WHERE id = 'x'").hit_is_exact());
        assert!(clause("SELECT * FROM STREAM() WHERE n = 5").hit_is_exact());
        assert!(!clause("SELECT * FROM STREAM() WHERE n = 9007199254740993L").hit_is_exact());
        assert!(!clause("SELECT * FROM STREAM() WHERE n >= 5").hit_is_exact());
    }

    #[test]
    fn fields_and_whole_records() {
        let reads = |bql: &str| {
            let plan = needle_query::compile(bql, &QueryConfig::default()).unwrap();
            let fields = Reads::of(&plan.stage).fields;
            fields.iter().map(|f| f.to_string()).collect::<Vec<_>>()
        };
        assert_eq!(
            reads("SELECT a, SUM(b) FROM STREAM() WHERE c.d = 1 GROUP BY a"),
            ["c\u{0}d", "a", "b"]
        );
        let bql = "SELECT m, SIZEOF(l) FROM STREAM() WHERE m['k'] = 1 AND l[0] = 2";
        assert_eq!(reads(bql), ["m\u{0}k", "l", "m"]);
        assert!(!access(bql).whole_record);
        assert_eq!(reads("SELECT * FROM STREAM() WHERE id = 'x'"), ["id"]);
        let a = access("SELECT * FROM STREAM() WHERE id = 'x'");
        assert!(a.whole_record && a.prefilter);
    }
}
