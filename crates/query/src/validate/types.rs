//! Static type checks: what can be known about an expression's type before any record arrives
//! (literals, casts, type hints, function results), and the errors for operations that can never
//! work on it (`'a' + 1`, `SUM('x')`, `NOT 5`, `SIZEOF(5)`, a non-string or invalid RLIKE pattern,
//! `CAST([1] AS INTEGER)`, a hinted `a : STRING` in arithmetic, wrong argument counts).
//!
//! A field without a hint has an unknown type: it is checked per record at run time, where a
//! value of the wrong type makes the operation NULL (LANGUAGE.md), so nothing here rejects it.

use crate::ast::{
    Accessor, Aggregate, BinaryOp, Expr, ExprKind, Function, Points, Quantifier, UnaryOp,
};
use crate::error::QueryError;
use needle_record::{Type, Value};

/// What is known statically about an expression's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    /// Depends on the record.
    Unknown,
    /// Always NULL (the literal NULL).
    Null,
    /// One of the numeric types (which one depends on the record).
    Number,
    Known(Type),
}

impl Ty {
    fn is_numeric(&self) -> Option<bool> {
        match self {
            Ty::Unknown | Ty::Null => None,
            Ty::Number => Some(true),
            Ty::Known(t) => Some(t.is_numeric()),
        }
    }

    fn is(&self, want: impl Fn(&Type) -> bool) -> Option<bool> {
        match self {
            Ty::Unknown | Ty::Null => None,
            Ty::Number => Some(false),
            Ty::Known(t) => Some(want(t)),
        }
    }

    fn describe(&self) -> String {
        match self {
            Ty::Unknown => "a value".into(),
            Ty::Null => "NULL".into(),
            Ty::Number => "a number".into(),
            Ty::Known(t) => t.to_string(),
        }
    }
}

/// An expression quoted for a message: string literals already carry their quotes.
pub fn shown(e: &Expr) -> String {
    let text = e.to_string();
    if text.starts_with('\'') {
        text
    } else {
        format!("'{text}'")
    }
}

fn type_error(e: &Expr, message: String, hint: &str) -> QueryError {
    QueryError::semantic(message, Some(e.span)).with_hint(hint)
}

fn need_numeric(what: &str, e: &Expr) -> Result<Ty, QueryError> {
    let ty = infer(e)?;
    if ty.is_numeric() == Some(false) {
        return Err(type_error(
            e,
            format!("{what} needs a number, but {} is {}", shown(e), ty.describe()),
            "use a numeric field or literal, or CAST(... AS DOUBLE)",
        ));
    }
    Ok(ty)
}

fn need_boolean(what: &str, e: &Expr) -> Result<Ty, QueryError> {
    let ty = infer(e)?;
    if ty.is(|t| *t == Type::Boolean) == Some(false) {
        return Err(type_error(
            e,
            format!("{what} needs a BOOLEAN, but {} is {}", shown(e), ty.describe()),
            "write a condition such as 'x = 5' or 'x IS NOT NULL'",
        ));
    }
    Ok(ty)
}

fn need_string(what: &str, e: &Expr) -> Result<Ty, QueryError> {
    let ty = infer(e)?;
    if ty.is(|t| *t == Type::String) == Some(false) {
        return Err(type_error(
            e,
            format!("{what} needs a STRING, but {} is {}", shown(e), ty.describe()),
            "use a string field or literal, or CAST(... AS STRING)",
        ));
    }
    Ok(ty)
}

fn need_list(what: &str, e: &Expr) -> Result<Ty, QueryError> {
    let ty = infer(e)?;
    if ty.is(|t| matches!(t, Type::List(_))) == Some(false) {
        return Err(type_error(
            e,
            format!("{what} needs a list, but {} is {}", shown(e), ty.describe()),
            "write a list such as [1, 2] or use a LIST field",
        ));
    }
    Ok(ty)
}

fn arity(
    function: Function,
    args: &[Expr],
    span: &Expr,
    min: usize,
    max: usize,
) -> Result<(), QueryError> {
    if args.len() < min || args.len() > max {
        let expected = if min == max { format!("{min}") } else { format!("{min} to {max}") };
        return Err(QueryError::semantic(
            format!("{function} takes {expected} argument(s), got {}", args.len()),
            Some(span.span),
        )
        .with_hint(signature(function)));
    }
    Ok(())
}

fn signature(function: Function) -> &'static str {
    match function {
        Function::SizeOf => "SIZEOF(list | map | string)",
        Function::Abs => "ABS(number)",
        Function::Trim => "TRIM(string)",
        Function::Lower => "LOWER(string)",
        Function::Upper => "UPPER(string)",
        Function::Hash => "HASH(value)",
        Function::SizeIs => "SIZEIS(list | map | string, n)",
        Function::ContainsKey => "CONTAINSKEY(map, key)",
        Function::ContainsValue => "CONTAINSVALUE(list | map, value)",
        Function::Filter => "FILTER(list, boolean_list)",
        Function::If => "IF(condition, then, else)",
        Function::Substring => "SUBSTRING(string, start[, length])",
        Function::UnixTimestamp => "UNIXTIMESTAMP([string[, format]])",
    }
}

/// Checks that a literal RLIKE pattern is a string and compiles (whole-value match, linear time:
/// the `regex` crate has no backtracking).
pub fn check_pattern(p: &Expr) -> Result<(), QueryError> {
    match &p.kind {
        ExprKind::Literal(Value::String(s)) => {
            if let Err(err) = regex::Regex::new(&format!("^(?:{s})$")) {
                let detail = err.to_string();
                let last = detail.lines().last().unwrap_or("").trim();
                let last = last.strip_prefix("error: ").unwrap_or(last).to_string();
                return Err(QueryError::semantic(
                    format!("invalid regular expression {p}: {last}"),
                    Some(p.span),
                )
                .with_hint(
                    "patterns use Rust regex syntax (no look-around or back-references); RLIKE matches the whole value",
                ));
            }
            Ok(())
        }
        ExprKind::Literal(Value::Null) => Ok(()),
        ExprKind::Literal(v) => Err(QueryError::semantic(
            format!(
                "RLIKE needs a STRING pattern, but {p} is {}",
                v.type_of().map_or("NULL".into(), |t| t.to_string())
            ),
            Some(p.span),
        )
        .with_hint("write the pattern as a string, e.g. RLIKE '.*abc.*'")),
        _ => need_string("RLIKE pattern", p).map(|_| ()),
    }
}

fn literal_type(v: &Value) -> Ty {
    match v.type_of() {
        None => Ty::Null,
        Some(t) => Ty::Known(t),
    }
}

/// Infers what can be known of `e`'s type, rejecting operations that can never work.
pub fn infer(e: &Expr) -> Result<Ty, QueryError> {
    Ok(match &e.kind {
        ExprKind::Literal(v) => literal_type(v),
        ExprKind::List(items) => {
            let mut element = None;
            for item in items {
                let t = infer(item)?;
                if element.is_none() {
                    if let Ty::Known(t) = t {
                        element = Some(t);
                    }
                }
            }
            match element {
                Some(t) => Ty::Known(Type::List(Box::new(t))),
                None => Ty::Unknown,
            }
        }
        ExprKind::Now => Ty::Known(Type::Long),
        ExprKind::Field(field) => {
            for accessor in &field.path {
                if let Accessor::Expr(inner) = accessor {
                    infer(inner)?;
                }
            }
            match &field.hint {
                Some(t) => Ty::Known(t.clone()),
                None => Ty::Unknown,
            }
        }
        ExprKind::Unary { op: UnaryOp::Not, operand } => {
            need_boolean("NOT", operand)?;
            Ty::Known(Type::Boolean)
        }
        ExprKind::Unary { op: UnaryOp::Negate, operand } => need_numeric("'-'", operand)?,
        ExprKind::Binary { op, left, right } => match op {
            BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => {
                need_boolean(&op.to_string(), left)?;
                need_boolean(&op.to_string(), right)?;
                Ty::Known(Type::Boolean)
            }
            _ => {
                let l = need_numeric(&format!("'{op}'"), left)?;
                let r = need_numeric(&format!("'{op}'"), right)?;
                match (l, r) {
                    (Ty::Null, _) | (_, Ty::Null) => Ty::Null,
                    _ => Ty::Number,
                }
            }
        },
        ExprKind::Compare { quantifier, left, right, .. } => {
            let l = infer(left)?;
            let r = if quantifier.is_some() {
                let q = if *quantifier == Some(Quantifier::Any) { "ANY" } else { "ALL" };
                match need_list(&format!("comparison with {q}"), right)? {
                    Ty::Known(Type::List(t)) => Ty::Known(*t),
                    _ => Ty::Unknown,
                }
            } else {
                infer(right)?
            };
            comparable(left, &l, right, &r)?;
            Ty::Known(Type::Boolean)
        }
        ExprKind::Rlike { any, value, pattern, .. } => {
            need_string("RLIKE", value)?;
            if *any {
                match &pattern.kind {
                    ExprKind::List(items) => {
                        for p in items {
                            check_pattern(p)?;
                        }
                    }
                    _ => {
                        need_list("RLIKE ANY", pattern)?;
                    }
                }
            } else {
                check_pattern(pattern)?;
            }
            Ty::Known(Type::Boolean)
        }
        ExprKind::In { value, list, .. } => {
            infer(value)?;
            need_list("IN", list)?;
            Ty::Known(Type::Boolean)
        }
        ExprKind::Between { value, low, high, .. } => {
            let v = infer(value)?;
            let lo = infer(low)?;
            let hi = infer(high)?;
            comparable(value, &v, low, &lo)?;
            comparable(value, &v, high, &hi)?;
            comparable(low, &lo, high, &hi)?;
            Ty::Known(Type::Boolean)
        }
        ExprKind::IsNull { value, .. } => {
            infer(value)?;
            Ty::Known(Type::Boolean)
        }
        ExprKind::Call { function, args } => call(*function, args, e)?,
        ExprKind::Cast { value, to } => {
            let from = infer(value)?;
            if let Ty::Known(t) = &from {
                if t.is_primitive() != to.is_primitive() {
                    return Err(QueryError::semantic(
                        format!("cannot cast {} ({t}) to {to}", shown(value)),
                        Some(e.span),
                    )
                    .with_hint("casts convert between INTEGER, LONG, FLOAT, DOUBLE, BOOLEAN and STRING; lists and maps cannot be cast to or from them"));
                }
                if !t.is_primitive() && t != to {
                    return Err(QueryError::semantic(
                        format!("cannot cast {} ({t}) to {to}", shown(value)),
                        Some(e.span),
                    )
                    .with_hint("a list or map can only be cast to its own type"));
                }
            }
            Ty::Known(to.clone())
        }
        ExprKind::Aggregate(a) => aggregate(a)?,
    })
}

fn comparable(l_expr: &Expr, l: &Ty, r_expr: &Expr, r: &Ty) -> Result<(), QueryError> {
    let class = |t: &Ty| -> Option<u8> {
        match t {
            Ty::Unknown | Ty::Null => None,
            Ty::Number => Some(0),
            Ty::Known(t) if t.is_numeric() => Some(0),
            Ty::Known(Type::String) => Some(1),
            Ty::Known(Type::Boolean) => Some(2),
            Ty::Known(Type::List(_)) => Some(3),
            Ty::Known(Type::Map(_)) => Some(4),
            Ty::Known(_) => None,
        }
    };
    if let (Some(a), Some(b)) = (class(l), class(r)) {
        if a != b {
            return Err(QueryError::semantic(
                format!(
                    "cannot compare {} ({}) with {} ({})",
                    shown(l_expr),
                    l.describe(),
                    shown(r_expr),
                    r.describe()
                ),
                Some(l_expr.span.to(r_expr.span)),
            )
            .with_hint("compare values of the same kind, or CAST one side"));
        }
    }
    Ok(())
}

fn call(function: Function, args: &[Expr], e: &Expr) -> Result<Ty, QueryError> {
    use Function::*;
    let (min, max) = match function {
        SizeOf | Abs | Trim | Lower | Upper | Hash => (1, 1),
        SizeIs | ContainsKey | ContainsValue | Filter => (2, 2),
        If => (3, 3),
        Substring => (2, 3),
        UnixTimestamp => (0, 2),
    };
    arity(function, args, e, min, max)?;
    let name = function.to_string();
    Ok(match function {
        SizeOf | SizeIs => {
            let t = infer(&args[0])?;
            if t.is(|t| matches!(t, Type::List(_) | Type::Map(_) | Type::String)) == Some(false)
                || t == Ty::Number
            {
                return Err(type_error(
                    &args[0],
                    format!(
                        "{name} needs a list, map or string, but {} is {}",
                        shown(&args[0]),
                        t.describe()
                    ),
                    signature(function),
                ));
            }
            if function == SizeIs {
                need_numeric("SIZEIS size", &args[1])?;
                Ty::Known(Type::Boolean)
            } else {
                Ty::Known(Type::Integer)
            }
        }
        Abs => need_numeric("ABS", &args[0])?,
        Trim | Lower | Upper => {
            need_string(&name, &args[0])?;
            Ty::Known(Type::String)
        }
        Hash => {
            infer(&args[0])?;
            Ty::Known(Type::Integer)
        }
        ContainsKey => {
            let t = infer(&args[0])?;
            if t.is(|t| matches!(t, Type::Map(_) | Type::List(_))) == Some(false) || t == Ty::Number
            {
                return Err(type_error(
                    &args[0],
                    format!("CONTAINSKEY needs a map, but {} is {}", shown(&args[0]), t.describe()),
                    signature(function),
                ));
            }
            need_string("CONTAINSKEY key", &args[1])?;
            Ty::Known(Type::Boolean)
        }
        ContainsValue => {
            let t = infer(&args[0])?;
            if t.is(|t| matches!(t, Type::Map(_) | Type::List(_))) == Some(false) || t == Ty::Number
            {
                return Err(type_error(
                    &args[0],
                    format!(
                        "CONTAINSVALUE needs a list or map, but {} is {}",
                        shown(&args[0]),
                        t.describe()
                    ),
                    signature(function),
                ));
            }
            infer(&args[1])?;
            Ty::Known(Type::Boolean)
        }
        Filter => {
            let t = need_list("FILTER", &args[0])?;
            need_list("FILTER", &args[1])?;
            t
        }
        If => {
            need_boolean("IF condition", &args[0])?;
            let a = infer(&args[1])?;
            let b = infer(&args[2])?;
            if a == b || b == Ty::Null {
                a
            } else if a == Ty::Null {
                b
            } else {
                Ty::Unknown
            }
        }
        Substring => {
            need_string("SUBSTRING", &args[0])?;
            for a in &args[1..] {
                need_numeric("SUBSTRING position", a)?;
            }
            Ty::Known(Type::String)
        }
        UnixTimestamp => {
            for a in args {
                need_string("UNIXTIMESTAMP", a)?;
            }
            Ty::Known(Type::Long)
        }
    })
}

fn aggregate(a: &Aggregate) -> Result<Ty, QueryError> {
    Ok(match a {
        Aggregate::Count => Ty::Known(Type::Long),
        Aggregate::Sum(x) => {
            need_numeric("SUM", x)?;
            Ty::Known(Type::Double)
        }
        Aggregate::Avg(x) => {
            need_numeric("AVG", x)?;
            Ty::Known(Type::Double)
        }
        Aggregate::Min(x) => need_numeric("MIN", x)?,
        Aggregate::Max(x) => need_numeric("MAX", x)?,
        Aggregate::CountDistinct(xs) => {
            for x in xs {
                infer(x)?;
            }
            Ty::Known(Type::Long)
        }
        Aggregate::Distribution { value, points, .. } => {
            need_numeric("a distribution", value)?;
            let _: &Points = points;
            Ty::Unknown
        }
        Aggregate::Top { fields, .. } => {
            for x in fields {
                infer(x)?;
            }
            Ty::Unknown
        }
    })
}
