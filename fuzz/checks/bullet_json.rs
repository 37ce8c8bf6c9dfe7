//! Target `bullet_json`: any bytes (as UTF-8 text) through the Bullet JSON query parser
//! (`needle_query::json::parse_json`) and, for what it accepts, the validator that makes its plan
//! (`needle_query::validate`, with the default configuration). Both must return: any panic,
//! stack overflow, timeout or out-of-memory is a bug, and so is an error whose span lies outside
//! the text or that does not render. Every expression of a translated query must print as BQL
//! that parses back to the same text (the JSON and BQL forms share one tree).
//!
//! One body serves the fuzzer (`fuzz/fuzz_targets/bullet_json.rs`) and the corpus replay test
//! (`crates/query/tests/fuzz_corpus.rs`), which both include this file by path.

use needle_query::json::parse_json;
use needle_query::parser::parse_expr;
use needle_query::{validate, QueryConfig, QueryError};

fn check_error(text: &str, error: &QueryError, what: &str) {
    if let Some(span) = error.span {
        assert!(
            span.start <= span.end && span.end <= text.len(),
            "{what} error span {span:?} outside the text's {} bytes: {error:?}",
            text.len()
        );
    }
    assert!(error.render(text).starts_with("error: "));
}

pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let query = match parse_json(text) {
        Ok(query) => query,
        Err(error) => {
            assert!(error.span.is_some(), "a JSON query's errors have spans: {error:?}");
            return check_error(text, &error, "parse_json");
        }
    };
    for e in query.expressions() {
        let printed = e.to_string();
        let again = parse_expr(&printed)
            .unwrap_or_else(|err| panic!("printed expression {printed:?} does not parse: {err:?}"));
        assert_eq!(again.to_string(), printed);
    }
    if let Err(error) = validate(&query, text, &QueryConfig::default()) {
        check_error(text, &error, "validate");
    }
}
