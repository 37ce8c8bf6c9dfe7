//! File-driven golden tests of the whole front end (parse → validate → plan).
//!
//! Each `tests/golden/<name>.bql` or `<name>.json` holds one query; next to it is either
//! `<name>.plan.json` (the plan, as `needle validate` prints it) or `<name>.error.txt` (the
//! rendered error). `tests/golden/pairs/<name>.bql` and `<name>.json` are a BQL query and the
//! Bullet JSON query that means the same: their plans must be equal (all but the query text).
//!
//! History queries are planned with "now" fixed at [`NOW_MS`].
//!
//! Regenerate the expected files with `UPDATE_GOLDEN=1 cargo test -p needle-query --test golden`
//! and review every changed file before committing.

use needle_query::{compile, QueryConfig};

/// "Now" for every case, so the relative times of history queries plan the same on any day:
/// 2026-11-24T10:00:00Z.
const NOW_MS: i64 = 1_795_514_400_000;

fn config() -> QueryConfig {
    QueryConfig { now_ms: Some(NOW_MS), ..QueryConfig::default() }
}
use std::fs;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn queries(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .expect("golden dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            name.ends_with(".bql") || (name.ends_with(".json") && !name.ends_with(".plan.json"))
        })
        .collect();
    out.sort();
    out
}

fn stem(path: &Path) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).expect("utf-8 name");
    name.rsplit_once('.').map(|(s, _)| s.to_string()).expect("an extension")
}

#[test]
fn golden_cases() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let config = config();
    let dir = dir();
    let cases = queries(&dir);
    let mut failures = Vec::new();
    let mut stems = std::collections::HashSet::new();
    for path in &cases {
        let text = fs::read_to_string(path).expect("query file");
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let name = stem(path);
        assert!(stems.insert(name.clone()), "two queries named {name}");
        let plan_path = dir.join(format!("{name}.plan.json"));
        let error_path = dir.join(format!("{name}.error.txt"));
        let (actual, expected_path, other_path) = match compile(text, &config) {
            Ok(plan) => (plan.to_json_pretty() + "\n", &plan_path, &error_path),
            Err(err) => (err.render(text), &error_path, &plan_path),
        };
        if update {
            fs::write(expected_path, &actual).expect("write expected");
            let _ = fs::remove_file(other_path);
            continue;
        }
        match fs::read_to_string(expected_path) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!("{name}: expected\n{expected}\ngot\n{actual}")),
            Err(_) => failures.push(format!(
                "{name}: no {} (the query gave:\n{actual})",
                expected_path.file_name().unwrap().to_string_lossy()
            )),
        }
    }
    // Every expected file belongs to a query.
    for entry in fs::read_dir(&dir).expect("golden dir") {
        let p = entry.expect("dir entry").path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        if let Some(s) = name.strip_suffix(".plan.json").or_else(|| name.strip_suffix(".error.txt"))
        {
            if !stems.contains(s) {
                failures.push(format!("{name} has no query file"));
            }
        }
    }
    assert!(cases.len() >= 150, "only {} golden cases", cases.len());
    assert!(
        failures.is_empty(),
        "{} of {} golden cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn bql_and_json_pairs_plan_the_same() {
    let config = config();
    let dir = dir().join("pairs");
    let mut pairs = 0;
    for path in queries(&dir).into_iter().filter(|p| p.extension().is_some_and(|e| e == "bql")) {
        let name = stem(&path);
        let bql = fs::read_to_string(&path).expect("bql");
        let json = fs::read_to_string(dir.join(format!("{name}.json"))).expect("a JSON twin");
        let plan = |text: &str| {
            let plan =
                compile(text, &config).unwrap_or_else(|e| panic!("{name}: {}", e.render(text)));
            let mut v = serde_json::to_value(&plan).expect("plan json");
            v.as_object_mut().expect("object").remove("text");
            v
        };
        assert_eq!(plan(&bql), plan(&json), "{name}: BQL and JSON plans differ");
        pairs += 1;
    }
    assert!(pairs >= 8, "only {pairs} pairs");
}

/// Every prefix of every golden query (BQL and JSON) compiles to a plan or an error whose span
/// lies inside the text: the validator and the JSON translation never panic on partial input.
#[test]
fn every_prefix_of_every_golden_query_is_handled() {
    let config = config();
    let mut checked = 0;
    for path in queries(&dir()).into_iter().chain(queries(&dir().join("pairs"))) {
        let text = fs::read_to_string(&path).expect("query file");
        for (i, _) in text.char_indices() {
            let prefix = &text[..i];
            if let Err(err) = compile(prefix, &config) {
                if let Some(span) = err.span {
                    assert!(
                        span.start <= span.end && span.end <= prefix.len(),
                        "{prefix:?}: {err:?}"
                    );
                }
                let _ = err.render(prefix);
            }
            checked += 1;
        }
    }
    assert!(checked > 10_000, "only {checked} prefixes");
}
