//! The canonical text of expressions: keywords upper-case, literals in BQL form, parentheses only
//! where precedence needs them. It names result columns that have no alias (`COUNT(*)`,
//! `AVG(x) + 5`, as Bullet does), and it is how the plan prints expressions.

use crate::ast::*;
use needle_record::Value;
use std::fmt::{self, Display, Formatter, Write};

/// Binding strength, higher binds tighter (SQL precedence).
pub fn precedence(kind: &ExprKind) -> u8 {
    match kind {
        ExprKind::Binary { op, .. } => match op {
            BinaryOp::Or => 1,
            BinaryOp::Xor => 2,
            BinaryOp::And => 3,
            BinaryOp::Add | BinaryOp::Sub => 7,
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod => 8,
        },
        ExprKind::Unary { op: UnaryOp::Not, .. } => 4,
        ExprKind::Compare { .. }
        | ExprKind::Rlike { .. }
        | ExprKind::In { .. }
        | ExprKind::Between { .. }
        | ExprKind::IsNull { .. } => 5,
        ExprKind::Unary { op: UnaryOp::Negate, .. } => 9,
        _ => 10,
    }
}

fn child(f: &mut Formatter<'_>, e: &Expr, min: u8) -> fmt::Result {
    if precedence(&e.kind) < min {
        write!(f, "({e})")
    } else {
        write!(f, "{e}")
    }
}

fn list(f: &mut Formatter<'_>, items: &[Expr]) -> fmt::Result {
    for (i, e) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{e}")?;
    }
    Ok(())
}

/// A literal as BQL text: `5`, `5L`, `5.0`, `5.0f`, `'it''s'`, `NULL`, `TRUE`.
pub fn write_literal(f: &mut impl Write, v: &Value) -> fmt::Result {
    match v {
        Value::Null => f.write_str("NULL"),
        Value::Bool(b) => f.write_str(if *b { "TRUE" } else { "FALSE" }),
        Value::Int(i) => write!(f, "{i}"),
        Value::Long(i) => write!(f, "{i}L"),
        Value::Float(x) => write!(f, "{x:?}f"),
        Value::Double(x) => write!(f, "{x:?}"),
        Value::String(s) => write!(f, "'{}'", s.replace('\'', "''")),
        Value::List(items) => {
            f.write_char('[')?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write_literal(f, item)?;
            }
            f.write_char(']')
        }
        Value::Map(_) => f.write_str(&v.to_json()),
    }
}

/// A name that reads back as itself unquoted: a plain word that is not reserved (so a field
/// named `from` prints as `"from"`).
fn is_plain_ident(s: &str) -> bool {
    !crate::lexer::needs_quotes(s)
}

impl Display for Field {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if is_plain_ident(&self.name) {
            f.write_str(&self.name)?;
        } else {
            write!(f, "\"{}\"", self.name.replace('"', "\"\""))?;
        }
        for accessor in &self.path {
            match accessor {
                Accessor::Key(k) if is_plain_ident(k) => write!(f, ".{k}")?,
                Accessor::Key(k) => write!(f, "['{}']", k.replace('\'', "''"))?,
                Accessor::Index(i) => write!(f, "[{i}]")?,
                Accessor::Expr(e) => write!(f, "[{e}]")?,
            }
        }
        if let Some(t) = &self.hint {
            write!(f, " : {t}")?;
        }
        Ok(())
    }
}

impl Display for Function {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Function::SizeOf => "SIZEOF",
            Function::Abs => "ABS",
            Function::Trim => "TRIM",
            Function::Lower => "LOWER",
            Function::Upper => "UPPER",
            Function::Hash => "HASH",
            Function::SizeIs => "SIZEIS",
            Function::ContainsKey => "CONTAINSKEY",
            Function::ContainsValue => "CONTAINSVALUE",
            Function::Filter => "FILTER",
            Function::If => "IF",
            Function::Substring => "SUBSTRING",
            Function::UnixTimestamp => "UNIXTIMESTAMP",
        })
    }
}

impl Display for CompareOp {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CompareOp::Eq => "=",
            CompareOp::Ne => "!=",
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
            CompareOp::Gt => ">",
            CompareOp::Ge => ">=",
        })
    }
}

impl Display for BinaryOp {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Mod => "%",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::And => "AND",
            BinaryOp::Xor => "XOR",
            BinaryOp::Or => "OR",
        })
    }
}

fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

impl Display for Points {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Points::Linear { count } => write!(f, "LINEAR, {count}"),
            Points::Region { start, end, step } => {
                write!(f, "REGION, {}, {}, {}", number(*start), number(*end), number(*step))
            }
            Points::Manual { points } => {
                f.write_str("MANUAL")?;
                for p in points {
                    write!(f, ", {}", number(*p))?;
                }
                Ok(())
            }
        }
    }
}

impl Display for Aggregate {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Aggregate::Count => f.write_str("COUNT(*)"),
            Aggregate::Sum(e) => write!(f, "SUM({e})"),
            Aggregate::Min(e) => write!(f, "MIN({e})"),
            Aggregate::Max(e) => write!(f, "MAX({e})"),
            Aggregate::Avg(e) => write!(f, "AVG({e})"),
            Aggregate::CountDistinct(es) => {
                f.write_str("COUNT(DISTINCT ")?;
                list(f, es)?;
                f.write_char(')')
            }
            Aggregate::Distribution { kind, value, points } => {
                let name = match kind {
                    DistributionKind::Quantile => "QUANTILE",
                    DistributionKind::Freq => "FREQ",
                    DistributionKind::CumFreq => "CUMFREQ",
                };
                write!(f, "{name}({value}, {points})")
            }
            Aggregate::Top { k, threshold, fields } => {
                write!(f, "TOP({k}")?;
                if let Some(t) = threshold {
                    write!(f, ", {t}")?;
                }
                for e in fields {
                    write!(f, ", {e}")?;
                }
                f.write_char(')')
            }
        }
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let p = precedence(&self.kind);
        match &self.kind {
            ExprKind::Literal(v) => write_literal(f, v),
            ExprKind::List(items) => {
                f.write_char('[')?;
                list(f, items)?;
                f.write_char(']')
            }
            ExprKind::Now => f.write_str("NOW"),
            ExprKind::Field(field) => write!(f, "{field}"),
            ExprKind::Unary { op: UnaryOp::Not, operand } => {
                f.write_str("NOT ")?;
                child(f, operand, p)
            }
            ExprKind::Unary { op: UnaryOp::Negate, operand } => {
                f.write_char('-')?;
                child(f, operand, p + 1)
            }
            ExprKind::Binary { op, left, right } => {
                child(f, left, p)?;
                write!(f, " {op} ")?;
                child(f, right, p + 1)
            }
            ExprKind::Compare { op, quantifier, left, right } => {
                child(f, left, p + 1)?;
                write!(f, " {op} ")?;
                match quantifier {
                    Some(Quantifier::Any) => f.write_str("ANY ")?,
                    Some(Quantifier::All) => f.write_str("ALL ")?,
                    None => {}
                }
                child(f, right, p + 1)
            }
            ExprKind::Rlike { negated, any, value, pattern } => {
                child(f, value, p + 1)?;
                f.write_str(if *negated { " NOT RLIKE " } else { " RLIKE " })?;
                if *any {
                    f.write_str("ANY ")?;
                }
                child(f, pattern, p + 1)
            }
            ExprKind::In { negated, value, list: items } => {
                child(f, value, p + 1)?;
                f.write_str(if *negated { " NOT IN " } else { " IN " })?;
                match &items.kind {
                    ExprKind::List(es) => {
                        f.write_char('(')?;
                        list(f, es)?;
                        f.write_char(')')
                    }
                    _ => child(f, items, p + 1),
                }
            }
            ExprKind::Between { negated, value, low, high } => {
                child(f, value, p + 1)?;
                f.write_str(if *negated { " NOT BETWEEN (" } else { " BETWEEN (" })?;
                write!(f, "{low}, {high})")
            }
            ExprKind::IsNull { negated, value } => {
                child(f, value, p + 1)?;
                f.write_str(if *negated { " IS NOT NULL" } else { " IS NULL" })
            }
            ExprKind::Call { function, args } => {
                write!(f, "{function}(")?;
                list(f, args)?;
                f.write_char(')')
            }
            ExprKind::Cast { value, to } => write!(f, "CAST({value} AS {to})"),
            ExprKind::Aggregate(a) => write!(f, "{a}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(kind: ExprKind) -> Expr {
        Expr::new(kind, Span::default())
    }
    fn field(name: &str) -> Expr {
        e(ExprKind::Field(Field { name: name.into(), path: vec![], hint: None }))
    }
    fn bin(op: BinaryOp, l: Expr, r: Expr) -> Expr {
        e(ExprKind::Binary { op, left: Box::new(l), right: Box::new(r) })
    }

    #[test]
    fn parenthesizes_only_where_precedence_needs_it() {
        let sum = bin(BinaryOp::Add, field("a"), field("b"));
        assert_eq!(bin(BinaryOp::Mul, sum.clone(), field("c")).to_string(), "(a + b) * c");
        assert_eq!(bin(BinaryOp::Add, field("c"), sum.clone()).to_string(), "c + (a + b)");
        assert_eq!(bin(BinaryOp::Add, sum, field("c")).to_string(), "a + b + c");
    }

    #[test]
    fn literals_and_fields_print_as_bql() {
        assert_eq!(e(ExprKind::Literal(Value::from("it's"))).to_string(), "'it''s'");
        assert_eq!(e(ExprKind::Literal(Value::Long(5))).to_string(), "5L");
        assert_eq!(e(ExprKind::Literal(Value::Double(5.0))).to_string(), "5.0");
        assert_eq!(e(ExprKind::Literal(Value::Float(2.5))).to_string(), "2.5f");
        let f = Field {
            name: "123col".into(),
            path: vec![Accessor::Index(0), Accessor::Key("b c".into())],
            hint: None,
        };
        assert_eq!(f.to_string(), "\"123col\"[0]['b c']");
        let count = e(ExprKind::Aggregate(Aggregate::Count));
        assert_eq!(count.to_string(), "COUNT(*)");
    }
}
