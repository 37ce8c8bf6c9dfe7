//! Bullet's legacy JSON queries, translated into the same `ast::Query` the equivalent BQL
//! parses to, so that both share one validator and give the same [`crate::Plan`].
//!
//! ```json
//! {"filters": [{"field": "id", "operation": "==", "values": ["c39ba8cfe8"]}],
//!  "aggregation": {"type": "LIMIT", "size": 10}, "duration": 30000}
//! ```
//!
//! Filter values are written as strings in Bullet and cast to the field's type. Here a value that
//! reads as a number or boolean stands for both that value and the string (`"5"` → `5L` and
//! `'5'`, so `==` gives `a IN (5L, '5')` and `>` gives `a > 5L OR a > '5'`): whichever the
//! field's type, one form compares and the other is NULL (a comparison across kinds), which WHERE
//! treats as not matching — the "cannot be cast, so false" of Bullet. Other text is a string,
//! `"null"` an IS NULL test. docs/language.md has the table and the one difference (under NOT).
//!
//! Errors name the JSON path (`filters[0].operation: unknown operation '=~'`); JSON syntax errors
//! point at the line and column serde_json reports, other errors at the value concerned (found by
//! `locate`), and the tree's nodes carry the spans of the JSON they came from, so that errors of
//! the shared validator point into the JSON too.

use crate::ast::{
    Accessor, Aggregate, CompareOp, DistributionKind, Expr, ExprKind, Field, From, Function,
    HistoryClause, Ident, Include, Limit, OrderItem, Points, Query, Select, SelectItem, Span,
    Stream, StreamDuration, TimeBound, TimeLiteral, UnaryOp, Window, WindowKind, WindowUnit,
};
use crate::error::QueryError;
use needle_record::Value;
use serde_json::{Map, Value as Json};
use std::cell::Cell;

mod locate;

/// Translates a Bullet JSON query into a syntax tree.
pub fn parse_json(text: &str) -> Result<Query, QueryError> {
    let json: Json = serde_json::from_str(text).map_err(|err| {
        let offset = offset_of(text, err.line(), err.column());
        let message = err.to_string();
        let message = message.split(" at line").next().unwrap_or(&message).to_string();
        QueryError::syntax(format!("invalid JSON query: {message}"), Span::new(offset, (offset + 1).min(text.len()).max(offset)))
            .with_hint("a Bullet JSON query is an object such as {\"filters\": [...], \"aggregation\": {\"type\": \"RAW\", \"size\": 10}}")
    })?;
    let whole = Span::new(0, text.len());
    Translator { text, span: whole, cur: Cell::new(whole) }.query(&json)
}

fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let mut offset = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            return (offset + column.saturating_sub(1)).min(text.len());
        }
        offset += l.len();
    }
    text.len()
}

struct Translator<'a> {
    text: &'a str,
    /// The whole query.
    span: Span,
    /// Where the part being translated is: the span given to the nodes built now.
    cur: Cell<Span>,
}

const TOP_KEYS: &[&str] =
    &["filters", "projection", "aggregation", "window", "duration", "history"];

impl Translator<'_> {
    /// The span of the value at `path`, or of the nearest enclosing value that exists.
    fn at(&self, path: &str) -> Span {
        let mut p = path;
        loop {
            if let Some(span) = locate::locate(self.text, p, false) {
                return span;
            }
            match p.rfind(['.', '[']) {
                Some(i) => p = &p[..i],
                None => return self.span,
            }
        }
    }

    /// Builds the next nodes with the span of `path`.
    fn enter(&self, path: &str) {
        self.cur.set(self.at(path));
    }

    fn err(&self, path: &str, message: impl AsRef<str>) -> QueryError {
        QueryError::semantic(format!("{path}: {}", message.as_ref()), Some(self.at(path)))
    }

    fn e(&self, kind: ExprKind) -> Expr {
        Expr::new(kind, self.cur.get())
    }

    fn ident(&self, name: &str) -> Ident {
        Ident { name: name.to_string(), span: self.cur.get() }
    }

    fn object<'a>(
        &self,
        path: &str,
        v: &'a Json,
        allowed: &[&str],
    ) -> Result<&'a Map<String, Json>, QueryError> {
        let obj = v.as_object().ok_or_else(|| self.err(path, "must be an object"))?;
        for key in obj.keys() {
            if !allowed.contains(&key.as_str()) {
                let mut e = self.err(path, format!("unknown key '{key}'"));
                let key_path = if path == "query" { key.clone() } else { format!("{path}.{key}") };
                if let Some(span) = locate::locate(self.text, &key_path, true) {
                    e.span = Some(span);
                }
                let best = allowed
                    .iter()
                    .map(|a| (strsim::jaro_winkler(&key.to_lowercase(), &a.to_lowercase()), a))
                    .filter(|(s, _)| *s > 0.8)
                    .max_by(|a, b| a.0.total_cmp(&b.0));
                e = e.with_hint(match best {
                    Some((_, a)) => format!("did you mean '{a}'?"),
                    None => format!("allowed here: {}", allowed.join(", ")),
                });
                return Err(e);
            }
        }
        Ok(obj)
    }

    /// `"history": {"from": ..., "to": ...}`: with `to`, the range `[from, to)` alone
    /// (`HISTORY(from, to)`); without it, the stored past from `from` then live records for
    /// `duration` when the query has one (`SINCE from`), else the past up to now
    /// (`HISTORY(from)`). Times are numbers (ms) or strings, as in BQL.
    fn history(&self, v: &Json, has_duration: bool) -> Result<HistoryClause, QueryError> {
        let obj = self.object("history", v, &["from", "to"])?;
        let bound = |key: &str| -> Result<Option<TimeBound>, QueryError> {
            let path = format!("history.{key}");
            let span = self.at(&path);
            match obj.get(key) {
                None | Some(Json::Null) => Ok(None),
                Some(Json::String(text)) => {
                    Ok(Some(TimeBound { value: TimeLiteral::Text(text.clone()), span }))
                }
                Some(n @ Json::Number(_)) => {
                    let ms = self.uint(&path, n)?;
                    let ms = i64::try_from(ms).map_err(|_| self.err(&path, "is too large"))?;
                    Ok(Some(TimeBound { value: TimeLiteral::Millis(ms), span }))
                }
                Some(other) => Err(self.err(
                    &path,
                    format!("must be ms since the epoch or a time string, got {other}"),
                )),
            }
        };
        let from = bound("from")?.ok_or_else(|| {
            self.err("history", "needs a \"from\"").with_hint(
                "{\"history\": {\"from\": \"-1h\"}} reads the last hour; add \"to\" to end \
                 the range earlier",
            )
        })?;
        let to = bound("to")?;
        let live = to.is_none() && has_duration;
        Ok(HistoryClause { from, to, live, span: self.at("history") })
    }

    fn uint(&self, path: &str, v: &Json) -> Result<u64, QueryError> {
        match v {
            Json::Number(n) if n.as_u64().is_some() => Ok(n.as_u64().unwrap_or_default()),
            Json::Number(n) if n.as_f64().is_some_and(|x| x >= 0.0 && x.fract() == 0.0) => {
                Ok(n.as_f64().unwrap_or_default() as u64)
            }
            Json::String(s) if s.trim().parse::<u64>().is_ok() => {
                Ok(s.trim().parse().unwrap_or_default())
            }
            _ => Err(self.err(path, format!("must be a non-negative integer, got {v}"))),
        }
    }

    fn number(&self, path: &str, v: &Json) -> Result<f64, QueryError> {
        match v {
            Json::Number(n) => n.as_f64().ok_or_else(|| self.err(path, "must be a number")),
            Json::String(s) => {
                s.trim().parse().map_err(|_| self.err(path, format!("must be a number, got {v}")))
            }
            _ => Err(self.err(path, format!("must be a number, got {v}"))),
        }
    }

    fn string<'a>(&self, path: &str, v: &'a Json) -> Result<&'a str, QueryError> {
        v.as_str().ok_or_else(|| self.err(path, format!("must be a string, got {v}")))
    }

    /// `"a.b.c"` → the field `a` with keys `b`, `c` (Bullet's map subfield notation).
    fn field(&self, path: &str, name: &str) -> Result<Expr, QueryError> {
        let mut parts = name.split('.');
        let first = parts.next().unwrap_or_default();
        if first.is_empty() || name.split('.').any(str::is_empty) {
            return Err(self
                .err(path, format!("invalid field name '{name}'"))
                .with_hint("write a field as \"name\" or \"map.key\""));
        }
        let saved = self.cur.get();
        self.enter(path);
        let path = parts.map(|p| Accessor::Key(p.to_string())).collect();
        let e = self.e(ExprKind::Field(Field { name: first.to_string(), path, hint: None }));
        self.cur.set(saved);
        Ok(e)
    }

    fn query(&self, json: &Json) -> Result<Query, QueryError> {
        let obj = self.object("query", json, TOP_KEYS)?;
        let where_clause = match obj.get("filters") {
            None | Some(Json::Null) => None,
            Some(Json::Array(clauses)) => self.and_all("filters", clauses)?,
            Some(other) => {
                return Err(self.err("filters", format!("must be a list of filters, got {other}")))
            }
        };
        let duration = match obj.get("duration") {
            None | Some(Json::Null) => StreamDuration::Default,
            Some(v) => StreamDuration::Millis(self.uint("duration", v)?),
        };
        let window = match obj.get("window") {
            None | Some(Json::Null) => None,
            Some(w) => Some(self.window(w)?),
        };
        let has_duration = !matches!(obj.get("duration"), None | Some(Json::Null));
        let history = match obj.get("history") {
            None | Some(Json::Null) => None,
            Some(h) => Some(self.history(h, has_duration)?),
        };
        let projection = match obj.get("projection") {
            None | Some(Json::Null) => None,
            Some(p) => Some(self.projection(p)?),
        };
        let mut q = Query {
            select: Select { distinct: false, items: vec![], span: self.span },
            from: From::Stream(Stream { duration, span: self.at("duration"), history }),
            lateral_views: vec![],
            where_clause,
            group_by: vec![],
            having: None,
            order_by: vec![],
            window,
            limit: None,
            span: self.span,
        };
        let agg = match obj.get("aggregation") {
            None | Some(Json::Null) => None,
            Some(a) => {
                Some(self.object("aggregation", a, &["type", "size", "fields", "attributes"])?)
            }
        };
        let kind = match agg.and_then(|a| a.get("type")) {
            None | Some(Json::Null) => "RAW".to_string(),
            Some(t) => self.string("aggregation.type", t)?.trim().to_uppercase(),
        };
        let size = match agg.and_then(|a| a.get("size")) {
            None | Some(Json::Null) => None,
            Some(v) => Some(self.uint("aggregation.size", v)?),
        };
        let fields: Vec<(String, String)> = match agg.and_then(|a| a.get("fields")) {
            None | Some(Json::Null) => vec![],
            Some(Json::Object(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    Json::String(s) => Ok((k.clone(), s.clone())),
                    Json::Null => Ok((k.clone(), String::new())),
                    other => Err(self.err(
                        &format!("aggregation.fields.{k}"),
                        format!("must be a new name (a string), got {other}"),
                    )),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(self.err(
                    "aggregation.fields",
                    format!("must be an object of field to new name, got {other}"),
                ))
            }
        };
        let empty = Map::new();
        let attributes = match agg.and_then(|a| a.get("attributes")) {
            None | Some(Json::Null) => &empty,
            Some(a) => a
                .as_object()
                .ok_or_else(|| self.err("aggregation.attributes", "must be an object"))?,
        };
        if kind != "RAW" && kind != "LIMIT" && projection.is_some() {
            return Err(self
                .err("projection", format!("a projection only applies to RAW queries, not {kind}"))
                .with_hint("name the fields in the aggregation's \"fields\" instead"));
        }
        let limit = |n: u64| Some(Limit { value: n, span: self.at("aggregation.size") });
        match kind.as_str() {
            "RAW" | "LIMIT" => {
                q.select.items =
                    projection.unwrap_or_else(|| vec![SelectItem::All { span: self.span }]);
                q.limit = size.and_then(limit);
            }
            "GROUP" => {
                self.check_attributes(attributes, &["operations"])?;
                let ops = match attributes.get("operations") {
                    None | Some(Json::Null) => vec![],
                    Some(Json::Array(ops)) => ops.clone(),
                    Some(other) => {
                        return Err(self.err(
                            "aggregation.attributes.operations",
                            format!("must be a list, got {other}"),
                        ))
                    }
                };
                if fields.is_empty() && ops.is_empty() {
                    return Err(self.err("aggregation", "GROUP needs fields, operations or both")
                        .with_hint("e.g. {\"type\": \"GROUP\", \"attributes\": {\"operations\": [{\"type\": \"COUNT\"}]}}"));
                }
                for (name, new) in &fields {
                    let key = self.field(&format!("aggregation.fields.{name}"), name)?;
                    self.enter(&format!("aggregation.fields.{name}"));
                    q.select.items.push(self.select(key.clone(), new));
                    q.group_by.push(key);
                }
                for (i, op) in ops.iter().enumerate() {
                    q.select.items.push(
                        self.operation(&format!("aggregation.attributes.operations[{i}]"), op)?,
                    );
                }
                q.limit = size.and_then(limit);
            }
            "COUNT DISTINCT" => {
                self.enter("aggregation");
                self.check_attributes(attributes, &["newName"])?;
                if fields.is_empty() {
                    return Err(
                        self.err("aggregation.fields", "COUNT DISTINCT needs at least one field")
                    );
                }
                let exprs = fields
                    .iter()
                    .map(|(name, _)| self.field(&format!("aggregation.fields.{name}"), name))
                    .collect::<Result<_, _>>()?;
                let name =
                    self.new_name(attributes)?.unwrap_or_else(|| "COUNT DISTINCT".to_string());
                let agg = self.e(ExprKind::Aggregate(Aggregate::CountDistinct(exprs)));
                q.select.items.push(SelectItem::Expr { expr: agg, alias: Some(self.ident(&name)) });
            }
            "DISTRIBUTION" => {
                self.enter("aggregation");
                self.check_attributes(
                    attributes,
                    &["type", "numberOfPoints", "start", "end", "increment", "points"],
                )?;
                if fields.len() != 1 {
                    return Err(self.err(
                        "aggregation.fields",
                        format!("DISTRIBUTION needs exactly one field, got {}", fields.len()),
                    ));
                }
                let value =
                    self.field(&format!("aggregation.fields.{}", fields[0].0), &fields[0].0)?;
                let kind = match attributes
                    .get("type")
                    .map(|t| self.string("aggregation.attributes.type", t))
                    .transpose()?
                {
                    None => {
                        return Err(self.err(
                            "aggregation.attributes.type",
                            "missing: one of QUANTILE, PMF, CDF",
                        ))
                    }
                    Some(t) => match t.trim().to_uppercase().as_str() {
                        "QUANTILE" => DistributionKind::Quantile,
                        "PMF" | "FREQ" => DistributionKind::Freq,
                        "CDF" | "CUMFREQ" => DistributionKind::CumFreq,
                        other => {
                            return Err(self
                                .err(
                                    "aggregation.attributes.type",
                                    format!("unknown distribution type '{other}'"),
                                )
                                .with_hint("one of QUANTILE, PMF, CDF"))
                        }
                    },
                };
                let points = self.points(attributes)?;
                q.select.items.push(SelectItem::Expr {
                    expr: self.e(ExprKind::Aggregate(Aggregate::Distribution {
                        kind,
                        value: Box::new(value),
                        points,
                    })),
                    alias: None,
                });
            }
            "TOP K" => {
                self.enter("aggregation");
                self.check_attributes(attributes, &["threshold", "newName"])?;
                let k = size.ok_or_else(|| {
                    self.err("aggregation.size", "TOP K needs a size (the k)")
                        .with_hint("e.g. \"size\": 10")
                })?;
                if fields.is_empty() {
                    return Err(self.err("aggregation.fields", "TOP K needs at least one field"));
                }
                let threshold = match attributes.get("threshold") {
                    None | Some(Json::Null) => None,
                    Some(t) => Some(self.uint("aggregation.attributes.threshold", t)?),
                };
                let new_name = self.new_name(attributes)?;
                let exprs: Vec<(Expr, &String)> = fields
                    .iter()
                    .map(|(name, new)| {
                        Ok((self.field(&format!("aggregation.fields.{name}"), name)?, new))
                    })
                    .collect::<Result<_, QueryError>>()?;
                let renamed =
                    exprs.iter().any(|(e, new)| !new.is_empty() && **new != e.to_string());
                if renamed {
                    // Renamed fields: the GROUP BY form, which the validator recognises as TOP K.
                    let count = self.e(ExprKind::Aggregate(Aggregate::Count));
                    for (e, new) in &exprs {
                        q.select.items.push(self.select(e.clone(), new));
                        q.group_by.push(e.clone());
                    }
                    let count_name = new_name.unwrap_or_else(|| "Count".to_string());
                    q.select.items.push(SelectItem::Expr {
                        expr: count.clone(),
                        alias: Some(self.ident(&count_name)),
                    });
                    if let Some(t) = threshold {
                        q.having = Some(self.e(ExprKind::Compare {
                            op: CompareOp::Ge,
                            quantifier: None,
                            left: Box::new(count.clone()),
                            right: Box::new(self.e(ExprKind::Literal(Value::Long(t as i64)))),
                        }));
                    }
                    q.order_by = vec![OrderItem { expr: count, descending: true }];
                    q.limit = limit(k);
                } else {
                    let top = Aggregate::Top {
                        k,
                        threshold,
                        fields: exprs.into_iter().map(|(e, _)| e).collect(),
                    };
                    q.select.items.push(SelectItem::Expr {
                        expr: self.e(ExprKind::Aggregate(top)),
                        alias: new_name.map(|n| self.ident(&n)),
                    });
                }
            }
            other => {
                return Err(self
                    .err("aggregation.type", format!("unknown aggregation type '{other}'"))
                    .with_hint("one of RAW, LIMIT, GROUP, COUNT DISTINCT, DISTRIBUTION, TOP K"))
            }
        }
        Ok(q)
    }

    fn check_attributes(
        &self,
        attributes: &Map<String, Json>,
        allowed: &[&str],
    ) -> Result<(), QueryError> {
        self.object("aggregation.attributes", &Json::Object(attributes.clone()), allowed)
            .map(|_| ())
    }

    fn new_name(&self, attributes: &Map<String, Json>) -> Result<Option<String>, QueryError> {
        match attributes.get("newName") {
            None | Some(Json::Null) => Ok(None),
            Some(v) => Ok(Some(self.string("aggregation.attributes.newName", v)?.to_string())
                .filter(|s| !s.is_empty())),
        }
    }

    fn select(&self, expr: Expr, new: &str) -> SelectItem {
        let alias = (!new.is_empty() && new != expr.to_string()).then(|| self.ident(new));
        SelectItem::Expr { expr, alias }
    }

    fn projection(&self, p: &Json) -> Result<Vec<SelectItem>, QueryError> {
        let obj = self.object("projection", p, &["fields"])?;
        let fields = match obj.get("fields") {
            Some(Json::Object(m)) if !m.is_empty() => m,
            _ => {
                return Err(self
                    .err("projection.fields", "must be a non-empty object of field to new name"))
            }
        };
        fields
            .iter()
            .map(|(old, new)| {
                let path = format!("projection.fields.{old}");
                let new = match new {
                    Json::String(s) => s.as_str(),
                    Json::Null => "",
                    other => {
                        return Err(
                            self.err(&path, format!("must be a new name (a string), got {other}"))
                        )
                    }
                };
                self.enter(&path);
                Ok(self.select(self.field(&path, old)?, new))
            })
            .collect()
    }

    fn operation(&self, path: &str, op: &Json) -> Result<SelectItem, QueryError> {
        self.enter(path);
        let obj = self.object(path, op, &["type", "field", "newName"])?;
        let kind = self
            .string(&format!("{path}.type"), obj.get("type").unwrap_or(&Json::Null))?
            .trim()
            .to_uppercase();
        let field = match obj.get("field") {
            None | Some(Json::Null) => None,
            Some(f) => Some(
                self.field(&format!("{path}.field"), self.string(&format!("{path}.field"), f)?)?,
            ),
        };
        let need = |f: Option<Expr>| {
            f.map(Box::new)
                .ok_or_else(|| self.err(&format!("{path}.field"), format!("{kind} needs a field")))
        };
        let agg = match kind.as_str() {
            "COUNT" => Aggregate::Count,
            "SUM" => Aggregate::Sum(need(field)?),
            "MIN" => Aggregate::Min(need(field)?),
            "MAX" => Aggregate::Max(need(field)?),
            "AVG" => Aggregate::Avg(need(field)?),
            other => {
                return Err(self
                    .err(&format!("{path}.type"), format!("unknown operation '{other}'"))
                    .with_hint("one of COUNT, SUM, MIN, MAX, AVG"))
            }
        };
        let alias = match obj.get("newName") {
            None | Some(Json::Null) => None,
            Some(n) => Some(self.string(&format!("{path}.newName"), n)?)
                .filter(|s| !s.is_empty())
                .map(|s| self.ident(s)),
        };
        Ok(SelectItem::Expr { expr: self.e(ExprKind::Aggregate(agg)), alias })
    }

    fn points(&self, a: &Map<String, Json>) -> Result<Points, QueryError> {
        let p = "aggregation.attributes";
        let has = |k: &str| a.get(k).is_some_and(|v| !v.is_null());
        let forms =
            [has("numberOfPoints"), has("start") || has("end") || has("increment"), has("points")];
        if forms.iter().filter(|f| **f).count() != 1 {
            return Err(self.err(p, "give exactly one of numberOfPoints, start/end/increment or points")
                .with_hint("e.g. \"numberOfPoints\": 11, or \"start\": 0, \"end\": 100, \"increment\": 10, or \"points\": [0.5, 0.9]"));
        }
        if forms[0] {
            return Ok(Points::Linear {
                count: self.uint(&format!("{p}.numberOfPoints"), &a["numberOfPoints"])?,
            });
        }
        if forms[1] {
            let get = |k: &str| match a.get(k) {
                Some(v) if !v.is_null() => self.number(&format!("{p}.{k}"), v),
                _ => {
                    Err(self
                        .err(&format!("{p}.{k}"), "missing (start, end and increment go together)"))
                }
            };
            return Ok(Points::Region {
                start: get("start")?,
                end: get("end")?,
                step: get("increment")?,
            });
        }
        match &a["points"] {
            Json::Array(items) => Ok(Points::Manual {
                points: items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| self.number(&format!("{p}.points[{i}]"), v))
                    .collect::<Result<_, _>>()?,
            }),
            other => {
                Err(self
                    .err(&format!("{p}.points"), format!("must be a list of numbers, got {other}")))
            }
        }
    }

    fn window(&self, w: &Json) -> Result<Window, QueryError> {
        let obj = self.object("window", w, &["emit", "include"])?;
        let emit =
            self.object("window.emit", obj.get("emit").unwrap_or(&Json::Null), &["type", "every"])?;
        let unit = self.unit("window.emit.type", emit.get("type"))?;
        let every = self.uint("window.emit.every", emit.get("every").unwrap_or(&Json::Null))?;
        let kind = match obj.get("include") {
            None | Some(Json::Null) => WindowKind::Tumbling { every, unit },
            Some(inc) => {
                let inc = self.object("window.include", inc, &["type", "first"])?;
                let t = self
                    .string("window.include.type", inc.get("type").unwrap_or(&Json::Null))?
                    .trim()
                    .to_uppercase();
                let include = match t.as_str() {
                    "ALL" => Include::All,
                    "FIRST" | "TIME" | "RECORD" => {
                        let first_unit = match t.as_str() {
                            "TIME" => WindowUnit::Time,
                            "RECORD" => WindowUnit::Record,
                            _ => unit,
                        };
                        let count = self.uint(
                            "window.include.first",
                            inc.get("first").unwrap_or(&Json::Null),
                        )?;
                        Include::First { count, unit: first_unit }
                    }
                    other => {
                        return Err(self
                            .err("window.include.type", format!("unknown include type '{other}'"))
                            .with_hint("one of ALL, FIRST (or TIME, RECORD, as in Bullet)"))
                    }
                };
                WindowKind::Every { every, unit, include }
            }
        };
        Ok(Window { kind, span: self.at("window") })
    }

    fn unit(&self, path: &str, v: Option<&Json>) -> Result<WindowUnit, QueryError> {
        match self.string(path, v.unwrap_or(&Json::Null))?.trim().to_uppercase().as_str() {
            "TIME" => Ok(WindowUnit::Time),
            "RECORD" => Ok(WindowUnit::Record),
            other => Err(self
                .err(path, format!("unknown window type '{other}'"))
                .with_hint("one of TIME, RECORD")),
        }
    }

    fn and_all(&self, path: &str, clauses: &[Json]) -> Result<Option<Expr>, QueryError> {
        let mut out: Option<Expr> = None;
        for (i, c) in clauses.iter().enumerate() {
            let e = self.filter(&format!("{path}[{i}]"), c)?;
            out = Some(match out {
                None => e,
                Some(prev) => self.binary(crate::ast::BinaryOp::And, prev, e),
            });
        }
        Ok(out)
    }

    fn binary(&self, op: crate::ast::BinaryOp, l: Expr, r: Expr) -> Expr {
        self.e(ExprKind::Binary { op, left: Box::new(l), right: Box::new(r) })
    }

    fn any_of(&self, exprs: Vec<Expr>) -> Expr {
        let mut it = exprs.into_iter();
        let first = it.next().expect("at least one value: checked");
        it.fold(first, |acc, e| self.binary(crate::ast::BinaryOp::Or, acc, e))
    }

    fn filter(&self, path: &str, c: &Json) -> Result<Expr, QueryError> {
        self.enter(path);
        let obj = self.object(path, c, &["field", "operation", "values", "clauses"])?;
        let op = self
            .string(&format!("{path}.operation"), obj.get("operation").unwrap_or(&Json::Null))?
            .trim()
            .to_uppercase();
        match op.as_str() {
            "AND" | "OR" | "NOT" => {
                let clauses = match obj.get("clauses") {
                    Some(Json::Array(c)) if !c.is_empty() => c,
                    _ => return Err(self.err(&format!("{path}.clauses"), format!("{op} needs a non-empty list of clauses"))),
                };
                let exprs = clauses
                    .iter()
                    .enumerate()
                    .map(|(i, c)| self.filter(&format!("{path}.clauses[{i}]"), c))
                    .collect::<Result<Vec<_>, _>>()?;
                self.enter(path);
                let bop = if op == "OR" { crate::ast::BinaryOp::Or } else { crate::ast::BinaryOp::And };
                let mut it = exprs.into_iter();
                let first = it.next().expect("non-empty: checked");
                let all = it.fold(first, |acc, e| self.binary(bop, acc, e));
                if op == "NOT" {
                    if clauses.len() != 1 {
                        return Err(self.err(&format!("{path}.clauses"), "NOT takes exactly one clause")
                            .with_hint("wrap several clauses in an AND or OR first"));
                    }
                    return Ok(self.e(ExprKind::Unary { op: UnaryOp::Not, operand: Box::new(all) }));
                }
                Ok(all)
            }
            "==" | "!=" | "<" | "<=" | ">" | ">=" | "RLIKE" | "SIZEIS" | "CONTAINSKEY" | "CONTAINSVALUE" => {
                let name = self.string(&format!("{path}.field"), obj.get("field").unwrap_or(&Json::Null))?;
                let field = self.field(&format!("{path}.field"), name)?;
                let values = match obj.get("values") {
                    Some(Json::Array(v)) if !v.is_empty() => v,
                    _ => return Err(self.err(&format!("{path}.values"), "needs a non-empty list of values")),
                };
                self.relational(path, &op, field, values)
            }
            other => Err(self.err(&format!("{path}.operation"), format!("unknown operation '{other}'")).with_hint(
                "one of == != < <= > >= RLIKE SIZEIS CONTAINSKEY CONTAINSVALUE, or AND OR NOT with clauses",
            )),
        }
    }

    /// A Bullet value as the literals it may stand for: a number or boolean written as text
    /// (`"5"`, `"true"`) is both that value and the string (`5L` and `'5'`), so that it compares
    /// with numeric and string fields alike, as Bullet's cast to the field's type does; other text
    /// is a string; `"null"` / JSON null gives none (an IS NULL test).
    fn forms(&self, v: &Json) -> Vec<Expr> {
        let values = match v {
            Json::Null => vec![],
            Json::Bool(b) => vec![Value::Bool(*b), Value::String(b.to_string())],
            Json::Number(n) => vec![
                match n.as_i64() {
                    Some(i) => Value::Long(i),
                    None => Value::Double(n.as_f64().unwrap_or_default()),
                },
                Value::String(n.to_string()),
            ],
            Json::String(s) => {
                let t = s.trim();
                let numeric = !t.is_empty()
                    && t.chars().all(|c| c.is_ascii_digit() || "+-.eE".contains(c))
                    && t.chars().any(|c| c.is_ascii_digit());
                let text = Value::String(s.clone());
                if t.eq_ignore_ascii_case("null") {
                    vec![]
                } else if numeric && t.parse::<i64>().is_ok() {
                    vec![Value::Long(t.parse().unwrap_or_default()), text]
                } else if numeric && t.parse::<f64>().is_ok() {
                    vec![Value::Double(t.parse().unwrap_or_default()), text]
                } else if t.eq_ignore_ascii_case("true") || t.eq_ignore_ascii_case("false") {
                    vec![Value::Bool(t.eq_ignore_ascii_case("true")), text]
                } else {
                    vec![text]
                }
            }
            other => vec![Value::String(other.to_string())],
        };
        values.into_iter().map(|v| self.e(ExprKind::Literal(v))).collect()
    }

    fn text_of(&self, v: &Json) -> String {
        match v {
            Json::String(s) => s.clone(),
            other => other.to_string(),
        }
    }

    fn relational(
        &self,
        path: &str,
        op: &str,
        field: Expr,
        values: &[Json],
    ) -> Result<Expr, QueryError> {
        let lit = |v: Value| self.e(ExprKind::Literal(v));
        let call = |function: Function, arg: Expr| {
            self.e(ExprKind::Call { function, args: vec![field.clone(), arg] })
        };
        // Each literal points at its value in the text; the tests at the whole clause.
        let groups: Vec<Vec<Expr>> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                self.enter(&format!("{path}.values[{i}]"));
                self.forms(v)
            })
            .collect();
        let nulls = groups.iter().filter(|g| g.is_empty()).count();
        let groups: Vec<Vec<Expr>> = groups.into_iter().filter(|g| !g.is_empty()).collect();
        let patterns: Vec<Expr> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                self.enter(&format!("{path}.values[{i}]"));
                lit(Value::String(self.text_of(v)))
            })
            .collect();
        self.enter(path);
        let is_null =
            |negated: bool| self.e(ExprKind::IsNull { negated, value: Box::new(field.clone()) });
        let compare = |op: CompareOp, r: Expr| {
            self.e(ExprKind::Compare {
                op,
                quantifier: None,
                left: Box::new(field.clone()),
                right: Box::new(r),
            })
        };
        Ok(match op {
            "==" | "!=" => {
                let eq = op == "==";
                let list = |items: Vec<Expr>| Box::new(self.e(ExprKind::List(items)));
                let all: Vec<Expr> = groups.iter().flatten().cloned().collect();
                let main = if all.is_empty() {
                    None
                } else if all.len() == 1 {
                    let op = if eq { CompareOp::Eq } else { CompareOp::Ne };
                    Some(compare(op, all[0].clone()))
                } else if eq || groups.iter().all(|g| g.len() == 1) {
                    // Equal to any of them / different from all of them.
                    Some(self.e(ExprKind::In {
                        negated: !eq,
                        value: Box::new(field.clone()),
                        list: list(all),
                    }))
                } else {
                    // Different from each value, in whichever form fits the field's type.
                    let each: Vec<Expr> = groups
                        .iter()
                        .map(|g| {
                            self.any_of(
                                g.iter().map(|v| compare(CompareOp::Ne, v.clone())).collect(),
                            )
                        })
                        .collect();
                    let mut it = each.into_iter();
                    let first = it.next().expect("values: checked non-empty");
                    Some(it.fold(first, |acc, e| self.binary(crate::ast::BinaryOp::And, acc, e)))
                };
                match (main, nulls > 0) {
                    (Some(m), false) => m,
                    (None, _) => is_null(!eq),
                    (Some(m), true) if eq => {
                        self.binary(crate::ast::BinaryOp::Or, is_null(false), m)
                    }
                    (Some(m), true) => self.binary(crate::ast::BinaryOp::And, is_null(true), m),
                }
            }
            "<" | "<=" | ">" | ">=" => {
                if nulls > 0 {
                    return Err(self
                        .err(&format!("{path}.values"), format!("{op} cannot compare with null")));
                }
                let cop = match op {
                    "<" => CompareOp::Lt,
                    "<=" => CompareOp::Le,
                    ">" => CompareOp::Gt,
                    _ => CompareOp::Ge,
                };
                self.any_of(groups.into_iter().flatten().map(|v| compare(cop, v)).collect())
            }
            "RLIKE" => {
                if patterns.len() == 1 {
                    self.e(ExprKind::Rlike {
                        negated: false,
                        any: false,
                        value: Box::new(field.clone()),
                        pattern: Box::new(patterns[0].clone()),
                    })
                } else {
                    self.e(ExprKind::Rlike {
                        negated: false,
                        any: true,
                        value: Box::new(field.clone()),
                        pattern: Box::new(self.e(ExprKind::List(patterns))),
                    })
                }
            }
            "SIZEIS" => {
                let sizes = values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let n = self.uint(&format!("{path}.values[{i}]"), v)?;
                        Ok(call(Function::SizeIs, lit(Value::Long(n as i64))))
                    })
                    .collect::<Result<Vec<_>, QueryError>>()?;
                self.any_of(sizes)
            }
            "CONTAINSKEY" => self.any_of(
                values
                    .iter()
                    .map(|v| call(Function::ContainsKey, lit(Value::String(self.text_of(v)))))
                    .collect(),
            ),
            _ => {
                let mut items: Vec<Expr> = groups
                    .into_iter()
                    .flatten()
                    .map(|v| call(Function::ContainsValue, v))
                    .collect();
                if nulls > 0 {
                    items.push(call(Function::ContainsValue, lit(Value::Null)));
                }
                self.any_of(items)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> Query {
        parse_json(text).unwrap_or_else(|e| panic!("{e:?}"))
    }
    fn err(text: &str) -> QueryError {
        parse_json(text).expect_err("must be rejected")
    }

    #[test]
    fn filters_become_one_anded_where() {
        let query =
            q(r#"{"filters": [{"field": "id", "operation": "==", "values": ["c39ba8cfe8"]},
            {"field": "m.k", "operation": ">", "values": ["5", "2.5"]}],
            "aggregation": {"type": "LIMIT", "size": 10}, "duration": 20000}"#);
        assert_eq!(
            query.where_clause.unwrap().to_string(),
            "id = 'c39ba8cfe8' AND (m.k > 5L OR m.k > '5' OR m.k > 2.5 OR m.k > '2.5')"
        );
        assert_eq!(query.limit.unwrap().value, 10);
        assert!(matches!(
            query.from,
            From::Stream(Stream { duration: StreamDuration::Millis(20000), .. })
        ));
    }

    #[test]
    fn several_values_mean_any_and_null_means_is_null() {
        let query =
            q(r#"{"filters": [{"field": "a", "operation": "!=", "values": ["x", "y", "null"]}]}"#);
        assert_eq!(
            query.where_clause.unwrap().to_string(),
            "a IS NOT NULL AND a NOT IN ('x', 'y')"
        );
        let query = q(r#"{"filters": [{"field": "a", "operation": "!=", "values": ["x", "5"]},
            {"field": "b", "operation": "==", "values": ["true", 7]}]}"#);
        assert_eq!(
            query.where_clause.unwrap().to_string(),
            "a != 'x' AND (a != 5L OR a != '5') AND b IN (TRUE, 'true', 7L, '7')"
        );
        let query = q(
            r#"{"filters": [{"operation": "NOT", "clauses": [{"field": "a", "operation": "RLIKE", "values": ["x.*", "y"]}]}]}"#,
        );
        assert_eq!(query.where_clause.unwrap().to_string(), "NOT a RLIKE ANY ['x.*', 'y']");
    }

    #[test]
    fn errors_name_the_json_path() {
        let e = err(r#"{"filters": [{"field": "a", "operation": "=~", "values": ["x"]}]}"#);
        assert_eq!(e.message, "filters[0].operation: unknown operation '=~'");
        let e = err(r#"{"filter": []}"#);
        assert_eq!(e.hint.as_deref(), Some("did you mean 'filters'?"));
        let e = err("{\n  \"filters\": [,]\n}");
        assert_eq!(e.line_column("{\n  \"filters\": [,]\n}"), (2, 15));
    }

    #[test]
    fn top_k_with_renamed_fields_uses_the_group_by_form() {
        let query = q(r#"{"aggregation": {"type": "TOP K", "size": 3, "fields": {"a": "A"},
            "attributes": {"threshold": 5}}}"#);
        assert_eq!(query.group_by.len(), 1);
        assert_eq!(query.having.unwrap().to_string(), "COUNT(*) >= 5L");
        assert_eq!(query.limit.unwrap().value, 3);
    }
}
