//! Unit tests of the validation rules, on hand-built syntax trees (independent of the parser).

use super::*;
use crate::ast::*;
use crate::error::QueryErrorKind;
use needle_record::Value;

fn e(kind: ExprKind) -> Expr {
    Expr::new(kind, Span::new(1, 2))
}
fn f(name: &str) -> Expr {
    e(ExprKind::Field(Field { name: name.into(), path: vec![], hint: None }))
}
fn hinted(name: &str, t: Type) -> Expr {
    e(ExprKind::Field(Field { name: name.into(), path: vec![], hint: Some(t) }))
}
fn lit(v: Value) -> Expr {
    e(ExprKind::Literal(v))
}
fn int(i: i32) -> Expr {
    lit(Value::Int(i))
}
fn s(x: &str) -> Expr {
    lit(Value::String(x.into()))
}
fn count() -> Expr {
    e(ExprKind::Aggregate(Aggregate::Count))
}
fn sum(x: Expr) -> Expr {
    e(ExprKind::Aggregate(Aggregate::Sum(Box::new(x))))
}
fn avg(x: Expr) -> Expr {
    e(ExprKind::Aggregate(Aggregate::Avg(Box::new(x))))
}
fn bin(op: BinaryOp, l: Expr, r: Expr) -> Expr {
    e(ExprKind::Binary { op, left: Box::new(l), right: Box::new(r) })
}
fn cmp(op: CompareOp, l: Expr, r: Expr) -> Expr {
    e(ExprKind::Compare { op, quantifier: None, left: Box::new(l), right: Box::new(r) })
}
fn item(x: Expr) -> SelectItem {
    SelectItem::Expr { expr: x, alias: None }
}
fn aliased(x: Expr, a: &str) -> SelectItem {
    SelectItem::Expr { expr: x, alias: Some(Ident { name: a.into(), span: Span::new(3, 4) }) }
}
fn query(items: Vec<SelectItem>) -> Query {
    Query {
        select: Select { distinct: false, items, span: Span::new(0, 6) },
        from: From::Stream(Stream {
            duration: StreamDuration::Default,
            span: Span::new(7, 15),
            history: None,
        }),
        lateral_views: vec![],
        where_clause: None,
        group_by: vec![],
        having: None,
        order_by: vec![],
        window: None,
        limit: None,
        span: Span::new(0, 20),
    }
}
fn ok(q: &Query) -> Plan {
    validate(q, "text", &QueryConfig::default()).unwrap_or_else(|err| panic!("{err:?}"))
}
fn err(q: &Query) -> QueryError {
    validate(q, "text", &QueryConfig::default()).expect_err("must be rejected")
}
fn limit(n: u64) -> Option<Limit> {
    Some(Limit { value: n, span: Span::new(30, 35) })
}
fn desc(x: Expr) -> OrderItem {
    OrderItem { expr: x, descending: true }
}

#[test]
fn raw_uses_default_size_and_rejects_large_or_zero_limits() {
    let mut q = query(vec![SelectItem::All { span: Span::new(7, 8) }]);
    let p = ok(&q);
    assert_eq!(p.stage.aggregation, Aggregation::Raw { projection: Projection::All, size: 500 });
    assert_eq!(p.duration_ms, 30_000);
    q.limit = limit(501);
    assert_eq!(err(&q).kind, QueryErrorKind::Limit);
    q.limit = limit(0);
    assert_eq!(err(&q).kind, QueryErrorKind::Semantic);
    q.limit = limit(10);
    assert!(matches!(ok(&q).stage.aggregation, Aggregation::Raw { size: 10, .. }));
}

#[test]
fn group_all_names_columns_and_computes_over_aggregates() {
    let q = query(vec![item(count()), aliased(bin(BinaryOp::Add, avg(f("x")), int(5)), "y")]);
    let p = ok(&q);
    let Aggregation::GroupAll { aggregates } = &p.stage.aggregation else { panic!("{p:?}") };
    let names: Vec<&str> = aggregates.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["COUNT(*)", "AVG(x)"]);
    assert_eq!(p.stage.post.computations[0].expr.to_string(), "\"AVG(x)\" + 5");
    assert_eq!(p.stage.post.output, Some(vec!["COUNT(*)".to_string(), "y".to_string()]));
}

#[test]
fn having_needs_group_by_and_resolves_aliases() {
    let mut q = query(vec![item(f("a")), aliased(count(), "c")]);
    q.having = Some(cmp(CompareOp::Gt, f("c"), int(5)));
    assert!(err(&q).message.contains("HAVING needs GROUP BY"));
    q.group_by = vec![f("a")];
    let p = ok(&q);
    assert_eq!(p.stage.post.having.as_ref().unwrap().to_string(), "c > 5");
}

#[test]
fn ungrouped_fields_are_rejected() {
    let mut q = query(vec![item(f("b")), item(count())]);
    q.group_by = vec![f("a")];
    let e = err(&q);
    assert!(e.message.contains("'b' is neither grouped nor aggregated"), "{e:?}");
}

#[test]
fn hidden_aggregates_for_order_by_are_left_out_of_the_output() {
    let mut q = query(vec![item(f("a")), item(count())]);
    q.group_by = vec![f("a")];
    q.order_by = vec![desc(sum(f("x")))];
    let p = ok(&q);
    let Aggregation::GroupBy { aggregates, .. } = &p.stage.aggregation else { panic!() };
    assert_eq!(aggregates.len(), 2);
    assert_eq!(p.stage.post.output, Some(vec!["a".to_string(), "COUNT(*)".to_string()]));
}

#[test]
fn group_by_count_order_desc_limit_is_top_k() {
    let mut q = query(vec![item(f("a")), aliased(count(), "n")]);
    q.group_by = vec![f("a")];
    q.order_by = vec![desc(f("n"))];
    q.limit = limit(10);
    q.having = Some(cmp(CompareOp::Gt, count(), int(3)));
    let p = ok(&q);
    let Aggregation::TopK { k, threshold, count_name, fields, .. } = &p.stage.aggregation else {
        panic!("{p:?}")
    };
    assert_eq!(
        (*k, *threshold, count_name.as_str(), fields[0].name.as_str()),
        (10, Some(4), "n", "a")
    );
    // Ascending order is not TOP K: an exact GROUP BY.
    q.order_by[0].descending = false;
    assert!(matches!(ok(&q).stage.aggregation, Aggregation::GroupBy { .. }));
}

#[test]
fn one_aggregation_kind_per_query() {
    let cd = e(ExprKind::Aggregate(Aggregate::CountDistinct(vec![f("a")])));
    let q = query(vec![item(cd.clone()), item(count())]);
    assert!(err(&q).message.contains("one aggregation kind"));
    let top =
        e(ExprKind::Aggregate(Aggregate::Top { k: 3, threshold: None, fields: vec![f("b")] }));
    let q = query(vec![item(cd.clone()), item(top)]);
    assert!(err(&q).message.contains("at most one"));
    let mut q = query(vec![item(cd)]);
    q.limit = limit(3);
    assert!(err(&q).message.contains("LIMIT is not allowed"));
}

#[test]
fn aggregates_not_allowed_in_where_or_nested() {
    let mut q = query(vec![SelectItem::All { span: Span::new(7, 8) }]);
    q.where_clause = Some(cmp(CompareOp::Gt, count(), int(1)));
    assert!(err(&q).message.contains("not allowed in WHERE"));
    let q = query(vec![item(sum(count()))]);
    assert!(err(&q).message.contains("inside another aggregate"));
}

#[test]
fn star_with_aggregates_is_rejected() {
    let q = query(vec![SelectItem::All { span: Span::new(7, 8) }, item(count())]);
    assert!(err(&q).message.contains("SELECT *"));
}

#[test]
fn types_are_checked_where_known() {
    let q = query(vec![item(bin(BinaryOp::Add, s("a"), int(1)))]);
    assert!(err(&q).message.contains("needs a number"));
    let q = query(vec![item(sum(s("x")))]);
    assert!(err(&q).message.contains("SUM needs a number"));
    let not5 = e(ExprKind::Unary { op: UnaryOp::Not, operand: Box::new(int(5)) });
    assert!(err(&query(vec![item(not5)])).message.contains("NOT needs a BOOLEAN"));
    let sizeof = e(ExprKind::Call { function: Function::SizeOf, args: vec![int(5)] });
    assert!(err(&query(vec![item(sizeof)])).message.contains("SIZEOF needs"));
    let hint = bin(BinaryOp::Mul, hinted("a", Type::String), int(2));
    assert!(err(&query(vec![item(hint)])).message.contains("STRING"));
    let cast =
        e(ExprKind::Cast { value: Box::new(e(ExprKind::List(vec![int(1)]))), to: Type::Integer });
    assert!(err(&query(vec![item(cast)])).message.contains("cannot cast"));
    let bad_re = e(ExprKind::Rlike {
        negated: false,
        any: false,
        value: Box::new(f("a")),
        pattern: Box::new(s("(")),
    });
    assert!(err(&query(vec![item(bad_re)])).message.contains("invalid regular expression"));
    let num_re = e(ExprKind::Rlike {
        negated: false,
        any: false,
        value: Box::new(f("a")),
        pattern: Box::new(int(5)),
    });
    assert!(err(&query(vec![item(num_re)])).message.contains("STRING pattern"));
}

#[test]
fn windows_follow_bullets_rules() {
    let mut q = query(vec![item(count())]);
    q.window = Some(Window {
        kind: WindowKind::Tumbling { every: 500, unit: WindowUnit::Time },
        span: Span::new(40, 50),
    });
    assert_eq!(err(&q).kind, QueryErrorKind::Limit);
    q.window = Some(Window {
        kind: WindowKind::Tumbling { every: 5, unit: WindowUnit::Record },
        span: Span::new(40, 50),
    });
    assert!(err(&q).message.contains("RECORD windows"));
    let mut raw = query(vec![SelectItem::All { span: Span::new(7, 8) }]);
    raw.window = Some(Window {
        kind: WindowKind::Every { every: 2000, unit: WindowUnit::Time, include: Include::All },
        span: Span::new(40, 50),
    });
    assert!(err(&raw).message.contains("EVERY(..., ALL)"));
    raw.window = Some(Window {
        kind: WindowKind::Every {
            every: 1,
            unit: WindowUnit::Record,
            include: Include::First { count: 1, unit: WindowUnit::Record },
        },
        span: Span::new(40, 50),
    });
    assert!(ok(&raw).window.is_some());
}

#[test]
fn durations_resolve_and_are_capped() {
    let mut q = query(vec![item(count())]);
    q.from = From::Stream(Stream {
        duration: StreamDuration::Max,
        span: Span::new(7, 15),
        history: None,
    });
    assert_eq!(ok(&q).duration_ms, 600_000);
    q.from = From::Stream(Stream {
        duration: StreamDuration::Millis(600_001),
        span: Span::new(7, 15),
        history: None,
    });
    assert_eq!(err(&q).kind, QueryErrorKind::Limit);
}

#[test]
fn outer_queries_read_inner_columns_and_have_no_window() {
    let mut inner = query(vec![item(f("a")), aliased(count(), "c")]);
    inner.group_by = vec![f("a")];
    let mut outer = query(vec![item(avg(f("c")))]);
    outer.from = From::Subquery(Box::new(inner.clone()));
    let p = ok(&outer);
    assert!(matches!(p.outer.as_ref().unwrap().aggregation, Aggregation::GroupAll { .. }));
    let mut bad = query(vec![item(avg(f("cc")))]);
    bad.from = From::Subquery(Box::new(inner));
    let e = err(&bad);
    assert!(e.hint.unwrap().contains("did you mean 'c'"));
    outer.window = Some(Window {
        kind: WindowKind::Tumbling { every: 2000, unit: WindowUnit::Time },
        span: Span::new(1, 2),
    });
    assert!(err(&outer).message.contains("outer query"));
}

#[test]
fn explode_aliases_must_not_collide() {
    let tf = |a: &str, b: &str| TableFunction {
        outer: false,
        expr: f("m"),
        alias: ExplodeAlias::KeyValue(
            Ident { name: a.into(), span: Span::new(1, 2) },
            Ident { name: b.into(), span: Span::new(3, 4) },
        ),
        span: Span::new(1, 4),
    };
    let mut q = query(vec![SelectItem::All { span: Span::new(7, 8) }]);
    q.lateral_views = vec![tf("k", "k")];
    assert!(err(&q).message.contains("used twice"));
    q.lateral_views = vec![tf("k", "v")];
    assert_eq!(ok(&q).stage.explode.len(), 1);
}

#[test]
fn distribution_points_are_checked() {
    let dist = |points| {
        e(ExprKind::Aggregate(Aggregate::Distribution {
            kind: DistributionKind::Freq,
            value: Box::new(f("x")),
            points,
        }))
    };
    assert!(err(&query(vec![item(dist(Points::Region { start: 5.0, end: 1.0, step: 1.0 }))]))
        .message
        .contains("start"));
    assert!(err(&query(vec![item(dist(Points::Region { start: 0.0, end: 1.0, step: 0.0 }))]))
        .message
        .contains("step"));
    assert_eq!(
        err(&query(vec![item(dist(Points::Linear { count: 101 }))])).kind,
        QueryErrorKind::Limit
    );
    assert!(ok(&query(vec![item(dist(Points::Linear { count: 100 }))]))
        .stage
        .post
        .output
        .is_none());
}

// The rules below are written in BQL for brevity (the parser is tested on its own).

fn plan(bql: &str) -> Plan {
    let q = crate::parse_bql(bql).unwrap_or_else(|e| panic!("{}", e.render(bql)));
    validate(&q, bql, &QueryConfig::default()).unwrap_or_else(|e| panic!("{}", e.render(bql)))
}

fn refused(bql: &str) -> QueryError {
    let q = crate::parse_bql(bql).unwrap_or_else(|e| panic!("{}", e.render(bql)));
    validate(&q, bql, &QueryConfig::default()).expect_err(bql)
}

#[test]
fn distinct_is_a_group_by_without_aggregates() {
    let p = plan("SELECT DISTINCT a, b AS bee FROM STREAM()");
    let Aggregation::GroupBy { keys, aggregates, .. } = &p.stage.aggregation else { panic!() };
    assert_eq!(keys.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["a", "bee"]);
    assert!(aggregates.is_empty());
    assert!(refused("SELECT DISTINCT a, COUNT(*) FROM STREAM()").message.contains("DISTINCT"));
    assert!(refused("SELECT DISTINCT a FROM STREAM() GROUP BY a").message.contains("DISTINCT"));
}

#[test]
fn count_distinct_in_expressions_reads_its_column() {
    let p = plan("SELECT COUNT(DISTINCT a) * 2 AS twice FROM STREAM()");
    let Aggregation::CountDistinct { name, .. } = &p.stage.aggregation else { panic!() };
    assert_eq!(name, "COUNT(DISTINCT a)");
    assert_eq!(p.stage.post.computations[0].expr.to_string(), "\"COUNT(DISTINCT a)\" * 2");
    assert_eq!(p.stage.post.output, Some(vec!["twice".to_string()]));
    assert!(refused("SELECT COUNT(DISTINCT a), b FROM STREAM()").message.contains("'b'"));
    assert!(refused("SELECT COUNT(DISTINCT a) FROM STREAM() ORDER BY a")
        .message
        .contains("ORDER BY"));
}

#[test]
fn top_alias_names_the_count_and_fields_are_named_like_columns() {
    let p = plan("SELECT TOP(5, 10, \"my f\", b.c) AS views FROM STREAM()");
    let Aggregation::TopK { k, threshold, fields, count_name, .. } = &p.stage.aggregation else {
        panic!()
    };
    assert_eq!((*k, *threshold, count_name.as_str()), (5, Some(10), "views"));
    assert_eq!(fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["my f", "b.c"]);
    assert_eq!(refused("SELECT TOP(0, a) FROM STREAM()").kind, QueryErrorKind::Semantic);
    assert_eq!(refused("SELECT TOP(501, a) FROM STREAM()").kind, QueryErrorKind::Limit);
    assert!(refused("SELECT TOP(5, a), b FROM STREAM()").message.contains("only item"));
}

#[test]
fn raw_order_by_projects_what_it_needs_as_hidden_columns() {
    let p = plan("SELECT a AS x FROM STREAM() ORDER BY x DESC, ts");
    let Aggregation::Raw { projection: Projection::Fields { fields }, .. } = &p.stage.aggregation
    else {
        panic!()
    };
    assert_eq!(fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["x", "ts"]);
    assert_eq!(p.stage.post.output, Some(vec!["x".to_string()]));
    let p = plan("SELECT * FROM STREAM() ORDER BY ts");
    assert_eq!(p.stage.post.order_by[0].expr.to_string(), "ts");
    assert!(p.stage.post.output.is_none());
}

#[test]
fn column_names_are_field_names_or_canonical_text() {
    let p = plan("SELECT \"123col\", m['k'], a : STRING, a + 1 FROM STREAM()");
    let Aggregation::Raw { projection: Projection::Fields { fields }, .. } = &p.stage.aggregation
    else {
        panic!()
    };
    let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["123col", "m.k", "a", "a + 1"]);
    assert!(refused("SELECT a, b AS a FROM STREAM()").message.contains("duplicate"));
}

#[test]
fn window_first_and_stream_zero_are_checked() {
    assert!(refused("SELECT * FROM STREAM() WINDOWING EVERY(5, RECORD, FIRST, 10, RECORD)")
        .message
        .contains("FIRST 10"));
    assert!(refused("SELECT * FROM STREAM() WINDOWING EVERY(5, RECORD, FIRST, 5000, TIME)")
        .message
        .contains("same unit"));
    assert!(refused("SELECT COUNT(*) FROM STREAM(0, TIME)").message.contains("at least 1 ms"));
    assert!(refused("SELECT * FROM STREAM() WINDOWING TUMBLING(0, RECORD)")
        .message
        .contains("every 1"));
}

#[test]
fn table_functions_in_select_stand_alone() {
    let p = plan("SELECT OUTER EXPLODE(m) AS (k, v) FROM STREAM() WHERE v > 1");
    assert_eq!(p.stage.explode.len(), 1);
    assert!(!p.stage.explode[0].lateral && p.stage.explode[0].outer);
    assert!(refused("SELECT EXPLODE(l) AS x, a FROM STREAM()")
        .message
        .contains("only select item"));
    assert!(refused("SELECT EXPLODE(l) AS x FROM STREAM() GROUP BY x")
        .message
        .contains("table function"));
    assert!(refused("SELECT EXPLODE(5) AS x FROM STREAM()").message.contains("cannot explode"));
}

#[test]
fn quantile_points_are_fractions_and_order_uses_result_columns() {
    assert!(refused("SELECT QUANTILE(d, MANUAL, 0.5, 2) FROM STREAM()")
        .message
        .contains("0 and 1"));
    assert!(refused("SELECT CUMFREQ(d, MANUAL, 5, 1) FROM STREAM()")
        .message
        .contains("increasing"));
    assert!(refused("SELECT QUANTILE(d, LINEAR, 3) AS q FROM STREAM()")
        .message
        .contains("renamed"));
    let p = plan("SELECT QUANTILE(d, LINEAR, 3) FROM STREAM() ORDER BY Value DESC LIMIT 2");
    assert_eq!(p.stage.post.limit, Some(2));
    assert!(refused("SELECT QUANTILE(d, LINEAR, 3) FROM STREAM() ORDER BY d")
        .message
        .contains("'d'"));
}
