//! Property tests of the canonical text: any expression tree the parser can produce, printed by
//! [`crate::display`] and parsed again, is the same tree (spans aside); and every expression of
//! a set of real queries survives the same trip.

use super::{parse_bql, parse_expr};
use crate::ast::*;
use needle_record::{Type, Value};
use proptest::prelude::*;

/// Sets every span in `e` to the default, so trees compare by structure only.
pub(crate) fn strip(e: &mut Expr) {
    e.span = Span::default();
    let each = |es: &mut Vec<Expr>| es.iter_mut().for_each(strip);
    match &mut e.kind {
        ExprKind::Literal(_) | ExprKind::Now => {}
        ExprKind::List(items) => each(items),
        ExprKind::Field(f) => {
            for a in &mut f.path {
                if let Accessor::Expr(e) = a {
                    strip(e);
                }
            }
        }
        ExprKind::Unary { operand, .. } => strip(operand),
        ExprKind::Binary { left, right, .. } | ExprKind::Compare { left, right, .. } => {
            strip(left);
            strip(right);
        }
        ExprKind::Rlike { value, pattern, .. } => {
            strip(value);
            strip(pattern);
        }
        ExprKind::In { value, list, .. } => {
            strip(value);
            strip(list);
        }
        ExprKind::Between { value, low, high, .. } => {
            strip(value);
            strip(low);
            strip(high);
        }
        ExprKind::IsNull { value, .. } | ExprKind::Cast { value, .. } => strip(value),
        ExprKind::Call { args, .. } => each(args),
        ExprKind::Aggregate(a) => match a {
            Aggregate::Count => {}
            Aggregate::Sum(e) | Aggregate::Min(e) | Aggregate::Max(e) | Aggregate::Avg(e) => {
                strip(e)
            }
            Aggregate::CountDistinct(es) | Aggregate::Top { fields: es, .. } => each(es),
            Aggregate::Distribution { value, .. } => strip(value),
        },
    }
}

fn ex(kind: ExprKind) -> Expr {
    Expr::new(kind, Span::default())
}

fn b(e: Expr) -> Box<Expr> {
    Box::new(e)
}

fn primitive() -> impl Strategy<Value = Type> {
    prop_oneof![
        Just(Type::Integer),
        Just(Type::Long),
        Just(Type::Float),
        Just(Type::Double),
        Just(Type::Boolean),
        Just(Type::String),
    ]
}

fn type_() -> impl Strategy<Value = Type> {
    (primitive(), 0..5u8).prop_map(|(t, shape)| match shape {
        0 | 1 => t,
        2 => Type::List(Box::new(t)),
        3 => Type::Map(Box::new(t)),
        _ => Type::List(Box::new(Type::Map(Box::new(t)))),
    })
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_][a-z0-9_]{0,4}",
        "[0-9a-z-]{1,5}",
        prop::sample::select(vec!["from", "any", "ALL", "count", "time", "not", "key", "Null"])
            .prop_map(str::to_owned),
    ]
}

fn literal() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i32>().prop_map(Value::Int),
        any::<i64>().prop_map(Value::Long),
        any::<f64>().prop_filter("finite", |x| x.is_finite()).prop_map(Value::Double),
        any::<f32>().prop_filter("finite", |x| x.is_finite()).prop_map(Value::Float),
        "(?s).{0,6}".prop_map(Value::String),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
    ]
}

fn is_number(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Literal(v) if v.is_numeric())
}

fn field(inner: BoxedStrategy<Expr>) -> impl Strategy<Value = Expr> {
    let accessor = prop_oneof![
        "(?s).{0,4}".prop_map(Accessor::Key),
        any::<i64>().prop_map(Accessor::Index),
        inner
            .prop_filter("not an index or key literal", |e| !matches!(
                e.kind,
                ExprKind::Literal(Value::Int(_) | Value::Long(_) | Value::String(_))
            ))
            .prop_map(|e| Accessor::Expr(b(e))),
    ];
    (name(), prop::collection::vec(accessor, 0..3), prop::option::of(type_()))
        .prop_map(|(name, path, hint)| ex(ExprKind::Field(Field { name, path, hint })))
}

fn points() -> impl Strategy<Value = Points> {
    let finite = || any::<f64>().prop_filter("finite", |x| x.is_finite());
    prop_oneof![
        any::<u64>().prop_map(|count| Points::Linear { count }),
        (finite(), finite(), finite()).prop_map(|(start, end, step)| Points::Region {
            start,
            end,
            step
        }),
        prop::collection::vec(finite(), 1..4).prop_map(|points| Points::Manual { points }),
    ]
}

fn call(inner: BoxedStrategy<Expr>) -> impl Strategy<Value = Expr> {
    let functions = vec![
        (Function::SizeOf, 1),
        (Function::Abs, 1),
        (Function::Trim, 1),
        (Function::Lower, 1),
        (Function::Upper, 1),
        (Function::Hash, 1),
        (Function::SizeIs, 2),
        (Function::ContainsKey, 2),
        (Function::ContainsValue, 2),
        (Function::Filter, 2),
        (Function::If, 3),
        (Function::Substring, 2),
        (Function::Substring, 3),
        (Function::UnixTimestamp, 0),
        (Function::UnixTimestamp, 1),
        (Function::UnixTimestamp, 2),
    ];
    (prop::sample::select(functions), prop::collection::vec(inner, 3)).prop_map(
        |((function, n), mut args)| {
            args.truncate(n);
            ex(ExprKind::Call { function, args })
        },
    )
}

fn aggregate(inner: BoxedStrategy<Expr>) -> impl Strategy<Value = Expr> {
    let kind = prop::sample::select(vec![
        DistributionKind::Quantile,
        DistributionKind::Freq,
        DistributionKind::CumFreq,
    ]);
    let top =
        (any::<u64>(), prop::option::of(any::<u64>()), prop::collection::vec(inner.clone(), 1..3))
            .prop_filter("canonical TOP", |(_, threshold, fields)| {
                threshold.is_some()
                    || fields.len() == 1
                    || !matches!(
                        fields[0].kind,
                        ExprKind::Literal(Value::Int(0..) | Value::Long(0..))
                    )
            })
            .prop_map(|(k, threshold, fields)| Aggregate::Top { k, threshold, fields });
    prop_oneof![
        Just(Aggregate::Count),
        inner.clone().prop_map(|e| Aggregate::Sum(b(e))),
        inner.clone().prop_map(|e| Aggregate::Min(b(e))),
        inner.clone().prop_map(|e| Aggregate::Max(b(e))),
        inner.clone().prop_map(|e| Aggregate::Avg(b(e))),
        prop::collection::vec(inner.clone(), 1..3).prop_map(Aggregate::CountDistinct),
        (kind, inner, points()).prop_map(|(kind, value, points)| Aggregate::Distribution {
            kind,
            value: b(value),
            points
        }),
        top,
    ]
    .prop_map(|a| ex(ExprKind::Aggregate(a)))
}

/// Trees in the form the parser produces (e.g. `-5` is a literal, never a negation of 5).
fn expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        4 => literal().prop_map(|v| ex(ExprKind::Literal(v))),
        1 => Just(ex(ExprKind::Now)),
        4 => name().prop_map(|name| ex(ExprKind::Field(Field { name, path: vec![], hint: None }))),
    ];
    leaf.prop_recursive(4, 48, 3, |inner| {
        let inner = inner.boxed();
        let cmp = prop::sample::select(vec![
            CompareOp::Eq,
            CompareOp::Ne,
            CompareOp::Lt,
            CompareOp::Le,
            CompareOp::Gt,
            CompareOp::Ge,
        ]);
        let bin = prop::sample::select(vec![
            BinaryOp::Mul,
            BinaryOp::Div,
            BinaryOp::Mod,
            BinaryOp::Add,
            BinaryOp::Sub,
            BinaryOp::And,
            BinaryOp::Xor,
            BinaryOp::Or,
        ]);
        let quantifier =
            prop::option::of(prop_oneof![Just(Quantifier::Any), Just(Quantifier::All)]);
        let i = || inner.clone();
        prop_oneof![
            prop::collection::vec(i(), 0..3).prop_map(|items| ex(ExprKind::List(items))),
            field(i()),
            i().prop_map(|e| ex(ExprKind::Unary { op: UnaryOp::Not, operand: b(e) })),
            i().prop_filter("not a number", |e| !is_number(e))
                .prop_map(|e| ex(ExprKind::Unary { op: UnaryOp::Negate, operand: b(e) })),
            (bin, i(), i()).prop_map(|(op, l, r)| ex(ExprKind::Binary {
                op,
                left: b(l),
                right: b(r)
            })),
            (cmp, quantifier.clone(), i(), i()).prop_map(|(op, quantifier, l, r)| ex(
                ExprKind::Compare { op, quantifier, left: b(l), right: b(r) }
            )),
            (any::<bool>(), any::<bool>(), i(), i()).prop_map(|(negated, any, value, pattern)| ex(
                ExprKind::Rlike { negated, any, value: b(value), pattern: b(pattern) }
            )),
            (
                any::<bool>(),
                i(),
                prop_oneof![
                    prop::collection::vec(i(), 0..3).prop_map(|items| ex(ExprKind::List(items))),
                    field(i()),
                ]
            )
                .prop_map(|(negated, value, list)| ex(ExprKind::In {
                    negated,
                    value: b(value),
                    list: b(list)
                })),
            (any::<bool>(), i(), i(), i()).prop_map(|(negated, value, low, high)| ex(
                ExprKind::Between { negated, value: b(value), low: b(low), high: b(high) }
            )),
            (any::<bool>(), i())
                .prop_map(|(negated, value)| ex(ExprKind::IsNull { negated, value: b(value) })),
            call(i()),
            (i(), type_()).prop_map(|(value, to)| ex(ExprKind::Cast { value: b(value), to })),
            aggregate(i()),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn printed_trees_parse_back_to_themselves(e in expr()) {
        let text = e.to_string();
        let mut parsed = parse_expr(&text)
            .map_err(|err| TestCaseError::fail(format!("{text:?}\n{}", err.render(&text))))?;
        strip(&mut parsed);
        prop_assert_eq!(parsed, e, "{}", text);
    }
}

pub(crate) const CORPUS: &[&str] = &[
    "SELECT * FROM STREAM(30000, TIME) WHERE id = 'c39ba8cfe8' LIMIT 10",
    "SELECT a.b[0].c AS x, COUNT(*) FROM STREAM() WHERE a.b[0].c > 5 GROUP BY a.b[0].c",
    "SELECT DISTINCT browser, os FROM STREAM(MAX, TIME) WHERE NOT (x IS NULL) AND y != -1.5e3",
    "SELECT TOP(10, 5, page, host) FROM STREAM(60000, TIME)",
    "SELECT QUANTILE(latency, LINEAR, 11) FROM STREAM() WINDOWING TUMBLING(5000, TIME)",
    "SELECT FREQ(size, REGION, -10, 10.5, 0.5), CUMFREQ(x, MANUAL, 1, 2.5, -3) FROM STREAM()",
    "SELECT COUNT(DISTINCT user, session) AS users FROM STREAM()",
    "SELECT AVG(x) + 5 AS a, SUM(x * 2) / COUNT(*) FROM STREAM() GROUP BY k HAVING AVG(x) > 1 \
     ORDER BY a DESC LIMIT 3",
    "SELECT * FROM STREAM() WHERE m['k'] RLIKE ANY ['a.*', 'b.*'] OR n NOT RLIKE 'x' XOR z",
    "SELECT * FROM STREAM() WHERE a IN (1, 2, 3) AND b NOT IN ['x'] AND c IN l AND d = ANY l",
    "SELECT * FROM STREAM() WHERE a BETWEEN (1, 10) AND b NOT BETWEEN 1 AND 2 OR BETWEEN(c, 0, 1)",
    "SELECT CAST(a AS DOUBLE), IF(a > 1, 'big', 'small'), SUBSTRING(s, 1, 2), UNIXTIMESTAMP(), \
     SIZEOF(l), ABS(-x), TRIM(s), LOWER(s), UPPER(s), HASH(s), SIZEIS(l, 2), \
     CONTAINSKEY(m, 'k'), CONTAINSVALUE(l, 1), FILTER(l, [true, false]) FROM STREAM()",
    "SELECT l AS item, OUTER EXPLODE(m) AS (k, v) FROM STREAM() LATERAL VIEW EXPLODE(l) AS x \
     LATERAL VIEW OUTER EXPLODE(n) AS (a, b) WHERE k = 'x'",
    "SELECT * FROM STREAM() WHERE a : LIST[MAP[STRING]] IS NOT NULL AND \"123col\" = 5L \
     AND b[c + 1] = 2.5f AND NOW > 0 AND d = NULL AND e = TRUE",
    "SELECT n FROM (SELECT COUNT(*) AS n FROM STREAM() WINDOWING EVERY(1000, TIME, ALL)) \
     WHERE n > 10",
    "SELECT * FROM STREAM() WINDOWING EVERY(1, RECORD, FIRST, 1, RECORD);",
    "select count, timestamp, type, key, value, time, record from stream() where count > 0",
    "SELECT history, since FROM STREAM() SINCE '-1h' WHERE since > 0 AND history IS NULL",
    "SELECT sensor, MAX(temp0) FROM HISTORY(1577836800000, '2020-01-02') WHERE temp0 > 95 \
     GROUP BY sensor WINDOWING TUMBLING(3600000, TIME)",
];

#[test]
fn every_expression_of_the_corpus_round_trips() {
    for text in CORPUS {
        let query = parse_bql(text).unwrap_or_else(|e| panic!("{}", e.render(text)));
        for e in query.expressions() {
            let printed = e.to_string();
            let mut again =
                parse_expr(&printed).unwrap_or_else(|err| panic!("{}", err.render(&printed)));
            let mut e = e.clone();
            strip(&mut again);
            strip(&mut e);
            assert_eq!(again, e, "{printed}");
        }
    }
}
