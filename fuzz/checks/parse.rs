//! Target `parse`: any bytes (as UTF-8 text) through the BQL parser. The parser must return
//! (a tree or an error whose span lies inside the text and renders); any panic, stack overflow,
//! timeout or out-of-memory is a bug. Every expression of an accepted query must print and parse
//! back to the same text.
//!
//! One body serves the fuzzer (`fuzz/fuzz_targets/parse.rs`) and the corpus replay test
//! (`crates/query/tests/fuzz_corpus.rs`), which both include this file by path.

use needle_query::parser::parse_expr;
use needle_query::{parse_bql, QueryError};

fn check_error(text: &str, error: &QueryError) {
    let span = error.span.expect("syntax errors have spans");
    assert!(span.start <= span.end && span.end <= text.len());
    assert!(error.render(text).starts_with("error: "));
}

pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match parse_bql(text) {
        Ok(query) => {
            for e in query.expressions() {
                let printed = e.to_string();
                let again = parse_expr(&printed).expect("printed expressions parse");
                assert_eq!(again.to_string(), printed);
            }
        }
        Err(error) => check_error(text, &error),
    }
    if let Err(error) = parse_expr(text) {
        check_error(text, &error);
    }
}
