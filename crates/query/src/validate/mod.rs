//! Semantic validation: a syntax tree ([`ast::Query`]) becomes a [`Plan`], or a [`QueryError`]
//! with a span and a hint. This module owns the rules of LANGUAGE.md that the grammar cannot
//! express: which aggregation kind a query is (one per query), where aggregates may appear, GROUP
//! BY membership, alias resolution in HAVING and ORDER BY, recognising `GROUP BY ... ORDER BY
//! COUNT(*) DESC LIMIT k` as TOP K, windows, durations and sizes against [`QueryConfig`], explode
//! aliases, outer queries, and (in [`types`]) the static type checks.
//!
//! Naming: a column is named by its alias, else by the expression's canonical text
//! ([`crate::display`]). Columns computed only for HAVING or ORDER BY are hidden: they are left
//! out of [`PostAggregation::output`].

pub mod types;

#[cfg(test)]
mod tests;

use crate::ast::{
    self, Aggregate, Expr, ExprKind, Field, From, Include, Query, SelectItem, StreamDuration,
    TableFunction, Window, WindowKind, WindowUnit,
};
use crate::ast::{CompareOp, DistributionKind, Points};
use crate::config::QueryConfig;
use crate::error::QueryError;
use crate::plan::{
    AggregateFunction, Aggregation, Explode, NamedAggregate, NamedExpr, OrderBy, Plan,
    PostAggregation, Projection, Stage,
};
use needle_record::Type;
use std::collections::{HashMap, HashSet};
use types::Ty;

/// Validates a parsed query against `config`; `text` is the query as received (kept in the plan).
pub fn validate(query: &Query, text: &str, config: &QueryConfig) -> Result<Plan, QueryError> {
    let (inner_q, outer_q) = match &query.from {
        From::Stream(_) => (query, None),
        From::Subquery(inner) => {
            if let From::Subquery(deeper) = &inner.from {
                return Err(QueryError::semantic(
                    "queries can be nested only one level deep",
                    Some(deeper.span),
                )
                .with_hint("read FROM STREAM(...) in the inner query"));
            }
            (&**inner, Some(query))
        }
    };
    let From::Stream(stream) = &inner_q.from else {
        unreachable!("the inner query reads a stream: checked above")
    };
    let history = match &stream.history {
        Some(clause) => Some(crate::history::resolve(
            clause,
            config.now_ms.unwrap_or_else(crate::history::wall_clock_ms),
        )?),
        None => None,
    };
    let duration_ms = match stream.duration {
        // HISTORY(...) ends when the stored range has been read
        _ if history.is_some_and(|h| !h.live) => 0,
        StreamDuration::Default => config.default_duration_ms,
        StreamDuration::Max => config.max_duration_ms,
        StreamDuration::Millis(0) => {
            return Err(QueryError::semantic(
                "a query must run for at least 1 ms",
                Some(stream.span),
            )
            .with_hint(format!(
                "write STREAM() for the default duration ({} ms) or STREAM(n, TIME) with n > 0",
                config.default_duration_ms
            )))
        }
        StreamDuration::Millis(n) if n > config.max_duration_ms => {
            return Err(QueryError::limit(
                format!(
                    "duration {n} ms is longer than the maximum of {} ms",
                    config.max_duration_ms
                ),
                Some(stream.span),
            )
            .with_hint(format!(
                "ask for at most {} ms, or write STREAM(MAX, TIME) for the maximum",
                config.max_duration_ms
            )))
        }
        StreamDuration::Millis(n) => n,
    };
    if let Some(outer) = outer_q {
        if let Some(w) = &outer.window {
            return Err(QueryError::semantic(
                "WINDOWING is not allowed in an outer query",
                Some(w.span),
            )
            .with_hint("move the WINDOWING clause into the inner query (inside the parentheses)"));
        }
    }
    let inner = validate_stage(inner_q, config, None)?;
    let window = match &inner_q.window {
        Some(w) => Some(check_window(w, &inner.stage.aggregation, config)?),
        None => None,
    };
    let outer = match outer_q {
        Some(q) => Some(validate_stage(q, config, Some(&inner.columns))?.stage),
        None => None,
    };
    Ok(Plan {
        text: text.to_string(),
        duration_ms,
        requested_duration: stream.duration,
        window,
        stage: inner.stage,
        outer,
        history,
    })
}

fn check_window(
    w: &Window,
    agg: &Aggregation,
    config: &QueryConfig,
) -> Result<WindowKind, QueryError> {
    let raw = matches!(agg, Aggregation::Raw { .. });
    let (every, unit) = match w.kind {
        WindowKind::Tumbling { every, unit } | WindowKind::Every { every, unit, .. } => {
            (every, unit)
        }
    };
    if every == 0 {
        return Err(QueryError::semantic("a window must emit every 1 or more units", Some(w.span))
            .with_hint("the window's first number is its emit interval; it must be positive"));
    }
    if unit == WindowUnit::Time && every < config.min_window_emit_ms {
        return Err(QueryError::limit(
            format!(
                "window emit interval {every} ms is shorter than the minimum of {} ms",
                config.min_window_emit_ms
            ),
            Some(w.span),
        )
        .with_hint(format!("emit at most once every {} ms", config.min_window_emit_ms)));
    }
    if unit == WindowUnit::Record && !raw {
        return Err(QueryError::semantic(
            "RECORD windows are only for RAW queries (no aggregates)",
            Some(w.span),
        )
        .with_hint("use a TIME window, e.g. TUMBLING(5000, TIME), for aggregations"));
    }
    if let WindowKind::Every { include, .. } = w.kind {
        match include {
            Include::All if raw => return Err(QueryError::semantic(
                "a RAW query cannot use EVERY(..., ALL): it would repeat every record ever matched",
                Some(w.span),
            )
            .with_hint("use TUMBLING(n, TIME) or EVERY(n, RECORD, FIRST, n, RECORD)")),
            Include::All => {}
            Include::First { count, unit: first_unit } => {
                if first_unit != unit {
                    return Err(QueryError::semantic(
                        "FIRST must use the same unit (TIME or RECORD) as the emit interval",
                        Some(w.span),
                    )
                    .with_hint(format!(
                        "write EVERY({every}, {u}, FIRST, {every}, {u})",
                        u = unit_name(unit)
                    )));
                }
                if count == 0 || count > every {
                    return Err(QueryError::semantic(
                        format!("FIRST {count} must be between 1 and the emit interval {every}"),
                        Some(w.span),
                    )
                    .with_hint("a window includes the first n units of each emit interval, so 1 <= n <= the interval"));
                }
            }
        }
    }
    Ok(w.kind)
}

fn unit_name(u: WindowUnit) -> &'static str {
    match u {
        WindowUnit::Time => "TIME",
        WindowUnit::Record => "RECORD",
    }
}

/// A validated stage and the columns it emits (`None` when they depend on the records: RAW with
/// `*`).
struct StageOut {
    stage: Stage,
    columns: Option<Vec<String>>,
}

/// Rebuilds `e` with each direct child replaced by `f(child)` (aggregates and fields are leaves).
fn map_children(
    e: &Expr,
    f: &mut impl FnMut(&Expr) -> Result<Expr, QueryError>,
) -> Result<Expr, QueryError> {
    let b = |x: Expr| Box::new(x);
    let kind = match &e.kind {
        ExprKind::Literal(_) | ExprKind::Now | ExprKind::Field(_) | ExprKind::Aggregate(_) => {
            e.kind.clone()
        }
        ExprKind::List(items) => {
            ExprKind::List(items.iter().map(&mut *f).collect::<Result<_, _>>()?)
        }
        ExprKind::Unary { op, operand } => ExprKind::Unary { op: *op, operand: b(f(operand)?) },
        ExprKind::Binary { op, left, right } => {
            ExprKind::Binary { op: *op, left: b(f(left)?), right: b(f(right)?) }
        }
        ExprKind::Compare { op, quantifier, left, right } => ExprKind::Compare {
            op: *op,
            quantifier: *quantifier,
            left: b(f(left)?),
            right: b(f(right)?),
        },
        ExprKind::Rlike { negated, any, value, pattern } => ExprKind::Rlike {
            negated: *negated,
            any: *any,
            value: b(f(value)?),
            pattern: b(f(pattern)?),
        },
        ExprKind::In { negated, value, list } => {
            ExprKind::In { negated: *negated, value: b(f(value)?), list: b(f(list)?) }
        }
        ExprKind::Between { negated, value, low, high } => ExprKind::Between {
            negated: *negated,
            value: b(f(value)?),
            low: b(f(low)?),
            high: b(f(high)?),
        },
        ExprKind::IsNull { negated, value } => {
            ExprKind::IsNull { negated: *negated, value: b(f(value)?) }
        }
        ExprKind::Call { function, args } => ExprKind::Call {
            function: *function,
            args: args.iter().map(&mut *f).collect::<Result<_, _>>()?,
        },
        ExprKind::Cast { value, to } => ExprKind::Cast { value: b(f(value)?), to: to.clone() },
    };
    Ok(Expr::new(kind, e.span))
}

fn first_aggregate(e: &Expr) -> Option<&Expr> {
    let mut found = None;
    e.visit(&mut |x| {
        if found.is_none() && matches!(x.kind, ExprKind::Aggregate(_)) {
            found = Some(x);
        }
    });
    found
}

fn no_aggregate(e: &Expr, clause: &str) -> Result<(), QueryError> {
    if let Some(a) = first_aggregate(e) {
        return Err(QueryError::semantic(
            format!("aggregate {a} is not allowed in {clause}"),
            Some(a.span),
        )
        .with_hint(match clause {
            "WHERE" => {
                "filter on aggregates with HAVING (which needs GROUP BY), or in an outer query"
            }
            "GROUP BY" => "group by fields or expressions of fields; put aggregates in SELECT",
            _ => "aggregates belong in SELECT, HAVING or ORDER BY",
        }));
    }
    Ok(())
}

/// The name of a column without alias: a field's own name (`123col`, `a.b`, without any type
/// hint), else the expression's canonical text (`COUNT(*)`, `AVG(x) + 5`).
pub fn column_name(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Field(f) if f.path.is_empty() => f.name.clone(),
        ExprKind::Field(f) => {
            // The accessors as BQL prints them (`.b`, `[0]`, `['c d']`), after the bare name.
            let path = Field { name: "x".into(), path: f.path.clone(), hint: None }.to_string();
            format!("{}{}", f.name, &path[1..])
        }
        _ => e.to_string(),
    }
}

fn field_ref(name: &str, span: ast::Span) -> Expr {
    Expr::new(ExprKind::Field(Field { name: name.to_string(), path: vec![], hint: None }), span)
}

/// The alias a bare field reference could be (`c` in `HAVING c > 5`).
fn bare_name(e: &Expr) -> Option<&str> {
    match &e.kind {
        ExprKind::Field(f) if f.path.is_empty() && f.hint.is_none() => Some(&f.name),
        _ => None,
    }
}

fn aggregate_label(a: &Aggregate) -> &'static str {
    match a {
        Aggregate::Count
        | Aggregate::Sum(_)
        | Aggregate::Min(_)
        | Aggregate::Max(_)
        | Aggregate::Avg(_) => "COUNT/SUM/MIN/MAX/AVG",
        Aggregate::CountDistinct(_) => "COUNT DISTINCT",
        Aggregate::Distribution { .. } => "a distribution (QUANTILE/FREQ/CUMFREQ)",
        Aggregate::Top { .. } => "TOP",
    }
}

fn is_special(a: &Aggregate) -> bool {
    matches!(
        a,
        Aggregate::CountDistinct(_) | Aggregate::Distribution { .. } | Aggregate::Top { .. }
    )
}

fn check_type(e: &Expr, clause: &str, want_bool: bool) -> Result<(), QueryError> {
    let ty = types::infer(e)?;
    if want_bool {
        let ok = match &ty {
            Ty::Unknown | Ty::Null => true,
            Ty::Known(t) => *t == Type::Boolean,
            Ty::Number => false,
        };
        if !ok {
            let shown = match ty {
                Ty::Known(t) => t.to_string(),
                _ => "a number".into(),
            };
            return Err(QueryError::semantic(
                format!("{clause} needs a BOOLEAN condition, but {} is {shown}", types::shown(e)),
                Some(e.span),
            )
            .with_hint("write a condition such as 'x > 5' or 'x IS NOT NULL'"));
        }
    }
    Ok(())
}

fn did_you_mean(name: &str, candidates: &[String]) -> Option<String> {
    candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(&name.to_lowercase(), &c.to_lowercase()), c))
        .filter(|(s, _)| *s > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c.clone())
}

fn check_unique(name: &str, span: ast::Span, seen: &mut HashSet<String>) -> Result<(), QueryError> {
    if !seen.insert(name.to_string()) {
        return Err(QueryError::semantic(format!("duplicate column name '{name}'"), Some(span))
            .with_hint("give one of the columns another name with AS"));
    }
    Ok(())
}

fn validate_stage(
    q: &Query,
    config: &QueryConfig,
    input: Option<&Option<Vec<String>>>,
) -> Result<StageOut, QueryError> {
    // Explodes: LATERAL VIEW first (they add fields), then a table function in SELECT.
    let mut explode = Vec::new();
    let mut explode_aliases: HashMap<String, ast::Span> = HashMap::new();
    let select_tf: Vec<&TableFunction> = q
        .select
        .items
        .iter()
        .filter_map(|i| match i {
            SelectItem::TableFunction(tf) => Some(tf),
            _ => None,
        })
        .collect();
    if let Some(tf) = select_tf.first() {
        if q.select.items.len() > 1 {
            return Err(QueryError::semantic(
                "a table function in SELECT must be the only select item",
                Some(tf.span),
            )
            .with_hint("it replaces each record by the exploded values; to keep other fields use LATERAL VIEW EXPLODE(...) AS ..."));
        }
    }
    let tfs =
        q.lateral_views.iter().map(|tf| (tf, true)).chain(select_tf.iter().map(|tf| (*tf, false)));
    for (tf, lateral) in tfs {
        no_aggregate(&tf.expr, "EXPLODE")?;
        let ty = types::infer(&tf.expr)?;
        let ex = Explode::from_table_function(tf, lateral);
        if let Ty::Known(t) = &ty {
            let ok = matches!(
                (&tf.alias, t),
                (ast::ExplodeAlias::Value(_), Type::List(_))
                    | (ast::ExplodeAlias::KeyValue(..), Type::Map(_))
            );
            if !ok {
                return Err(QueryError::semantic(
                    format!("cannot explode {} ({t})", types::shown(&tf.expr)),
                    Some(tf.expr.span),
                )
                .with_hint("EXPLODE(list) AS value explodes a list; EXPLODE(map) AS (key, value) explodes a map"));
            }
        } else if ty == Ty::Number {
            return Err(QueryError::semantic(
                format!("cannot explode the number '{}'", tf.expr),
                Some(tf.expr.span),
            )
            .with_hint("EXPLODE takes a list or a map"));
        }
        let idents: Vec<&ast::Ident> = match &tf.alias {
            ast::ExplodeAlias::Value(v) => vec![v],
            ast::ExplodeAlias::KeyValue(k, v) => vec![k, v],
        };
        for id in idents {
            if explode_aliases.insert(id.name.clone(), id.span).is_some() {
                return Err(QueryError::semantic(
                    format!("explode alias '{}' is used twice", id.name),
                    Some(id.span),
                )
                .with_hint("give every exploded key and value its own name"));
            }
        }
        explode.push(ex);
    }

    // Fields an outer query reads must be columns of the inner query.
    if let Some(Some(columns)) = input {
        let mut exprs: Vec<&Expr> = Vec::new();
        for item in &q.select.items {
            match item {
                SelectItem::Expr { expr, .. } => exprs.push(expr),
                SelectItem::TableFunction(tf) => exprs.push(&tf.expr),
                SelectItem::All { .. } => {}
            }
        }
        exprs.extend(q.lateral_views.iter().map(|tf| &tf.expr));
        exprs.extend(q.where_clause.iter());
        exprs.extend(q.group_by.iter());
        for e in exprs {
            let mut bad = None;
            e.visit(&mut |x| {
                if let ExprKind::Field(f) = &x.kind {
                    if bad.is_none()
                        && !columns.contains(&f.name)
                        && !explode_aliases.contains_key(&f.name)
                    {
                        bad = Some((f.name.clone(), x.span));
                    }
                }
            });
            if let Some((name, span)) = bad {
                let hint = match did_you_mean(&name, columns) {
                    Some(c) => {
                        format!("did you mean '{c}'? the inner query gives: {}", columns.join(", "))
                    }
                    None => format!("the inner query gives: {}", columns.join(", ")),
                };
                return Err(QueryError::semantic(
                    format!("'{name}' is not a column of the inner query"),
                    Some(span),
                )
                .with_hint(hint));
            }
        }
    }

    let filter = match &q.where_clause {
        Some(w) => {
            no_aggregate(w, "WHERE")?;
            check_type(w, "WHERE", true)?;
            Some(w.clone())
        }
        None => None,
    };
    for g in &q.group_by {
        no_aggregate(g, "GROUP BY")?;
        types::infer(g)?;
    }

    // Every expression that may hold aggregates: type checks and no nesting.
    let mut post_exprs: Vec<&Expr> = Vec::new();
    for item in &q.select.items {
        if let SelectItem::Expr { expr, .. } = item {
            post_exprs.push(expr);
        }
    }
    post_exprs.extend(q.having.iter());
    post_exprs.extend(q.order_by.iter().map(|o| &o.expr));
    let mut specials: Vec<&Expr> = Vec::new();
    let mut simple: Vec<&Expr> = Vec::new();
    for e in &post_exprs {
        types::infer(e)?;
        let mut found: Vec<&Expr> = Vec::new();
        e.visit(&mut |x| {
            if matches!(x.kind, ExprKind::Aggregate(_)) {
                found.push(x);
            }
        });
        for agg in found {
            let ExprKind::Aggregate(a) = &agg.kind else { unreachable!() };
            let mut inner_found = None;
            agg.visit(&mut |x| {
                if inner_found.is_none()
                    && !std::ptr::eq(x, agg)
                    && matches!(x.kind, ExprKind::Aggregate(_))
                {
                    inner_found = Some(x);
                }
            });
            if let Some(inner) = inner_found {
                return Err(QueryError::semantic(
                    format!("aggregate {inner} is inside another aggregate"),
                    Some(inner.span),
                )
                .with_hint("aggregates cannot be nested; compute the inner one in an inner query: SELECT ... FROM (SELECT ...)"));
            }
            if is_special(a) {
                if !specials.iter().any(|s| s.to_string() == agg.to_string()) {
                    specials.push(agg);
                }
            } else {
                simple.push(agg);
            }
        }
    }
    if specials.len() > 1 {
        return Err(QueryError::semantic(
            format!(
                "at most one COUNT DISTINCT, distribution or TOP per query; found {} and {}",
                specials[0], specials[1]
            ),
            Some(specials[1].span),
        )
        .with_hint("run the second one as a separate query"));
    }
    if let Some(h) = &q.having {
        if q.group_by.is_empty() {
            return Err(QueryError::semantic("HAVING needs GROUP BY", Some(h.span))
                .with_hint("filter records with WHERE, or add GROUP BY; to filter a single aggregate, use an outer query"));
        }
        check_type(h, "HAVING", true)?;
    }
    if let Some(o) = q.order_by.iter().find(|o| matches!(o.expr.kind, ExprKind::Literal(_))) {
        return Err(QueryError::semantic(
            format!("ORDER BY {} sorts by a constant", o.expr),
            Some(o.expr.span),
        )
        .with_hint("order by a column or an expression; BQL has no ORDER BY position numbers"));
    }
    if let Some(l) = &q.limit {
        if l.value == 0 {
            return Err(QueryError::semantic("LIMIT must be at least 1", Some(l.span))
                .with_hint("remove LIMIT for the default, or ask for 1 or more"));
        }
    }
    if let Some(special) = specials.first() {
        let ExprKind::Aggregate(a) = &special.kind else { unreachable!() };
        if let Some(s) = simple.first() {
            return Err(QueryError::semantic(
                format!(
                    "one aggregation kind per query: {s} cannot be combined with {}",
                    aggregate_label(a)
                ),
                Some(s.span),
            )
            .with_hint("run them as separate queries"));
        }
        if let Some(g) = q.group_by.first() {
            return Err(QueryError::semantic(
                format!(
                    "one aggregation kind per query: {} cannot be combined with GROUP BY",
                    aggregate_label(a)
                ),
                Some(g.span),
            )
            .with_hint("remove GROUP BY, or use COUNT/SUM/MIN/MAX/AVG per group"));
        }
        if q.select.distinct {
            return Err(QueryError::semantic(
                format!(
                    "one aggregation kind per query: {} cannot be combined with SELECT DISTINCT",
                    aggregate_label(a)
                ),
                Some(q.select.span),
            )
            .with_hint("remove DISTINCT"));
        }
        if let Some(SelectItem::All { span }) =
            q.select.items.iter().find(|i| matches!(i, SelectItem::All { .. }))
        {
            return Err(star_with_aggregates(*span));
        }
        if let Some(SelectItem::TableFunction(tf)) = q.select.items.first() {
            return Err(tf_with_aggregates(tf));
        }
        let out = match a {
            Aggregate::CountDistinct(fields) => count_distinct_stage(q, special, fields, config)?,
            Aggregate::Distribution { kind, value, points } => {
                distribution_stage(q, special, *kind, value, points, config)?
            }
            Aggregate::Top { k, threshold, fields } => {
                top_stage(q, special, *k, *threshold, fields, config)?
            }
            _ => unreachable!("special aggregates only"),
        };
        return Ok(StageOut {
            stage: Stage { explode, filter, ..out.stage },
            columns: out.columns,
        });
    }
    let out = if !simple.is_empty() || !q.group_by.is_empty() || q.select.distinct {
        if let Some(SelectItem::TableFunction(tf)) = q.select.items.first() {
            return Err(tf_with_aggregates(tf));
        }
        group_stage(q, config)?
    } else {
        raw_stage(q, config)?
    };
    Ok(StageOut { stage: Stage { explode, filter, ..out.stage }, columns: out.columns })
}

fn star_with_aggregates(span: ast::Span) -> QueryError {
    QueryError::semantic(
        "SELECT * cannot be used with aggregates, GROUP BY or DISTINCT",
        Some(span),
    )
    .with_hint("select the group keys and aggregates by name")
}

fn tf_with_aggregates(tf: &TableFunction) -> QueryError {
    QueryError::semantic(
        "a table function in SELECT cannot be combined with aggregates or GROUP BY",
        Some(tf.span),
    )
    .with_hint("use LATERAL VIEW EXPLODE(...) AS ... and aggregate the exploded fields")
}

fn empty_stage(aggregation: Aggregation, post: PostAggregation) -> Stage {
    Stage { explode: vec![], filter: None, aggregation, post }
}

fn output_if_needed(visible: Vec<String>, natural: Vec<String>) -> Option<Vec<String>> {
    if visible == natural {
        None
    } else {
        Some(visible)
    }
}

/// RAW: the matching records, projected.
fn raw_stage(q: &Query, config: &QueryConfig) -> Result<StageOut, QueryError> {
    let mut stars = 0;
    let mut fields: Vec<NamedExpr> = Vec::new();
    let mut seen = HashSet::new();
    let mut aliases: HashMap<String, String> = HashMap::new();
    let mut by_text: HashMap<String, String> = HashMap::new();
    for item in &q.select.items {
        match item {
            SelectItem::All { span } => {
                stars += 1;
                if stars > 1 {
                    return Err(QueryError::semantic("'*' is selected twice", Some(*span))
                        .with_hint("select * once"));
                }
            }
            SelectItem::TableFunction(_) => {}
            SelectItem::Expr { expr, alias } => {
                let name = alias.as_ref().map_or_else(|| column_name(expr), |a| a.name.clone());
                check_unique(&name, alias.as_ref().map_or(expr.span, |a| a.span), &mut seen)?;
                if alias.is_some() {
                    aliases.insert(name.clone(), name.clone());
                }
                by_text.entry(expr.to_string()).or_insert_with(|| name.clone());
                fields.push(NamedExpr { name, expr: expr.clone() });
            }
        }
    }
    let whole =
        stars > 0 || q.select.items.iter().any(|i| matches!(i, SelectItem::TableFunction(_)));
    let visible: Vec<String> = fields.iter().map(|f| f.name.clone()).collect();
    let mut hidden = 0;
    let mut order_by = Vec::new();
    for o in &q.order_by {
        let e = &o.expr;
        let resolved = if let Some(name) = bare_name(e).and_then(|n| aliases.get(n)) {
            field_ref(name, e.span)
        } else if let Some(name) = by_text.get(&e.to_string()) {
            field_ref(name, e.span)
        } else if whole {
            e.clone()
        } else {
            // Not projected: project it as a hidden column, sort on it, leave it out of the output.
            let base = column_name(e);
            let mut name = base.clone();
            let mut n = 2;
            while seen.contains(&name) {
                name = format!("{base}#{n}");
                n += 1;
            }
            seen.insert(name.clone());
            by_text.insert(e.to_string(), name.clone());
            fields.push(NamedExpr { name: name.clone(), expr: e.clone() });
            hidden += 1;
            field_ref(&name, e.span)
        };
        order_by.push(OrderBy { expr: resolved, descending: o.descending });
    }
    let size = match &q.limit {
        Some(l) if l.value > config.max_raw_size => {
            return Err(QueryError::limit(
                format!(
                    "LIMIT {} is more than the maximum of {} records",
                    l.value, config.max_raw_size
                ),
                Some(l.span),
            )
            .with_hint(format!("ask for at most {} records", config.max_raw_size)))
        }
        Some(l) => l.value,
        None => config.default_raw_size,
    };
    let projection = match (stars > 0 || whole, fields.is_empty()) {
        (true, true) => Projection::All,
        (true, false) => Projection::AllAnd { fields },
        (false, _) => Projection::Fields { fields },
    };
    let columns = if whole { None } else { Some(visible.clone()) };
    let output = if hidden > 0 { Some(visible) } else { None };
    Ok(StageOut {
        stage: empty_stage(
            Aggregation::Raw { projection, size },
            PostAggregation { order_by, output, ..Default::default() },
        ),
        columns,
    })
}

/// GROUP ALL and GROUP BY (and SELECT DISTINCT), recognising the TOP K form.
struct GroupCtx {
    keys: Vec<NamedExpr>,
    key_index: HashMap<String, String>,
    aggs: Vec<NamedAggregate>,
    agg_index: HashMap<String, String>,
    used: HashSet<String>,
    aliases: HashMap<String, Expr>,
}

impl GroupCtx {
    fn unique(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut n = 2;
        while self.used.contains(&name) {
            name = format!("{base}#{n}");
            n += 1;
        }
        self.used.insert(name.clone());
        name
    }

    fn register(&mut self, agg: &Expr, name: String) -> String {
        let ExprKind::Aggregate(a) = &agg.kind else { unreachable!() };
        let (function, input) = match a {
            Aggregate::Count => (AggregateFunction::Count, None),
            Aggregate::Sum(x) => (AggregateFunction::Sum, Some((**x).clone())),
            Aggregate::Min(x) => (AggregateFunction::Min, Some((**x).clone())),
            Aggregate::Max(x) => (AggregateFunction::Max, Some((**x).clone())),
            Aggregate::Avg(x) => (AggregateFunction::Avg, Some((**x).clone())),
            _ => unreachable!("special aggregates are planned elsewhere"),
        };
        self.agg_index.entry(agg.to_string()).or_insert_with(|| name.clone());
        self.aggs.push(NamedAggregate { name: name.clone(), function, input });
        name
    }

    /// `e` over the aggregated record: keys and aggregates become column references; with
    /// `aliases`, a bare name that is a select alias becomes what it names.
    fn post_expr(&mut self, e: &Expr, aliases: bool) -> Result<Expr, QueryError> {
        if aliases {
            if let Some(x) = bare_name(e).and_then(|n| self.aliases.get(n)) {
                return Ok(Expr::new(x.kind.clone(), e.span));
            }
        }
        let text = e.to_string();
        if let Some(name) = self.key_index.get(&text) {
            return Ok(field_ref(name, e.span));
        }
        match &e.kind {
            ExprKind::Aggregate(_) => {
                let name = match self.agg_index.get(&text) {
                    Some(n) => n.clone(),
                    None => {
                        let name = self.unique(&text);
                        self.register(e, name)
                    }
                };
                Ok(field_ref(&name, e.span))
            }
            ExprKind::Field(_) => {
                let keys: Vec<String> = self.keys.iter().map(|k| k.expr.to_string()).collect();
                let hint = if keys.is_empty() {
                    format!("put '{e}' inside an aggregate, or add GROUP BY {e}")
                } else {
                    format!(
                        "add it to GROUP BY (now: {}) or put it inside an aggregate",
                        keys.join(", ")
                    )
                };
                Err(QueryError::semantic(
                    format!("'{e}' is neither grouped nor aggregated"),
                    Some(e.span),
                )
                .with_hint(hint))
            }
            _ => map_children(e, &mut |c| self.post_expr(c, aliases)),
        }
    }
}

enum Col {
    Key(String),
    Agg(String),
    Comp(String, Expr),
}

fn group_stage(q: &Query, config: &QueryConfig) -> Result<StageOut, QueryError> {
    let mut ctx = GroupCtx {
        keys: vec![],
        key_index: HashMap::new(),
        aggs: vec![],
        agg_index: HashMap::new(),
        used: HashSet::new(),
        aliases: HashMap::new(),
    };
    let items: Vec<(&Expr, Option<&ast::Ident>)> = q
        .select
        .items
        .iter()
        .map(|i| match i {
            SelectItem::Expr { expr, alias } => Ok((expr, alias.as_ref())),
            SelectItem::All { span } => Err(star_with_aggregates(*span)),
            SelectItem::TableFunction(tf) => Err(tf_with_aggregates(tf)),
        })
        .collect::<Result<_, _>>()?;
    let name_of = |e: &Expr, alias: Option<&ast::Ident>| {
        alias.map_or_else(|| column_name(e), |a| a.name.clone())
    };

    if q.select.distinct {
        if let Some(g) = q.group_by.first() {
            return Err(QueryError::semantic(
                "SELECT DISTINCT cannot be combined with GROUP BY",
                Some(g.span),
            )
            .with_hint("DISTINCT already groups by the selected columns; remove one of them"));
        }
        if let Some((e, _)) = items.iter().find(|(e, _)| first_aggregate(e).is_some()) {
            let a = first_aggregate(e).unwrap_or(e);
            return Err(QueryError::semantic(
                "SELECT DISTINCT cannot be combined with aggregates",
                Some(a.span),
            )
            .with_hint("use GROUP BY with the aggregates instead of DISTINCT"));
        }
    }
    let key_exprs: Vec<&Expr> = if q.select.distinct {
        items.iter().map(|(e, _)| *e).collect()
    } else {
        q.group_by.iter().collect()
    };
    for k in key_exprs {
        let text = k.to_string();
        if ctx.key_index.contains_key(&text) {
            continue;
        }
        let name = match items.iter().find(|(e, _)| e.to_string() == text) {
            Some((e, a)) => name_of(e, *a),
            // A hidden key: never a name the user gave a column.
            None => {
                let base = column_name(k);
                let mut name = base.clone();
                let mut n = 2;
                while ctx.used.contains(&name) || items.iter().any(|(e, a)| name_of(e, *a) == name)
                {
                    name = format!("{base}#{n}");
                    n += 1;
                }
                name
            }
        };
        if !ctx.used.insert(name.clone()) {
            return Err(QueryError::semantic(
                format!("duplicate column name '{name}'"),
                Some(k.span),
            )
            .with_hint("give one of the columns another name with AS"));
        }
        ctx.key_index.insert(text, name.clone());
        ctx.keys.push(NamedExpr { name, expr: k.clone() });
    }

    // Pass 1: keys and plain aggregates; pass 2: computations over them.
    let mut seen = HashSet::new();
    let mut cols: Vec<Option<Col>> = Vec::new();
    for (e, alias) in &items {
        let name = name_of(e, *alias);
        check_unique(&name, alias.map_or(e.span, |a| a.span), &mut seen)?;
        let text = e.to_string();
        let col = match (ctx.key_index.get(&text), &e.kind) {
            (Some(key), _) if *key == name => Some(Col::Key(name)),
            (None, ExprKind::Aggregate(_)) => {
                if ctx.used.contains(&name) {
                    return Err(QueryError::semantic(
                        format!("duplicate column name '{name}'"),
                        Some(e.span),
                    )
                    .with_hint("give one of the columns another name with AS"));
                }
                ctx.used.insert(name.clone());
                Some(Col::Agg(ctx.register(e, name)))
            }
            _ => None,
        };
        cols.push(col);
    }
    // Computed columns' names are taken before hidden aggregates are named, so that a hidden
    // column never takes a name the user chose.
    for (i, (e, alias)) in items.iter().enumerate() {
        if cols[i].is_none() && !ctx.used.insert(name_of(e, *alias)) {
            return Err(QueryError::semantic(
                format!("duplicate column name '{}'", name_of(e, *alias)),
                Some(e.span),
            )
            .with_hint("give one of the columns another name with AS"));
        }
    }
    let mut computations = Vec::new();
    for (i, (e, alias)) in items.iter().enumerate() {
        if cols[i].is_none() {
            let name = name_of(e, *alias);
            let rewritten = ctx.post_expr(e, false)?;
            computations.push(NamedExpr { name: name.clone(), expr: rewritten.clone() });
            cols[i] = Some(Col::Comp(name, rewritten));
        }
    }
    let mut visible = Vec::new();
    for (i, (_, alias)) in items.iter().enumerate() {
        let (name, target) = match cols[i].as_ref().expect("every column planned") {
            Col::Key(n) | Col::Agg(n) => (n.clone(), field_ref(n, ast::Span::default())),
            Col::Comp(n, e) => (n.clone(), e.clone()),
        };
        if let Some(a) = alias {
            ctx.aliases.insert(a.name.clone(), target);
        }
        visible.push(name);
    }
    let having = match &q.having {
        Some(h) => Some(ctx.post_expr(h, true)?),
        None => None,
    };
    let mut order_by = Vec::new();
    for o in &q.order_by {
        order_by.push(OrderBy { expr: ctx.post_expr(&o.expr, true)?, descending: o.descending });
    }
    let limit = q.limit.map(|l| l.value);

    // GROUP BY a, COUNT(*) ... ORDER BY COUNT(*) DESC LIMIT k is TOP K, as in Bullet.
    if let Some(top) = as_top_k(q, &ctx, &computations, &having, &order_by, limit, &visible, config)
    {
        return Ok(top);
    }
    let natural: Vec<String> = ctx
        .keys
        .iter()
        .map(|k| k.name.clone())
        .chain(ctx.aggs.iter().map(|a| a.name.clone()))
        .chain(computations.iter().map(|c| c.name.clone()))
        .collect();
    let output = output_if_needed(visible.clone(), natural);
    let aggregation = if ctx.keys.is_empty() {
        Aggregation::GroupAll { aggregates: ctx.aggs }
    } else {
        Aggregation::GroupBy { keys: ctx.keys, aggregates: ctx.aggs, max_groups: config.max_groups }
    };
    Ok(StageOut {
        stage: empty_stage(
            aggregation,
            PostAggregation { computations, having, order_by, limit, output },
        ),
        columns: Some(visible),
    })
}

#[allow(clippy::too_many_arguments)]
fn as_top_k(
    q: &Query,
    ctx: &GroupCtx,
    computations: &[NamedExpr],
    having: &Option<Expr>,
    order_by: &[OrderBy],
    limit: Option<u64>,
    visible: &[String],
    config: &QueryConfig,
) -> Option<StageOut> {
    let k = limit?;
    if q.select.distinct || ctx.keys.is_empty() || !computations.is_empty() || ctx.aggs.len() != 1 {
        return None;
    }
    let count = &ctx.aggs[0];
    if count.function != AggregateFunction::Count || !visible.contains(&count.name) {
        return None;
    }
    if ctx.keys.iter().any(|key| !visible.contains(&key.name)) || k > config.max_top_k {
        return None;
    }
    let is_count = |e: &Expr| bare_name(e) == Some(count.name.as_str());
    match order_by {
        [o] if o.descending && is_count(&o.expr) => {}
        _ => return None,
    }
    let threshold = match having {
        None => None,
        Some(h) => match &h.kind {
            ExprKind::Compare { op, quantifier: None, left, right } if is_count(left) => {
                let n = match &right.kind {
                    ExprKind::Literal(v) => v.as_i64()?,
                    _ => return None,
                };
                match op {
                    CompareOp::Ge if n >= 0 => Some(n as u64),
                    CompareOp::Gt if n >= 0 => Some(n as u64 + 1),
                    _ => return None,
                }
            }
            _ => return None,
        },
    };
    let natural: Vec<String> = ctx
        .keys
        .iter()
        .map(|k| k.name.clone())
        .chain(std::iter::once(count.name.clone()))
        .collect();
    let output = output_if_needed(visible.to_vec(), natural);
    Some(StageOut {
        stage: empty_stage(
            Aggregation::TopK {
                k,
                threshold,
                fields: ctx.keys.clone(),
                count_name: count.name.clone(),
                max_map_size: config.top_k_max_map_size,
            },
            PostAggregation { output, ..Default::default() },
        ),
        columns: Some(visible.to_vec()),
    })
}

fn no_order_or_limit(q: &Query, what: &str) -> Result<(), QueryError> {
    if let Some(o) = q.order_by.first() {
        return Err(QueryError::semantic(
            format!("ORDER BY is not allowed with {what}"),
            Some(o.expr.span),
        )
        .with_hint(format!("{what} has a fixed result; remove ORDER BY")));
    }
    if let Some(l) = &q.limit {
        return Err(QueryError::semantic(
            format!("LIMIT is not allowed with {what}"),
            Some(l.span),
        )
        .with_hint(format!("{what} has a fixed result size; remove LIMIT")));
    }
    Ok(())
}

fn select_exprs(q: &Query) -> Vec<(&Expr, Option<&ast::Ident>)> {
    q.select
        .items
        .iter()
        .filter_map(|i| match i {
            SelectItem::Expr { expr, alias } => Some((expr, alias.as_ref())),
            _ => None,
        })
        .collect()
}

/// COUNT(DISTINCT ...): one number, possibly inside computations (`COUNT(DISTINCT a) * 2`).
fn count_distinct_stage(
    q: &Query,
    agg: &Expr,
    fields: &[Expr],
    config: &QueryConfig,
) -> Result<StageOut, QueryError> {
    no_order_or_limit(q, "COUNT DISTINCT")?;
    let text = agg.to_string();
    let items = select_exprs(q);
    let cols: Vec<String> = items
        .iter()
        .map(|(e, alias)| alias.map_or_else(|| column_name(e), |a| a.name.clone()))
        .collect();
    let mut seen = HashSet::new();
    for ((e, alias), col) in items.iter().zip(&cols) {
        check_unique(col, alias.map_or(e.span, |a| a.span), &mut seen)?;
    }
    // The column holding the count: the select item that is exactly the COUNT DISTINCT, else a
    // hidden column named by its text (made unique if an alias already uses that name).
    let direct = items.iter().position(|(e, _)| e.to_string() == text);
    let name = match direct {
        Some(i) => cols[i].clone(),
        None => {
            let mut name = text.clone();
            let mut n = 2;
            while seen.contains(&name) {
                name = format!("{text}#{n}");
                n += 1;
            }
            name
        }
    };
    let mut computations = Vec::new();
    for (i, ((e, _), col)) in items.iter().zip(&cols).enumerate() {
        if Some(i) != direct {
            let rewritten = replace_special(e, &text, &name, "COUNT DISTINCT")?;
            computations.push(NamedExpr { name: col.clone(), expr: rewritten });
        }
    }
    let visible = cols;
    let natural: Vec<String> =
        std::iter::once(name.clone()).chain(computations.iter().map(|c| c.name.clone())).collect();
    let output = output_if_needed(visible.clone(), natural);
    Ok(StageOut {
        stage: empty_stage(
            Aggregation::CountDistinct {
                name,
                fields: fields.to_vec(),
                nominal_entries: config.count_distinct_nominal_entries,
            },
            PostAggregation { computations, output, ..Default::default() },
        ),
        columns: Some(visible),
    })
}

/// `e` with the one special aggregate (by its text) replaced by its column; any field is an error.
fn replace_special(e: &Expr, text: &str, name: &str, what: &str) -> Result<Expr, QueryError> {
    if e.to_string() == text {
        return Ok(field_ref(name, e.span));
    }
    match &e.kind {
        ExprKind::Field(_) => Err(QueryError::semantic(
            format!("'{e}' cannot be selected beside {what}: the result is one record"),
            Some(e.span),
        )
        .with_hint(format!("select only {what} (and expressions of it), or use GROUP BY with COUNT/SUM/MIN/MAX/AVG"))),
        _ => map_children(e, &mut |c| replace_special(c, text, name, what)),
    }
}

fn only_item<'a>(
    q: &'a Query,
    agg: &Expr,
    what: &str,
) -> Result<Option<&'a ast::Ident>, QueryError> {
    let items = select_exprs(q);
    let text = agg.to_string();
    for (e, _) in &items {
        if e.to_string() != text {
            return Err(QueryError::semantic(
                format!("{what} must be the only item in SELECT"),
                Some(e.span),
            )
            .with_hint(format!("{what} has fixed result columns; remove '{e}'")));
        }
    }
    if items.len() > 1 {
        return Err(QueryError::semantic(
            format!("{what} is selected twice"),
            Some(items[1].0.span),
        )
        .with_hint("select it once"));
    }
    Ok(items.first().and_then(|(_, a)| *a))
}

fn distribution_stage(
    q: &Query,
    agg: &Expr,
    kind: DistributionKind,
    value: &Expr,
    points: &Points,
    config: &QueryConfig,
) -> Result<StageOut, QueryError> {
    let what = match kind {
        DistributionKind::Quantile => "QUANTILE",
        DistributionKind::Freq => "FREQ",
        DistributionKind::CumFreq => "CUMFREQ",
    };
    if let Some(alias) = only_item(q, agg, what)? {
        return Err(QueryError::semantic(format!("{what} cannot be renamed"), Some(alias.span)).with_hint(
            "a distribution gives a record per point with fixed columns (Quantile, Value or Range, Probability, Count); remove AS",
        ));
    }
    check_points(agg, kind, points, config)?;
    let columns: Vec<String> = match kind {
        DistributionKind::Quantile => vec!["Quantile".into(), "Value".into()],
        _ => vec!["Range".into(), "Probability".into(), "Count".into()],
    };
    let mut order_by = Vec::new();
    for o in &q.order_by {
        let mut bad = None;
        o.expr.visit(&mut |x| {
            if let ExprKind::Field(f) = &x.kind {
                if bad.is_none() && !columns.contains(&f.name) {
                    bad = Some(x);
                }
            }
            if bad.is_none() && matches!(x.kind, ExprKind::Aggregate(_)) {
                bad = Some(x);
            }
        });
        if let Some(b) = bad {
            return Err(QueryError::semantic(
                format!("cannot order {what} results by '{b}'"),
                Some(b.span),
            )
            .with_hint(format!("order by the result columns: {}", columns.join(", "))));
        }
        order_by.push(OrderBy { expr: o.expr.clone(), descending: o.descending });
    }
    Ok(StageOut {
        stage: empty_stage(
            Aggregation::Distribution {
                kind,
                value: value.clone(),
                points: points.clone(),
                k: config.distribution_k,
            },
            PostAggregation { order_by, limit: q.limit.map(|l| l.value), ..Default::default() },
        ),
        columns: Some(columns),
    })
}

fn check_points(
    agg: &Expr,
    kind: DistributionKind,
    points: &Points,
    config: &QueryConfig,
) -> Result<(), QueryError> {
    let span = Some(agg.span);
    let max = config.max_distribution_points;
    let count = match points {
        Points::Linear { count } => {
            if *count == 0 {
                return Err(QueryError::semantic("LINEAR needs at least 1 point", span)
                    .with_hint("write LINEAR, n with n >= 1, e.g. LINEAR, 11"));
            }
            *count
        }
        Points::Region { start, end, step } => {
            if step.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) || !step.is_finite() {
                return Err(QueryError::semantic(
                    format!("REGION step must be positive, got {step}"),
                    span,
                )
                .with_hint("write REGION, start, end, step with step > 0"));
            }
            if start.partial_cmp(end) != Some(std::cmp::Ordering::Less) {
                return Err(QueryError::semantic(
                    format!("REGION start {start} must be less than its end {end}"),
                    span,
                )
                .with_hint("write REGION, start, end, step with start < end"));
            }
            ((end - start) / step).floor() as u64 + 1
        }
        Points::Manual { points } => {
            if points.is_empty() {
                return Err(QueryError::semantic("MANUAL needs at least 1 point", span)
                    .with_hint("write MANUAL, p1, p2, ..."));
            }
            if points.windows(2).any(|w| w[0].partial_cmp(&w[1]) != Some(std::cmp::Ordering::Less))
            {
                return Err(QueryError::semantic(
                    "MANUAL points must be strictly increasing",
                    span,
                )
                .with_hint("list each point once, smallest first"));
            }
            points.len() as u64
        }
    };
    if count > max {
        return Err(QueryError::limit(
            format!("{count} distribution points is more than the maximum of {max}"),
            span,
        )
        .with_hint(format!("ask for at most {max} points")));
    }
    if kind == DistributionKind::Quantile {
        let out_of_range = match points {
            Points::Linear { .. } => false,
            Points::Region { start, end, .. } => *start < 0.0 || *end > 1.0,
            Points::Manual { points } => points.iter().any(|p| !(0.0..=1.0).contains(p)),
        };
        if out_of_range {
            return Err(QueryError::semantic(
                "QUANTILE points must be fractions between 0 and 1",
                span,
            )
            .with_hint(
                "e.g. QUANTILE(x, MANUAL, 0.5, 0.9, 0.99); use FREQ or CUMFREQ for value ranges",
            ));
        }
    }
    Ok(())
}

fn top_stage(
    q: &Query,
    agg: &Expr,
    k: u64,
    threshold: Option<u64>,
    fields: &[Expr],
    config: &QueryConfig,
) -> Result<StageOut, QueryError> {
    no_order_or_limit(q, "TOP")?;
    let alias = only_item(q, agg, "TOP")?;
    if k == 0 {
        return Err(QueryError::semantic("TOP needs k of at least 1", Some(agg.span))
            .with_hint("write TOP(k, field, ...) with k >= 1"));
    }
    if k > config.max_top_k {
        return Err(QueryError::limit(
            format!("TOP {k} is more than the maximum of {} items", config.max_top_k),
            Some(agg.span),
        )
        .with_hint(format!("ask for at most {} items", config.max_top_k)));
    }
    if fields.is_empty() {
        return Err(QueryError::semantic("TOP needs at least one field", Some(agg.span))
            .with_hint("write TOP(k, field, ...)"));
    }
    let count_name = alias.map_or_else(|| "Count".to_string(), |a| a.name.clone());
    let mut seen = HashSet::new();
    let mut named = Vec::new();
    for f in fields {
        let name = column_name(f);
        if !seen.insert(name.clone()) {
            return Err(QueryError::semantic(format!("TOP lists '{f}' twice"), Some(f.span))
                .with_hint("list each field once"));
        }
        named.push(NamedExpr { name, expr: f.clone() });
    }
    check_unique(&count_name, alias.map_or(agg.span, |a| a.span), &mut seen)?;
    let columns =
        named.iter().map(|n| n.name.clone()).chain(std::iter::once(count_name.clone())).collect();
    Ok(StageOut {
        stage: empty_stage(
            Aggregation::TopK {
                k,
                threshold,
                fields: named,
                count_name,
                max_map_size: config.top_k_max_map_size,
            },
            PostAggregation::default(),
        ),
        columns: Some(columns),
    })
}
