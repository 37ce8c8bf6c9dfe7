//! The query crate's one error type: what is wrong, where (a byte span into the query text, turned
//! into line and column on demand) and, where one helps, a hint.

use crate::span::Span;

/// Which stage refused the query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QueryErrorKind {
    /// The text does not follow the grammar.
    Syntax,
    /// Well-formed, but breaks a rule of the language (one aggregation kind, HAVING needs GROUP
    /// BY, types that cannot work, ...).
    Semantic,
    /// Valid, but past a configured limit (duration, LIMIT size, window emit interval, ...).
    Limit,
}

/// A query that cannot run, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct QueryError {
    pub kind: QueryErrorKind,
    pub message: String,
    /// Where in the query text; `None` when the error concerns the query as a whole.
    pub span: Option<Span>,
    /// What the user can do about it (did-you-mean, the allowed range, ...).
    pub hint: Option<String>,
}

impl QueryError {
    pub fn new(kind: QueryErrorKind, message: impl Into<String>, span: Option<Span>) -> Self {
        Self { kind, message: message.into(), span, hint: None }
    }

    pub fn syntax(message: impl Into<String>, span: Span) -> Self {
        Self::new(QueryErrorKind::Syntax, message, Some(span))
    }

    pub fn semantic(message: impl Into<String>, span: Option<Span>) -> Self {
        Self::new(QueryErrorKind::Semantic, message, span)
    }

    pub fn limit(message: impl Into<String>, span: Option<Span>) -> Self {
        Self::new(QueryErrorKind::Limit, message, span)
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// 1-based line and column (in characters) of the error's start in `source`; (1, 1) when the
    /// error has no span.
    pub fn line_column(&self, source: &str) -> (usize, usize) {
        let offset = self.span.map_or(0, |s| s.start).min(source.len());
        let before = &source[..floor_char_boundary(source, offset)];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        (line, column)
    }

    /// The error as a person reads it on a terminal:
    ///
    /// ```text
    /// error: unknown function 'CONT'
    /// at line 1, column 30
    ///   SELECT * FROM STREAM() WHERE CONT(a) > 1
    ///                                ^^^^
    /// hint: did you mean COUNT?
    /// ```
    pub fn render(&self, source: &str) -> String {
        let (line, column) = self.line_column(source);
        let mut out = format!("error: {}\nat line {line}, column {column}\n", self.message);
        if let Some(text) = source.lines().nth(line - 1) {
            let width = self
                .span
                .map(|s| {
                    let start = floor_char_boundary(source, s.start.min(source.len()));
                    let end = floor_char_boundary(source, s.end.min(source.len())).max(start);
                    source[start..end].lines().next().map_or(1, |l| l.chars().count().max(1))
                })
                .unwrap_or(1);
            out.push_str(&format!("  {text}\n  {}{}\n", " ".repeat(column - 1), "^".repeat(width)));
        }
        if let Some(hint) = &self.hint {
            out.push_str(&format!("hint: {hint}\n"));
        }
        out
    }

    /// The error as JSON for APIs: message, kind, line, column, hint.
    pub fn to_json(&self, source: &str) -> serde_json::Value {
        let (line, column) = self.line_column(source);
        serde_json::json!({
            "error": self.message,
            "kind": self.kind,
            "line": line,
            "column": column,
            "hint": self.hint,
        })
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_count_characters_on_the_right_line() {
        let src = "SELECT *\nFROM STREAM()\nWHERE é = 1 AND x";
        let e = QueryError::syntax("boom", Span::new(src.find('x').unwrap(), src.len()));
        assert_eq!(e.line_column(src), (3, 17));
        let text = e.render(src);
        assert!(text.contains("at line 3, column 17"), "{text}");
        assert!(text.contains(&format!("\n{}^\n", " ".repeat(18))), "{text}");
    }
}
