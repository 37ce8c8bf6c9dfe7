//! Did-you-mean: the closest keyword, function or type name to a misspelled word, and the BQL
//! names of functions a SQL user reaches for (`SUBSTR`, `LENGTH`, ...). The parser calls these
//! only on the error path, with the candidates that could stand where the word was found.

/// The candidate closest to `word` (compared case-insensitively), when it is close enough to be
/// a likely typo: an edit distance (with transpositions, so `FORM` → `FROM` is one edit) of at
/// most 1 for words of up to 3 letters, 2 up to 6 letters, 3 beyond. An exact match is not a
/// suggestion. Ties go to the earlier candidate.
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    if word.is_empty() || word.len() > 64 {
        return None;
    }
    let word = word.to_ascii_uppercase();
    let mut best: Option<(usize, &'a str)> = None;
    for &candidate in candidates {
        let distance = strsim::damerau_levenshtein(&word, &candidate.to_ascii_uppercase());
        let limit = match word.len().max(candidate.len()) {
            0..=3 => 1,
            4..=6 => 2,
            _ => 3,
        };
        if distance > 0 && distance <= limit && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, c)| c)
}

/// `did you mean X?` for the closest candidate, if any.
pub fn did_you_mean_hint(word: &str, candidates: &[&str]) -> Option<String> {
    did_you_mean(word, candidates).map(|c| format!("did you mean {c}?"))
}

/// The BQL way to write a SQL (or other dialect's) function that BQL names differently.
pub fn sql_function(name: &str) -> Option<&'static str> {
    const NAMES: &[(&str, &str)] = &[
        ("SUBSTR", "SUBSTRING(s, start[, len])"),
        ("MID", "SUBSTRING(s, start[, len])"),
        ("LENGTH", "SIZEOF(x)"),
        ("LEN", "SIZEOF(x)"),
        ("CHAR_LENGTH", "SIZEOF(x)"),
        ("SIZE", "SIZEOF(x)"),
        ("CARDINALITY", "SIZEOF(x)"),
        ("LCASE", "LOWER(s)"),
        ("UCASE", "UPPER(s)"),
        ("BTRIM", "TRIM(s)"),
        ("IIF", "IF(condition, then, else)"),
        ("UNIX_TIMESTAMP", "UNIXTIMESTAMP([s[, fmt]])"),
        ("CONTAINS", "CONTAINSVALUE(x, v) or CONTAINSKEY(m, k)"),
        ("COUNT_DISTINCT", "COUNT(DISTINCT e, ...)"),
        ("APPROX_COUNT_DISTINCT", "COUNT(DISTINCT e, ...)"),
        ("PERCENTILE", "QUANTILE(e, MANUAL, 0.5, 0.99)"),
        ("PERCENTILE_APPROX", "QUANTILE(e, MANUAL, 0.5, 0.99)"),
        ("APPROX_PERCENTILE", "QUANTILE(e, MANUAL, 0.5, 0.99)"),
        ("MEDIAN", "QUANTILE(e, MANUAL, 0.5)"),
        ("AVERAGE", "AVG(e)"),
        ("MEAN", "AVG(e)"),
        ("TOPK", "TOP(k, e, ...)"),
        ("TOP_K", "TOP(k, e, ...)"),
    ];
    NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|&(_, bql)| bql)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLAUSES: &[&str] = &["WHERE", "GROUP BY", "HAVING", "ORDER BY", "WINDOWING", "LIMIT"];

    #[test]
    fn finds_common_typos() {
        assert_eq!(did_you_mean("SELCT", &["SELECT"]), Some("SELECT"));
        assert_eq!(did_you_mean("form", &["FROM"]), Some("FROM"));
        assert_eq!(did_you_mean("WHRE", &["WHERE", "HAVING"]), Some("WHERE"));
        assert_eq!(did_you_mean("BUY", &["BY"]), Some("BY"));
        assert_eq!(did_you_mean("WINDOWNG", &["WINDOWING"]), Some("WINDOWING"));
        assert_eq!(did_you_mean("TUMBILNG", &["TUMBLING", "EVERY"]), Some("TUMBLING"));
        assert_eq!(did_you_mean("CONT", &["COUNT", "SUM"]), Some("COUNT"));
        assert_eq!(did_you_mean("QUANTILLE", &["QUANTILE", "FREQ"]), Some("QUANTILE"));
        assert_eq!(did_you_mean("limt", CLAUSES), Some("LIMIT"));
    }

    #[test]
    fn refuses_far_words_and_exact_matches() {
        assert_eq!(did_you_mean("banana", CLAUSES), None);
        assert_eq!(did_you_mean("x", &["AS", "BY"]), None);
        assert_eq!(did_you_mean("FROM", &["FROM"]), None);
        assert_eq!(did_you_mean("", &["AS"]), None);
        assert_eq!(did_you_mean(&"A".repeat(1000), &["AS"]), None);
    }

    #[test]
    fn hints_and_sql_names() {
        assert_eq!(did_you_mean_hint("ODER", &["ORDER"]).as_deref(), Some("did you mean ORDER?"));
        assert_eq!(sql_function("substr"), Some("SUBSTRING(s, start[, len])"));
        assert_eq!(sql_function("Length"), Some("SIZEOF(x)"));
        assert_eq!(sql_function("SUBSTRING"), None);
    }
}
