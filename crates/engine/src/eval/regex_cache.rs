//! Compiling RLIKE patterns: whole-value anchoring, size limits, and the per-thread cache for
//! patterns computed per record.
//!
//! Literal patterns are compiled once, when the query is compiled ([`compile_literal`]). Patterns
//! that come from the data go through [`dynamic_match`], which keeps a per-thread map from
//! pattern text to compiled regex (or to "invalid"): no lock is ever taken, each worker thread
//! warms its own copy. The map holds at most [`CACHE_CAPACITY`] patterns and is emptied when
//! full (simple and bounded; a stream with more distinct patterns than that recompiles).
//! Patterns longer than [`MAX_DYNAMIC_PATTERN_LEN`] bytes are not compiled at all (NULL).

use needle_record::Value;
use regex::{Regex, RegexBuilder};
use std::cell::RefCell;
use std::collections::HashMap;

/// The compiled-size limit for a literal pattern (compiled once per query).
pub const LITERAL_SIZE_LIMIT: usize = 10 << 20;
/// The compiled-size limit for a pattern computed per record.
pub const DYNAMIC_SIZE_LIMIT: usize = 256 << 10;
/// How many computed patterns each thread keeps compiled.
pub const CACHE_CAPACITY: usize = 256;
/// The longest computed pattern that is compiled.
pub const MAX_DYNAMIC_PATTERN_LEN: usize = 4096;

/// Compiles `pattern` to match whole values only (`\A(?:pattern)\z`, Java's `matches`). The
/// pattern is first checked alone, so that an unbalanced `)` cannot escape the group.
pub fn compile_whole(pattern: &str, size_limit: usize) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern).size_limit(size_limit).build()?;
    RegexBuilder::new(&format!(r"\A(?:{pattern})\z")).size_limit(size_limit).build()
}

/// A literal pattern of the query, compiled, with a shortcut for the common shapes `text`,
/// `text.*`, `.*text` and `.*text.*` (no other metacharacters): string equality, prefix, suffix
/// or substring tests instead of running the regex. `.` does not match a newline, so the
/// shortcuts other than equality apply only to values without one (others go to the regex).
///
/// Cloning gives the clone its own regex scratch space: the `regex` crate hands its cache to the
/// first thread that matches and makes other threads take a (striped) lock, so each worker thread
/// should match through its own clone.
#[derive(Debug, Clone)]
pub struct LiteralRegex {
    regex: Regex,
    shortcut: Option<Shortcut>,
}

#[derive(Debug, Clone, PartialEq)]
enum Shortcut {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Contains(String),
}

fn shortcut(pattern: &str) -> Option<Shortcut> {
    let (leading, rest) = match pattern.strip_prefix(".*") {
        Some(rest) => (true, rest),
        None => (false, pattern),
    };
    let (text, trailing) = match rest.strip_suffix(".*") {
        Some(text) => (text, true),
        None => (rest, false),
    };
    if text.chars().any(|c| "\\.+*?()|[]{}^$#\n".contains(c)) {
        return None;
    }
    let text = text.to_owned();
    Some(match (leading, trailing) {
        (false, false) => Shortcut::Exact(text),
        (false, true) => Shortcut::Prefix(text),
        (true, false) => Shortcut::Suffix(text),
        (true, true) => Shortcut::Contains(text),
    })
}

impl LiteralRegex {
    /// Whether `value` matches the whole pattern.
    pub fn is_match(&self, value: &str) -> bool {
        match &self.shortcut {
            Some(Shortcut::Exact(text)) => value == text,
            Some(shortcut) if !value.contains('\n') => match shortcut {
                Shortcut::Prefix(text) => value.starts_with(text.as_str()),
                Shortcut::Suffix(text) => value.ends_with(text.as_str()),
                Shortcut::Contains(text) => value.contains(text.as_str()),
                Shortcut::Exact(_) => unreachable!("handled above"),
            },
            _ => self.regex.is_match(value),
        }
    }
}

/// Compiles a literal pattern of the query.
pub fn compile_literal(pattern: &str) -> Result<LiteralRegex, crate::EngineError> {
    let regex = compile_whole(pattern, LITERAL_SIZE_LIMIT).map_err(|e| {
        crate::EngineError::Regex { pattern: pattern.to_owned(), message: e.to_string() }
    })?;
    Ok(LiteralRegex { regex, shortcut: shortcut(pattern) })
}

thread_local! {
    static CACHE: RefCell<HashMap<String, Option<Regex>>> = RefCell::new(HashMap::new());
}

/// Whether `value` matches the computed pattern `pattern` as a whole; NULL when the pattern is
/// not a string, is invalid or too large.
pub fn dynamic_match(pattern: &Value, value: &str) -> Option<bool> {
    let Value::String(p) = pattern else {
        return None;
    };
    if p.len() > MAX_DYNAMIC_PATTERN_LEN {
        return None;
    }
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(re) = cache.get(p.as_str()) {
            return re.as_ref().map(|re| re.is_match(value));
        }
        let re = compile_whole(p, DYNAMIC_SIZE_LIMIT).ok();
        let result = re.as_ref().map(|re| re.is_match(value));
        if cache.len() >= CACHE_CAPACITY {
            cache.clear();
        }
        cache.insert(p.clone(), re);
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_whole_values_only() {
        let re = compile_literal("b").unwrap();
        assert!(!re.is_match("abc"));
        assert!(re.is_match("b"));
        let re = compile_literal("a|ab").unwrap();
        assert!(re.is_match("ab"), "alternatives are tried for a whole match, as in Java");
        let re = compile_literal(".*b.*").unwrap();
        assert!(re.is_match("abc"));
        assert!(!compile_literal("(?m)^a$").unwrap().is_match("a\nb"));
    }

    #[test]
    fn shortcuts_agree_with_the_regex() {
        assert_eq!(shortcut("chrom.*"), Some(Shortcut::Prefix("chrom".into())));
        assert_eq!(shortcut(".*x"), Some(Shortcut::Suffix("x".into())));
        assert_eq!(shortcut(".*x.*"), Some(Shortcut::Contains("x".into())));
        assert_eq!(shortcut("ipad"), Some(Shortcut::Exact("ipad".into())));
        assert_eq!(shortcut("a.b"), None);
        assert_eq!(shortcut(".*?"), None);
        assert_eq!(shortcut("\\d.*"), None);
        let patterns = ["chrom.*", ".*x", ".*x.*", "ipad", "", ".*", ".*.*", "é.*", "a b.*"];
        let values = [
            "chrome", "chrom", "xchrome", "ax", "x", "a\nx", "x\n", "chrom\ne", "ipad", "", "\n",
            "é", "éa", "a b c",
        ];
        for p in patterns {
            let fast = compile_literal(p).unwrap();
            assert!(fast.shortcut.is_some(), "{p}");
            let slow = compile_whole(p, LITERAL_SIZE_LIMIT).unwrap();
            for v in values {
                assert_eq!(fast.is_match(v), slow.is_match(v), "{p:?} on {v:?}");
            }
        }
    }

    #[test]
    fn a_pattern_cannot_escape_its_anchoring_group() {
        assert!(compile_literal("a)|(b").is_err());
        assert!(compile_literal("(a").is_err());
        assert!(matches!(compile_literal("(a)\\1"), Err(crate::EngineError::Regex { .. })));
    }

    #[test]
    fn size_limit_rejects_huge_programs() {
        assert!(compile_whole("a{10000}{10000}", DYNAMIC_SIZE_LIMIT).is_err());
        assert_eq!(dynamic_match(&Value::from("a{1000}{1000}"), "a"), None);
    }

    #[test]
    fn computed_patterns_are_cached_and_invalid_ones_are_null() {
        let p = Value::from("x+y");
        assert_eq!(dynamic_match(&p, "xxy"), Some(true));
        assert_eq!(dynamic_match(&p, "xy!"), Some(false));
        assert_eq!(dynamic_match(&Value::from("("), "("), None);
        assert_eq!(dynamic_match(&Value::Long(1), "1"), None);
        let long = "a".repeat(MAX_DYNAMIC_PATTERN_LEN + 1);
        assert_eq!(dynamic_match(&Value::from(long.as_str()), &long), None);
        for i in 0..CACHE_CAPACITY + 10 {
            assert_eq!(dynamic_match(&Value::from(format!("k{i}")), &format!("k{i}")), Some(true));
        }
        CACHE.with(|c| assert!(c.borrow().len() <= CACHE_CAPACITY));
    }
}
