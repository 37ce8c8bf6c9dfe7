//! Unit tests of expression evaluation through the public API: every operator, function, NULL
//! rule and wrong-type case, on expressions built as the parser would build them.

use super::*;
use needle_query::ast::*;
use needle_record::{Map, Type};

pub(super) fn e(kind: ExprKind) -> Expr {
    Expr::new(kind, Span::default())
}
fn lit(v: impl Into<Value>) -> Expr {
    e(ExprKind::Literal(v.into()))
}
fn int(i: i32) -> Expr {
    e(ExprKind::Literal(Value::Int(i)))
}
fn field(name: &str) -> Expr {
    e(ExprKind::Field(Field { name: name.into(), path: vec![], hint: None }))
}
fn cmp(op: CompareOp, l: Expr, r: Expr) -> Expr {
    e(ExprKind::Compare { op, quantifier: None, left: Box::new(l), right: Box::new(r) })
}
fn call(function: Function, args: Vec<Expr>) -> Expr {
    e(ExprKind::Call { function, args })
}

fn record() -> Record {
    let mut r = Record::new();
    r.insert("i", Value::Int(7));
    r.insert("s", Value::from("ipad"));
    r.insert("t", Value::Bool(true));
    r.insert("f", Value::Bool(false));
    r.insert("n", Value::Null);
    r.insert("COUNT(*)", Value::Long(3));
    r
}

fn eval(expr: &Expr) -> Value {
    CompiledExpr::compile(expr).unwrap().eval(&record(), &EvalContext::new(1_500))
}

#[test]
fn fields_literals_and_now() {
    assert_eq!(eval(&field("i")), Value::Int(7));
    assert_eq!(eval(&field("missing")), Value::Null);
    assert_eq!(eval(&field("COUNT(*)")), Value::Long(3));
    assert_eq!(eval(&e(ExprKind::Now)), Value::Long(1_500));
    assert_eq!(eval(&lit("x")), Value::from("x"));
    let list = e(ExprKind::List(vec![int(1), field("s")]));
    assert_eq!(eval(&list), Value::List(vec![Value::Int(1), Value::from("ipad")]));
}

#[test]
fn test_is_true_only_for_true() {
    let c = |x: Expr| CompiledExpr::compile(&x).unwrap().test(&record(), &EvalContext::default());
    assert!(c(field("t")));
    assert!(!c(field("f")));
    assert!(!c(field("n")));
    assert!(!c(field("i")));
    assert!(c(cmp(CompareOp::Eq, field("s"), lit("ipad"))));
}

#[test]
fn aggregates_are_unsupported_and_arity_is_checked() {
    let agg = e(ExprKind::Aggregate(Aggregate::Count));
    assert!(matches!(CompiledExpr::compile(&agg), Err(EngineError::Unsupported(_))));
    let bad = call(Function::Abs, vec![]);
    assert!(matches!(CompiledExpr::compile(&bad), Err(EngineError::Unsupported(_))));
}

fn null() -> Expr {
    e(ExprKind::Literal(Value::Null))
}
fn bin(op: BinaryOp, l: Expr, r: Expr) -> Expr {
    e(ExprKind::Binary { op, left: Box::new(l), right: Box::new(r) })
}
fn not(x: Expr) -> Expr {
    e(ExprKind::Unary { op: UnaryOp::Not, operand: Box::new(x) })
}
fn neg(x: Expr) -> Expr {
    e(ExprKind::Unary { op: UnaryOp::Negate, operand: Box::new(x) })
}
fn quant(op: CompareOp, q: Quantifier, l: Expr, r: Expr) -> Expr {
    e(ExprKind::Compare { op, quantifier: Some(q), left: Box::new(l), right: Box::new(r) })
}
fn list(items: Vec<Expr>) -> Expr {
    e(ExprKind::List(items))
}
fn rlike(negated: bool, any: bool, value: Expr, pattern: Expr) -> Expr {
    e(ExprKind::Rlike { negated, any, value: Box::new(value), pattern: Box::new(pattern) })
}
fn in_(negated: bool, value: Expr, l: Expr) -> Expr {
    e(ExprKind::In { negated, value: Box::new(value), list: Box::new(l) })
}
fn between(negated: bool, v: Expr, lo: Expr, hi: Expr) -> Expr {
    e(ExprKind::Between { negated, value: Box::new(v), low: Box::new(lo), high: Box::new(hi) })
}
fn is_null(negated: bool, v: Expr) -> Expr {
    e(ExprKind::IsNull { negated, value: Box::new(v) })
}
fn cast(v: Expr, to: Type) -> Expr {
    e(ExprKind::Cast { value: Box::new(v), to })
}
fn path(name: &str, path: Vec<Accessor>, hint: Option<Type>) -> Expr {
    e(ExprKind::Field(Field { name: name.into(), path, hint }))
}
fn b(x: bool) -> Expr {
    lit(x)
}
fn long(i: i64) -> Expr {
    lit(Value::Long(i))
}
fn dbl(x: f64) -> Expr {
    lit(Value::Double(x))
}
fn flt(x: f32) -> Expr {
    lit(Value::Float(x))
}
const T: Value = Value::Bool(true);
const F: Value = Value::Bool(false);
const N: Value = Value::Null;

#[test]
fn and_or_xor_not_follow_sql_truth_tables() {
    let vals = [(b(true), Some(true)), (b(false), Some(false)), (null(), None)];
    for (l, lv) in &vals {
        for (r, rv) in &vals {
            let and = match (lv, rv) {
                (Some(false), _) | (_, Some(false)) => F,
                (Some(true), Some(true)) => T,
                _ => N,
            };
            let or = match (lv, rv) {
                (Some(true), _) | (_, Some(true)) => T,
                (Some(false), Some(false)) => F,
                _ => N,
            };
            let xor = match (lv, rv) {
                (Some(x), Some(y)) => Value::Bool(x ^ y),
                _ => N,
            };
            assert_eq!(eval(&bin(BinaryOp::And, l.clone(), r.clone())), and, "{l} AND {r}");
            assert_eq!(eval(&bin(BinaryOp::Or, l.clone(), r.clone())), or, "{l} OR {r}");
            assert_eq!(eval(&bin(BinaryOp::Xor, l.clone(), r.clone())), xor, "{l} XOR {r}");
        }
    }
    assert_eq!(eval(&not(b(true))), F);
    assert_eq!(eval(&not(null())), N);
    assert_eq!(eval(&not(field("i"))), N, "NOT of a number is NULL");
    assert_eq!(eval(&bin(BinaryOp::And, field("s"), b(true))), N, "a string is not a boolean");
    assert_eq!(eval(&bin(BinaryOp::And, field("s"), b(false))), F);
    assert_eq!(eval(&bin(BinaryOp::Or, int(1), b(true))), T);
}

#[test]
fn and_or_short_circuit_on_the_left() {
    // The right side would be NULL (a string is no boolean); the left decides alone.
    assert_eq!(eval(&bin(BinaryOp::And, field("f"), field("s"))), F);
    assert_eq!(eval(&bin(BinaryOp::Or, field("t"), field("s"))), T);
}

#[test]
fn arithmetic_promotes_and_is_null_on_overflow_and_zero_division() {
    let ar = |op, l, r| eval(&bin(op, l, r));
    assert_eq!(ar(BinaryOp::Add, int(2), int(3)), Value::Int(5));
    assert_eq!(ar(BinaryOp::Add, int(2), long(3)), Value::Long(5));
    assert_eq!(ar(BinaryOp::Add, long(2), flt(0.5)), Value::Float(2.5));
    assert_eq!(ar(BinaryOp::Add, flt(0.5), dbl(0.25)), Value::Double(0.75));
    assert_eq!(ar(BinaryOp::Sub, int(2), int(3)), Value::Int(-1));
    assert_eq!(ar(BinaryOp::Mul, int(4), dbl(0.5)), Value::Double(2.0));
    assert_eq!(ar(BinaryOp::Div, int(7), int(2)), Value::Int(3));
    assert_eq!(ar(BinaryOp::Div, int(-7), int(2)), Value::Int(-3), "truncates toward zero");
    assert_eq!(ar(BinaryOp::Mod, int(-7), int(3)), Value::Int(-1), "Java remainder");
    assert_eq!(ar(BinaryOp::Mod, int(7), int(-3)), Value::Int(1));
    assert_eq!(ar(BinaryOp::Mod, dbl(-7.5), dbl(2.0)), Value::Double(-1.5));
    assert_eq!(ar(BinaryOp::Div, dbl(7.0), dbl(2.0)), Value::Double(3.5));
    assert_eq!(ar(BinaryOp::Div, int(1), int(0)), N);
    assert_eq!(ar(BinaryOp::Mod, long(1), long(0)), N);
    assert_eq!(ar(BinaryOp::Div, dbl(1.0), dbl(0.0)), N);
    assert_eq!(ar(BinaryOp::Div, dbl(1.0), dbl(-0.0)), N);
    assert_eq!(ar(BinaryOp::Mod, flt(1.0), int(0)), N);
    assert_eq!(ar(BinaryOp::Add, int(i32::MAX), int(1)), N, "INTEGER overflow");
    assert_eq!(ar(BinaryOp::Add, long(i32::MAX as i64), int(1)), Value::Long(1 << 31));
    assert_eq!(ar(BinaryOp::Mul, long(i64::MAX), int(2)), N);
    assert_eq!(ar(BinaryOp::Div, int(i32::MIN), int(-1)), N);
    assert_eq!(ar(BinaryOp::Mod, int(i32::MIN), int(-1)), Value::Int(0));
    assert_eq!(ar(BinaryOp::Mod, long(i64::MIN), int(-1)), Value::Long(0));
    assert_eq!(ar(BinaryOp::Add, dbl(f64::MAX), dbl(f64::MAX)), Value::Double(f64::INFINITY));
    assert_eq!(ar(BinaryOp::Add, lit("a"), lit("b")), N, "no string concatenation");
    assert_eq!(ar(BinaryOp::Add, int(1), b(true)), N);
    assert_eq!(ar(BinaryOp::Add, int(1), null()), N);
    assert_eq!(ar(BinaryOp::Add, field("missing"), int(1)), N);
    assert_eq!(eval(&neg(int(5))), Value::Int(-5));
    assert_eq!(eval(&neg(int(i32::MIN))), N);
    assert_eq!(eval(&neg(long(i64::MIN))), N);
    assert_eq!(eval(&neg(dbl(1.5))), Value::Double(-1.5));
    assert_eq!(eval(&neg(lit("x"))), N);
}

#[test]
fn comparisons_across_numeric_types_and_with_null() {
    use CompareOp::*;
    assert_eq!(eval(&cmp(Eq, int(1), dbl(1.0))), T);
    assert_eq!(eval(&cmp(Lt, long(1), flt(1.5))), T);
    assert_eq!(eval(&cmp(Ge, int(1), int(2))), F);
    assert_eq!(eval(&cmp(Ne, int(1), int(2))), T);
    assert_eq!(eval(&cmp(Le, lit("a"), lit("b"))), T);
    assert_eq!(eval(&cmp(Gt, b(true), b(false))), T);
    assert_eq!(eval(&cmp(Eq, null(), null())), N);
    assert_eq!(eval(&cmp(Ne, int(1), null())), N);
    assert_eq!(eval(&cmp(Eq, lit("1"), int(1))), N, "no casting between strings and numbers");
    assert_eq!(eval(&cmp(Eq, dbl(f64::NAN), dbl(f64::NAN))), N);
    assert_eq!(eval(&cmp(Eq, b(true), int(1))), N);
}

#[test]
fn containers_compare_structurally() {
    use CompareOp::*;
    let l12 = || list(vec![int(1), int(2)]);
    assert_eq!(eval(&cmp(Eq, l12(), list(vec![long(1), dbl(2.0)]))), T);
    assert_eq!(eval(&cmp(Eq, l12(), list(vec![int(1)]))), F);
    assert_eq!(eval(&cmp(Ne, l12(), list(vec![int(2), int(1)]))), T);
    assert_eq!(eval(&cmp(Eq, list(vec![null()]), list(vec![null()]))), T);
    assert_eq!(eval(&cmp(Lt, l12(), list(vec![int(1), int(3)]))), T);
    assert_eq!(eval(&cmp(Eq, l12(), int(1))), N);
    let mut r = Record::new();
    let m1: Map =
        Map::from_iter([("a".to_string(), Value::Int(1)), ("b".to_string(), Value::Int(2))]);
    let m2: Map =
        Map::from_iter([("b".to_string(), Value::Long(2)), ("a".to_string(), Value::Int(1))]);
    r.insert("m1", Value::Map(m1));
    r.insert("m2", Value::Map(m2));
    let ctx = EvalContext::default();
    let c = |x: Expr| CompiledExpr::compile(&x).unwrap().eval(&r, &ctx);
    assert_eq!(c(cmp(Eq, field("m1"), field("m2"))), T, "key order does not matter");
    assert_eq!(c(cmp(Lt, field("m1"), field("m2"))), N, "maps do not order");
}

#[test]
fn any_and_all_use_three_valued_logic() {
    use CompareOp::*;
    use Quantifier::*;
    let q = |op, qu, l, r| eval(&quant(op, qu, l, r));
    assert_eq!(q(Eq, Any, int(2), list(vec![int(1), int(2)])), T);
    assert_eq!(q(Eq, Any, int(3), list(vec![int(1), int(2)])), F);
    assert_eq!(q(Eq, Any, int(3), list(vec![int(1), null()])), N);
    assert_eq!(q(Eq, Any, int(1), list(vec![int(1), null()])), T);
    assert_eq!(q(Gt, All, int(3), list(vec![int(1), int(2)])), T);
    assert_eq!(q(Gt, All, int(2), list(vec![int(1), int(2)])), F);
    assert_eq!(q(Gt, All, int(3), list(vec![int(1), null()])), N);
    assert_eq!(q(Gt, All, int(0), list(vec![int(1), null()])), F);
    assert_eq!(q(Eq, Any, null(), list(vec![])), F, "empty ANY is FALSE");
    assert_eq!(q(Eq, All, null(), list(vec![])), T, "empty ALL is TRUE");
    assert_eq!(q(Eq, Any, null(), list(vec![int(1)])), N);
    assert_eq!(q(Eq, Any, int(1), int(1)), N, "right side must be a list");
    assert_eq!(q(Lt, Any, lit("a"), list(vec![int(1), lit("b")])), T);
}

#[test]
fn in_and_not_in_with_sql_nulls() {
    let items = || list(vec![int(1), lit("x"), null()]);
    assert_eq!(eval(&in_(false, int(1), items())), T);
    assert_eq!(eval(&in_(false, dbl(1.0), items())), T);
    assert_eq!(eval(&in_(false, int(2), items())), N, "a NULL in the list");
    assert_eq!(eval(&in_(true, int(2), items())), N, "NOT IN with a NULL in the list");
    assert_eq!(eval(&in_(true, int(2), list(vec![int(1)]))), T);
    assert_eq!(eval(&in_(true, int(1), items())), F);
    assert_eq!(eval(&in_(false, null(), list(vec![int(1)]))), N);
    assert_eq!(eval(&in_(false, field("s"), lit(Value::List(vec![Value::from("ipad")])))), T);
    assert_eq!(eval(&in_(false, int(1), lit("1"))), N);
}

#[test]
fn between_is_inclusive_and_three_valued() {
    assert_eq!(eval(&between(false, int(5), int(5), long(9))), T);
    assert_eq!(eval(&between(false, dbl(9.0), int(5), int(9))), T);
    assert_eq!(eval(&between(false, int(10), int(5), int(9))), F);
    assert_eq!(eval(&between(true, int(10), int(5), int(9))), T);
    assert_eq!(eval(&between(false, lit("b"), lit("a"), lit("c"))), T);
    assert_eq!(eval(&between(false, int(10), null(), int(9))), F, "the upper bound excludes");
    assert_eq!(eval(&between(false, int(1), null(), int(9))), N);
    assert_eq!(eval(&between(false, int(1), int(5), null())), F, "the lower bound excludes");
    assert_eq!(eval(&between(true, int(1), int(5), null())), T);
    assert_eq!(eval(&between(false, null(), int(1), int(2))), N);
    assert_eq!(eval(&between(false, lit("b"), int(1), int(2))), N);
}

#[test]
fn is_null_is_never_null() {
    assert_eq!(eval(&is_null(false, field("missing"))), T);
    assert_eq!(eval(&is_null(false, field("n"))), T);
    assert_eq!(eval(&is_null(true, field("n"))), F);
    assert_eq!(eval(&is_null(false, dbl(f64::NAN))), F);
    assert_eq!(eval(&is_null(true, bin(BinaryOp::Div, int(1), int(0)))), F);
}

#[test]
fn rlike_matches_whole_values() {
    assert_eq!(eval(&rlike(false, false, field("s"), lit("ip.*"))), T);
    assert_eq!(eval(&rlike(false, false, field("s"), lit("pa"))), F, "whole value");
    assert_eq!(eval(&rlike(false, false, field("s"), lit(".*pa.*"))), T);
    assert_eq!(eval(&rlike(true, false, field("s"), lit("pa"))), T);
    assert_eq!(eval(&rlike(false, false, field("i"), lit("7"))), N, "a number is no string");
    assert_eq!(eval(&rlike(false, false, field("s"), null())), N);
    assert_eq!(eval(&rlike(true, false, field("missing"), lit("x"))), N);
    let pats = || list(vec![lit("a.*"), lit("i.*")]);
    assert_eq!(eval(&rlike(false, true, field("s"), pats())), T);
    assert_eq!(eval(&rlike(false, true, field("s"), list(vec![lit("a.*"), null()]))), N);
    assert_eq!(eval(&rlike(false, true, field("s"), list(vec![]))), F);
    assert_eq!(eval(&rlike(true, true, field("s"), list(vec![lit("a"), lit("b")]))), T);
    assert_eq!(eval(&rlike(false, true, field("s"), lit("i.*"))), N, "ANY needs a list");
}

#[test]
fn rlike_literal_patterns_are_checked_at_compile_time_and_computed_ones_per_record() {
    let bad = rlike(false, false, field("s"), lit("(unclosed"));
    assert!(matches!(CompiledExpr::compile(&bad), Err(EngineError::Regex { .. })));
    let bad_any = rlike(false, true, field("s"), list(vec![lit("ok"), lit("[z-a]")]));
    assert!(matches!(CompiledExpr::compile(&bad_any), Err(EngineError::Regex { .. })));
    let mut r = Record::new();
    r.insert("v", Value::from("abc"));
    r.insert("good", Value::from("a.c"));
    r.insert("bad", Value::from("(a"));
    r.insert("pats", Value::List(vec![Value::from("x"), Value::from("(a"), Value::from("abc")]));
    let ctx = EvalContext::default();
    let c = |x: Expr| CompiledExpr::compile(&x).unwrap().eval(&r, &ctx);
    assert_eq!(c(rlike(false, false, field("v"), field("good"))), T);
    assert_eq!(c(rlike(false, false, field("v"), field("bad"))), N);
    assert_eq!(c(rlike(false, true, field("v"), field("pats"))), T);
    assert_eq!(c(rlike(false, true, field("good"), field("pats"))), N, "invalid pattern is NULL");
}

#[test]
fn field_paths_keys_indexes_and_computed_accessors() {
    let inner: Map = Map::from_iter([("c".to_string(), Value::Int(9))]);
    let m: Map = Map::from_iter([
        ("b".to_string(), Value::Map(inner)),
        ("k".to_string(), Value::from("v")),
        ("idx".to_string(), Value::Int(1)),
    ]);
    let mut r = Record::new();
    r.insert("m", Value::Map(m.clone()));
    r.insert("l", Value::List(vec![Value::Map(m), Value::from("second")]));
    r.insert("key", Value::from("k"));
    r.insert("one", Value::Long(1));
    let ctx = EvalContext::default();
    let c = |x: Expr| CompiledExpr::compile(&x).unwrap().eval(&r, &ctx);
    use Accessor::{Index, Key};
    assert_eq!(c(path("m", vec![Key("k".into())], None)), Value::from("v"));
    assert_eq!(c(path("m", vec![Key("b".into()), Key("c".into())], None)), Value::Int(9));
    assert_eq!(c(path("l", vec![Index(1)], None)), Value::from("second"));
    assert_eq!(c(path("l", vec![Index(0), Key("k".into())], None)), Value::from("v"));
    assert_eq!(c(path("l", vec![Index(2)], None)), N);
    assert_eq!(c(path("l", vec![Index(-1)], None)), N);
    assert_eq!(c(path("m", vec![Index(0)], None)), N, "index into a map");
    assert_eq!(c(path("l", vec![Key("k".into())], None)), N, "key into a list");
    assert_eq!(c(path("m", vec![Key("nope".into())], None)), N);
    assert_eq!(c(path("m", vec![Accessor::Expr(Box::new(field("key")))], None)), Value::from("v"));
    assert_eq!(
        c(path("l", vec![Accessor::Expr(Box::new(field("one")))], None)),
        Value::from("second")
    );
    assert_eq!(
        c(path("l", vec![Accessor::Expr(Box::new(bin(BinaryOp::Sub, int(1), int(1))))], None))
            .as_map()
            .map(|m| m.len()),
        Some(3)
    );
    assert_eq!(
        c(path("l", vec![Accessor::Expr(Box::new(dbl(1.0)))], None)),
        N,
        "a double is no index"
    );
    assert_eq!(c(path("l", vec![Accessor::Expr(Box::new(field("missing")))], None)), N);
    let m_idx = path("m", vec![Key("idx".into())], None);
    assert_eq!(c(path("l", vec![Accessor::Expr(Box::new(m_idx))], None)), Value::from("second"));
}

#[test]
fn type_hints_cast_values_of_another_type() {
    let mut r = Record::new();
    r.insert("num", Value::from("42"));
    r.insert("word", Value::from("abc"));
    r.insert("l", Value::List(vec![Value::Int(1), Value::from("2")]));
    let ctx = EvalContext::default();
    let c = |x: Expr| CompiledExpr::compile(&x).unwrap().eval(&r, &ctx);
    assert_eq!(c(path("num", vec![], Some(Type::Long))), Value::Long(42));
    assert_eq!(c(path("num", vec![], Some(Type::String))), Value::from("42"));
    assert_eq!(c(path("word", vec![], Some(Type::Integer))), N);
    let lt = Type::List(Box::new(Type::Double));
    assert_eq!(
        c(path("l", vec![], Some(lt))),
        Value::List(vec![Value::Double(1.0), Value::Double(2.0)])
    );
    assert_eq!(c(path("l", vec![Accessor::Index(1)], Some(Type::Integer))), Value::Int(2));
    assert_eq!(c(path("missing", vec![], Some(Type::Integer))), N);
}

#[test]
fn casts() {
    assert_eq!(eval(&cast(lit("5"), Type::Integer)), Value::Int(5));
    assert_eq!(eval(&cast(lit("abc"), Type::Integer)), N);
    assert_eq!(eval(&cast(dbl(5.7), Type::Integer)), Value::Int(5));
    assert_eq!(eval(&cast(b(true), Type::Long)), Value::Long(1));
    assert_eq!(eval(&cast(field("i"), Type::String)), Value::from("7"));
    assert_eq!(eval(&cast(null(), Type::String)), N);
    let l = list(vec![lit("1"), lit("x")]);
    assert_eq!(
        eval(&cast(l, Type::List(Box::new(Type::Integer)))),
        Value::List(vec![Value::Int(1), N])
    );
    assert_eq!(eval(&cast(int(1), Type::List(Box::new(Type::Integer)))), N);
}

#[test]
fn functions_through_expressions() {
    use Function::*;
    assert_eq!(eval(&call(SizeOf, vec![field("s")])), Value::Int(4));
    assert_eq!(eval(&call(Abs, vec![neg(field("i"))])), Value::Int(7));
    assert_eq!(eval(&call(Upper, vec![call(Trim, vec![lit("  ab ")])])), Value::from("AB"));
    assert_eq!(eval(&call(Lower, vec![lit("AB")])), Value::from("ab"));
    assert_eq!(eval(&call(SizeIs, vec![field("s"), int(4)])), T);
    assert_eq!(eval(&call(Hash, vec![lit("a")])), eval(&call(Hash, vec![lit("a")])));
    assert!(matches!(eval(&call(Hash, vec![field("s")])), Value::Long(_)));
    assert_eq!(eval(&call(Hash, vec![field("n")])), N);
    let l = || list(vec![int(1), int(2), int(3)]);
    assert_eq!(eval(&call(ContainsValue, vec![l(), long(2)])), T);
    let flags = list(vec![b(false), b(true), b(true)]);
    assert_eq!(
        eval(&call(Filter, vec![l(), flags])),
        Value::List(vec![Value::Int(2), Value::Int(3)])
    );
    assert_eq!(eval(&call(If, vec![field("t"), lit("y"), lit("n")])), Value::from("y"));
    assert_eq!(eval(&call(If, vec![field("n"), lit("y"), lit("n")])), Value::from("n"));
    assert_eq!(eval(&call(If, vec![field("i"), lit("y"), lit("n")])), N);
    assert_eq!(eval(&call(Substring, vec![field("s"), int(2), int(2)])), Value::from("pa"));
    assert_eq!(eval(&call(Substring, vec![field("s"), int(-3)])), Value::from("pad"));
    assert_eq!(eval(&call(UnixTimestamp, vec![])), Value::Long(1));
    let neg_ctx = EvalContext::new(-1);
    let before_epoch = CompiledExpr::compile(&call(UnixTimestamp, vec![])).unwrap();
    assert_eq!(before_epoch.eval(&record(), &neg_ctx), Value::Long(-1), "floor, not truncation");
    assert_eq!(eval(&call(UnixTimestamp, vec![lit("1970-01-02 00:00:00")])), Value::Long(86_400));
    assert_eq!(
        eval(&call(UnixTimestamp, vec![lit("02/01/1970"), lit("dd/MM/yyyy")])),
        Value::Long(86_400)
    );
    let m: Map = Map::from_iter([("k".to_string(), Value::Int(1))]);
    let mut r = record();
    r.insert("m", Value::Map(m));
    let ck = CompiledExpr::compile(&call(ContainsKey, vec![field("m"), lit("k")])).unwrap();
    assert_eq!(ck.eval(&r, &EvalContext::default()), T);
}

#[test]
fn constants_fold_at_compile_time_but_not_now_or_fields() {
    let folded = |x: Expr| CompiledExpr::compile(&x).unwrap().as_constant().cloned();
    assert_eq!(folded(bin(BinaryOp::Add, int(1), int(2))), Some(Value::Int(3)));
    assert_eq!(
        folded(list(vec![int(1), lit("a")])),
        Some(Value::List(vec![Value::Int(1), Value::from("a")]))
    );
    assert_eq!(folded(rlike(false, false, lit("abc"), lit("a.c"))), Some(T));
    assert_eq!(folded(in_(true, int(1), list(vec![int(2)]))), Some(T));
    assert_eq!(folded(call(Function::Upper, vec![lit("a")])), Some(Value::from("A")));
    assert_eq!(folded(e(ExprKind::Now)), None);
    assert_eq!(folded(call(Function::UnixTimestamp, vec![])), None);
    assert_eq!(folded(bin(BinaryOp::Add, field("i"), int(2))), None);
    assert_eq!(folded(bin(BinaryOp::Sub, e(ExprKind::Now), int(2))), None);
}

#[test]
fn eval_cow_borrows_fields_and_literals() {
    let r = record();
    let ctx = EvalContext::default();
    let f = CompiledExpr::compile(&field("s")).unwrap();
    assert!(matches!(f.eval_cow(&r, &ctx), std::borrow::Cow::Borrowed(_)));
    let l = CompiledExpr::compile(&lit("x")).unwrap();
    assert!(matches!(l.eval_cow(&r, &ctx), std::borrow::Cow::Borrowed(_)));
    assert_eq!(f.eval_bool(&r, &ctx), None);
}

#[test]
fn lookup_field_resolves_paths() {
    let mut r = Record::new();
    r.insert("l", Value::List(vec![Value::from("a"), Value::from("7")]));
    let f = Field { name: "l".into(), path: vec![Accessor::Index(1)], hint: Some(Type::Long) };
    assert_eq!(lookup_field(&r, &f, &EvalContext::default()), Value::Long(7));
}

#[test]
fn compiled_expressions_are_send_sync_and_cheap_to_clone() {
    fn assert_send_sync<X: Send + Sync + Clone>() {}
    assert_send_sync::<CompiledExpr>();
    let c = CompiledExpr::compile(&rlike(false, false, field("s"), lit("ip.*"))).unwrap();
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || c.test(&record(), &EvalContext::default()))
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap());
    }
}

#[test]
fn long_logic_chains_flatten_and_constants_prune() {
    // A Bullet JSON filter with thousands of clauses: one n-ary node, no deep recursion.
    let mut chain = cmp(CompareOp::Eq, field("i"), int(0));
    for k in 1..5_000 {
        chain = bin(BinaryOp::Or, chain, cmp(CompareOp::Eq, field("i"), int(k)));
    }
    assert_eq!(eval(&chain), T);
    let folded = |x: Expr| CompiledExpr::compile(&x).unwrap().as_constant().cloned();
    assert_eq!(folded(bin(BinaryOp::And, field("i"), b(false))), Some(F), "FALSE decides AND");
    assert_eq!(folded(bin(BinaryOp::Or, b(true), field("i"))), Some(T), "TRUE decides OR");
    assert_eq!(folded(bin(BinaryOp::And, b(true), null())), Some(N));
    assert_eq!(folded(bin(BinaryOp::And, b(true), field("i"))), None);
    // TRUE dropped from AND leaves the other operand's truth value, not the operand itself.
    assert_eq!(eval(&bin(BinaryOp::And, b(true), field("i"))), N);
    assert_eq!(eval(&bin(BinaryOp::And, b(true), field("t"))), T);
    assert_eq!(eval(&bin(BinaryOp::Or, b(false), field("f"))), F);
    let nested = bin(BinaryOp::And, field("t"), bin(BinaryOp::And, field("n"), field("t")));
    assert_eq!(eval(&nested), N);
}

#[test]
fn in_a_constant_list_through_a_hash_set_keeps_sql_semantics() {
    let strs = |extra: Vec<Expr>| {
        let mut items: Vec<Expr> = ["a", "b", "ipad", "d"].iter().map(|s| lit(*s)).collect();
        items.extend(extra);
        list(items)
    };
    assert_eq!(eval(&in_(false, field("s"), strs(vec![]))), T);
    assert_eq!(eval(&in_(false, lit("zz"), strs(vec![]))), F);
    assert_eq!(eval(&in_(false, field("missing"), strs(vec![]))), N);
    assert_eq!(eval(&in_(false, field("i"), strs(vec![]))), N, "a number equals no string");
    assert_eq!(eval(&in_(false, field("COUNT(*)"), strs(vec![]))), N);
    let with_null = || strs(vec![null()]);
    assert_eq!(eval(&in_(false, field("s"), with_null())), T);
    assert_eq!(eval(&in_(true, lit("zz"), with_null())), N);
    let ints = || list(vec![int(1), long(7), int(9), null(), long(1 << 40)]);
    assert_eq!(eval(&in_(false, field("i"), ints())), T, "INTEGER 7 matches LONG 7");
    assert_eq!(eval(&in_(false, dbl(7.0), ints())), T, "floats compare by value");
    assert_eq!(eval(&in_(false, dbl(7.5), ints())), N);
    assert_eq!(eval(&in_(true, int(2), list(vec![int(1), int(3), int(4), int(5)]))), T);
    assert_eq!(eval(&in_(false, field("s"), ints())), N);
}

/// BQL text through the real parser, compiled and evaluated against a record.
fn bql(text: &str, r: &Record) -> Value {
    let expr = needle_query::parser::parse_expr(text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
    CompiledExpr::compile(&expr)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .eval(r, &EvalContext::new(1_234_567_890_123))
}

#[test]
fn bql_text_end_to_end() {
    let mut r = record();
    let inner: Map = Map::from_iter([("c".to_string(), Value::from("deep"))]);
    let m: Map = Map::from_iter([("b".to_string(), Value::Map(inner))]);
    r.insert("a", Value::Map(m.clone()));
    r.insert("l", Value::List(vec![Value::Map(m), Value::Int(2)]));
    let cases: &[(&str, Value)] = &[
        ("'abc' RLIKE 'b'", F),
        ("'abc' RLIKE '.*b.*'", T),
        ("s NOT RLIKE ANY ['x.*', 'y.*']", T),
        ("i IN (1, 7, 9)", T),
        ("i NOT IN (1, NULL)", N),
        ("i BETWEEN (7, 8) AND NOT i BETWEEN (8, 9)", T),
        ("i > ANY [8, 6]", T),
        ("i > ALL [8, 6]", F),
        ("a.b['c']", Value::from("deep")),
        ("l[0].b.c", Value::from("deep")),
        ("l[i - 6]", Value::Int(2)),
        ("SUBSTRING('hello', -3, 2)", Value::from("ll")),
        ("CAST('5' AS INTEGER) + 1", Value::Int(6)),
        ("CAST(l AS LIST[STRING])", Value::List(vec![N, Value::from("2")])),
        ("SIZEOF(s) * 2L", Value::Long(8)),
        ("i / 2 + i % 2", Value::Int(4)),
        ("7.0 / 0", N),
        ("n IS NULL AND missing IS NULL", T),
        ("t XOR n", N),
        ("f AND n", F),
        ("t OR n", T),
        ("IF(i > 5, 'big', 'small')", Value::from("big")),
        ("NOW", Value::Long(1_234_567_890_123)),
        ("UNIXTIMESTAMP()", Value::Long(1_234_567_890)),
        ("UNIXTIMESTAMP('2009-02-13 23:31:30')", Value::Long(1_234_567_890)),
        ("\"COUNT(*)\" + 1", Value::Long(4)),
        ("i : STRING", Value::from("7")),
    ];
    for (text, expected) in cases {
        assert_eq!(&bql(text, &r), expected, "{text}");
    }
}
