//! Expression evaluation: a query's expression tree ([`needle_query::ast::Expr`]) is compiled once
//! into a [`CompiledExpr`] (fields resolved to lookups, literal regular expressions compiled,
//! constant sub-expressions folded) and then evaluated per record. Evaluation never fails and
//! never panics: anything that cannot be computed for a record is NULL for that record.
//!
//! This module owns the semantics of every operator and function of LANGUAGE.md. Where that page
//! is silent the decisions below apply (Bullet's behaviour where it has a sensible one, SQL's
//! otherwise); `tests/eval_differential.rs` checks the compiled evaluator against a direct
//! interpretation of these rules.
//!
//! # Values and NULL
//! - A missing field, a missing map key, an out-of-range list index and a value of the wrong type
//!   for an operation are all NULL. Compilation is the only place that reports errors
//!   ([`EngineError::Regex`] for an invalid literal pattern, [`EngineError::Unsupported`] for an
//!   aggregate or a function called with the wrong number of arguments).
//! - Three-valued logic. `AND`, `OR` follow SQL's truth tables (`FALSE AND NULL` is FALSE,
//!   `TRUE OR NULL` is TRUE, and the right side is not evaluated when the left decides); `XOR` and
//!   `NOT` of NULL are NULL. An operand that is not a BOOLEAN counts as NULL (no string or number
//!   is coerced to a boolean). `WHERE`/`HAVING` keep a record only when the value is TRUE
//!   ([`CompiledExpr::test`]).
//!
//! # Arithmetic (`+ - * / %`, unary `-`)
//! - Operands must be numbers (BOOLEAN, STRING, containers: NULL). The result has the wider type of
//!   INTEGER < LONG < FLOAT < DOUBLE, as in Bullet (so `1L + 1.5f` is a FLOAT).
//! - INTEGER and LONG arithmetic is checked: an overflow is NULL, not a wrapped number (Java would
//!   wrap silently; a wrong number is worse than a NULL). `-x` of the minimum value is NULL too.
//! - Division and remainder by zero are NULL for every type (also `1.0 / 0.0`). Integer division
//!   truncates toward zero and `%` is Java's remainder (its sign follows the dividend), for floats
//!   too (`fmod`). Other float results follow IEEE (overflow gives infinity, NaN propagates).
//! - `+` does not concatenate strings (Bullet does not either): `'a' + 'b'` is NULL.
//!
//! # Comparisons (`= != < <= > >=`, `ANY`/`ALL`, `IN`, `BETWEEN`)
//! - NULL on either side is NULL. Numbers compare by value across numeric types (`1 = 1.0`);
//!   strings by bytes; booleans FALSE < TRUE; lists lexicographically ([`crate::compare`]).
//!   A number never equals or orders against a string (NULL, no casting), and NaN compares to
//!   nothing (NULL).
//! - `=`/`!=` on two lists or two maps is structural equality: same length (same key set for
//!   maps, in any order) and pairwise equal elements, where nested NULLs equal each other and
//!   numbers compare by value. Maps do not order: `<` on maps is NULL.
//! - `x op ANY list` is TRUE if some element satisfies `op`, else NULL if some comparison was NULL,
//!   else FALSE; `ALL` is FALSE if some element fails, else NULL if one was NULL, else TRUE. An
//!   empty list gives FALSE for ANY and TRUE for ALL whatever `x` is (SQL). A right side that is
//!   not a list is NULL.
//! - `x IN (a, b)` and `x IN list` are `x = ANY list`; `NOT IN` is its negation (so a NULL in the
//!   list makes `NOT IN` NULL rather than TRUE, as in SQL). A constant list of strings or of integers
//!   is looked up through a hash set (same result).
//! - `x BETWEEN (lo, hi)` is `lo <= x AND x <= hi` (inclusive, three-valued: with a NULL bound it
//!   is FALSE when the other bound already excludes `x`, else NULL); `NOT BETWEEN` negates.
//! - `x IS NULL` is never NULL itself. NaN is not NULL.
//!
//! # RLIKE
//! - Whole-value match, like Java's `String.matches`: the pattern is compiled as `\A(?:p)\z`
//!   (after checking that `p` alone is a valid expression, so that it cannot escape the group).
//!   The syntax is the Rust `regex` crate's, which runs in linear time; Java features that need
//!   backtracking (back-references, look-around) are rejected.
//! - A literal pattern (or a literal list of patterns for `RLIKE ANY`) is compiled when the query
//!   is compiled; an invalid one is [`EngineError::Regex`]. The common shapes `text`, `text.*`,
//!   `.*text`, `.*text.*` are answered by string comparisons without running the regex
//!   ([`regex_cache::LiteralRegex`]). A pattern computed per record is
//!   compiled through a per-thread cache ([`regex_cache`]), so no lock is taken on the hot path;
//!   an invalid computed pattern is NULL. Compiled programs are limited in size
//!   ([`regex_cache::LITERAL_SIZE_LIMIT`], [`regex_cache::DYNAMIC_SIZE_LIMIT`]).
//! - A value or pattern that is not a STRING is NULL. `RLIKE ANY list` follows the ANY rule
//!   above; `NOT RLIKE` negates (three-valued).
//!
//! # Fields
//! - `a` is the record's top-level field `a` (a post-aggregation column such as `COUNT(*)` is just
//!   a field by that name). `.k` / `['k']` look a key up in a map, `[i]` indexes a list from 0
//!   (negative or past the end: NULL), `[e]` indexes a list when `e` is an INTEGER or LONG and
//!   looks a key up in a map when it is a STRING. Anything else on the way is NULL.
//! - A type hint `a : T` casts the value to `T` when it is not already of that type (see CAST);
//!   a value that cannot be cast is NULL.
//!
//! # Functions
//! See [`functions`] for each function's rules (SIZEOF, ABS, TRIM, LOWER, UPPER, HASH, SIZEIS,
//! CONTAINSKEY, CONTAINSVALUE, FILTER, IF, SUBSTRING, UNIXTIMESTAMP), [`cast`] for CAST, and
//! [`hash`] for the HASH algorithm. `NOW` is [`EvalContext::now_ms`] as a LONG.
//!
//! # Compilation
//! Sub-expressions without fields, `NOW` or `UNIXTIMESTAMP()` are evaluated once at compile time.
//! Top-level field lookups borrow from the record ([`CompiledExpr::eval_cow`]), so a typical
//! `WHERE` allocates nothing per record.

pub mod cast;
mod compile;
pub mod functions;
pub mod hash;
pub(crate) mod node;
pub mod ops;
pub mod regex_cache;
pub mod time;

use crate::EngineError;
use needle_query::ast::{Expr, Field};
use needle_record::{Record, Value};
use std::borrow::Cow;

/// What an expression may depend on besides the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EvalContext {
    /// The current time in ms since the epoch: the value of `NOW` (and, in seconds, of
    /// `UNIXTIMESTAMP()`). Injected so that results are deterministic in tests.
    pub now_ms: i64,
}

impl EvalContext {
    pub fn new(now_ms: i64) -> Self {
        Self { now_ms }
    }
}

/// A compiled expression: `Send + Sync`, evaluated through `&self`. A clone is a copy of the
/// compiled tree with its own regex scratch space: the `regex` crate gives a regex's cache to the
/// first thread that uses it and makes other threads take a striped lock per match, so a worker
/// thread should evaluate through its own clone (sharing one across threads is correct, only
/// slower for RLIKE).
#[derive(Clone, Debug)]
pub struct CompiledExpr {
    root: node::Node,
}

impl CompiledExpr {
    /// Compiles an expression. Errors: an aggregate inside the expression, a function with the
    /// wrong number of arguments ([`EngineError::Unsupported`]), an invalid literal regular
    /// expression ([`EngineError::Regex`]).
    pub fn compile(expr: &Expr) -> Result<CompiledExpr, EngineError> {
        Ok(CompiledExpr { root: compile::compile(expr)? })
    }

    /// The compiled tree (constants folded), for the matching index to read predicates from.
    pub(crate) fn root(&self) -> &node::Node {
        &self.root
    }

    /// The expression's value for this record.
    pub fn eval(&self, record: &Record, ctx: &EvalContext) -> Value {
        self.root.eval(record, ctx).into_owned()
    }

    /// The expression's value, borrowed from the record or the expression where possible (field
    /// lookups and literals do not copy).
    pub fn eval_cow<'a>(&'a self, record: &'a Record, ctx: &EvalContext) -> Cow<'a, Value> {
        self.root.eval(record, ctx)
    }

    /// WHERE/HAVING semantics: true only when the value is TRUE (NULL, FALSE and non-booleans are
    /// false).
    pub fn test(&self, record: &Record, ctx: &EvalContext) -> bool {
        self.root.eval_bool(record, ctx) == Some(true)
    }

    /// The expression as three-valued logic: `Some(b)` for a BOOLEAN, `None` for NULL or any
    /// other type.
    pub fn eval_bool(&self, record: &Record, ctx: &EvalContext) -> Option<bool> {
        self.root.eval_bool(record, ctx)
    }

    /// The value, when the whole expression folded to a constant at compile time.
    pub fn as_constant(&self) -> Option<&Value> {
        match &self.root {
            node::Node::Const(v) => Some(v),
            _ => None,
        }
    }
}

/// The value of a field reference (path and type hint included) in a record; NULL when missing.
/// A convenience for callers holding a [`Field`] rather than an expression: it compiles the
/// reference on every call, so hot paths should compile once with [`CompiledExpr::compile`].
pub fn lookup_field(record: &Record, field: &Field, ctx: &EvalContext) -> Value {
    match compile::compile_field(field) {
        Ok(f) => f.lookup(record, ctx).into_owned(),
        // Only an invalid regex inside a computed index can fail, which is NULL here.
        Err(_) => Value::Null,
    }
}

#[cfg(test)]
mod tests;
