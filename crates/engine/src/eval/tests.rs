//! Unit tests of expression evaluation through the public API: every operator, function, NULL
//! rule and wrong-type case, on expressions built as the parser would build them.

use super::*;
use needle_query::ast::*;

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
