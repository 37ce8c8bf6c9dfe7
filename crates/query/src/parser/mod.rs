//! The BQL parser: tokens from [`crate::lexer`] → [`Query`], with the exact span of every
//! node, and the first syntax error as a [`QueryError`] that says what was expected, what was
//! found, and (where it can guess) what the user meant.
//!
//! # Why by hand
//! A hand-written recursive-descent parser with a Pratt loop for operators gives precise spans,
//! errors phrased for the place they happen ("expected FROM after the select list, found
//! 'WERE'"), did-you-mean hints drawn from the words that could stand there, context-dependent
//! keywords (so `count`, `time` or `key` stay usable as field names), and no build-time
//! generator. It never panics on any input, bounds both the trees it builds ([`MAX_HEIGHT`])
//! and its own recursion ([`MAX_DEPTH`]), so deep input cannot overflow the stack here or in
//! whoever walks the tree, and every loop consumes a token, so it always ends.
//!
//! # Reserved words, and where other words are keywords
//! [`crate::lexer::RESERVED`] lists the words that can never be a bare field name or alias
//! (`SELECT FROM WHERE GROUP HAVING ORDER WINDOWING LIMIT LATERAL AS DISTINCT AND OR XOR NOT IN
//! IS NULL TRUE FALSE BETWEEN RLIKE NOW`). Any other word is a keyword only where the grammar
//! expects one: a function name only when `(` follows (`count` is a field, `COUNT(*)` an
//! aggregate), `TIME`/`RECORD`/`ALL`/`FIRST`/`MAX`/`LINEAR`/... only inside `STREAM(...)`,
//! `WINDOWING ...` and distribution arguments, `ASC`/`DESC` only after an ORDER BY item,
//! `OUTER`/`EXPLODE` only at the start of a select item or after `LATERAL VIEW`, and `ANY`/`ALL`
//! only right after a comparison operator or `RLIKE` when an expression follows (`a = any` and
//! `a = any AND b` compare with a field named `any`; `a = "any" - 1` needs the quotes). So
//! `key`, `value`, `type`, `time`, `record`, `timestamp` and `count` are plain names; a reserved
//! word, or any name at all, can be written in double quotes: `"from"`, `"123col"`.
//!
//! # Choices where Bullet or SQL leave room
//! - `a BETWEEN lo AND hi` (SQL) is accepted as well as Bullet's `a BETWEEN (lo, hi)`; both give
//!   [`ExprKind::Between`], as does the function form `BETWEEN(a, lo, hi)`.
//! - `IN (e, ...)` and `IN [e, ...]` both give an [`ExprKind::List`] as the right side;
//!   `IN field` keeps the expression. `()` and `[]` are allowed (the validator decides).
//! - `==` is `=`, `<>` is `!=`. `NOW` may be written `NOW()`.
//! - A minus sign before a number literal is part of the literal (`-5` is `Literal(Int(-5))`,
//!   `-2147483648` is an INTEGER); an integer too large for an INTEGER is a LONG without needing
//!   `L`; past a LONG it is an error.
//! - Field paths may be any number of `.key`, `['key']`, `[0]` and `[expr]` steps (the validator
//!   enforces Bullet's two levels if it wants to). `[0]`/`[-1]` (an integer literal) is
//!   [`Accessor::Index`], `['k']` (a string literal) is [`Accessor::Key`], any other expression
//!   is [`Accessor::Expr`].
//! - An alias without `AS` is taken only when a `,` or `FROM` follows it, so `SELECT a FORM
//!   STREAM()` reports the misspelled FROM instead of reading `FORM` as an alias.
//! - A double-quoted name containing whitespace (or, after RLIKE, regex characters) on the right
//!   of `=`/`!=`, `RLIKE` or in an `IN` list is refused as a string written with the wrong
//!   quotes (`name = "John Smith"`); write such a field on the left side, or compare two such
//!   fields, which is allowed.
//! - `TOP(k, t, e, ...)`: a non-negative whole number right after k, with more arguments after
//!   it, is the threshold; `TOP(10, 5)` has no threshold and one (constant) expression.
//! - WINDOWING is accepted as Bullet 1.x writes it, `WINDOWING TUMBLING(5000, TIME)`, and as
//!   older Bullet did, `WINDOWING(TUMBLING, 5000, TIME)`. It is kept in an outer query's tree;
//!   the validator refuses it there.
//! - A query in `FROM ( ... )` must itself read `FROM STREAM(...)` (one level of nesting).
//! - `-(5)` folds to the literal `-5` too, so every parsed tree prints ([`crate::display`]) to
//!   text that parses back to the same tree; `parser::roundtrip` tests that property.
//! - There are no comments (Bullet has none; `--5` is minus minus five).
//!
//! # Testing
//! Unit tests beside this file cover every construct and error; `tests/parser_never_panics.rs`
//! feeds arbitrary and mutated queries; `fuzz/` has a cargo-fuzz target: from the repository
//! root, `cargo +nightly fuzz run parse fuzz/corpus/parse fuzz/seeds/parse` (see
//! `fuzz/README.md`).

mod expr;
#[cfg(test)]
mod roundtrip;
#[cfg(test)]
mod tests;

use crate::ast::*;
use crate::error::QueryError;
use crate::hint::did_you_mean;
use crate::lexer::{self, NumberSuffix, Token, TokenKind};

/// How tall a parsed expression tree may be (a leaf is 1): past it, an error. Every tree the
/// parser returns is at most this tall, so recursive walks of it (validation, display,
/// evaluation, drop) cannot overflow the stack. Operator chains (`a OR b OR c ...`) loop in the
/// parser but nest in the tree, so this also bounds them (use `IN (...)` for long lists).
/// It is kept low because unoptimized builds spend up to ~14 KB of stack per level of nesting
/// and test threads have 2 MB (`tests::depth_is_bounded` parses the tallest trees on one).
pub const MAX_HEIGHT: usize = 96;

/// How deeply the parser itself may recurse (parentheses, lists, calls, operators, subscripts):
/// past it, an error. It is a guard for the parser's own stack and never the binding limit for
/// a tree within [`MAX_HEIGHT`]: the canonical text of such a tree needs at most two levels per
/// level of the tree (a parenthesis and an operand), so it always parses back.
pub const MAX_DEPTH: usize = 2 * MAX_HEIGHT + 16;

/// Parses one BQL query (a trailing `;` is allowed).
pub fn parse_bql(text: &str) -> std::result::Result<Query, QueryError> {
    let mut parser = Parser::new(text)?;
    let query = parser.query(false)?;
    if parser.eat(&TokenKind::Semicolon).is_some() && !parser.at(&TokenKind::Eof) {
        let tok = parser.peek();
        return Err(QueryError::syntax(
            format!("expected the end of the query after ';', found {}", parser.describe(tok)),
            tok.span,
        )
        .with_hint("send one query at a time"));
    }
    parser.end_of_query(&query)?;
    Ok(query)
}

/// Parses one expression on its own (as it would appear in WHERE); the whole text must be the
/// expression. Used to check that the canonical text ([`crate::display`]) reads back.
pub fn parse_expr(text: &str) -> std::result::Result<Expr, QueryError> {
    let mut parser = Parser::new(text)?;
    let e = parser.expr()?;
    if !parser.at(&TokenKind::Eof) {
        let tok = parser.peek().clone();
        return Err(QueryError::syntax(
            format!("unexpected {} after the expression", parser.describe(&tok)),
            tok.span,
        ));
    }
    Ok(e)
}

/// The clauses after FROM, in the order they must come.
const CLAUSES: &[(&str, &str)] = &[
    ("LATERAL", "LATERAL VIEW"),
    ("WHERE", "WHERE"),
    ("GROUP", "GROUP BY"),
    ("HAVING", "HAVING"),
    ("ORDER", "ORDER BY"),
    ("WINDOWING", "WINDOWING"),
    ("LIMIT", "LIMIT"),
];

pub(crate) struct Parser<'s> {
    src: &'s str,
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
    /// Where the last consumed token ended (for spans that end at it).
    prev_end: usize,
}

type Result<T> = std::result::Result<T, QueryError>;

impl<'s> Parser<'s> {
    fn new(src: &'s str) -> Result<Self> {
        Ok(Self { src, tokens: lexer::tokenize(src)?, pos: 0, depth: 0, prev_end: 0 })
    }

    // ---- token helpers ----

    fn peek(&self) -> &Token {
        self.peek_at(0)
    }

    /// The token `n` ahead (the final EOF when past the end).
    fn peek_at(&self, n: usize) -> &Token {
        let last = self.tokens.len() - 1;
        &self.tokens[(self.pos + n).min(last)]
    }

    fn bump(&mut self) -> Token {
        let tok = self.peek().clone();
        if tok.kind != TokenKind::Eof {
            self.pos += 1;
            self.prev_end = tok.span.end;
        }
        tok
    }

    fn at(&self, kind: &TokenKind) -> bool {
        &self.peek().kind == kind
    }

    fn eat(&mut self, kind: &TokenKind) -> Option<Span> {
        if self.at(kind) {
            Some(self.bump().span)
        } else {
            None
        }
    }

    fn text(&self, tok: &Token) -> &'s str {
        &self.src[tok.span.start..tok.span.end]
    }

    /// True when `tok` is the word `kw` (any case).
    fn is_kw(&self, tok: &Token, kw: &str) -> bool {
        tok.kind == TokenKind::Word && self.text(tok).eq_ignore_ascii_case(kw)
    }

    fn at_kw(&self, kw: &str) -> bool {
        self.is_kw(self.peek(), kw)
    }

    fn eat_kw(&mut self, kw: &str) -> Option<Span> {
        if self.at_kw(kw) {
            Some(self.bump().span)
        } else {
            None
        }
    }

    /// The word at `tok`, upper-cased, or `None` for other tokens.
    fn word_upper(&self, tok: &Token) -> Option<String> {
        (tok.kind == TokenKind::Word).then(|| self.text(tok).to_ascii_uppercase())
    }

    /// How an error message names a token.
    fn describe(&self, tok: &Token) -> String {
        match &tok.kind {
            TokenKind::Eof => "the end of the query".to_owned(),
            TokenKind::Str(_) => format!("the string {}", self.text(tok)),
            TokenKind::QuotedIdent(_) => format!("the name {}", self.text(tok)),
            TokenKind::Word if lexer::is_reserved(self.text(tok)) => {
                format!("keyword {}", self.text(tok).to_ascii_uppercase())
            }
            _ => format!("'{}'", self.text(tok)),
        }
    }

    /// "expected {what}, found {the next token}", at the next token, with a did-you-mean hint
    /// when the next token is a word close to one of `candidates`.
    fn expected(&self, what: &str, candidates: &[&str]) -> QueryError {
        let tok = self.peek();
        let error =
            QueryError::syntax(format!("expected {what}, found {}", self.describe(tok)), tok.span);
        match tok.kind {
            TokenKind::Word => match did_you_mean(self.text(tok), candidates) {
                Some(c) => error.with_hint(format!("did you mean {c}?")),
                None => error,
            },
            _ => error,
        }
    }

    fn expect_kw(&mut self, kw: &str, what: &str) -> Result<Span> {
        self.eat_kw(kw).ok_or_else(|| self.expected(what, &[kw]))
    }

    fn expect(&mut self, kind: &TokenKind, what: &str) -> Result<Span> {
        self.eat(kind).ok_or_else(|| self.expected(what, &[]))
    }

    /// Expects the `)` that closes the `(` at `open`.
    fn close_paren(&mut self, open: Span, what: &str) -> Result<Span> {
        if let Some(span) = self.eat(&TokenKind::RParen) {
            return Ok(span);
        }
        let (line, column) = QueryError::syntax("", open).line_column(self.src);
        Err(self
            .expected(&format!("')' to close {what}"), &[])
            .with_hint(format!("the '(' at line {line}, column {column} is not closed")))
    }

    /// Counts one level of nesting; an error past [`MAX_DEPTH`].
    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(QueryError::syntax(
                format!("the query nests too deeply (more than {MAX_DEPTH} levels of parentheses)"),
                self.peek().span,
            )
            .with_hint("split the expression or remove redundant parentheses"));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// A whole number (for LIMIT, durations, counts): digits with an optional `L`.
    fn uint(&mut self, what: &str) -> Result<(u64, Span)> {
        let tok = self.peek().clone();
        match &tok.kind {
            TokenKind::Number(n)
                if n.integral && matches!(n.suffix, NumberSuffix::None | NumberSuffix::Long) =>
            {
                self.bump();
                n.text.parse::<u64>().map(|v| (v, tok.span)).map_err(|_| {
                    QueryError::syntax(format!("{what} is too large"), tok.span)
                        .with_hint(format!("the largest allowed is {}", u64::MAX))
                })
            }
            TokenKind::Number(_) => Err(QueryError::syntax(
                format!("{what} must be a whole number, found {}", self.text(&tok)),
                tok.span,
            )),
            TokenKind::Minus => Err(QueryError::syntax(
                format!("{what} cannot be negative"),
                tok.span.to(self.peek_at(1).span),
            )),
            _ => Err(self.expected(what, &[])),
        }
    }

    // ---- the query ----

    /// `SELECT ... FROM ... [clauses]`; `nested` inside `FROM ( ... )`.
    fn query(&mut self, nested: bool) -> Result<Query> {
        self.enter()?;
        let start = self.peek().span.start;
        if !self.at_kw("SELECT") {
            let what = if nested {
                "SELECT to start the query in FROM ( ... )"
            } else {
                "a query starting with SELECT"
            };
            return Err(self.expected(what, &["SELECT"]));
        }
        let select = self.select()?;
        if !self.at_kw("FROM") {
            return Err(self.expected("FROM after the select list", &["FROM"]));
        }
        self.bump();
        let from = self.from(nested)?;
        let mut query = Query {
            select,
            from,
            lateral_views: Vec::new(),
            where_clause: None,
            group_by: Vec::new(),
            having: None,
            order_by: Vec::new(),
            window: None,
            limit: None,
            span: Span::default(),
        };
        let mut last: Option<usize> = None;
        loop {
            let tok = self.peek().clone();
            let Some(index) =
                self.word_upper(&tok).and_then(|w| CLAUSES.iter().position(|(kw, _)| *kw == w))
            else {
                break;
            };
            if let Some(last) = last {
                if index < last || (index == last && index != 0) {
                    let message = if index == last {
                        format!("a query has only one {} clause", CLAUSES[index].1)
                    } else {
                        format!("{} must come before {}", CLAUSES[index].1, CLAUSES[last].1)
                    };
                    return Err(QueryError::syntax(message, tok.span).with_hint(
                        "clauses go in this order: LATERAL VIEW, WHERE, GROUP BY, HAVING, \
                         ORDER BY, WINDOWING, LIMIT",
                    ));
                }
            }
            last = Some(index);
            self.bump();
            match index {
                0 => {
                    self.expect_kw("VIEW", "VIEW after LATERAL")?;
                    let view = self.table_function()?;
                    query.lateral_views.push(view);
                }
                1 => query.where_clause = Some(self.expr()?),
                2 => {
                    self.expect_kw("BY", "BY after GROUP")?;
                    query.group_by = self.expr_list_until_clause()?;
                }
                3 => query.having = Some(self.expr()?),
                4 => {
                    self.expect_kw("BY", "BY after ORDER")?;
                    loop {
                        let expr = self.expr()?;
                        let descending = if self.eat_kw("DESC").is_some() {
                            true
                        } else {
                            self.eat_kw("ASC");
                            false
                        };
                        query.order_by.push(OrderItem { expr, descending });
                        if self.eat(&TokenKind::Comma).is_none() {
                            break;
                        }
                    }
                }
                5 => query.window = Some(self.window(tok.span)?),
                _ => {
                    let (value, span) = self.uint("a row count after LIMIT")?;
                    query.limit = Some(Limit { value, span });
                }
            }
        }
        query.span = Span::new(start, self.prev_end);
        self.leave();
        Ok(query)
    }

    fn expr_list_until_clause(&mut self) -> Result<Vec<Expr>> {
        let mut items = vec![self.expr()?];
        while self.eat(&TokenKind::Comma).is_some() {
            items.push(self.expr()?);
        }
        Ok(items)
    }

    /// After the last clause: the end of the text, or an error naming what could have come.
    fn end_of_query(&self, query: &Query) -> Result<()> {
        if self.at(&TokenKind::Eof) {
            return Ok(());
        }
        Err(self.clause_error(query, "the end of the query"))
    }

    /// "expected <the clauses that may still come> or {end}, found X".
    fn clause_error(&self, query: &Query, end: &str) -> QueryError {
        let done = if query.limit.is_some() {
            7
        } else if query.window.is_some() {
            6
        } else if !query.order_by.is_empty() {
            5
        } else if query.having.is_some() {
            4
        } else if !query.group_by.is_empty() {
            3
        } else if query.where_clause.is_some() {
            2
        } else {
            0
        };
        let names: Vec<&str> = CLAUSES[done..].iter().map(|(_, name)| *name).collect();
        let what = if names.is_empty() {
            end.to_owned()
        } else {
            format!("{} or {end}", names.join(", "))
        };
        let tok = self.peek();
        let mut error =
            QueryError::syntax(format!("expected {what}, found {}", self.describe(tok)), tok.span);
        if tok.kind == TokenKind::Word {
            let word = self.text(tok);
            let firsts: Vec<&str> = CLAUSES.iter().map(|(kw, _)| *kw).collect();
            if let Some(kw) = did_you_mean(word, &firsts) {
                let name = CLAUSES.iter().find(|(k, _)| *k == kw).map_or(kw, |(_, n)| *n);
                error = error.with_hint(format!("did you mean {name}?"));
            } else if CLAUSES.iter().any(|(kw, _)| kw.eq_ignore_ascii_case(word)) {
                error = error.with_hint(
                    "clauses go in this order: LATERAL VIEW, WHERE, GROUP BY, HAVING, ORDER BY, \
                     WINDOWING, LIMIT",
                );
            } else if word.eq_ignore_ascii_case("LIKE") {
                error = error.with_hint(like_hint());
            }
        }
        error
    }

    /// `[DISTINCT] item, ...`
    fn select(&mut self) -> Result<Select> {
        let start = self.bump().span;
        let distinct = self.eat_kw("DISTINCT").is_some();
        if self.at_kw("FROM") || self.at(&TokenKind::Eof) {
            let tok = self.peek();
            return Err(QueryError::syntax("the select list is empty", tok.span).with_hint(
                "write SELECT * for whole records, or name what you want: SELECT a, b",
            ));
        }
        let mut items = Vec::new();
        loop {
            items.push(self.select_item()?);
            let Some(comma) = self.eat(&TokenKind::Comma) else { break };
            if self.at_kw("FROM") || self.at(&TokenKind::Eof) {
                return Err(QueryError::syntax(
                    format!(
                        "expected a select item after ',', found {}",
                        self.describe(self.peek())
                    ),
                    self.peek().span,
                )
                .with_hint(format!(
                    "remove the trailing ',' at column {}",
                    QueryError::syntax("", comma).line_column(self.src).1
                )));
            }
        }
        Ok(Select { distinct, items, span: start.to(Span::new(self.prev_end, self.prev_end)) })
    }

    fn select_item(&mut self) -> Result<SelectItem> {
        if let Some(span) = self.eat(&TokenKind::Star) {
            return Ok(SelectItem::All { span });
        }
        if self.at_table_function() {
            return Ok(SelectItem::TableFunction(self.table_function()?));
        }
        let expr = self.expr()?;
        let alias = if self.eat_kw("AS").is_some() {
            Some(self.alias("an alias after AS")?)
        } else {
            let next = self.peek_at(1);
            let alias_like = match &self.peek().kind {
                TokenKind::QuotedIdent(_) => true,
                TokenKind::Word => !lexer::is_reserved(self.text(self.peek())),
                _ => false,
            };
            if alias_like && (next.kind == TokenKind::Comma || self.is_kw(next, "FROM")) {
                Some(self.alias("an alias")?)
            } else {
                None
            }
        };
        Ok(SelectItem::Expr { expr, alias })
    }

    /// A name given by the query: an unreserved word or a quoted name.
    fn alias(&mut self, what: &str) -> Result<Ident> {
        let tok = self.peek().clone();
        match &tok.kind {
            TokenKind::Word if !lexer::is_reserved(self.text(&tok)) => {
                self.bump();
                Ok(Ident { name: self.text(&tok).to_owned(), span: tok.span })
            }
            TokenKind::Word => Err(self.expected(what, &[]).with_hint(format!(
                "{} is a reserved word; to use it as a name, quote it: \"{}\"",
                self.text(&tok).to_ascii_uppercase(),
                self.text(&tok)
            ))),
            TokenKind::QuotedIdent(name) => {
                self.bump();
                Ok(Ident { name: name.clone(), span: tok.span })
            }
            _ => Err(self.expected(what, &[])),
        }
    }

    fn at_table_function(&self) -> bool {
        let (first, second) = (self.peek(), self.peek_at(1));
        (self.is_kw(first, "EXPLODE") && second.kind == TokenKind::LParen)
            || (self.is_kw(first, "OUTER")
                && self.is_kw(second, "EXPLODE")
                && self.peek_at(2).kind == TokenKind::LParen)
    }

    /// `[OUTER] EXPLODE(e) AS alias | AS (key_alias, value_alias)`
    fn table_function(&mut self) -> Result<TableFunction> {
        let start = self.peek().span;
        let outer = self.eat_kw("OUTER").is_some();
        if !self.at_kw("EXPLODE") {
            let what = if outer { "EXPLODE after OUTER" } else { "[OUTER] EXPLODE(...)" };
            return Err(self.expected(what, &["EXPLODE", "OUTER"]));
        }
        self.bump();
        let open = self.expect(&TokenKind::LParen, "'(' after EXPLODE")?;
        let expr = self.expr()?;
        self.close_paren(open, "EXPLODE(")?;
        if self.eat_kw("AS").is_none() {
            return Err(self.expected("AS after EXPLODE(...)", &["AS"]).with_hint(
                "name what EXPLODE produces: EXPLODE(list) AS item, or EXPLODE(map) AS (k, v)",
            ));
        }
        let alias = if let Some(open) = self.eat(&TokenKind::LParen) {
            let key = self.alias("a key alias in AS (key, value)")?;
            self.expect(&TokenKind::Comma, "',' between the key and value aliases")?;
            let value = self.alias("a value alias in AS (key, value)")?;
            self.close_paren(open, "AS (key, value)")?;
            ExplodeAlias::KeyValue(key, value)
        } else {
            ExplodeAlias::Value(self.alias("an alias after AS")?)
        };
        Ok(TableFunction {
            outer,
            expr,
            alias,
            span: start.to(Span::new(self.prev_end, self.prev_end)),
        })
    }

    /// `STREAM(...)` or `( query )`.
    fn from(&mut self, nested: bool) -> Result<From> {
        let tok = self.peek().clone();
        if self.is_kw(&tok, "STREAM") {
            self.bump();
            let mut stream = self.stream(tok.span)?;
            if let Some(since) = self.eat_kw("SINCE") {
                let from = self.time_bound("a time after SINCE")?;
                let span = since.to(from.span);
                stream.history = Some(HistoryClause { from, to: None, live: true, span });
            }
            return Ok(From::Stream(stream));
        }
        if self.is_kw(&tok, "HISTORY") && self.peek_at(1).kind == TokenKind::LParen {
            self.bump();
            return Ok(From::Stream(self.history(tok.span)?));
        }
        if tok.kind == TokenKind::LParen {
            if nested {
                return Err(QueryError::syntax(
                    "a query in FROM ( ... ) must itself read FROM STREAM(...)",
                    tok.span,
                )
                .with_hint(
                    "BQL nests one query at most: SELECT ... FROM (SELECT ... FROM STREAM())",
                ));
            }
            self.bump();
            let inner = self.query(true)?;
            if !self.at(&TokenKind::RParen) {
                let error = self.clause_error(&inner, "')' to close the query in FROM ( ... )");
                return Err(error);
            }
            self.bump();
            return Ok(From::Subquery(Box::new(inner)));
        }
        let mut error = self.expected(
            "STREAM(...), HISTORY(...) or a query in parentheses after FROM",
            &["STREAM", "HISTORY"],
        );
        if error.hint.is_none() && matches!(tok.kind, TokenKind::Word | TokenKind::QuotedIdent(_)) {
            error = error.with_hint(
                "BQL reads the live stream, not a table: write FROM STREAM() for the default \
                 duration or FROM STREAM(30000, TIME) for 30 seconds (FROM HISTORY('-1h') reads \
                 the stored past)",
            );
        }
        Err(error)
    }

    /// After `HISTORY`: `(from)` or `(from, to)`.
    fn history(&mut self, start: Span) -> Result<Stream> {
        let open = self.expect(&TokenKind::LParen, "'(' after HISTORY")?;
        let from = self.time_bound("the start of the range in HISTORY(from, to)")?;
        let to = match self.eat(&TokenKind::Comma) {
            Some(_) => Some(self.time_bound("the end of the range in HISTORY(from, to)")?),
            None => None,
        };
        let close = self.close_paren(open, "HISTORY(")?;
        let span = start.to(close);
        Ok(Stream {
            duration: StreamDuration::Default,
            span,
            history: Some(HistoryClause { from, to, live: false, span }),
        })
    }

    /// A time in HISTORY(...) or after SINCE: ms since the epoch, or a string.
    fn time_bound(&mut self, what: &str) -> Result<TimeBound> {
        let tok = self.peek().clone();
        if let TokenKind::Str(text) = &tok.kind {
            self.bump();
            return Ok(TimeBound { value: TimeLiteral::Text(text.clone()), span: tok.span });
        }
        if matches!(tok.kind, TokenKind::Number(_) | TokenKind::Minus) {
            let (ms, span) = self.uint(what).map_err(|e| {
                e.with_hint_if_none(
                    "write a time as ms since the epoch (1600000000000), an ISO-8601 string \
                     ('2026-11-24T10:00:00Z') or a time relative to now ('-15m')",
                )
            })?;
            let ms = i64::try_from(ms).unwrap_or(i64::MAX);
            return Ok(TimeBound { value: TimeLiteral::Millis(ms), span });
        }
        Err(self.expected(what, &[]).with_hint_if_none(
            "write a time as ms since the epoch (1600000000000), an ISO-8601 string \
             ('2026-11-24T10:00:00Z') or a time relative to now ('-15m')",
        ))
    }

    /// After `STREAM`: `()`, `(n, TIME)` or `(MAX, TIME)`.
    fn stream(&mut self, start: Span) -> Result<Stream> {
        let open = self.eat(&TokenKind::LParen).ok_or_else(|| {
            self.expected("'(' after STREAM", &[])
                .with_hint("write STREAM() for the default duration, or STREAM(30000, TIME)")
        })?;
        let duration = if self.at(&TokenKind::RParen) {
            StreamDuration::Default
        } else {
            let duration = if self.eat_kw("MAX").is_some() {
                StreamDuration::Max
            } else if matches!(self.peek().kind, TokenKind::Number(_) | TokenKind::Minus) {
                StreamDuration::Millis(self.uint("a duration in milliseconds")?.0)
            } else {
                return Err(self.expected("a duration in milliseconds or MAX", &["MAX"]));
            };
            if self.eat(&TokenKind::Comma).is_none() {
                return Err(self
                    .expected("', TIME' after the duration", &[])
                    .with_hint("durations are in milliseconds: STREAM(30000, TIME)"));
            }
            if self.eat_kw("TIME").is_none() {
                let mut error = self.expected("TIME", &["TIME"]);
                if self.at_kw("RECORD") {
                    error = error
                        .with_hint("a query runs for a time; to stop after n records use LIMIT n");
                } else if error.hint.is_none() {
                    error = error.with_hint("durations are in milliseconds: STREAM(30000, TIME)");
                }
                return Err(error);
            }
            duration
        };
        let close = self.close_paren(open, "STREAM(")?;
        Ok(Stream { duration, span: start.to(close), history: None })
    }

    /// After `WINDOWING`: `TUMBLING(n, unit)`, `EVERY(n, unit, ALL | FIRST, m, unit)`, or the
    /// older `(TUMBLING, n, unit)` / `(EVERY, n, unit, ...)`.
    fn window(&mut self, start: Span) -> Result<Window> {
        const KINDS: &[&str] = &["TUMBLING", "EVERY"];
        let old_form = self.eat(&TokenKind::LParen);
        let kind_tok = self.peek().clone();
        let kind = match self.word_upper(&kind_tok).as_deref() {
            Some("TUMBLING") => "TUMBLING",
            Some("EVERY") => "EVERY",
            _ => {
                return Err(self
                    .expected("TUMBLING(...) or EVERY(...) after WINDOWING", KINDS)
                    .with_hint_if_none(
                        "windows are TUMBLING(5000, TIME) or EVERY(5000, TIME, ALL) or \
                         EVERY(1, RECORD, FIRST, 1, RECORD)",
                    ))
            }
        };
        self.bump();
        let open = match old_form {
            Some(open) => {
                self.expect(&TokenKind::Comma, &format!("',' after {kind}"))?;
                open
            }
            None => self.expect(&TokenKind::LParen, &format!("'(' after {kind}"))?,
        };
        let (every, _) = self.uint("an emit interval")?;
        self.expect(&TokenKind::Comma, "',' after the emit interval")?;
        let unit = self.window_unit()?;
        let kind = if kind == "TUMBLING" {
            WindowKind::Tumbling { every, unit }
        } else {
            self.expect(&TokenKind::Comma, "', ALL' or ', FIRST, n, unit' in EVERY(...)")?;
            let include = if self.eat_kw("ALL").is_some() {
                Include::All
            } else if self.eat_kw("FIRST").is_some() {
                self.expect(&TokenKind::Comma, "',' after FIRST")?;
                let (count, _) = self.uint("the size after FIRST")?;
                self.expect(&TokenKind::Comma, "',' after the size")?;
                Include::First { count, unit: self.window_unit()? }
            } else {
                return Err(self.expected("ALL or FIRST", &["ALL", "FIRST"]));
            };
            WindowKind::Every { every, unit, include }
        };
        let close = self.close_paren(open, "the window")?;
        Ok(Window { kind, span: start.to(close) })
    }

    fn window_unit(&mut self) -> Result<WindowUnit> {
        if self.eat_kw("TIME").is_some() {
            Ok(WindowUnit::Time)
        } else if self.eat_kw("RECORD").is_some() {
            Ok(WindowUnit::Record)
        } else {
            let mut error = self.expected("TIME or RECORD", &["TIME", "RECORD"]);
            if error.hint.is_none() {
                error = error.with_hint("intervals are in milliseconds (TIME) or records (RECORD)");
            }
            Err(error)
        }
    }
}

/// What to write instead of SQL's LIKE.
pub(crate) fn like_hint() -> &'static str {
    "BQL has no LIKE: use RLIKE with a regular expression that matches the whole value, \
     e.g. name RLIKE '.*abc.*' for SQL's name LIKE '%abc%'"
}

trait HintIfNone {
    fn with_hint_if_none(self, hint: &str) -> Self;
}

impl HintIfNone for QueryError {
    fn with_hint_if_none(self, hint: &str) -> Self {
        if self.hint.is_some() {
            self
        } else {
            self.with_hint(hint)
        }
    }
}
