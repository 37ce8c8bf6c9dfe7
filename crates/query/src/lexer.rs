//! The BQL lexer: query text → tokens, each with its byte [`Span`].
//!
//! It is written by hand (no generator) so that every token knows exactly where it stands and
//! every lexical mistake gets a message a person can act on: an unterminated string points at its
//! opening quote, `5x` is one bad number rather than a number and a name, `&&` suggests `AND`.
//! It never panics and always advances, so it ends on any input.
//!
//! # Tokens
//! - words (`[A-Za-z_][A-Za-z0-9_]*`): keywords, function names and field names alike. Which one
//!   a word is depends on where it stands, and is the parser's call (see [`RESERVED`]).
//! - `"quoted identifiers"` with `""` for a double quote inside: always names, never keywords.
//! - `'strings'` with `''` for a quote inside. There are no backslash escapes: a backslash is a
//!   backslash, which keeps regular expressions readable.
//! - numbers: `5`, `5L`, `5.0`, `5.0f`, `5f`, `5.0d`, `1e9`, `1.5e-3` (the sign is the parser's).
//! - punctuation and operators: `( ) [ ] , . : ; * / % + -` and `= == != <> < <= > >=`.
//!
//! There are no comments in BQL (Bullet has none), so `--5` is minus minus five.

use crate::error::QueryError;
use crate::span::Span;

/// Words that can never be a bare field name or alias: they start clauses, are operators, or are
/// literals. Everything else (function names like `count`, units like `time` and `record`, `key`,
/// `value`, `type`, `timestamp`, ...) is a keyword only where the grammar expects it and a name
/// everywhere else. Any name at all can be written in double quotes: `"from"`.
pub const RESERVED: &[&str] = &[
    "AND",
    "AS",
    "BETWEEN",
    "DISTINCT",
    "FALSE",
    "FROM",
    "GROUP",
    "HAVING",
    "IN",
    "IS",
    "LATERAL",
    "LIMIT",
    "NOT",
    "NOW",
    "NULL",
    "OR",
    "ORDER",
    "RLIKE",
    "SELECT",
    "TRUE",
    "WHERE",
    "WINDOWING",
    "XOR",
];

/// True when `word` (any case) is in [`RESERVED`].
pub fn is_reserved(word: &str) -> bool {
    RESERVED.iter().any(|r| r.eq_ignore_ascii_case(word))
}

/// True when a field or key named `name` must be written in double quotes to be read back as
/// that name: it is not a plain word, it is reserved, or it is `ANY`/`ALL` (which after a
/// comparison operator would read as a quantifier).
pub fn needs_quotes(name: &str) -> bool {
    let mut chars = name.chars();
    let plain = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    !plain
        || is_reserved(name)
        || name.eq_ignore_ascii_case("ANY")
        || name.eq_ignore_ascii_case("ALL")
}

/// What a numeric literal said after its digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberSuffix {
    /// none: INTEGER (LONG when too large for an INTEGER) or, with a fraction or exponent, DOUBLE
    None,
    /// `L`
    Long,
    /// `f`
    Float,
    /// `d`
    Double,
}

/// A numeric literal as written, without its sign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Number {
    /// The digits, fraction and exponent, without the suffix (`1.5e3` for `1.5e3f`).
    pub text: String,
    /// No fraction and no exponent.
    pub integral: bool,
    pub suffix: NumberSuffix,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TokenKind {
    /// An unquoted word; its text is the source under the token's span.
    Word,
    /// `"name"`, unescaped.
    QuotedIdent(String),
    /// `'text'`, unescaped.
    Str(String),
    Number(Number),
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Dot,
    Colon,
    Semicolon,
    Star,
    Slash,
    Percent,
    Plus,
    Minus,
    /// `=` or `==`
    Eq,
    /// `!=` or `<>`
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// The end of the text (an empty span at its length).
    Eof,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub kind: TokenKind,
    pub span: Span,
}

/// Splits `src` into tokens, ending with one [`TokenKind::Eof`]; the first lexical error stops it.
pub fn tokenize(src: &str) -> Result<Vec<Token>, QueryError> {
    let bytes = src.as_bytes();
    let mut tokens = Vec::with_capacity(src.len() / 3 + 1);
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        let single = |kind| Some((kind, 1));
        let next = bytes.get(i + 1).copied();
        let punct = match c {
            b'(' => single(TokenKind::LParen),
            b')' => single(TokenKind::RParen),
            b'[' => single(TokenKind::LBracket),
            b']' => single(TokenKind::RBracket),
            b',' => single(TokenKind::Comma),
            b'.' => single(TokenKind::Dot),
            b':' => single(TokenKind::Colon),
            b';' => single(TokenKind::Semicolon),
            b'*' => single(TokenKind::Star),
            b'/' => single(TokenKind::Slash),
            b'%' => single(TokenKind::Percent),
            b'+' => single(TokenKind::Plus),
            b'-' => single(TokenKind::Minus),
            b'=' if next == Some(b'=') => Some((TokenKind::Eq, 2)),
            b'=' => single(TokenKind::Eq),
            b'!' if next == Some(b'=') => Some((TokenKind::Ne, 2)),
            b'<' if next == Some(b'>') => Some((TokenKind::Ne, 2)),
            b'<' if next == Some(b'=') => Some((TokenKind::Le, 2)),
            b'<' => single(TokenKind::Lt),
            b'>' if next == Some(b'=') => Some((TokenKind::Ge, 2)),
            b'>' => single(TokenKind::Gt),
            _ => None,
        };
        if let Some((kind, len)) = punct {
            i += len;
            tokens.push(Token { kind, span: Span::new(start, i) });
            continue;
        }
        let kind = match c {
            b'\'' => {
                let (text, end) = quoted(src, start, b'\'').ok_or_else(|| {
                    QueryError::syntax("unterminated string", Span::new(start, src.len()))
                        .with_hint("close the string with ' (write '' for a quote inside a string)")
                })?;
                i = end;
                TokenKind::Str(text)
            }
            b'"' => {
                let (text, end) = quoted(src, start, b'"').ok_or_else(|| {
                    QueryError::syntax("unterminated quoted name", Span::new(start, src.len()))
                        .with_hint(
                            "double quotes quote field names (\"my field\"; write \"\" for a \
                             double quote inside); strings take single quotes: 'text'",
                        )
                })?;
                if text.is_empty() {
                    return Err(QueryError::syntax("empty quoted name", Span::new(start, end))
                        .with_hint(
                            "a field name cannot be empty; strings take single quotes: ''",
                        ));
                }
                i = end;
                TokenKind::QuotedIdent(text)
            }
            b'0'..=b'9' => {
                let (number, end) = number(src, start)?;
                i = end;
                TokenKind::Number(number)
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                i = word_end(bytes, start);
                TokenKind::Word
            }
            _ => return Err(unexpected_char(src, start)),
        };
        tokens.push(Token { kind, span: Span::new(start, i) });
    }
    tokens.push(Token { kind: TokenKind::Eof, span: Span::new(src.len(), src.len()) });
    Ok(tokens)
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn word_end(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && is_word_byte(bytes[i]) {
        i += 1;
    }
    i
}

/// The text between the quote at `start` and its closing quote (a doubled quote stands for one),
/// and the offset after the closing quote; `None` when it is never closed.
fn quoted(src: &str, start: usize, quote: u8) -> Option<(String, usize)> {
    let bytes = src.as_bytes();
    let mut text = String::new();
    let mut from = start + 1;
    let mut i = start + 1;
    while i < bytes.len() {
        if bytes[i] == quote {
            text.push_str(&src[from..i]);
            if bytes.get(i + 1) == Some(&quote) {
                text.push(quote as char);
                i += 2;
                from = i;
                continue;
            }
            return Some((text, i + 1));
        }
        i += 1;
    }
    None
}

/// A number starting at `start` (a digit): digits, an optional fraction (only when a digit
/// follows the dot, so `a[0].b` stays an index and a key), an optional exponent, an optional
/// suffix; letters or digits glued to it make it one bad number.
fn number(src: &str, start: usize) -> Result<(Number, usize), QueryError> {
    let bytes = src.as_bytes();
    let digits = |mut i: usize| {
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let mut i = digits(start);
    let mut integral = true;
    if bytes.get(i) == Some(&b'.') && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
        i = digits(i + 1);
        integral = false;
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        let after_sign = if matches!(bytes.get(i + 1), Some(b'+' | b'-')) { i + 2 } else { i + 1 };
        if bytes.get(after_sign).is_some_and(u8::is_ascii_digit) {
            i = digits(after_sign);
            integral = false;
        }
    }
    let text = src[start..i].to_owned();
    let suffix = match bytes.get(i) {
        Some(b'L' | b'l') if integral => NumberSuffix::Long,
        Some(b'f' | b'F') => NumberSuffix::Float,
        Some(b'd' | b'D') => NumberSuffix::Double,
        _ => NumberSuffix::None,
    };
    if suffix != NumberSuffix::None {
        i += 1;
    }
    if bytes.get(i).is_some_and(|&b| is_word_byte(b)) {
        let end = word_end(bytes, i);
        let written = &src[start..end];
        let hint = if matches!(bytes[i], b'L' | b'l') && !integral {
            "only whole numbers take the L (LONG) suffix: write 5L, or 5.0 for a DOUBLE".to_owned()
        } else {
            format!(
                "numbers are written 5 (INTEGER), 5L (LONG), 5.0 or 1e3 (DOUBLE), 5.0f (FLOAT); \
                 a name that starts with a digit needs double quotes: \"{written}\""
            )
        };
        return Err(QueryError::syntax(
            format!("invalid number '{written}'"),
            Span::new(start, end),
        )
        .with_hint(hint));
    }
    Ok((Number { text, integral, suffix }, i))
}

fn unexpected_char(src: &str, start: usize) -> QueryError {
    let c = src[start..].chars().next().unwrap_or('?');
    let span = Span::new(start, start + c.len_utf8());
    let next = src[start + c.len_utf8()..].chars().next();
    let hint = match (c, next) {
        ('&', _) => Some("write AND for logical and".to_owned()),
        ('|', _) => Some("write OR for logical or".to_owned()),
        ('!', _) => Some("write != for not-equal, NOT for negation".to_owned()),
        ('{', _) => Some(
            "BQL queries start with SELECT; a Bullet JSON query goes where JSON is read".to_owned(),
        ),
        ('`', _) => {
            Some("names are quoted with double quotes (\"my field\"), not backquotes".to_owned())
        }
        (c, _) if c.is_alphabetic() => Some(format!(
            "unquoted names are ASCII letters, digits and _; quote other names: \"{}\"",
            &src[start..word_end_unicode(src, start)]
        )),
        _ => None,
    };
    let error = QueryError::syntax(format!("unexpected character '{c}'"), span);
    match hint {
        Some(h) => error.with_hint(h),
        None => error,
    }
}

fn word_end_unicode(src: &str, start: usize) -> usize {
    src[start..]
        .char_indices()
        .find(|&(_, c)| !(c.is_alphanumeric() || c == '_'))
        .map_or(src.len(), |(i, _)| start + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<TokenKind> {
        tokenize(src).unwrap().into_iter().map(|t| t.kind).collect()
    }

    fn num(text: &str, integral: bool, suffix: NumberSuffix) -> TokenKind {
        TokenKind::Number(Number { text: text.into(), integral, suffix })
    }

    fn err(src: &str) -> QueryError {
        tokenize(src).unwrap_err()
    }

    #[test]
    fn words_punctuation_and_operators() {
        use TokenKind::*;
        assert_eq!(
            kinds("a.b[0]:(x,y); * / % + - = == != <> < <= > >="),
            vec![
                Word,
                Dot,
                Word,
                LBracket,
                num("0", true, NumberSuffix::None),
                RBracket,
                Colon,
                LParen,
                Word,
                Comma,
                Word,
                RParen,
                Semicolon,
                Star,
                Slash,
                Percent,
                Plus,
                Minus,
                Eq,
                Eq,
                Ne,
                Ne,
                Lt,
                Le,
                Gt,
                Ge,
                Eof
            ]
        );
    }

    #[test]
    fn spans_are_byte_ranges() {
        let tokens = tokenize("SELECT  'é' \"x\"").unwrap();
        let spans: Vec<_> = tokens.iter().map(|t| (t.span.start, t.span.end)).collect();
        assert_eq!(spans, vec![(0, 6), (8, 12), (13, 16), (16, 16)]);
    }

    #[test]
    fn strings_and_quoted_names_unescape_doubled_quotes() {
        assert_eq!(kinds("'it''s'")[0], TokenKind::Str("it's".into()));
        assert_eq!(kinds("''")[0], TokenKind::Str(String::new()));
        assert_eq!(kinds(r"'a\d+'")[0], TokenKind::Str(r"a\d+".into()));
        assert_eq!(kinds("\"say \"\"hi\"\"\"")[0], TokenKind::QuotedIdent("say \"hi\"".into()));
        assert_eq!(kinds("\"123col\"")[0], TokenKind::QuotedIdent("123col".into()));
    }

    #[test]
    fn numbers_with_fractions_exponents_and_suffixes() {
        use NumberSuffix::*;
        assert_eq!(kinds("5")[0], num("5", true, None));
        assert_eq!(kinds("5L")[0], num("5", true, Long));
        assert_eq!(kinds("5l")[0], num("5", true, Long));
        assert_eq!(kinds("5.0")[0], num("5.0", false, None));
        assert_eq!(kinds("5.0f")[0], num("5.0", false, Float));
        assert_eq!(kinds("5F")[0], num("5", true, Float));
        assert_eq!(kinds("2.5d")[0], num("2.5", false, Double));
        assert_eq!(kinds("1e9")[0], num("1e9", false, None));
        assert_eq!(kinds("1.5E-3f")[0], num("1.5E-3", false, Float));
        // a dot not followed by a digit is a field access
        assert_eq!(kinds("0.b")[..3], [num("0", true, None), TokenKind::Dot, TokenKind::Word]);
    }

    #[test]
    fn bad_numbers_are_one_error_over_the_whole_word() {
        let e = err("x = 5x + 1");
        assert_eq!(e.message, "invalid number '5x'");
        assert_eq!(e.span, Some(Span::new(4, 6)));
        assert!(e.hint.unwrap().contains("\"5x\""));
        assert_eq!(err("1e").message, "invalid number '1e'");
        assert_eq!(err("5.0L").message, "invalid number '5.0L'");
        assert!(err("5.0L").hint.unwrap().contains("L (LONG)"));
        assert_eq!(err("5Lx").span, Some(Span::new(0, 3)));
    }

    #[test]
    fn unterminated_strings_and_names_point_at_the_opening_quote() {
        let e = err("a = 'abc");
        assert_eq!(e.message, "unterminated string");
        assert_eq!(e.span, Some(Span::new(4, 8)));
        let e = err("a = \"abc");
        assert_eq!(e.message, "unterminated quoted name");
        assert!(e.hint.unwrap().contains("single quotes"));
        assert_eq!(err("'it''s").message, "unterminated string");
        assert_eq!(err("\"\"").message, "empty quoted name");
    }

    #[test]
    fn stray_characters_get_hints() {
        let e = err("a && b");
        assert_eq!(e.message, "unexpected character '&'");
        assert_eq!(e.hint.as_deref(), Some("write AND for logical and"));
        assert!(err("a || b").hint.unwrap().contains("OR"));
        assert!(err("!a").hint.unwrap().contains("NOT"));
        assert!(err("`a`").hint.unwrap().contains("double quotes"));
        let e = err("größe > 1");
        assert_eq!(e.span, Some(Span::new(2, 4)));
        assert!(e.hint.as_deref().unwrap().contains("\"öße\""), "{e:?}");
        assert!(err("a # b").hint.is_none());
    }

    #[test]
    fn reserved_words_and_quoting() {
        assert!(is_reserved("from") && is_reserved("SELECT") && !is_reserved("count"));
        for name in ["time", "record", "key", "value", "type", "timestamp", "count", "max"] {
            assert!(!is_reserved(name) && !needs_quotes(name), "{name}");
        }
        for name in ["from", "Any", "all", "123col", "a b", "", "é"] {
            assert!(needs_quotes(name), "{name}");
        }
    }
}
