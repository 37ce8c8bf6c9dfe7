//! The syntax tree of a BQL query, exactly as written (before validation), with the byte span of
//! every node so that errors can point at the text. Bullet JSON queries are translated into this
//! same tree, so both forms share one validator and produce the same [`crate::Plan`].

use needle_record::{Type, Value};
use serde::Serialize;

pub use crate::span::Span;

/// A name as written, with where it was written.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// One query: `SELECT ... FROM STREAM(...)` or `SELECT ... FROM (inner query)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub select: Select,
    pub from: From,
    /// `LATERAL VIEW [OUTER] EXPLODE(...) AS ...`, in order.
    pub lateral_views: Vec<TableFunction>,
    pub where_clause: Option<Expr>,
    pub group_by: Vec<Expr>,
    pub having: Option<Expr>,
    pub order_by: Vec<OrderItem>,
    pub window: Option<Window>,
    pub limit: Option<Limit>,
    pub span: Span,
}

impl Query {
    /// Every expression the query holds, the inner query's too, in clause order: select items,
    /// the inner query, LATERAL VIEWs, WHERE, GROUP BY, HAVING, ORDER BY.
    pub fn expressions(&self) -> Vec<&Expr> {
        let mut out = Vec::new();
        for item in &self.select.items {
            match item {
                SelectItem::All { .. } => {}
                SelectItem::Expr { expr, .. } => out.push(expr),
                SelectItem::TableFunction(t) => out.push(&t.expr),
            }
        }
        if let From::Subquery(inner) = &self.from {
            out.extend(inner.expressions());
        }
        out.extend(self.lateral_views.iter().map(|t| &t.expr));
        out.extend(self.where_clause.iter());
        out.extend(self.group_by.iter());
        out.extend(self.having.iter());
        out.extend(self.order_by.iter().map(|o| &o.expr));
        out
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Select {
    pub distinct: bool,
    pub items: Vec<SelectItem>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SelectItem {
    /// `*`
    All { span: Span },
    /// `e [[AS] alias]`
    Expr { expr: Expr, alias: Option<Ident> },
    /// `[OUTER] EXPLODE(e) AS ...` in the select list.
    TableFunction(TableFunction),
}

#[derive(Debug, Clone, PartialEq)]
pub enum From {
    Stream(Stream),
    Subquery(Box<Query>),
}

/// `STREAM()`, `STREAM(n, TIME)` or `STREAM(MAX, TIME)`, maybe followed by `SINCE from`; or
/// `HISTORY(from[, to])`, the stored past alone (`history` set, `live` false).
#[derive(Debug, Clone, PartialEq)]
pub struct Stream {
    pub duration: StreamDuration,
    pub span: Span,
    /// The stored past the query reads first (`SINCE`) or only (`HISTORY`).
    pub history: Option<HistoryClause>,
}

/// `HISTORY(from[, to])`, or `SINCE from` after `STREAM(...)`.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryClause {
    pub from: TimeBound,
    /// `HISTORY(from, to)`; `None`: up to now (`HISTORY(from)`), or on into the live stream
    /// (`SINCE`).
    pub to: Option<TimeBound>,
    /// `SINCE`: live records follow the stored past.
    pub live: bool,
    /// The whole clause.
    pub span: Span,
}

/// A time as written: ms since the epoch, or a string (ISO-8601, or relative such as `'-15m'`).
#[derive(Debug, Clone, PartialEq)]
pub struct TimeBound {
    pub value: TimeLiteral,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum TimeLiteral {
    Millis(i64),
    Text(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamDuration {
    /// `STREAM()`: the configured default duration.
    Default,
    /// `STREAM(n, TIME)`: n milliseconds.
    Millis(u64),
    /// `STREAM(MAX, TIME)`: the configured maximum duration.
    Max,
}

/// `[OUTER] EXPLODE(e) AS alias` or `[OUTER] EXPLODE(e) AS (key_alias, value_alias)`.
#[derive(Debug, Clone, PartialEq)]
pub struct TableFunction {
    pub outer: bool,
    pub expr: Expr,
    pub alias: ExplodeAlias,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExplodeAlias {
    /// A list explodes into one value per element.
    Value(Ident),
    /// A map explodes into one key and one value per entry.
    KeyValue(Ident, Ident),
}

#[derive(Debug, Clone, PartialEq)]
pub struct OrderItem {
    pub expr: Expr,
    pub descending: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub value: u64,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WindowUnit {
    Time,
    Record,
}

/// What an EVERY window covers each time it emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Include {
    /// Everything since the query started.
    All,
    /// The first `count` units of each window.
    First { count: u64, unit: WindowUnit },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WindowKind {
    /// `TUMBLING(n, unit)`
    Tumbling { every: u64, unit: WindowUnit },
    /// `EVERY(n, unit, ALL | FIRST, m, unit)`
    Every { every: u64, unit: WindowUnit, include: Include },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub kind: WindowKind,
    pub span: Span,
}

/// An expression and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

impl Expr {
    pub fn new(kind: ExprKind, span: Span) -> Self {
        Self { kind, span }
    }

    /// Calls `f` on this expression and every expression inside it (aggregate arguments and
    /// computed accessors `a[expr]` included), parents first.
    pub fn visit<'a>(&'a self, f: &mut impl FnMut(&'a Expr)) {
        f(self);
        match &self.kind {
            ExprKind::Literal(_) | ExprKind::Now => {}
            ExprKind::List(items) => items.iter().for_each(|i| i.visit(f)),
            ExprKind::Field(field) => {
                for a in &field.path {
                    if let Accessor::Expr(x) = a {
                        x.visit(f);
                    }
                }
            }
            ExprKind::Unary { operand, .. } => operand.visit(f),
            ExprKind::Binary { left, right, .. } | ExprKind::Compare { left, right, .. } => {
                left.visit(f);
                right.visit(f);
            }
            ExprKind::Rlike { value, pattern, .. } => {
                value.visit(f);
                pattern.visit(f);
            }
            ExprKind::In { value, list, .. } => {
                value.visit(f);
                list.visit(f);
            }
            ExprKind::Between { value, low, high, .. } => {
                value.visit(f);
                low.visit(f);
                high.visit(f);
            }
            ExprKind::IsNull { value, .. } | ExprKind::Cast { value, .. } => value.visit(f),
            ExprKind::Call { args, .. } => args.iter().for_each(|a| a.visit(f)),
            ExprKind::Aggregate(a) => match a {
                Aggregate::Count => {}
                Aggregate::Sum(x) | Aggregate::Min(x) | Aggregate::Max(x) | Aggregate::Avg(x) => {
                    x.visit(f)
                }
                Aggregate::CountDistinct(xs) | Aggregate::Top { fields: xs, .. } => {
                    xs.iter().for_each(|x| x.visit(f))
                }
                Aggregate::Distribution { value, .. } => value.visit(f),
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    /// NULL, TRUE/FALSE, `5` (INTEGER), `5L` (LONG), `5.0` (DOUBLE), `5.0f` (FLOAT), `'s'`.
    Literal(Value),
    /// `[e, ...]`
    List(Vec<Expr>),
    /// `NOW`: the current time in ms.
    Now,
    Field(Field),
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    /// Arithmetic and logic: `* / % + - AND OR XOR`.
    Binary {
        op: BinaryOp,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    /// `a op b`, or `a op ANY|ALL list`.
    Compare {
        op: CompareOp,
        quantifier: Option<Quantifier>,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    /// `value [NOT] RLIKE [ANY] pattern` (whole-value match; with ANY, `pattern` is a list).
    Rlike {
        negated: bool,
        any: bool,
        value: Box<Expr>,
        pattern: Box<Expr>,
    },
    /// `value [NOT] IN list` or `value [NOT] IN (e, ...)` (the latter as an [`ExprKind::List`]).
    In {
        negated: bool,
        value: Box<Expr>,
        list: Box<Expr>,
    },
    /// `value [NOT] BETWEEN (low, high)` and `BETWEEN(value, low, high)`; inclusive.
    Between {
        negated: bool,
        value: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
    },
    /// `value IS [NOT] NULL`
    IsNull {
        negated: bool,
        value: Box<Expr>,
    },
    /// A scalar function call.
    Call {
        function: Function,
        args: Vec<Expr>,
    },
    /// `CAST(value AS to)`
    Cast {
        value: Box<Expr>,
        to: Type,
    },
    /// An aggregate call (only where the validator allows one).
    Aggregate(Aggregate),
}

/// A field reference: `a`, `a.b`, `a[0]`, `a['k']`, `a[expr]`, `a[0].b`, `a.b['c']`, `"123col"`,
/// with an optional type hint `a : LIST[MAP[STRING]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub path: Vec<Accessor>,
    pub hint: Option<Type>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Accessor {
    /// `.b` or `['b']`: a map key.
    Key(String),
    /// `[0]`: a list index.
    Index(i64),
    /// `[expr]`: an index or key computed per record.
    Expr(Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum UnaryOp {
    Not,
    Negate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum BinaryOp {
    Mul,
    Div,
    Mod,
    Add,
    Sub,
    And,
    Xor,
    Or,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CompareOp {
    /// The operator with its sides swapped: `a < b` is `b > a`.
    pub fn flipped(self) -> Self {
        match self {
            CompareOp::Lt => CompareOp::Gt,
            CompareOp::Le => CompareOp::Ge,
            CompareOp::Gt => CompareOp::Lt,
            CompareOp::Ge => CompareOp::Le,
            other => other,
        }
    }

    /// The operator that is TRUE exactly when this one is FALSE (for non-null operands).
    pub fn negated(self) -> Self {
        match self {
            CompareOp::Eq => CompareOp::Ne,
            CompareOp::Ne => CompareOp::Eq,
            CompareOp::Lt => CompareOp::Ge,
            CompareOp::Le => CompareOp::Gt,
            CompareOp::Gt => CompareOp::Le,
            CompareOp::Ge => CompareOp::Lt,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Quantifier {
    Any,
    All,
}

/// The scalar functions of LANGUAGE.md (`BETWEEN(x, lo, hi)` becomes [`ExprKind::Between`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Function {
    SizeOf,
    Abs,
    Trim,
    Lower,
    Upper,
    Hash,
    SizeIs,
    ContainsKey,
    ContainsValue,
    Filter,
    If,
    Substring,
    UnixTimestamp,
}

/// Aggregate calls.
#[derive(Debug, Clone, PartialEq)]
pub enum Aggregate {
    /// `COUNT(*)`
    Count,
    Sum(Box<Expr>),
    Min(Box<Expr>),
    Max(Box<Expr>),
    Avg(Box<Expr>),
    /// `COUNT(DISTINCT e, ...)`
    CountDistinct(Vec<Expr>),
    /// `QUANTILE|FREQ|CUMFREQ(e, LINEAR, n | REGION, start, end, step | MANUAL, p, ...)`
    Distribution {
        kind: DistributionKind,
        value: Box<Expr>,
        points: Points,
    },
    /// `TOP(k[, threshold], e, ...)`
    Top {
        k: u64,
        threshold: Option<u64>,
        fields: Vec<Expr>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DistributionKind {
    Quantile,
    Freq,
    CumFreq,
}

/// Where a distribution is evaluated.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Points {
    /// `LINEAR, n`: n evenly spaced points (quantiles: fractions 0..=1; FREQ/CUMFREQ: over the
    /// observed min..max).
    Linear { count: u64 },
    /// `REGION, start, end, step`
    Region { start: f64, end: f64, step: f64 },
    /// `MANUAL, p, ...`
    Manual { points: Vec<f64> },
}
