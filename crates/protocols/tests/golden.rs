//! Golden files: every `tests/golden/<format>/<case>.in` is read line by line through the
//! parser of `<format>` (`influx`, `influx-us`, `influx-ms`, `influx-s`, `opentsdb`,
//! `graphite`: the directory names the protocol, and line protocol's precision when it is not
//! `ns`), and what comes out must be `<case>.out`: one NDJSON line per record, the error as
//! `{"malformed": "..."}` for a malformed line, nothing for a comment. A missing timestamp is
//! "now", fixed here at 1700000000000. The lines are also parsed one after another into one
//! reused point, as a source parses a connection's (the series it saw kept), and must give the
//! same, each point saying its series as the fuzz check requires (`check_series`).
//! `BLESS=1 cargo test -p needle-protocols --test golden`
//! rewrites the `.out` files (read the diff before committing it).

use needle_protocols::{Format, Precision};
use std::path::Path;

#[path = "../../../fuzz/checks/protocols.rs"]
#[allow(dead_code)]
mod fuzz_check;

const NOW_MS: i64 = 1_700_000_000_000;

fn format_of(dir: &str) -> Format {
    match dir.split_once('-') {
        Some(("influx", precision)) => {
            Format::Influx(Precision::parse(precision).expect("a known precision"))
        }
        _ => Format::parse(dir).expect("a golden directory names a format"),
    }
}

fn run(format: Format, input: &str) -> String {
    let mut out = String::new();
    let mut reused = needle_protocols::Point::new();
    let mut series = std::collections::HashMap::new();
    for line in input.split('\n') {
        let alone = format.parse_line(line.as_bytes(), NOW_MS);
        let parsed = format.parse_point(line.as_bytes(), NOW_MS, &mut reused);
        if let Ok(true) = parsed {
            fuzz_check::check_series(&reused, &mut series);
        }
        let in_turn = parsed.and_then(|some| some.then(|| reused.to_record()).transpose());
        assert_eq!(alone, in_turn, "{line:?} parsed after the lines before it");
        match alone {
            Ok(Some(record)) => out.push_str(&record.to_json()),
            Ok(None) => continue,
            Err(error) => {
                out.push_str(&serde_json::json!({ "malformed": error.to_string() }).to_string())
            }
        }
        out.push('\n');
    }
    out
}

#[test]
fn every_golden_case_gives_its_expected_records() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let bless = std::env::var_os("BLESS").is_some();
    let mut cases = 0;
    let mut failed = Vec::new();
    let mut dirs: Vec<_> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
    dirs.sort();
    for dir in dirs {
        let format = format_of(dir.file_name().unwrap().to_str().unwrap());
        let mut inputs: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "in"))
            .collect();
        inputs.sort();
        for input in inputs {
            cases += 1;
            let got = run(format, &std::fs::read_to_string(&input).unwrap());
            let expected_path = input.with_extension("out");
            if bless {
                std::fs::write(&expected_path, &got).unwrap();
                continue;
            }
            let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
            if got != expected {
                failed
                    .push(format!("{}:\n--- expected\n{expected}--- got\n{got}", input.display()));
            }
        }
    }
    assert!(cases >= 10, "only {cases} golden cases found under {}", root.display());
    assert!(failed.is_empty(), "{} golden cases differ:\n{}", failed.len(), failed.join("\n"));
}
