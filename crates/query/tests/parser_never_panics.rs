//! The parser on hostile input: arbitrary strings, strings of BQL-ish pieces, and valid queries
//! with characters and tokens deleted, inserted, swapped and duplicated. It must return (never
//! panic, overflow the stack or hang), and an error must carry a span inside the text that
//! renders; a query it accepts must print and parse back to the same expressions.

use needle_query::ast::Expr;
use needle_query::parser::parse_expr;
use needle_query::{parse_bql, QueryError};
use proptest::prelude::*;

const VALID: &[&str] = &[
    "SELECT * FROM STREAM(30000, TIME) WHERE id = 'c39ba8cfe8' LIMIT 10",
    "SELECT a.b[0].c AS x, COUNT(*) FROM STREAM() WHERE a.b[0].c > 5 GROUP BY a.b[0].c",
    "SELECT DISTINCT browser FROM STREAM(MAX, TIME) WHERE NOT (x IS NULL) AND y != -1.5e3",
    "SELECT TOP(10, 5, page, host) FROM STREAM(60000, TIME)",
    "SELECT QUANTILE(latency, LINEAR, 11) FROM STREAM() WINDOWING TUMBLING(5000, TIME)",
    "SELECT FREQ(size, REGION, -10, 10.5, 0.5) FROM STREAM() WINDOWING EVERY(1, RECORD, FIRST, 1, RECORD)",
    "SELECT COUNT(DISTINCT user, session) AS users FROM STREAM();",
    "SELECT AVG(x) + 5 AS a FROM STREAM() GROUP BY k HAVING AVG(x) > 1 ORDER BY a DESC LIMIT 3",
    "SELECT * FROM STREAM() WHERE m['k'] RLIKE ANY ['a.*', 'b''c'] OR n NOT RLIKE 'x' XOR z",
    "SELECT * FROM STREAM() WHERE a IN (1, 2, 3) AND b NOT IN ['x'] AND d = ANY l",
    "SELECT * FROM STREAM() WHERE a BETWEEN (1, 10) AND b NOT BETWEEN 1 AND 2 OR BETWEEN(c, 0, 1)",
    "SELECT CAST(a AS DOUBLE), IF(a > 1, 'big', 'small'), SUBSTRING(s, 1, 2) FROM STREAM()",
    "SELECT OUTER EXPLODE(m) AS (k, v) FROM STREAM() LATERAL VIEW EXPLODE(l) AS x WHERE k = 'x'",
    "SELECT * FROM STREAM() WHERE a : LIST[MAP[STRING]] IS NOT NULL AND \"123col\" = 5L AND b[c + 1] = 2.5f",
    "SELECT n FROM (SELECT COUNT(*) AS n FROM STREAM() WINDOWING EVERY(1000, TIME, ALL)) WHERE n > 10",
];

/// Pieces of BQL to build nonsense from.
const PIECES: &[&str] = &[
    "SELECT",
    "FROM",
    "STREAM",
    "WHERE",
    "GROUP",
    "BY",
    "HAVING",
    "ORDER",
    "LIMIT",
    "WINDOWING",
    "LATERAL",
    "VIEW",
    "EXPLODE",
    "OUTER",
    "AS",
    "DISTINCT",
    "AND",
    "OR",
    "XOR",
    "NOT",
    "IN",
    "IS",
    "NULL",
    "BETWEEN",
    "RLIKE",
    "ANY",
    "ALL",
    "TRUE",
    "NOW",
    "COUNT",
    "TOP",
    "QUANTILE",
    "LINEAR",
    "REGION",
    "MANUAL",
    "CAST",
    "TIME",
    "RECORD",
    "TUMBLING",
    "EVERY",
    "FIRST",
    "MAX",
    "LIST",
    "MAP",
    "STRING",
    "a",
    "b",
    "\"q\"",
    "'s'",
    "'",
    "\"",
    "5",
    "5L",
    "1.5f",
    "1e9",
    "-",
    "+",
    "*",
    "/",
    "%",
    "(",
    ")",
    "[",
    "]",
    ",",
    ".",
    ":",
    ";",
    "=",
    "!=",
    "<>",
    "<",
    ">=",
    " ",
    "\n",
    "é",
    "99999999999999999999",
];

/// What every outcome must satisfy.
fn check(text: &str) -> Result<(), TestCaseError> {
    match parse_bql(text) {
        Ok(query) => {
            for e in query.expressions() {
                round_trips(e)?;
            }
        }
        Err(error) => check_error(text, &error)?,
    }
    if let Err(error) = parse_expr(text) {
        check_error(text, &error)?;
    }
    Ok(())
}

fn check_error(text: &str, error: &QueryError) -> Result<(), TestCaseError> {
    let span = error.span.expect("syntax errors have spans");
    prop_assert!(span.start <= span.end && span.end <= text.len(), "{span:?} in {}", text.len());
    prop_assert!(!error.message.is_empty());
    let rendered = error.render(text);
    prop_assert!(rendered.starts_with("error: "));
    let _ = error.to_json(text);
    Ok(())
}

fn round_trips(e: &Expr) -> Result<(), TestCaseError> {
    let printed = e.to_string();
    let again = parse_expr(&printed)
        .map_err(|err| TestCaseError::fail(format!("{printed:?}: {}", err.render(&printed))))?;
    prop_assert_eq!(again.to_string(), printed);
    Ok(())
}

#[derive(Debug, Clone)]
enum Edit {
    DeleteChars(usize, usize),
    InsertChar(usize, char),
    InsertPiece(usize, &'static str),
    SwapTokens(usize, usize),
    DeleteToken(usize),
    Duplicate(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1..6usize).prop_map(|(at, n)| Edit::DeleteChars(at, n)),
        (any::<usize>(), any::<char>()).prop_map(|(at, c)| Edit::InsertChar(at, c)),
        (any::<usize>(), prop::sample::select(PIECES)).prop_map(|(at, p)| Edit::InsertPiece(at, p)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapTokens(a, b)),
        any::<usize>().prop_map(Edit::DeleteToken),
        (any::<usize>(), 1..20usize).prop_map(|(at, n)| Edit::Duplicate(at, n)),
    ]
}

/// The nearest char boundary at or before `at % (len + 1)`.
fn boundary(text: &str, at: usize) -> usize {
    let mut i = at % (text.len() + 1);
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn apply(text: &str, edit: &Edit) -> String {
    let mut words: Vec<&str> = text.split(' ').collect();
    match *edit {
        Edit::DeleteChars(at, n) => {
            let start = boundary(text, at);
            let end = boundary(text, (start + n).min(text.len()));
            let end = end.max(start);
            format!("{}{}", &text[..start], &text[end..])
        }
        Edit::InsertChar(at, c) => {
            let at = boundary(text, at);
            format!("{}{c}{}", &text[..at], &text[at..])
        }
        Edit::InsertPiece(at, piece) => {
            let at = boundary(text, at);
            format!("{}{piece}{}", &text[..at], &text[at..])
        }
        Edit::SwapTokens(a, b) => {
            let n = words.len();
            words.swap(a % n, b % n);
            words.join(" ")
        }
        Edit::DeleteToken(at) => {
            let n = words.len();
            words.remove(at % n);
            words.join(" ")
        }
        Edit::Duplicate(at, n) => {
            let start = boundary(text, at);
            let end = boundary(text, (start + n).min(text.len())).max(start);
            format!("{}{}", &text[..end], &text[start..])
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_strings(text in "(?s).{0,200}") {
        check(&text)?;
    }

    #[test]
    fn strings_of_bql_pieces(pieces in prop::collection::vec(prop::sample::select(PIECES), 0..40)) {
        check(&pieces.join(" "))?;
        check(&pieces.concat())?;
    }

    #[test]
    fn mutated_valid_queries(
        query in prop::sample::select(VALID),
        edits in prop::collection::vec(edit(), 1..5),
    ) {
        let mut text = query.to_owned();
        for e in &edits {
            text = apply(&text, e);
        }
        check(&text)?;
    }
}

#[test]
fn the_valid_queries_are_valid() {
    for text in VALID {
        if let Err(e) = parse_bql(text) {
            panic!("{}", e.render(text));
        }
    }
}

#[test]
fn huge_and_deep_inputs_end_with_an_error_not_a_crash() {
    let cases = [
        "(".repeat(100_000),
        "[".repeat(100_000),
        "-".repeat(100_000) + "1",
        "NOT ".repeat(100_000) + "a",
        "ABS(".repeat(100_000),
        "a[".repeat(100_000),
        format!("SELECT * FROM STREAM() WHERE {}", "a OR ".repeat(100_000) + "b"),
        format!("SELECT * FROM STREAM() WHERE {}", "a = ".repeat(100_000) + "b"),
        format!("SELECT * FROM {}", "(SELECT * FROM ".repeat(100_000)),
        "CAST(a AS LIST[".repeat(10_000),
        "'".repeat(100_001),
    ];
    for text in &cases {
        let error = parse_bql(text).expect_err("refused");
        check_error(text, &error).unwrap();
        if let Err(error) = parse_expr(text) {
            check_error(text, &error).unwrap();
        }
    }
}
