//! The same-results check of `needle bench vs-bullet`: every query's result records from needle
//! and from Bullet, compared as multisets (GROUP BY comes back in Bullet's hash order; RAW in
//! stream order on both, but the order is not what is being checked).
//!
//! Records are compared in a canonical form that removes what the two engines legitimately
//! write differently: object keys sorted, fields whose value is null dropped (Bullet leaves a
//! null field unset), and numbers compared as doubles to 12 significant digits (Bullet's
//! `SUM` of longs is a double, `759948693.0`; needle keeps the long). Anything else — a record
//! one side has and the other has not, a value that differs — is a disagreement.

use serde_json::Value as Json;
use std::fmt::Write;

/// What the check compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Agreement {
    pub queries: usize,
    /// Queries whose result has at least one record.
    pub non_empty: usize,
    /// Result records compared, in all.
    pub records_compared: usize,
}

/// Compares the results of every query; `Err` describes the first few disagreements.
pub fn compare(
    texts: &[String],
    needle: &[Vec<Json>],
    bullet: &[Vec<Json>],
) -> Result<Agreement, String> {
    if needle.len() != texts.len() || bullet.len() != texts.len() {
        return Err(format!(
            "{} queries, but needle gave {} results and Bullet {}",
            texts.len(),
            needle.len(),
            bullet.len()
        ));
    }
    let mut agreement = Agreement { queries: texts.len(), non_empty: 0, records_compared: 0 };
    let mut differing = Vec::new();
    for (i, (n, b)) in needle.iter().zip(bullet).enumerate() {
        let (n, b) = (sorted(n), sorted(b));
        if n != b {
            differing.push((i, n, b));
            continue;
        }
        agreement.non_empty += usize::from(!n.is_empty());
        agreement.records_compared += n.len();
    }
    if differing.is_empty() {
        return Ok(agreement);
    }
    let mut message =
        format!("needle and Bullet disagree on {} of {} queries:", differing.len(), texts.len());
    for (i, n, b) in differing.iter().take(3) {
        let _ = write!(
            message,
            "\n  query {} ({}): needle {} record(s), Bullet {}",
            i + 1,
            texts[*i],
            n.len(),
            b.len()
        );
        if let Some(r) = n.iter().find(|r| !b.contains(r)) {
            let _ = write!(message, "\n    only needle has {}", abbreviate(r));
        }
        if let Some(r) = b.iter().find(|r| !n.contains(r)) {
            let _ = write!(message, "\n    only Bullet has {}", abbreviate(r));
        }
    }
    Err(message)
}

fn sorted(records: &[Json]) -> Vec<String> {
    let mut out: Vec<String> = records.iter().map(canonical).collect();
    out.sort();
    out
}

/// The canonical text of a value (see the module doc).
pub fn canonical(value: &Json) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Json, out: &mut String) {
    match value {
        Json::Null | Json::Bool(_) | Json::String(_) => out.push_str(&value.to_string()),
        Json::Number(n) => {
            let _ = write!(out, "{:.11e}", n.as_f64().unwrap_or(f64::NAN));
        }
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Json::Object(map) => {
            let mut keys: Vec<&String> = map.keys().filter(|k| !map[*k].is_null()).collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Json::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
    }
}

fn abbreviate(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn texts(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("query {i}")).collect()
    }

    #[test]
    fn equal_results_agree_whatever_the_order_key_order_nulls_and_number_types() {
        let needle = vec![
            vec![
                json!({"n": 3, "device": "ipad", "avg": 0.1 + 0.2}),
                json!({"device": "tv", "n": 1}),
            ],
            vec![],
            vec![json!({"id": "ab", "m": {"b": "2", "a": "1"}, "gone": null})],
        ];
        let bullet = vec![
            vec![json!({"device": "tv", "n": 1.0}), json!({"device": "ipad", "n": 3, "avg": 0.3})],
            vec![],
            vec![json!({"m": {"a": "1", "b": "2"}, "id": "ab"})],
        ];
        let agreement = compare(&texts(3), &needle, &bullet).unwrap();
        assert_eq!(agreement, Agreement { queries: 3, non_empty: 2, records_compared: 3 });
    }

    #[test]
    fn a_missing_record_or_a_different_value_is_a_disagreement() {
        let needle = vec![vec![json!({"id": "ab"})], vec![json!({"n": 3})], vec![]];
        let bullet = vec![vec![], vec![json!({"n": 4})], vec![]];
        let err = compare(&texts(3), &needle, &bullet).unwrap_err();
        assert!(err.starts_with("needle and Bullet disagree on 2 of 3 queries"), "{err}");
        assert!(err.contains("query 1 (query 0): needle 1 record(s), Bullet 0"), "{err}");
        assert!(err.contains(r#"only needle has {"id":"ab"}"#), "{err}");
        assert!(err.contains("only Bullet has {\"n\":4.00000000000e0}"), "{err}");
        // list order matters inside a record
        let err = compare(&texts(1), &[vec![json!({"l": [1, 2]})]], &[vec![json!({"l": [2, 1]})]]);
        assert!(err.is_err());
        // so does a count of results that is not the count of queries
        assert!(compare(&texts(2), &[vec![], vec![]], &[vec![]]).is_err());
    }
}
