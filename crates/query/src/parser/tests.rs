//! Unit tests of the parser: every construct of LANGUAGE.md, and every class of syntax error
//! with its message, span and hint.

use super::*;
use needle_record::{Type, Value};

fn q(text: &str) -> Query {
    parse_bql(text).unwrap_or_else(|e| panic!("{text}\n{}", e.render(text)))
}

fn e(text: &str) -> Expr {
    parse_expr(text).unwrap_or_else(|e| panic!("{text}\n{}", e.render(text)))
}

/// The canonical text of a parsed expression.
fn s(text: &str) -> String {
    e(text).to_string()
}

fn err(text: &str) -> QueryError {
    match parse_bql(text) {
        Ok(q) => panic!("{text} parsed: {q:?}"),
        Err(e) => e,
    }
}

fn expr_err(text: &str) -> QueryError {
    match parse_expr(text) {
        Ok(q) => panic!("{text} parsed: {q:?}"),
        Err(e) => e,
    }
}

/// The text under an error's span.
fn under(text: &str, e: &QueryError) -> String {
    let span = e.span.expect("a span");
    text[span.start..span.end].to_owned()
}

fn field(name: &str) -> ExprKind {
    ExprKind::Field(Field { name: name.into(), path: vec![], hint: None })
}

fn lit(v: Value) -> ExprKind {
    ExprKind::Literal(v)
}

// ---- statements ----

#[test]
fn the_smallest_query() {
    let query = q("SELECT * FROM STREAM()");
    assert_eq!(query.select.items, vec![SelectItem::All { span: Span::new(7, 8) }]);
    assert!(!query.select.distinct);
    assert_eq!(query.select.span, Span::new(0, 8));
    let From::Stream(stream) = &query.from else { panic!() };
    assert_eq!(stream.duration, StreamDuration::Default);
    assert_eq!(stream.span, Span::new(14, 22));
    assert_eq!(query.span, Span::new(0, 22));
    assert!(query.where_clause.is_none() && query.limit.is_none() && query.window.is_none());
}

#[test]
fn every_clause_in_order() {
    let text = "select distinct a, b AS x, c y from stream(30000, time) \
                lateral view explode(l) as item lateral view outer explode(m) as (k, v) \
                where a > 1 group by a, b having count(*) > 2 order by a desc, b asc, c \
                windowing tumbling(5000, time) limit 10;";
    let query = q(text);
    assert!(query.select.distinct);
    assert_eq!(query.select.items.len(), 3);
    let SelectItem::Expr { alias: Some(x), .. } = &query.select.items[1] else { panic!() };
    assert_eq!((x.name.as_str(), &text[x.span.start..x.span.end]), ("x", "x"));
    let SelectItem::Expr { alias: Some(y), .. } = &query.select.items[2] else { panic!() };
    assert_eq!(y.name, "y");
    let From::Stream(stream) = &query.from else { panic!() };
    assert_eq!(stream.duration, StreamDuration::Millis(30000));
    assert_eq!(query.lateral_views.len(), 2);
    assert!(!query.lateral_views[0].outer);
    assert!(query.lateral_views[1].outer);
    let ExplodeAlias::KeyValue(k, v) = &query.lateral_views[1].alias else { panic!() };
    assert_eq!((k.name.as_str(), v.name.as_str()), ("k", "v"));
    assert_eq!(
        &text[query.lateral_views[1].span.start..query.lateral_views[1].span.end],
        "outer explode(m) as (k, v)"
    );
    assert_eq!(query.where_clause.unwrap().to_string(), "a > 1");
    assert_eq!(query.group_by.len(), 2);
    assert_eq!(query.having.unwrap().to_string(), "COUNT(*) > 2");
    let order: Vec<_> = query.order_by.iter().map(|o| (o.expr.to_string(), o.descending)).collect();
    assert_eq!(order, vec![("a".into(), true), ("b".into(), false), ("c".into(), false)]);
    let window = query.window.unwrap();
    assert_eq!(window.kind, WindowKind::Tumbling { every: 5000, unit: WindowUnit::Time });
    assert_eq!(&text[window.span.start..window.span.end], "windowing tumbling(5000, time)");
    let limit = query.limit.unwrap();
    assert_eq!(limit.value, 10);
    assert_eq!(&text[limit.span.start..limit.span.end], "10");
    assert_eq!(query.span.end, text.len() - 1, "the span stops before the ';'");
}

#[test]
fn streams() {
    let duration = |text: &str| match q(text).from {
        From::Stream(s) => s.duration,
        From::Subquery(_) => panic!(),
    };
    assert_eq!(duration("SELECT * FROM STREAM(MAX, TIME)"), StreamDuration::Max);
    assert_eq!(duration("SELECT * FROM stream( max , time )"), StreamDuration::Max);
    assert_eq!(duration("SELECT * FROM STREAM(10L, TIME)"), StreamDuration::Millis(10));
}

#[test]
fn windows() {
    let window = |w: &str| q(&format!("SELECT * FROM STREAM() WINDOWING {w}")).window.unwrap().kind;
    use WindowUnit::*;
    assert_eq!(window("TUMBLING(10, RECORD)"), WindowKind::Tumbling { every: 10, unit: Record });
    assert_eq!(
        window("EVERY(5000, TIME, ALL)"),
        WindowKind::Every { every: 5000, unit: Time, include: Include::All }
    );
    assert_eq!(
        window("every(1, record, first, 1, record)"),
        WindowKind::Every {
            every: 1,
            unit: Record,
            include: Include::First { count: 1, unit: Record }
        }
    );
    assert_eq!(window("(TUMBLING, 10, TIME)"), WindowKind::Tumbling { every: 10, unit: Time });
    assert_eq!(
        window("(EVERY, 10, TIME, FIRST, 5, TIME)"),
        WindowKind::Every {
            every: 10,
            unit: Time,
            include: Include::First { count: 5, unit: Time }
        }
    );
}

#[test]
fn outer_queries() {
    let text = "SELECT COUNT(*) AS n FROM (SELECT DISTINCT a FROM STREAM(1000, TIME) \
                WINDOWING TUMBLING(100, TIME)) WHERE n > 1 LIMIT 3";
    let query = q(text);
    let From::Subquery(inner) = &query.from else { panic!() };
    assert!(inner.select.distinct);
    assert!(inner.window.is_some());
    assert_eq!(
        &text[inner.span.start..inner.span.end],
        "SELECT DISTINCT a FROM STREAM(1000, TIME) WINDOWING TUMBLING(100, TIME)"
    );
    assert_eq!(query.limit.unwrap().value, 3);
    // WINDOWING in the outer query is kept for the validator to refuse
    let query = q("SELECT * FROM (SELECT * FROM STREAM()) WINDOWING TUMBLING(1, TIME)");
    assert!(query.window.is_some());
    // LATERAL VIEW on the outer query
    let query = q("SELECT * FROM (SELECT l FROM STREAM()) LATERAL VIEW EXPLODE(l) AS x");
    assert_eq!(query.lateral_views.len(), 1);
}

#[test]
fn select_items() {
    let query = q("SELECT *, a, EXPLODE(l) AS x, OUTER EXPLODE(m) AS (k, v), b + 1 \"my col\" \
                   FROM STREAM()");
    let items = &query.select.items;
    assert!(matches!(items[0], SelectItem::All { .. }));
    assert!(matches!(&items[1], SelectItem::Expr { alias: None, .. }));
    let SelectItem::TableFunction(t) = &items[2] else { panic!() };
    assert!(!t.outer && matches!(&t.alias, ExplodeAlias::Value(i) if i.name == "x"));
    let SelectItem::TableFunction(t) = &items[3] else { panic!() };
    assert!(t.outer && matches!(&t.alias, ExplodeAlias::KeyValue(..)));
    let SelectItem::Expr { alias: Some(alias), .. } = &items[4] else { panic!() };
    assert_eq!(alias.name, "my col");
}

#[test]
fn keywords_are_case_insensitive_and_semicolon_is_optional() {
    assert_eq!(
        q("sElEcT * fRoM sTrEaM() wHeRe A = 1 LiMiT 1 ;"),
        q("SELECT * FROM STREAM() WHERE A = 1 LIMIT 1")
    );
}

#[test]
fn unreserved_words_are_names() {
    let text = "SELECT count, timestamp, type, key, value, time, record, max, outer, explode, \
                any, all, first FROM STREAM() WHERE count > 1 AND time = any AND all = 1";
    let query = q(text);
    assert_eq!(query.select.items.len(), 13);
    assert_eq!(
        query.where_clause.unwrap().to_string(),
        "count > 1 AND time = \"any\" AND \"all\" = 1"
    );
    let query = q("SELECT COUNT(*) AS count, a AS time FROM STREAM() ORDER BY count DESC");
    assert_eq!(query.order_by[0].expr.kind, field("count"));
    let query = q("SELECT \"from\", \"select\" AS \"where\" FROM STREAM()");
    let SelectItem::Expr { expr, alias: Some(alias) } = &query.select.items[1] else { panic!() };
    assert_eq!((expr.kind.clone(), alias.name.as_str()), (field("select"), "where"));
}

// ---- expressions ----

#[test]
fn literals() {
    assert_eq!(e("5").kind, lit(Value::Int(5)));
    assert_eq!(e("5L").kind, lit(Value::Long(5)));
    assert_eq!(e("5.0").kind, lit(Value::Double(5.0)));
    assert_eq!(e("5.0f").kind, lit(Value::Float(5.0)));
    assert_eq!(e("2.5d").kind, lit(Value::Double(2.5)));
    assert_eq!(e("1e3").kind, lit(Value::Double(1000.0)));
    assert_eq!(e("'it''s'").kind, lit(Value::from("it's")));
    assert_eq!(e("NULL").kind, lit(Value::Null));
    assert_eq!(e("true").kind, lit(Value::Bool(true)));
    assert_eq!(e("FALSE").kind, lit(Value::Bool(false)));
    assert_eq!(e("NOW").kind, ExprKind::Now);
    assert_eq!(e("now()").kind, ExprKind::Now);
    assert_eq!(e("[]").kind, ExprKind::List(vec![]));
    let ExprKind::List(items) = e("[1, 'a', [2]]").kind else { panic!() };
    assert_eq!(items.len(), 3);
    assert_eq!(items[1].kind, lit(Value::from("a")));
}

#[test]
fn integers_grow_to_long_and_signs_belong_to_literals() {
    assert_eq!(e("2147483647").kind, lit(Value::Int(i32::MAX)));
    assert_eq!(e("2147483648").kind, lit(Value::Long(2147483648)));
    assert_eq!(e("-2147483648").kind, lit(Value::Int(i32::MIN)));
    assert_eq!(e("-9223372036854775808").kind, lit(Value::Long(i64::MIN)));
    assert_eq!(e("-5").kind, lit(Value::Int(-5)));
    assert_eq!(e("-(5)").kind, lit(Value::Int(-5)));
    assert_eq!(e("- 2.5f").kind, lit(Value::Float(-2.5)));
    assert_eq!(e("--5").kind, lit(Value::Int(5)));
    assert_eq!(e("-5").span, Span::new(0, 2));
    let ExprKind::Unary { op: UnaryOp::Negate, operand } = e("-a").kind else { panic!() };
    assert_eq!(operand.kind, field("a"));
    assert_eq!(s("--2147483648"), "--2147483648");
    assert_eq!(s("a - -1"), "a - -1");
}

#[test]
fn bad_numbers() {
    let text = "SELECT * FROM STREAM() WHERE a > 5x";
    let error = err(text);
    assert_eq!(error.message, "invalid number '5x'");
    assert_eq!(under(text, &error), "5x");
    let error = expr_err("a = 9223372036854775808");
    assert_eq!(error.message, "9223372036854775808 is out of range for an integer");
    assert!(error.hint.unwrap().contains("DOUBLE"));
    assert_eq!(
        expr_err("99999999999999999999L").message,
        "99999999999999999999 is out of range for a LONG"
    );
    assert_eq!(expr_err("1e39f").message, "1e39 is out of range for a FLOAT");
    assert_eq!(expr_err("1e309").message, "1e309 is out of range for a DOUBLE");
    let text = "SELECT * FROM STREAM() LIMIT 99999999999999999999";
    assert_eq!(err(text).message, "a row count after LIMIT is too large");
    assert_eq!(
        err("SELECT * FROM STREAM() LIMIT 5.5").message,
        "a row count after LIMIT must be a whole number, found 5.5"
    );
    assert_eq!(
        err("SELECT * FROM STREAM() LIMIT -1").message,
        "a row count after LIMIT cannot be negative"
    );
    assert_eq!(
        err("SELECT * FROM STREAM(-1, TIME)").message,
        "a duration in milliseconds cannot be negative"
    );
}

#[test]
fn precedence_follows_sql() {
    assert_eq!(s("a OR b XOR c AND NOT d = 1 + 2 * -e"), "a OR b XOR c AND NOT d = 1 + 2 * -e");
    let ExprKind::Binary { op: BinaryOp::Or, right, .. } = e("a OR b AND c").kind else { panic!() };
    assert!(matches!(right.kind, ExprKind::Binary { op: BinaryOp::And, .. }));
    let ExprKind::Binary { op: BinaryOp::Xor, .. } = e("a AND b XOR c").kind else { panic!() };
    let ExprKind::Unary { op: UnaryOp::Not, operand } = e("NOT a = b").kind else { panic!() };
    assert!(matches!(operand.kind, ExprKind::Compare { .. }));
    let ExprKind::Binary { op: BinaryOp::And, left, .. } = e("NOT a AND b").kind else { panic!() };
    assert!(matches!(left.kind, ExprKind::Unary { op: UnaryOp::Not, .. }));
    let ExprKind::Binary { op: BinaryOp::Add, right, .. } = e("a + b * c").kind else { panic!() };
    assert!(matches!(right.kind, ExprKind::Binary { op: BinaryOp::Mul, .. }));
    let ExprKind::Binary { op: BinaryOp::Sub, left, .. } = e("a - b - c").kind else { panic!() };
    assert!(matches!(left.kind, ExprKind::Binary { op: BinaryOp::Sub, .. }), "left-associative");
    assert_eq!(s("(a + b) * c"), "(a + b) * c");
    assert_eq!(s("((a))"), "a");
    assert_eq!(s("a % b / c"), "a % b / c");
    let ExprKind::Binary { op: BinaryOp::Mul, left, .. } = e("-a * b").kind else { panic!() };
    assert!(matches!(left.kind, ExprKind::Unary { op: UnaryOp::Negate, .. }));
    let ExprKind::Compare { left, .. } = e("a + 1 > b").kind else { panic!() };
    assert!(matches!(left.kind, ExprKind::Binary { op: BinaryOp::Add, .. }));
}

#[test]
fn spans_cover_each_node() {
    let text = "x + (a.b[0] * 2)";
    let expr = e(text);
    assert_eq!(expr.span, Span::new(0, text.len()));
    let ExprKind::Binary { right, .. } = &expr.kind else { panic!() };
    assert_eq!(&text[right.span.start..right.span.end], "(a.b[0] * 2)");
    let ExprKind::Binary { left, .. } = &right.kind else { panic!() };
    assert_eq!(&text[left.span.start..left.span.end], "a.b[0]");
    let text = "SUBSTRING(s, 1) IS NOT NULL";
    let ExprKind::IsNull { value, negated: true } = e(text).kind else { panic!() };
    assert_eq!(&text[value.span.start..value.span.end], "SUBSTRING(s, 1)");
}

#[test]
fn comparisons_and_quantifiers() {
    let cmp = |text: &str| match e(text).kind {
        ExprKind::Compare { op, quantifier, .. } => (op, quantifier),
        other => panic!("{other:?}"),
    };
    assert_eq!(cmp("a = 1"), (CompareOp::Eq, None));
    assert_eq!(cmp("a == 1"), (CompareOp::Eq, None));
    assert_eq!(cmp("a != 1"), (CompareOp::Ne, None));
    assert_eq!(cmp("a <> 1"), (CompareOp::Ne, None));
    assert_eq!(cmp("a < 1"), (CompareOp::Lt, None));
    assert_eq!(cmp("a <= 1"), (CompareOp::Le, None));
    assert_eq!(cmp("a > 1"), (CompareOp::Gt, None));
    assert_eq!(cmp("a >= 1"), (CompareOp::Ge, None));
    assert_eq!(cmp("a = ANY [1, 2]"), (CompareOp::Eq, Some(Quantifier::Any)));
    assert_eq!(cmp("a > all l"), (CompareOp::Gt, Some(Quantifier::All)));
    assert_eq!(cmp("a != ANY (l)"), (CompareOp::Ne, Some(Quantifier::Any)));
    assert_eq!(cmp("a = any"), (CompareOp::Eq, None));
    assert_eq!(s("a = any AND b"), "a = \"any\" AND b");
    assert_eq!(cmp("a = ANY ('x')"), (CompareOp::Eq, Some(Quantifier::Any)));
    assert_eq!(s("a = ANY ('x')"), "a = ANY 'x'");
    assert_eq!(s("a = ANY 'x'"), "a = ANY 'x'");
    assert_eq!(s("a = \"any\" - 1"), "a = \"any\" - 1");
    assert_eq!(s("a = ALL [1]"), "a = ALL [1]");
}

#[test]
fn rlike_in_between_is_null() {
    let ExprKind::Rlike { negated: true, any: true, pattern, .. } =
        e("a NOT RLIKE ANY ['x', 'y']").kind
    else {
        panic!()
    };
    assert!(matches!(pattern.kind, ExprKind::List(_)));
    assert_eq!(s("a rlike '.*b.*'"), "a RLIKE '.*b.*'");

    let ExprKind::In { negated: false, list, .. } = e("a IN (1, 2, 3)").kind else { panic!() };
    let ExprKind::List(items) = &list.kind else { panic!() };
    assert_eq!(items.len(), 3);
    let text = "a NOT IN (1)";
    let ExprKind::In { negated: true, list, .. } = e(text).kind else { panic!() };
    assert!(matches!(&list.kind, ExprKind::List(items) if items.len() == 1));
    assert_eq!(&text[list.span.start..list.span.end], "(1)");
    let ExprKind::In { list, .. } = e("a IN [1, 2]").kind else { panic!() };
    assert!(matches!(list.kind, ExprKind::List(_)));
    let ExprKind::In { list, .. } = e("a IN l").kind else { panic!() };
    assert_eq!(list.kind, field("l"));
    assert_eq!(s("a IN ()"), "a IN ()");

    let between = |text: &str| match e(text).kind {
        ExprKind::Between { negated, value, low, high } => {
            (negated, value.to_string(), low.to_string(), high.to_string())
        }
        other => panic!("{other:?}"),
    };
    let expected = (false, "a".to_owned(), "1".to_owned(), "b + 2".to_owned());
    assert_eq!(between("a BETWEEN (1, b + 2)"), expected);
    assert_eq!(between("a BETWEEN 1 AND b + 2"), expected);
    assert_eq!(between("BETWEEN(a, 1, b + 2)"), expected);
    assert!(between("a NOT BETWEEN (1, 2)").0);
    assert_eq!(between("a BETWEEN (1) + 1 AND 5").2, "1 + 1");
    assert_eq!(s("a BETWEEN 1 AND 2 AND b"), "a BETWEEN (1, 2) AND b");

    assert!(matches!(e("a IS NULL").kind, ExprKind::IsNull { negated: false, .. }));
    assert!(matches!(e("a is not null").kind, ExprKind::IsNull { negated: true, .. }));
    assert_eq!(s("a + 1 IS NULL AND b"), "a + 1 IS NULL AND b");
}

#[test]
fn fields_paths_and_type_hints() {
    let f = |text: &str| match e(text).kind {
        ExprKind::Field(f) => f,
        other => panic!("{other:?}"),
    };
    assert_eq!(f("a.b").path, vec![Accessor::Key("b".into())]);
    assert_eq!(f("a[0]").path, vec![Accessor::Index(0)]);
    assert_eq!(f("a[-1]").path, vec![Accessor::Index(-1)]);
    assert_eq!(f("a['k']").path, vec![Accessor::Key("k".into())]);
    assert_eq!(f("a[0].b").path, vec![Accessor::Index(0), Accessor::Key("b".into())]);
    assert_eq!(f("a.b['c']").path, vec![Accessor::Key("b".into()), Accessor::Key("c".into())]);
    assert_eq!(f("a.b.c").path.len(), 2);
    assert_eq!(f("a.from").path, vec![Accessor::Key("from".into())]);
    let [Accessor::Expr(index)] = &f("a[b]").path[..] else { panic!() };
    assert_eq!(index.kind, field("b"));
    let [Accessor::Expr(index)] = &f("a[1 + 1]").path[..] else { panic!() };
    assert_eq!(index.to_string(), "1 + 1");
    assert_eq!(f("\"123col\"").name, "123col");
    assert_eq!(f("\"a\"\"b\"").name, "a\"b");
    assert_eq!(f("a : STRING").hint, Some(Type::String));
    assert_eq!(
        f("a.b : list[map[STRING]]").hint,
        Some(Type::List(Box::new(Type::Map(Box::new(Type::String)))))
    );
    assert_eq!(
        f("a:MAP[MAP[long]]").hint,
        Some(Type::Map(Box::new(Type::Map(Box::new(Type::Long)))))
    );
    assert_eq!(f("a : LIST[DOUBLE]").hint, Some(Type::List(Box::new(Type::Double))));
    for t in ["INTEGER", "LONG", "FLOAT", "DOUBLE", "BOOLEAN", "STRING"] {
        assert_eq!(f(&format!("a : {t}")).hint.unwrap().to_string(), t);
    }
    assert_eq!(s("a : STRING = 'x'"), "a : STRING = 'x'");
}

#[test]
fn bad_types() {
    let text = "a : LIST[LIST[STRING]]";
    let error = expr_err(text);
    assert_eq!(error.message, "LIST[LIST[...]] is not a Bullet type");
    assert_eq!(under(text, &error), "LIST");
    assert!(error.hint.unwrap().contains("MAP[MAP[t]]"));
    assert_eq!(expr_err("a : MAP[LIST[STRING]]").message, "MAP[LIST[...]] is not a Bullet type");
    assert_eq!(expr_err("a : MAP[MAP[MAP[STRING]]]").message, "types nest at most two deep");
    let error = expr_err("CAST(a AS INT)");
    assert_eq!(error.message, "expected a type, found 'INT'");
    assert_eq!(error.hint.as_deref(), Some("did you mean INTEGER or LONG?"));
    assert_eq!(expr_err("CAST(a AS STIRNG)").hint.as_deref(), Some("did you mean STRING?"));
    assert_eq!(
        expr_err("a : LIST").message,
        "expected '[' after the container type, found the end of the query"
    );
    assert_eq!(expr_err("a : LIST[STRING").message, "expected ']', found the end of the query");
}

#[test]
fn functions() {
    let call = |text: &str| match e(text).kind {
        ExprKind::Call { function, args } => (function, args.len()),
        other => panic!("{other:?}"),
    };
    assert_eq!(call("SIZEOF(a)"), (Function::SizeOf, 1));
    assert_eq!(call("abs(a)"), (Function::Abs, 1));
    assert_eq!(call("Trim(a)"), (Function::Trim, 1));
    assert_eq!(call("LOWER(a)"), (Function::Lower, 1));
    assert_eq!(call("UPPER(a)"), (Function::Upper, 1));
    assert_eq!(call("HASH(a)"), (Function::Hash, 1));
    assert_eq!(call("SIZEIS(a, 2)"), (Function::SizeIs, 2));
    assert_eq!(call("CONTAINSKEY(m, 'k')"), (Function::ContainsKey, 2));
    assert_eq!(call("CONTAINSVALUE(m, 1)"), (Function::ContainsValue, 2));
    assert_eq!(call("FILTER(l, [true])"), (Function::Filter, 2));
    assert_eq!(call("IF(a > 1, 'x', 'y')"), (Function::If, 3));
    assert_eq!(call("SUBSTRING(s, 1)"), (Function::Substring, 2));
    assert_eq!(call("SUBSTRING(s, 1, 2)"), (Function::Substring, 3));
    assert_eq!(call("UNIXTIMESTAMP()"), (Function::UnixTimestamp, 0));
    assert_eq!(call("UNIXTIMESTAMP(s, 'yyyy')"), (Function::UnixTimestamp, 2));
    let ExprKind::Cast { value, to } = e("CAST(a + 1 AS DOUBLE)").kind else { panic!() };
    assert_eq!((value.to_string(), to), ("a + 1".into(), Type::Double));
    assert_eq!(s("cast(a as list[string])"), "CAST(a AS LIST[STRING])");
}

#[test]
fn aggregates() {
    let agg = |text: &str| match e(text).kind {
        ExprKind::Aggregate(a) => a,
        other => panic!("{other:?}"),
    };
    assert_eq!(agg("COUNT(*)"), Aggregate::Count);
    assert_eq!(agg("count( * )"), Aggregate::Count);
    assert!(matches!(agg("SUM(a)"), Aggregate::Sum(_)));
    assert!(matches!(agg("min(a)"), Aggregate::Min(_)));
    assert!(matches!(agg("MAX(a.b)"), Aggregate::Max(_)));
    assert!(matches!(agg("AVG(a * 2)"), Aggregate::Avg(_)));
    assert!(matches!(agg("COUNT(DISTINCT a, b)"), Aggregate::CountDistinct(v) if v.len() == 2));
    let Aggregate::Distribution { kind, points, .. } = agg("QUANTILE(a, LINEAR, 11)") else {
        panic!()
    };
    assert_eq!((kind, points), (DistributionKind::Quantile, Points::Linear { count: 11 }));
    let Aggregate::Distribution { kind, points, .. } = agg("freq(a, region, -10, 2.5, 0.5)") else {
        panic!()
    };
    assert_eq!(kind, DistributionKind::Freq);
    assert_eq!(points, Points::Region { start: -10.0, end: 2.5, step: 0.5 });
    let Aggregate::Distribution { kind, points, .. } = agg("CUMFREQ(a, MANUAL, -1, 0, 1e3, 5L)")
    else {
        panic!()
    };
    assert_eq!(kind, DistributionKind::CumFreq);
    assert_eq!(points, Points::Manual { points: vec![-1.0, 0.0, 1000.0, 5.0] });
    assert_eq!(
        agg("TOP(10, a)"),
        Aggregate::Top { k: 10, threshold: None, fields: vec![e("a")] }.strip()
    );
    let Aggregate::Top { k, threshold, fields } = agg("TOP(10, 5, a, b)") else { panic!() };
    assert_eq!((k, threshold, fields.len()), (10, Some(5), 2));
    let Aggregate::Top { threshold, fields, .. } = agg("TOP(10, 5)") else { panic!() };
    assert_eq!((threshold, fields.len()), (None, 1));
    let Aggregate::Top { threshold, fields, .. } = agg("TOP(10, 5 + 1, a)") else { panic!() };
    assert_eq!((threshold, fields.len()), (None, 2));
    let Aggregate::Top { threshold, fields, .. } = agg("TOP(10, (5), a)") else { panic!() };
    assert_eq!((threshold, fields.len()), (Some(5), 1));
    let text = "TOP(1, 18446744073709551615, a)";
    let Aggregate::Top { threshold, .. } = agg(text) else { panic!() };
    assert_eq!(threshold, Some(u64::MAX));
    assert_eq!(s("AVG(x) + 5"), "AVG(x) + 5");
    assert_eq!(s("QUANTILE(a, REGION, 0, 1, 0.25)"), "QUANTILE(a, REGION, 0, 1, 0.25)");
}

trait Strip {
    fn strip(self) -> Self;
}

impl Strip for Aggregate {
    /// Spans of `e("a")` inside a hand-built aggregate differ from the parsed ones; compare
    /// the canonical texts instead by round-tripping through Display.
    fn strip(self) -> Self {
        match e(&Expr::new(ExprKind::Aggregate(self), Span::default()).to_string()).kind {
            ExprKind::Aggregate(a) => a,
            _ => unreachable!(),
        }
    }
}

// ---- errors ----

#[test]
fn errors_render_with_line_column_carets_and_hint() {
    let text = "SELECT *\nFROM STREAM()\nWERE a = 1";
    let error = err(text);
    assert_eq!(
        error.render(text),
        "error: expected LATERAL VIEW, WHERE, GROUP BY, HAVING, ORDER BY, WINDOWING, LIMIT or \
         the end of the query, found 'WERE'\nat line 3, column 1\n  WERE a = 1\n  ^^^^\n\
         hint: did you mean WHERE?\n"
    );
}

#[test]
fn misspelled_keywords_get_did_you_mean() {
    let cases = [
        ("SELCT * FROM STREAM()", "SELCT", "expected a query starting with SELECT, found 'SELCT'", "did you mean SELECT?"),
        ("SELECT * FORM STREAM()", "FORM", "expected FROM after the select list, found 'FORM'", "did you mean FROM?"),
        ("SELECT a FORM STREAM()", "FORM", "expected FROM after the select list, found 'FORM'", "did you mean FROM?"),
        ("SELECT * FROM STREAM() WHRE a = 1", "WHRE", "expected LATERAL VIEW, WHERE, GROUP BY, HAVING, ORDER BY, WINDOWING, LIMIT or the end of the query, found 'WHRE'", "did you mean WHERE?"),
        ("SELECT * FROM STREAM() GROUP BUY a", "BUY", "expected BY after GROUP, found 'BUY'", "did you mean BY?"),
        ("SELECT * FROM STREAM() WHERE a = 1 ODER BY a", "ODER", "expected GROUP BY, HAVING, ORDER BY, WINDOWING, LIMIT or the end of the query, found 'ODER'", "did you mean ORDER BY?"),
        ("SELECT * FROM STREAM() WINDOWNG TUMBLING(1, TIME)", "WINDOWNG", "expected LATERAL VIEW, WHERE, GROUP BY, HAVING, ORDER BY, WINDOWING, LIMIT or the end of the query, found 'WINDOWNG'", "did you mean WINDOWING?"),
        ("SELECT * FROM STREAM() WINDOWING TUMBILNG(1, TIME)", "TUMBILNG", "expected TUMBLING(...) or EVERY(...) after WINDOWING, found 'TUMBILNG'", "did you mean TUMBLING?"),
        ("SELECT * FROM STREAM() WINDOWING EVERY(1, TIME, AL)", "AL", "expected ALL or FIRST, found 'AL'", "did you mean ALL?"),
        ("SELECT * FROM STREAM() WINDOWING TUMBLING(1, TIEM)", "TIEM", "expected TIME or RECORD, found 'TIEM'", "did you mean TIME?"),
        ("SELECT * FROM STREEM()", "STREEM", "expected STREAM(...), HISTORY(...) or a query in parentheses after FROM, found 'STREEM'", "did you mean STREAM?"),
        ("SELECT * FROM STREAM() LATERAL VEIW EXPLODE(a) AS b", "VEIW", "expected VIEW after LATERAL, found 'VEIW'", "did you mean VIEW?"),
        ("SELECT * FROM STREAM() LMIT 5", "LMIT", "expected LATERAL VIEW, WHERE, GROUP BY, HAVING, ORDER BY, WINDOWING, LIMIT or the end of the query, found 'LMIT'", "did you mean LIMIT?"),
    ];
    let text = "SELECT a WERE STREAM()";
    let error = err(text);
    assert_eq!(error.message, "expected FROM after the select list, found 'WERE'");
    assert_eq!((under(text, &error).as_str(), error.hint), ("WERE", None));
    for (text, at, message, hint) in cases {
        let error = err(text);
        assert_eq!(error.message, message, "{text}");
        assert_eq!(under(text, &error), at, "{text}");
        assert_eq!(error.hint.as_deref(), Some(hint), "{text}");
        assert_eq!(error.kind, crate::QueryErrorKind::Syntax);
    }
}

#[test]
fn unknown_functions_and_wrong_arity() {
    let text = "SELECT CONT(*) FROM STREAM()";
    let error = err(text);
    assert_eq!(error.message, "unknown function 'CONT'");
    assert_eq!(under(text, &error), "CONT");
    assert_eq!(error.hint.as_deref(), Some("did you mean COUNT?"));
    assert_eq!(expr_err("QUANTILLE(a, LINEAR, 2)").hint.as_deref(), Some("did you mean QUANTILE?"));
    assert_eq!(
        expr_err("substr(a, 1)").hint.as_deref(),
        Some("BQL writes this as SUBSTRING(s, start[, len])")
    );
    assert_eq!(expr_err("LENGTH(a)").hint.as_deref(), Some("BQL writes this as SIZEOF(x)"));
    assert!(expr_err("FROBNICATE(a)").hint.unwrap().contains("SIZEOF ABS"));

    let text = "a = SUBSTRING(s)";
    let error = expr_err(text);
    assert_eq!(error.message, "SUBSTRING takes 2 or 3 arguments, found 1");
    assert_eq!(under(text, &error), "SUBSTRING(s)");
    assert_eq!(error.hint.as_deref(), Some("usage: SUBSTRING(s, start[, len])"));
    assert_eq!(expr_err("ABS(a, b)").message, "ABS takes 1 argument, found 2");
    assert_eq!(expr_err("IF(a, b)").message, "IF takes 3 arguments, found 2");
    assert_eq!(
        expr_err("UNIXTIMESTAMP(a, b, c)").message,
        "UNIXTIMESTAMP takes at most 2 arguments, found 3"
    );
    assert_eq!(expr_err("BETWEEN(a, b)").message, "BETWEEN takes 3 arguments, found 2");
    assert_eq!(expr_err("SUM(a, b)").message, "SUM takes 1 argument, found 2");
    assert_eq!(expr_err("AVG()").message, "AVG takes 1 argument, found 0");
    let error = expr_err("COUNT(a)");
    assert_eq!(error.message, "COUNT takes * or DISTINCT, found 1 argument");
    assert!(error.hint.unwrap().contains("COUNT(DISTINCT"));
    assert_eq!(
        expr_err("COUNT(DISTINCT)").message,
        "COUNT(DISTINCT ...) needs at least one expression"
    );
    assert_eq!(expr_err("SUM(DISTINCT a)").message, "SUM(DISTINCT ...) is not BQL");
    assert_eq!(expr_err("TOP(10)").message, "TOP needs at least one expression after k");
    assert_eq!(
        expr_err("TOP(a, b)").message,
        "expected the number of items k in TOP(k, e, ...), found 'a'"
    );
    assert_eq!(
        expr_err("QUANTILE(a)").message,
        "expected ',' and the points in QUANTILE(e, ...), found ')'"
    );
    let error = expr_err("QUANTILE(a, LINEER, 3)");
    assert_eq!(error.hint.as_deref(), Some("did you mean LINEAR?"));
    assert_eq!(
        expr_err("FREQ(a, MANUAL)").message,
        "expected ',' and at least one point after MANUAL, found ')'"
    );
    assert_eq!(expr_err("FREQ(a, REGION, 1, 2)").message, "expected ',' after the end, found ')'");
    assert!(expr_err("EXPLODE(a) = 1").message.contains("table function"));
}

#[test]
fn unclosed_and_stray_tokens() {
    let text = "SELECT * FROM STREAM() WHERE (a = 1 LIMIT 5";
    let error = err(text);
    assert_eq!(error.message, "expected ')' to close this '(', found keyword LIMIT");
    assert_eq!(under(text, &error), "LIMIT");
    assert_eq!(error.hint.as_deref(), Some("the '(' at line 1, column 30 is not closed"));
    let text = "SELECT * FROM STREAM() WHERE ABS(a";
    let error = err(text);
    assert_eq!(error.message, "expected ',' or ')' to close ABS(, found the end of the query");
    assert_eq!(error.span, Some(Span::new(text.len(), text.len())));
    assert_eq!(
        err("SELECT * FROM STREAM(").message,
        "expected a duration in milliseconds or MAX, found the end of the query"
    );
    assert_eq!(
        err("SELECT * FROM STREAM(1, TIME").message,
        "expected ')' to close STREAM(, found the end of the query"
    );
    assert_eq!(
        expr_err("[1, 2").message,
        "expected ',' or ']' to close [, found the end of the query"
    );
    assert_eq!(expr_err("a[1").message, "expected ']', found the end of the query");
    assert_eq!(expr_err("(a, b)").message, "expected ')', found ','");
    let text = "SELECT * FROM STREAM() WHERE a = 1) LIMIT 1";
    let error = err(text);
    assert_eq!(under(text, &error), ")");
    let text = "SELECT * FROM STREAM() LIMIT 1 garbage";
    let error = err(text);
    assert_eq!(error.message, "expected the end of the query, found 'garbage'");
    assert_eq!(under(text, &error), "garbage");
    assert_eq!(
        err("SELECT * FROM STREAM();;").message,
        "expected the end of the query after ';', found ';'"
    );
    assert_eq!(expr_err("a b").message, "unexpected 'b' after the expression");
    assert_eq!(expr_err("").message, "expected an expression, found the end of the query");
    let error = expr_err("a = *");
    assert_eq!(error.message, "'*' is not a value here");
    let error = expr_err("a = FROM");
    assert_eq!(error.message, "expected an expression, found keyword FROM");
    assert_eq!(
        error.hint.as_deref(),
        Some(
            "FROM is a reserved word; a field with that name is written in double quotes: \"FROM\""
        )
    );
}

#[test]
fn select_list_errors() {
    let text = "SELECT FROM STREAM()";
    let error = err(text);
    assert_eq!(error.message, "the select list is empty");
    assert_eq!(under(text, &error), "FROM");
    assert!(error.hint.unwrap().contains("SELECT *"));
    assert_eq!(err("SELECT DISTINCT FROM STREAM()").message, "the select list is empty");
    assert_eq!(err("SELECT").message, "the select list is empty");
    let error = err("SELECT a, FROM STREAM()");
    assert_eq!(error.message, "expected a select item after ',', found keyword FROM");
    assert_eq!(error.hint.as_deref(), Some("remove the trailing ',' at column 9"));
    let error = err("SELECT a AS FROM STREAM()");
    assert_eq!(error.message, "expected an alias after AS, found keyword FROM");
    assert!(error.hint.unwrap().contains("\"FROM\""));
    assert_eq!(
        err("SELECT a b c FROM STREAM()").message,
        "expected FROM after the select list, found 'b'"
    );
    let error = err("SELECT EXPLODE(l) FROM STREAM()");
    assert_eq!(error.message, "expected AS after EXPLODE(...), found keyword FROM");
    assert_eq!(
        err("SELECT OUTER EXPLODE(m) AS (k) FROM STREAM()").message,
        "expected ',' between the key and value aliases, found ')'"
    );
    assert_eq!(
        err("").message,
        "expected a query starting with SELECT, found the end of the query"
    );
    assert!(err("{\"filters\": []}").hint.unwrap().contains("JSON"));
}

#[test]
fn from_and_clause_errors() {
    let text = "SELECT * FROM events WHERE a = 1";
    let error = err(text);
    assert_eq!(
        error.message,
        "expected STREAM(...), HISTORY(...) or a query in parentheses after FROM, found 'events'"
    );
    assert_eq!(under(text, &error), "events");
    assert!(error.hint.unwrap().contains("FROM STREAM(30000, TIME)"));
    let error = err("SELECT * FROM STREAM");
    assert_eq!(error.message, "expected '(' after STREAM, found the end of the query");
    assert_eq!(
        err("SELECT * FROM STREAM(10)").message,
        "expected ', TIME' after the duration, found ')'"
    );
    let error = err("SELECT * FROM STREAM(10, RECORD)");
    assert_eq!(error.message, "expected TIME, found 'RECORD'");
    assert!(error.hint.unwrap().contains("LIMIT"));
    let error = err("SELECT * FROM (SELECT * FROM (SELECT * FROM STREAM()))");
    assert_eq!(error.message, "a query in FROM ( ... ) must itself read FROM STREAM(...)");
    let text = "SELECT * FROM (SELECT * FROM STREAM() WHRE a = 1)";
    let error = err(text);
    assert_eq!(
        error.message,
        "expected LATERAL VIEW, WHERE, GROUP BY, HAVING, ORDER BY, WINDOWING, LIMIT or ')' to \
         close the query in FROM ( ... ), found 'WHRE'"
    );
    assert_eq!(error.hint.as_deref(), Some("did you mean WHERE?"));
    let text = "SELECT * FROM STREAM() LIMIT 5 WHERE a = 1";
    let error = err(text);
    assert_eq!(error.message, "WHERE must come before LIMIT");
    assert_eq!(under(text, &error), "WHERE");
    assert!(error.hint.unwrap().contains("clauses go in this order"));
    assert_eq!(
        err("SELECT * FROM STREAM() WHERE a WHERE b").message,
        "a query has only one WHERE clause"
    );
    assert_eq!(
        err("SELECT * FROM STREAM() WHERE a LATERAL VIEW EXPLODE(l) AS x").message,
        "LATERAL VIEW must come before WHERE"
    );
    assert_eq!(
        err("SELECT * FROM STREAM() WINDOWING TUMBLING(1)").message,
        "expected ',' after the emit interval, found ')'"
    );
    assert_eq!(
        err("SELECT * FROM STREAM() WINDOWING").message,
        "expected TUMBLING(...) or EVERY(...) after WINDOWING, found the end of the query"
    );
}

#[test]
fn sql_habits_get_hints() {
    let text = "SELECT * FROM STREAM() WHERE name LIKE '%abc%'";
    let error = err(text);
    assert_eq!(error.message, "LIKE is not BQL");
    assert_eq!(under(text, &error), "LIKE");
    assert!(error.hint.unwrap().contains("RLIKE '.*abc.*'"));
    assert_eq!(expr_err("a NOT LIKE 'x'").message, "LIKE is not BQL");

    let text = "SELECT * FROM STREAM() WHERE name = \"John Smith\"";
    let error = err(text);
    assert_eq!(
        error.message,
        "\"John Smith\" is a field name: double quotes quote names, not strings"
    );
    assert_eq!(under(text, &error), "\"John Smith\"");
    assert!(error.hint.unwrap().contains("'John Smith'"));
    assert!(expr_err("a RLIKE \".*x\"").hint.unwrap().contains("'.*x'"));
    assert!(expr_err("a IN ('x', \"y z\")").message.contains("\"y z\""));
    assert!(expr_err("a IN ['x', \"y z\"]").message.contains("\"y z\""));
    assert!(expr_err("a = (\"y z\")").message.contains("\"y z\""));
    // allowed: plain quoted names, a quoted name on the left, two quoted names
    e("a = \"123col\"");
    e("\"First Name\" = a");
    e("\"First Name\" = \"Last Name\"");

    assert_eq!(
        expr_err("a IS TRUE").hint.as_deref(),
        Some("compare booleans with = : flag = TRUE")
    );
    assert_eq!(expr_err("a NOT b").message, "expected IN, RLIKE or BETWEEN after NOT, found 'b'");
    assert!(expr_err("a BETWEEN (1 AND 2)").hint.unwrap().contains("BETWEEN (low, high)"));
    assert_eq!(
        expr_err("a BETWEEN 1, 2").message,
        "expected AND in BETWEEN low AND high, found ','"
    );
    assert!(expr_err("a.0").hint.unwrap().contains("a[0]"));
}

#[test]
fn depth_is_bounded() {
    let deep = format!("{}a{}", "(".repeat(MAX_DEPTH - 2), ")".repeat(MAX_DEPTH - 2));
    assert_eq!(e(&deep).kind, field("a"));
    for (open, close) in
        [("(", ")"), ("[", "]"), ("ABS(", ")"), ("a[", "]"), ("-", ""), ("NOT ", "")]
    {
        let text = format!("{}1{}", open.repeat(10_000), close.repeat(10_000));
        let error = expr_err(&text);
        assert!(error.message.contains("nests too deeply"), "{open}: {}", error.message);
    }
    let text = format!("SELECT * FROM STREAM() WHERE {}", "a = ".repeat(10_000) + "1");
    assert!(err(&text).message.contains("nests too deeply"));
    // operator chains loop in the parser, but the tree they build is bounded in height too
    let text =
        format!("SELECT * FROM STREAM() WHERE {}", vec!["a = 1"; MAX_HEIGHT / 2].join(" OR "));
    q(&text);
    let text = format!("SELECT * FROM STREAM() WHERE {}", vec!["a"; 10_000].join(" + "));
    let error = err(&text);
    assert!(error.message.contains("more than 96 levels"), "{}", error.message);
    assert!(error.hint.unwrap().contains("IN (a, b, ...)"));
    // nesting and chains together stay bounded
    let chain = vec!["a"; 300].join(" * ");
    let text = format!("{}{chain}{}", "(".repeat(100), ") + a".repeat(100));
    if let Ok(tree) = parse_expr(&text) {
        assert!(expr::height(&tree) <= MAX_HEIGHT);
    }
    // the tallest trees allowed, and the deepest parentheses, fit on a test thread's stack and
    // print to text that parses back (found by fuzzing: `- - - a` prints as `-(-(-a))`)
    let n = MAX_HEIGHT - 1;
    for (open, close) in [
        ("-", ""),
        ("NOT ", ""),
        ("ABS(", ")"),
        ("[", "]"),
        ("a[", "]"),
        ("QUANTILE(", ", LINEAR, 2)"),
        ("CAST(", " AS STRING)"),
        ("a = (", ")"),
        ("a BETWEEN (", ", 1)"),
        ("-(", ")"),
    ] {
        let text = format!("{}b{}", open.repeat(n), close.repeat(n));
        let tree = e(&text);
        assert_eq!(expr::height(&tree), MAX_HEIGHT, "{open}");
        let printed = tree.to_string();
        assert_eq!(e(&printed).to_string(), printed, "{open}");
        let text = format!("{}b{}", open.repeat(n + 1), close.repeat(n + 1));
        assert!(expr_err(&text).message.contains("nests too deeply"), "{open}");
    }
    let chain = format!("SELECT * FROM STREAM() WHERE {}", vec!["a"; 40].join(" = "));
    let query = q(&chain);
    let printed = query.where_clause.unwrap().to_string();
    assert!(printed.starts_with(&"(".repeat(38)), "{printed}");
    e(&printed);
    let deep = format!("{}a{}", "(".repeat(MAX_DEPTH - 2), ")".repeat(MAX_DEPTH - 2));
    e(&deep);
}
