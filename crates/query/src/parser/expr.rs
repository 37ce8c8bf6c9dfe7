//! Expressions: a Pratt loop over SQL precedence (lowest to highest: OR, XOR, AND, NOT,
//! comparisons / IN / BETWEEN / RLIKE / IS NULL, `+ -`, `* / %`, unary minus, primaries), the
//! primaries (literals, lists, fields with their paths and type hints, parentheses), function and
//! aggregate calls with their arity checks, CAST and type names.

use super::{like_hint, HintIfNone, Parser, Result};
use crate::ast::*;
use crate::error::QueryError;
use crate::hint::{did_you_mean, sql_function};
use crate::lexer::{self, Number, NumberSuffix, Token, TokenKind};
use needle_record::{Type, Value};

/// Binding powers (see [`crate::display::precedence`], which prints by the same table).
const BP_OR: u8 = 1;
const BP_XOR: u8 = 2;
const BP_AND: u8 = 3;
const BP_NOT: u8 = 4;
const BP_CMP: u8 = 5;
const BP_ADD: u8 = 7;
const BP_MUL: u8 = 8;
const BP_NEG: u8 = 9;

/// Scalar functions: name, function, fewest and most arguments, usage.
const FUNCTIONS: &[(&str, Function, usize, usize, &str)] = &[
    ("SIZEOF", Function::SizeOf, 1, 1, "SIZEOF(x)"),
    ("ABS", Function::Abs, 1, 1, "ABS(x)"),
    ("TRIM", Function::Trim, 1, 1, "TRIM(s)"),
    ("LOWER", Function::Lower, 1, 1, "LOWER(s)"),
    ("UPPER", Function::Upper, 1, 1, "UPPER(s)"),
    ("HASH", Function::Hash, 1, 1, "HASH(x)"),
    ("SIZEIS", Function::SizeIs, 2, 2, "SIZEIS(x, n)"),
    ("CONTAINSKEY", Function::ContainsKey, 2, 2, "CONTAINSKEY(map, key)"),
    ("CONTAINSVALUE", Function::ContainsValue, 2, 2, "CONTAINSVALUE(x, value)"),
    ("FILTER", Function::Filter, 2, 2, "FILTER(list, bool_list)"),
    ("IF", Function::If, 3, 3, "IF(condition, then, else)"),
    ("SUBSTRING", Function::Substring, 2, 3, "SUBSTRING(s, start[, len])"),
    ("UNIXTIMESTAMP", Function::UnixTimestamp, 0, 2, "UNIXTIMESTAMP([s[, fmt]])"),
];

/// Every name that may be called, for did-you-mean.
const CALLABLE: &[&str] = &[
    "SIZEOF",
    "ABS",
    "TRIM",
    "LOWER",
    "UPPER",
    "HASH",
    "SIZEIS",
    "CONTAINSKEY",
    "CONTAINSVALUE",
    "FILTER",
    "IF",
    "SUBSTRING",
    "UNIXTIMESTAMP",
    "BETWEEN",
    "CAST",
    "COUNT",
    "SUM",
    "MIN",
    "MAX",
    "AVG",
    "QUANTILE",
    "FREQ",
    "CUMFREQ",
    "TOP",
    "EXPLODE",
];

const TYPE_NAMES: &[&str] =
    &["INTEGER", "LONG", "FLOAT", "DOUBLE", "BOOLEAN", "STRING", "LIST", "MAP"];

const TYPES_HINT: &str = "types are INTEGER, LONG, FLOAT, DOUBLE, BOOLEAN, STRING, LIST[t], \
                          MAP[t], LIST[MAP[t]] and MAP[MAP[t]], where t is one of the first six";

fn boxed(e: Expr) -> Box<Expr> {
    Box::new(e)
}

impl Parser<'_> {
    /// One whole expression.
    pub(super) fn expr(&mut self) -> Result<Expr> {
        self.expr_bp(0)
    }

    /// An expression whose operators all bind at least as tightly as `min`.
    fn expr_bp(&mut self, min: u8) -> Result<Expr> {
        self.enter()?;
        let left = self.prefix()?;
        let e = self.infix(left, min)?;
        self.leave();
        Ok(e)
    }

    fn infix(&mut self, mut left: Expr, min: u8) -> Result<Expr> {
        // Operator chains loop instead of recursing, but each link makes the tree one level
        // taller; the tree's height is bounded (the prefix's too: calls, lists, unary operators
        // are built there) so that whoever walks it recursively is safe.
        let mut height = height(&left);
        loop {
            if height > super::MAX_HEIGHT {
                return Err(QueryError::syntax(
                    format!(
                        "the expression nests too deeply (more than {} levels)",
                        super::MAX_HEIGHT
                    ),
                    left.span,
                )
                .with_hint(
                    "use IN (a, b, ...) instead of a long chain of ORs, or split the expression",
                ));
            }
            left = match self.infix_step(left, min)? {
                Step::Done(e) => return Ok(e),
                Step::Grew(e) => e,
            };
            height = 1 + height.max(right_height(&left));
        }
    }

    /// One operator after `left`, if one that binds at least as tightly as `min` follows.
    fn infix_step(&mut self, left: Expr, min: u8) -> Result<Step> {
        // a dispatcher of small functions: this frame is on the stack once per level of nesting
        let tok = self.peek();
        let arith = match &tok.kind {
            TokenKind::Plus => Some(BinaryOp::Add),
            TokenKind::Minus => Some(BinaryOp::Sub),
            TokenKind::Star => Some(BinaryOp::Mul),
            TokenKind::Slash => Some(BinaryOp::Div),
            TokenKind::Percent => Some(BinaryOp::Mod),
            TokenKind::Word if self.is_kw(tok, "AND") => Some(BinaryOp::And),
            TokenKind::Word if self.is_kw(tok, "OR") => Some(BinaryOp::Or),
            TokenKind::Word if self.is_kw(tok, "XOR") => Some(BinaryOp::Xor),
            _ => None,
        };
        if let Some(op) = arith {
            return self.binary(left, op, min);
        }
        let compare = match &tok.kind {
            TokenKind::Eq => Some(CompareOp::Eq),
            TokenKind::Ne => Some(CompareOp::Ne),
            TokenKind::Lt => Some(CompareOp::Lt),
            TokenKind::Le => Some(CompareOp::Le),
            TokenKind::Gt => Some(CompareOp::Gt),
            TokenKind::Ge => Some(CompareOp::Ge),
            _ => None,
        };
        match compare {
            Some(op) => self.compare(left, op, min),
            None if tok.kind == TokenKind::Word => self.word_operator(left, min),
            None => Ok(Step::Done(left)),
        }
    }

    /// `left op right` for arithmetic and AND/OR/XOR.
    fn binary(&mut self, left: Expr, op: BinaryOp, min: u8) -> Result<Step> {
        let bp = bp_of(op);
        if bp < min {
            return Ok(Step::Done(left));
        }
        self.bump();
        let right = self.expr_bp(bp + 1)?;
        let span = left.span.to(right.span);
        Ok(Step::Grew(Expr::new(
            ExprKind::Binary { op, left: boxed(left), right: boxed(right) },
            span,
        )))
    }

    /// `left op [ANY|ALL] right` for the comparison operators.
    fn compare(&mut self, left: Expr, op: CompareOp, min: u8) -> Result<Step> {
        if BP_CMP < min {
            return Ok(Step::Done(left));
        }
        self.bump();
        let quantifier = if self.at_quantifier("ANY") {
            self.bump();
            Some(Quantifier::Any)
        } else if self.at_quantifier("ALL") {
            self.bump();
            Some(Quantifier::All)
        } else {
            None
        };
        let right = self.expr_bp(BP_CMP + 1)?;
        if quantifier.is_none() && matches!(op, CompareOp::Eq | CompareOp::Ne) {
            self.refuse_double_quoted_value(&left, &right, false)?;
        }
        let span = left.span.to(right.span);
        Ok(Step::Grew(Expr::new(
            ExprKind::Compare { op, quantifier, left: boxed(left), right: boxed(right) },
            span,
        )))
    }

    /// `[NOT] IN`, `[NOT] RLIKE`, `[NOT] BETWEEN`, `IS [NOT] NULL` (and SQL's LIKE, refused).
    fn word_operator(&mut self, left: Expr, min: u8) -> Result<Step> {
        let tok = self.peek().clone();
        let Some(word) = self.word_upper(&tok) else { return Ok(Step::Done(left)) };
        if !matches!(word.as_str(), "NOT" | "IN" | "RLIKE" | "BETWEEN" | "IS" | "LIKE")
            || BP_CMP < min
        {
            return Ok(Step::Done(left));
        }
        self.bump();
        let (negated, word) = if word == "NOT" {
            let next = self.peek().clone();
            match self.word_upper(&next).as_deref() {
                Some(w @ ("IN" | "RLIKE" | "BETWEEN" | "LIKE")) => {
                    self.bump();
                    (true, w.to_owned())
                }
                _ => {
                    return Err(self
                        .expected("IN, RLIKE or BETWEEN after NOT", &["IN", "RLIKE", "BETWEEN"]))
                }
            }
        } else {
            (false, word)
        };
        let grown = match word.as_str() {
            "IN" => self.in_list(left, negated)?,
            "RLIKE" => {
                let any = self.at_quantifier("ANY");
                if any {
                    self.bump();
                }
                let pattern = self.expr_bp(BP_CMP + 1)?;
                if !any {
                    self.refuse_double_quoted_value(&left, &pattern, true)?;
                }
                let span = left.span.to(pattern.span);
                Expr::new(
                    ExprKind::Rlike { negated, any, value: boxed(left), pattern: boxed(pattern) },
                    span,
                )
            }
            "BETWEEN" => self.between_infix(left, negated)?,
            "IS" => {
                let negated = self.eat_kw("NOT").is_some();
                let Some(null) = self.eat_kw("NULL") else {
                    let mut error = self.expected(
                        if negated { "NULL after IS NOT" } else { "NULL or NOT NULL after IS" },
                        &["NULL", "NOT"],
                    );
                    if self.at_kw("TRUE") || self.at_kw("FALSE") {
                        error = error.with_hint("compare booleans with = : flag = TRUE");
                    }
                    return Err(error);
                };
                let span = left.span.to(null);
                Expr::new(ExprKind::IsNull { negated, value: boxed(left) }, span)
            }
            _ => {
                return Err(QueryError::syntax(
                    "LIKE is not BQL",
                    tok.span.to(Span::new(self.prev_end, self.prev_end)),
                )
                .with_hint(like_hint()))
            }
        };
        Ok(Step::Grew(grown))
    }

    /// `ANY`/`ALL` right after a comparison operator or RLIKE is the quantifier when something
    /// that can start an expression follows it; otherwise it is a field named `any`/`all`
    /// (which the canonical text always quotes).
    fn at_quantifier(&self, kw: &str) -> bool {
        let next = self.peek_at(1);
        self.at_kw(kw)
            && match &next.kind {
                TokenKind::LBracket
                | TokenKind::LParen
                | TokenKind::Minus
                | TokenKind::Number(_)
                | TokenKind::Str(_)
                | TokenKind::QuotedIdent(_) => true,
                TokenKind::Word => {
                    let word = self.text(next);
                    !lexer::is_reserved(word)
                        || ["NULL", "TRUE", "FALSE", "NOW", "NOT", "BETWEEN"]
                            .iter()
                            .any(|w| w.eq_ignore_ascii_case(word))
                }
                _ => false,
            }
    }

    /// After `[NOT] IN`: `(e, ...)`, `[e, ...]` (both an [`ExprKind::List`]) or an expression.
    fn in_list(&mut self, value: Expr, negated: bool) -> Result<Expr> {
        let list = if let Some(open) = self.eat(&TokenKind::LParen) {
            let items = self.comma_list(&TokenKind::RParen, open, "IN (")?;
            Expr::new(ExprKind::List(items), open.to(Span::new(self.prev_end, self.prev_end)))
        } else {
            self.expr_bp(BP_CMP + 1)?
        };
        if let ExprKind::List(items) = &list.kind {
            for item in items {
                self.refuse_double_quoted_value(&value, item, false)?;
            }
        }
        let span = value.span.to(list.span);
        Ok(Expr::new(ExprKind::In { negated, value: boxed(value), list: boxed(list) }, span))
    }

    /// After `[NOT] BETWEEN`: Bullet's `(lo, hi)` or SQL's `lo AND hi`.
    fn between_infix(&mut self, value: Expr, negated: bool) -> Result<Expr> {
        let low = if let Some(open) = self.eat(&TokenKind::LParen) {
            self.enter()?;
            let first = self.expr()?;
            self.leave();
            if self.eat(&TokenKind::Comma).is_some() {
                let high = self.expr()?;
                let close = self.close_paren(open, "BETWEEN (")?;
                let span = value.span.to(close);
                return Ok(Expr::new(
                    ExprKind::Between {
                        negated,
                        value: boxed(value),
                        low: boxed(first),
                        high: boxed(high),
                    },
                    span,
                ));
            }
            // `BETWEEN (x) + 1 AND y`: a parenthesized low bound of SQL's form
            if !self.at(&TokenKind::RParen) {
                return Err(self
                    .expected("',' in BETWEEN (low, high)", &[])
                    .with_hint("write x BETWEEN (low, high), or x BETWEEN low AND high"));
            }
            let close = self.bump().span;
            let grouped = Expr::new(first.kind, open.to(close));
            self.infix(grouped, BP_CMP + 1)?
        } else {
            self.expr_bp(BP_CMP + 1)?
        };
        if self.eat_kw("AND").is_none() {
            return Err(self
                .expected("AND in BETWEEN low AND high", &["AND"])
                .with_hint("write x BETWEEN (low, high), or x BETWEEN low AND high"));
        }
        let high = self.expr_bp(BP_CMP + 1)?;
        let span = value.span.to(high.span);
        Ok(Expr::new(
            ExprKind::Between { negated, value: boxed(value), low: boxed(low), high: boxed(high) },
            span,
        ))
    }

    /// `name = "John Smith"` is almost surely a string in the wrong quotes: refused with a hint
    /// (see the module doc of [`super`]).
    fn refuse_double_quoted_value(&self, left: &Expr, right: &Expr, regex: bool) -> Result<()> {
        let suspicious = |e: &Expr| -> Option<String> {
            let ExprKind::Field(field) = &e.kind else { return None };
            // (a name with whitespace or such characters can only have been written quoted)
            if !field.path.is_empty() || field.hint.is_some() {
                return None;
            }
            let odd = |c: char| c.is_whitespace() || (regex && ".*+?^$[](){}|\\".contains(c));
            field.name.chars().any(odd).then(|| field.name.clone())
        };
        let Some(name) = suspicious(right) else { return Ok(()) };
        if suspicious(left).is_some() {
            return Ok(());
        }
        Err(QueryError::syntax(
            format!("\"{name}\" is a field name: double quotes quote names, not strings"),
            right.span,
        )
        .with_hint(format!(
            "write the string in single quotes: '{}' (to compare with a field with such a name, \
             put that field on the left)",
            name.replace('\'', "''")
        )))
    }

    // ---- prefixes and primaries ----

    fn prefix(&mut self) -> Result<Expr> {
        // a dispatcher of small functions: this frame is on the stack once per level of nesting
        let span = self.peek().span;
        match &self.peek().kind {
            TokenKind::Minus => self.minus(span),
            TokenKind::Number(_) | TokenKind::Str(_) => self.literal(),
            TokenKind::LBracket => self.list(span),
            TokenKind::LParen => self.parenthesized(span),
            TokenKind::QuotedIdent(_) => self.quoted_field(),
            TokenKind::Word => self.word(self.peek().clone()),
            TokenKind::Star => Err(QueryError::syntax("'*' is not a value here", span)
                .with_hint("'*' stands alone in the select list (SELECT *) or in COUNT(*)")),
            _ => Err(self.expected("an expression", &[])),
        }
    }

    /// `-5` (a negative literal) or `-e`.
    fn minus(&mut self, start: Span) -> Result<Expr> {
        self.bump();
        if let TokenKind::Number(n) = &self.peek().kind {
            let n = n.clone();
            let num = self.bump();
            let value = self.number_value(&n, true, start.to(num.span))?;
            return Ok(Expr::new(ExprKind::Literal(value), start.to(num.span)));
        }
        let operand = self.expr_bp(BP_NEG)?;
        let span = start.to(operand.span);
        if let ExprKind::Literal(v) = &operand.kind {
            if let Some(negative) = negate(v) {
                return Ok(Expr::new(ExprKind::Literal(negative), span));
            }
        }
        Ok(Expr::new(ExprKind::Unary { op: UnaryOp::Negate, operand: boxed(operand) }, span))
    }

    /// A number or string literal.
    fn literal(&mut self) -> Result<Expr> {
        let tok = self.bump();
        let value = match &tok.kind {
            TokenKind::Number(n) => self.number_value(n, false, tok.span)?,
            TokenKind::Str(s) => Value::String(s.clone()),
            _ => return Err(QueryError::syntax("expected a literal", tok.span)),
        };
        Ok(Expr::new(ExprKind::Literal(value), tok.span))
    }

    /// `[e, ...]`
    fn list(&mut self, open: Span) -> Result<Expr> {
        self.bump();
        let items = self.comma_list(&TokenKind::RBracket, open, "[")?;
        Ok(Expr::new(ExprKind::List(items), open.to(Span::new(self.prev_end, self.prev_end))))
    }

    /// `( e )`: the expression, its span widened to the parentheses.
    fn parenthesized(&mut self, open: Span) -> Result<Expr> {
        self.bump();
        let inner = self.expr()?;
        if self.at(&TokenKind::Comma) {
            return Err(self.expected("')'", &[]).with_hint(
                "lists are written in brackets, [a, b]; a list after IN may use (a, b)",
            ));
        }
        let close = self.close_paren(open, "this '('")?;
        Ok(Expr::new(inner.kind, open.to(close)))
    }

    /// `"name"` and its path.
    fn quoted_field(&mut self) -> Result<Expr> {
        let tok = self.bump();
        match tok.kind {
            TokenKind::QuotedIdent(name) => self.field(name, tok.span),
            _ => Err(QueryError::syntax("expected a quoted name", tok.span)),
        }
    }

    /// A primary starting with a word: a literal keyword, NOT, a call, or a field.
    fn word(&mut self, tok: Token) -> Result<Expr> {
        let text = self.text(&tok);
        let upper = text.to_ascii_uppercase();
        let call = self.peek_at(1).kind == TokenKind::LParen;
        let literal = |v| Ok(Expr::new(ExprKind::Literal(v), tok.span));
        match upper.as_str() {
            "NULL" => {
                self.bump();
                literal(Value::Null)
            }
            "TRUE" => {
                self.bump();
                literal(Value::Bool(true))
            }
            "FALSE" => {
                self.bump();
                literal(Value::Bool(false))
            }
            "NOW" => {
                self.bump();
                let mut span = tok.span;
                if self.at(&TokenKind::LParen) && self.peek_at(1).kind == TokenKind::RParen {
                    self.bump();
                    span = span.to(self.bump().span);
                }
                Ok(Expr::new(ExprKind::Now, span))
            }
            "NOT" => {
                self.bump();
                let operand = self.expr_bp(BP_NOT)?;
                let span = tok.span.to(operand.span);
                Ok(Expr::new(ExprKind::Unary { op: UnaryOp::Not, operand: boxed(operand) }, span))
            }
            _ if call => self.call(tok, upper),
            _ if lexer::is_reserved(text) => {
                let mut error = self.expected("an expression", &[]);
                if !matches!(upper.as_str(), "AND" | "OR" | "XOR" | "IN" | "IS" | "RLIKE" | "AS") {
                    error = error.with_hint(format!(
                        "{upper} is a reserved word; a field with that name is written in double \
                         quotes: \"{text}\""
                    ));
                }
                Err(error)
            }
            _ => {
                self.bump();
                self.field(text.to_owned(), tok.span)
            }
        }
    }

    /// A field's path (`.key`, `[index]`, `['key']`, `[expr]`) and optional type hint.
    fn field(&mut self, name: String, start: Span) -> Result<Expr> {
        let mut path = Vec::new();
        loop {
            if self.eat(&TokenKind::Dot).is_some() {
                let tok = self.peek().clone();
                let key = match &tok.kind {
                    TokenKind::Word => self.text(&tok).to_owned(),
                    TokenKind::QuotedIdent(key) => key.clone(),
                    _ => {
                        return Err(self.expected("a key name after '.'", &[]).with_hint(
                            "write a[0] for a list element, a['some key'] for any map key",
                        ))
                    }
                };
                self.bump();
                path.push(Accessor::Key(key));
            } else if let Some(open) = self.eat(&TokenKind::LBracket) {
                let index = self.expr()?;
                if !self.at(&TokenKind::RBracket) {
                    return Err(self
                        .expected("']'", &[])
                        .with_hint(format!("to close the '[' at column {}", self.column(open))));
                }
                self.bump();
                path.push(match index.kind {
                    ExprKind::Literal(Value::Int(i)) => Accessor::Index(i64::from(i)),
                    ExprKind::Literal(Value::Long(i)) => Accessor::Index(i),
                    ExprKind::Literal(Value::String(key)) => Accessor::Key(key),
                    _ => Accessor::Expr(boxed(index)),
                });
            } else {
                break;
            }
        }
        let hint =
            if self.eat(&TokenKind::Colon).is_some() { Some(self.type_name()?) } else { None };
        let span = start.to(Span::new(self.prev_end, self.prev_end));
        Ok(Expr::new(ExprKind::Field(Field { name, path, hint }), span))
    }

    fn column(&self, span: Span) -> usize {
        QueryError::syntax("", span).line_column(self.src).1
    }

    /// Items up to `close` (an empty list is allowed), after the opening token at `open`.
    fn comma_list(&mut self, close: &TokenKind, open: Span, what: &str) -> Result<Vec<Expr>> {
        let mut items = Vec::new();
        if self.eat(close).is_some() {
            return Ok(items);
        }
        loop {
            items.push(self.expr()?);
            if self.eat(&TokenKind::Comma).is_some() {
                continue;
            }
            if self.eat(close).is_some() {
                return Ok(items);
            }
            let closer = if close == &TokenKind::RBracket { "']'" } else { "')'" };
            return Err(self.expected(&format!("',' or {closer} to close {what}"), &[]).with_hint(
                format!("the list opened at column {} is not closed", self.column(open)),
            ));
        }
    }

    // ---- numbers ----

    /// The value of a number literal, with its sign.
    fn number_value(&self, n: &Number, negative: bool, span: Span) -> Result<Value> {
        let text = if negative { format!("-{}", n.text) } else { n.text.clone() };
        let out_of_range = |what: &str, hint: &str| {
            QueryError::syntax(format!("{text} is out of range for {what}"), span).with_hint(hint)
        };
        match n.suffix {
            NumberSuffix::Float => match text.parse::<f32>() {
                Ok(x) if x.is_finite() => Ok(Value::Float(x)),
                _ => Err(out_of_range(
                    "a FLOAT",
                    "a FLOAT holds up to about 3.4e38; drop the f for a DOUBLE",
                )),
            },
            NumberSuffix::Double => self.double(&text, span),
            _ if !n.integral => self.double(&text, span),
            NumberSuffix::Long => text.parse::<i64>().map(Value::Long).map_err(|_| {
                out_of_range("a LONG", "a LONG holds -9223372036854775808 to 9223372036854775807")
            }),
            NumberSuffix::None => match text.parse::<i64>() {
                Ok(v) => Ok(i32::try_from(v).map_or(Value::Long(v), Value::Int)),
                Err(_) => Err(out_of_range(
                    "an integer",
                    "integers hold up to 9223372036854775807 (a LONG); write a DOUBLE such as \
                     1.0e20 for larger numbers",
                )),
            },
        }
    }

    fn double(&self, text: &str, span: Span) -> Result<Value> {
        match text.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(Value::Double(x)),
            _ => Err(QueryError::syntax(format!("{text} is out of range for a DOUBLE"), span)
                .with_hint("a DOUBLE holds up to about 1.8e308")),
        }
    }

    /// A number for a distribution's points: any literal, optionally negative, as a double.
    fn point(&mut self, what: &str) -> Result<f64> {
        let minus = self.eat(&TokenKind::Minus);
        let tok = self.peek().clone();
        let TokenKind::Number(n) = &tok.kind else {
            return Err(self.expected(what, &[]));
        };
        self.bump();
        let span = minus.map_or(tok.span, |m| m.to(tok.span));
        let text = if minus.is_some() { format!("-{}", n.text) } else { n.text.clone() };
        match text.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(x),
            _ => Err(QueryError::syntax(format!("{text} is out of range for a DOUBLE"), span)),
        }
    }

    // ---- calls ----

    /// `name(`...: a scalar function, an aggregate, CAST or BETWEEN.
    fn call(&mut self, name_tok: Token, upper: String) -> Result<Expr> {
        self.bump();
        let open = self.bump().span;
        self.enter()?;
        let e = self.call_body(name_tok.span, &upper, open)?;
        self.leave();
        Ok(e)
    }

    fn call_body(&mut self, name: Span, upper: &str, open: Span) -> Result<Expr> {
        // one small function per kind keeps this frame, which is on the stack of every
        // nested call, small in unoptimized builds
        match upper {
            "CAST" => self.call_cast(name, upper, open),
            "BETWEEN" => self.call_between_call(name, upper, open),
            "COUNT" => self.call_count(name, upper, open),
            "SUM" | "MIN" | "MAX" | "AVG" => self.call_simple_aggregate(name, upper, open),
            "QUANTILE" | "FREQ" | "CUMFREQ" => self.call_distribution(name, upper, open),
            "TOP" => self.call_top(name, upper, open),
            "EXPLODE" => self.call_explode(name, upper, open),
            _ => self.call_scalar(name, upper, open),
        }
    }

    fn call_cast(&mut self, name: Span, upper: &str, open: Span) -> Result<Expr> {
        let _ = (name, upper, open);
        let value = self.expr()?;
        if self.eat_kw("AS").is_none() {
            return Err(self.expected("AS in CAST(value AS type)", &["AS"]));
        }
        let to = self.type_name()?;
        let close = self.close_paren(open, "CAST(")?;
        Ok(Expr::new(ExprKind::Cast { value: boxed(value), to }, name.to(close)))
    }

    fn call_between_call(&mut self, name: Span, upper: &str, open: Span) -> Result<Expr> {
        let _ = (name, upper, open);
        let args = self.args(open, upper)?;
        let span = name.to(Span::new(self.prev_end, self.prev_end));
        let found = args.len();
        let Ok([value, low, high]) = <[Expr; 3]>::try_from(args) else {
            return Err(arity("BETWEEN", "3 arguments", found, "BETWEEN(x, low, high)", span));
        };
        let (value, low, high) = (boxed(value), boxed(low), boxed(high));
        Ok(Expr::new(ExprKind::Between { negated: false, value, low, high }, span))
    }

    fn call_count(&mut self, name: Span, upper: &str, open: Span) -> Result<Expr> {
        let _ = (name, upper, open);
        let aggregate = |a, p: &Self| {
            Ok(Expr::new(ExprKind::Aggregate(a), name.to(Span::new(p.prev_end, p.prev_end))))
        };
        if self.eat(&TokenKind::Star).is_some() {
            self.close_paren(open, "COUNT(*")?;
            return aggregate(Aggregate::Count, self);
        }
        if self.eat_kw("DISTINCT").is_some() {
            let fields = self.args(open, "COUNT(DISTINCT")?;
            if fields.is_empty() {
                return Err(QueryError::syntax(
                    "COUNT(DISTINCT ...) needs at least one expression",
                    name.to(Span::new(self.prev_end, self.prev_end)),
                ));
            }
            return aggregate(Aggregate::CountDistinct(fields), self);
        }
        let args = self.args(open, upper)?;
        Err(QueryError::syntax(
            format!(
                "COUNT takes * or DISTINCT, found {} argument{}",
                args.len(),
                plural(args.len())
            ),
            name.to(Span::new(self.prev_end, self.prev_end)),
        )
        .with_hint("COUNT(*) counts records; COUNT(DISTINCT e, ...) counts distinct values"))
    }

    fn call_simple_aggregate(&mut self, name: Span, upper: &str, open: Span) -> Result<Expr> {
        let _ = (name, upper, open);
        if let Some(d) = self.eat_kw("DISTINCT") {
            return Err(QueryError::syntax(format!("{upper}(DISTINCT ...) is not BQL"), d)
                .with_hint("DISTINCT goes in COUNT(DISTINCT ...) or SELECT DISTINCT"));
        }
        let mut args = self.args(open, upper)?;
        let span = name.to(Span::new(self.prev_end, self.prev_end));
        if args.len() != 1 {
            let usage = format!("{upper}(e)");
            return Err(arity(upper, "1 argument", args.len(), &usage, span));
        }
        let arg = boxed(args.remove(0));
        let a = match upper {
            "SUM" => Aggregate::Sum(arg),
            "MIN" => Aggregate::Min(arg),
            "MAX" => Aggregate::Max(arg),
            _ => Aggregate::Avg(arg),
        };
        Ok(Expr::new(ExprKind::Aggregate(a), span))
    }

    fn call_distribution(&mut self, name: Span, upper: &str, open: Span) -> Result<Expr> {
        let _ = (name, upper, open);
        let aggregate = |a, p: &Self| {
            Ok(Expr::new(ExprKind::Aggregate(a), name.to(Span::new(p.prev_end, p.prev_end))))
        };
        let kind = match upper {
            "QUANTILE" => DistributionKind::Quantile,
            "FREQ" => DistributionKind::Freq,
            _ => DistributionKind::CumFreq,
        };
        let value = self.expr()?;
        let usage = "LINEAR, n | REGION, start, end, step | MANUAL, p, ...";
        if self.eat(&TokenKind::Comma).is_none() {
            return Err(self
                .expected(&format!("',' and the points in {upper}(e, ...)"), &[])
                .with_hint(format!("write {upper}(e, {usage})")));
        }
        let points = if self.eat_kw("LINEAR").is_some() {
            self.expect(&TokenKind::Comma, "',' after LINEAR")?;
            Points::Linear { count: self.uint("the number of points after LINEAR")?.0 }
        } else if self.eat_kw("REGION").is_some() {
            self.expect(&TokenKind::Comma, "',' after REGION")?;
            let start = self.point("the start of the region")?;
            self.expect(&TokenKind::Comma, "',' after the start")?;
            let end = self.point("the end of the region")?;
            self.expect(&TokenKind::Comma, "',' after the end")?;
            let step = self.point("the step of the region")?;
            Points::Region { start, end, step }
        } else if self.eat_kw("MANUAL").is_some() {
            let mut points = Vec::new();
            while self.eat(&TokenKind::Comma).is_some() {
                points.push(self.point("a point after ','")?);
            }
            if points.is_empty() {
                return Err(self
                    .expected("',' and at least one point after MANUAL", &[])
                    .with_hint(format!("write {upper}(e, MANUAL, 0.5, 0.99)")));
            }
            Points::Manual { points }
        } else {
            return Err(self
                .expected("LINEAR, REGION or MANUAL", &["LINEAR", "REGION", "MANUAL"])
                .with_hint_if_none(&format!("write {upper}(e, {usage})")));
        };
        self.close_paren(open, &format!("{upper}("))?;
        aggregate(Aggregate::Distribution { kind, value: boxed(value), points }, self)
    }

    fn call_top(&mut self, name: Span, upper: &str, open: Span) -> Result<Expr> {
        let _ = (name, upper, open);
        let aggregate = |a, p: &Self| {
            Ok(Expr::new(ExprKind::Aggregate(a), name.to(Span::new(p.prev_end, p.prev_end))))
        };
        let (k, _) = self.uint("the number of items k in TOP(k, e, ...)")?;
        // `TOP(k, t, e, ...)`: a whole number directly followed by ',' is the threshold
        let threshold = if self.at(&TokenKind::Comma)
            && matches!(&self.peek_at(1).kind, TokenKind::Number(n) if n.integral)
            && self.peek_at(2).kind == TokenKind::Comma
        {
            self.bump();
            Some(self.uint("the threshold in TOP(k, threshold, e, ...)")?.0)
        } else {
            None
        };
        let mut rest = Vec::new();
        while self.eat(&TokenKind::Comma).is_some() {
            rest.push(self.expr()?);
        }
        self.close_paren(open, "TOP(")?;
        let span = name.to(Span::new(self.prev_end, self.prev_end));
        if rest.is_empty() {
            return Err(QueryError::syntax("TOP needs at least one expression after k", span)
                .with_hint("write TOP(k[, threshold], e, ...), e.g. TOP(10, page)"));
        }
        // `TOP(k, (5), e)` reads as its canonical text `TOP(k, 5, e)` does
        let threshold = match (threshold, &rest[0].kind) {
            (None, ExprKind::Literal(Value::Int(t))) if rest.len() > 1 && *t >= 0 => {
                let t = *t as u64;
                rest.remove(0);
                Some(t)
            }
            (None, ExprKind::Literal(Value::Long(t))) if rest.len() > 1 && *t >= 0 => {
                let t = *t as u64;
                rest.remove(0);
                Some(t)
            }
            (threshold, _) => threshold,
        };
        aggregate(Aggregate::Top { k, threshold, fields: rest }, self)
    }

    fn call_explode(&mut self, name: Span, upper: &str, open: Span) -> Result<Expr> {
        let _ = (name, upper, open);
        Err(QueryError::syntax("EXPLODE is a table function, not a value", name).with_hint(
            "use it as a select item, SELECT EXPLODE(list) AS item FROM ..., or in \
         LATERAL VIEW EXPLODE(list) AS item",
        ))
    }

    fn call_scalar(&mut self, name: Span, upper: &str, open: Span) -> Result<Expr> {
        let _ = (name, upper, open);
        let Some(&(fname, function, min, max, usage)) =
            FUNCTIONS.iter().find(|(n, ..)| *n == upper)
        else {
            let written = &self.src[name.start..name.end];
            let error = QueryError::syntax(format!("unknown function '{written}'"), name);
            return Err(if let Some(bql) = sql_function(written) {
                error.with_hint(format!("BQL writes this as {bql}"))
            } else if let Some(c) = did_you_mean(written, CALLABLE) {
                error.with_hint(format!("did you mean {c}?"))
            } else {
                error.with_hint(
                    "the functions are SIZEOF ABS TRIM LOWER UPPER HASH SIZEIS \
                     CONTAINSKEY CONTAINSVALUE FILTER IF BETWEEN SUBSTRING UNIXTIMESTAMP \
                     CAST, and the aggregates COUNT SUM MIN MAX AVG QUANTILE FREQ \
                     CUMFREQ TOP",
                )
            });
        };
        let args = self.args(open, fname)?;
        let span = name.to(Span::new(self.prev_end, self.prev_end));
        if args.len() < min || args.len() > max {
            let expected = if min == max {
                format!("{min} argument{}", plural(min))
            } else if min == 0 {
                format!("at most {max} arguments")
            } else {
                format!("{min} or {max} arguments")
            };
            return Err(arity(fname, &expected, args.len(), usage, span));
        }
        Ok(Expr::new(ExprKind::Call { function, args }, span))
    }

    /// Comma-separated arguments up to the `)` of the call opened at `open`.
    fn args(&mut self, open: Span, name: &str) -> Result<Vec<Expr>> {
        self.comma_list(&TokenKind::RParen, open, &format!("{name}("))
    }

    // ---- types ----

    /// `INTEGER ... STRING`, `LIST[t]`, `MAP[t]`, `LIST[MAP[t]]`, `MAP[MAP[t]]`.
    pub(super) fn type_name(&mut self) -> Result<Type> {
        let (outer, _) = self.type_word()?;
        let outer_list = match outer {
            TypeWord::Primitive(t) => return Ok(t),
            TypeWord::List => true,
            TypeWord::Map => false,
        };
        let open = self.expect(&TokenKind::LBracket, "'[' after the container type")?;
        let (inner, inner_span) = self.type_word()?;
        let element = match inner {
            TypeWord::Primitive(t) => t,
            TypeWord::List => {
                let outer = if outer_list { "LIST" } else { "MAP" };
                return Err(QueryError::syntax(
                    format!("{outer}[LIST[...]] is not a Bullet type"),
                    inner_span,
                )
                .with_hint(TYPES_HINT));
            }
            TypeWord::Map => {
                self.expect(&TokenKind::LBracket, "'[' after MAP")?;
                let (deepest, deepest_span) = self.type_word()?;
                let TypeWord::Primitive(t) = deepest else {
                    return Err(QueryError::syntax("types nest at most two deep", deepest_span)
                        .with_hint(TYPES_HINT));
                };
                self.expect(&TokenKind::RBracket, "']' to close MAP[")?;
                Type::Map(Box::new(t))
            }
        };
        if !self.at(&TokenKind::RBracket) {
            return Err(self
                .expected("']'", &[])
                .with_hint(format!("to close the '[' at column {}", self.column(open))));
        }
        self.bump();
        Ok(if outer_list { Type::List(Box::new(element)) } else { Type::Map(Box::new(element)) })
    }

    /// Reads one type word.
    fn type_word(&mut self) -> Result<(TypeWord, Span)> {
        let tok = self.peek().clone();
        let word = match self.word_upper(&tok).as_deref() {
            Some("LIST") => TypeWord::List,
            Some("MAP") => TypeWord::Map,
            Some("INTEGER") => TypeWord::Primitive(Type::Integer),
            Some("LONG") => TypeWord::Primitive(Type::Long),
            Some("FLOAT") => TypeWord::Primitive(Type::Float),
            Some("DOUBLE") => TypeWord::Primitive(Type::Double),
            Some("BOOLEAN") => TypeWord::Primitive(Type::Boolean),
            Some("STRING") => TypeWord::Primitive(Type::String),
            other => {
                let alias = match other {
                    Some("INT" | "BIGINT" | "SMALLINT") => Some("did you mean INTEGER or LONG?"),
                    Some("BOOL") => Some("did you mean BOOLEAN?"),
                    Some("VARCHAR" | "TEXT" | "CHAR") => Some("did you mean STRING?"),
                    Some("REAL") => Some("did you mean FLOAT or DOUBLE?"),
                    _ => None,
                };
                let error = self.expected("a type", TYPE_NAMES);
                return Err(match alias {
                    Some(alias) => QueryError { hint: Some(alias.to_owned()), ..error },
                    None => error.with_hint_if_none(TYPES_HINT),
                });
            }
        };
        self.bump();
        Ok((word, tok.span))
    }
}

enum TypeWord {
    List,
    Map,
    Primitive(Type),
}

enum Step {
    /// No operator binds here: the expression is complete.
    Done(Expr),
    /// `left op right` (or a postfix comparison) was built.
    Grew(Expr),
}

/// The height of the parts of an operator node other than its left operand.
fn right_height(e: &Expr) -> usize {
    match &e.kind {
        ExprKind::Binary { right, .. } | ExprKind::Compare { right, .. } => height(right),
        ExprKind::Rlike { pattern, .. } => height(pattern),
        ExprKind::In { list, .. } => height(list),
        ExprKind::Between { low, high, .. } => height(low).max(height(high)),
        _ => 0,
    }
}

/// The height of an expression tree (a leaf is 1). Only called on trees the parser has bounded.
pub(super) fn height(e: &Expr) -> usize {
    let many = |es: &[Expr]| es.iter().map(height).max().unwrap_or(0);
    1 + match &e.kind {
        ExprKind::Literal(_) | ExprKind::Now => 0,
        ExprKind::List(items) => many(items),
        ExprKind::Field(f) => f
            .path
            .iter()
            .map(|a| if let Accessor::Expr(e) = a { height(e) } else { 0 })
            .max()
            .unwrap_or(0),
        ExprKind::Unary { operand, .. } => height(operand),
        ExprKind::Binary { left, right, .. } | ExprKind::Compare { left, right, .. } => {
            height(left).max(height(right))
        }
        ExprKind::Rlike { value, pattern, .. } => height(value).max(height(pattern)),
        ExprKind::In { value, list, .. } => height(value).max(height(list)),
        ExprKind::Between { value, low, high, .. } => {
            height(value).max(height(low)).max(height(high))
        }
        ExprKind::IsNull { value, .. } => height(value),
        ExprKind::Call { args, .. } => many(args),
        ExprKind::Cast { value, .. } => height(value),
        ExprKind::Aggregate(a) => match a {
            Aggregate::Count => 0,
            Aggregate::Sum(e) | Aggregate::Min(e) | Aggregate::Max(e) | Aggregate::Avg(e) => {
                height(e)
            }
            Aggregate::CountDistinct(es) => many(es),
            Aggregate::Distribution { value, .. } => height(value),
            Aggregate::Top { fields, .. } => many(fields),
        },
    }
}

fn bp_of(op: BinaryOp) -> u8 {
    match op {
        BinaryOp::Or => BP_OR,
        BinaryOp::Xor => BP_XOR,
        BinaryOp::And => BP_AND,
        BinaryOp::Add | BinaryOp::Sub => BP_ADD,
        BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod => BP_MUL,
    }
}

/// `-v` for a numeric literal, when it fits its type.
fn negate(v: &Value) -> Option<Value> {
    match v {
        Value::Int(i) => i.checked_neg().map(Value::Int),
        Value::Long(i) => i.checked_neg().map(Value::Long),
        Value::Float(x) => Some(Value::Float(-x)),
        Value::Double(x) => Some(Value::Double(-x)),
        _ => None,
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn arity(name: &str, expected: &str, found: usize, usage: &str, span: Span) -> QueryError {
    QueryError::syntax(format!("{name} takes {expected}, found {found}"), span)
        .with_hint(format!("usage: {usage}"))
}
