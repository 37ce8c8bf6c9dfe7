//! `needle bench` runs its scenarios end to end (few runs: speed is for docs/benchmarks.md,
//! never for a test).

use std::process::Command;

const NEEDLE: &str = env!("CARGO_BIN_EXE_needle");

#[test]
fn latency_scenarios_report_needle_and_the_baseline_as_json() {
    let out_dir = std::env::temp_dir().join(format!("needle-bench-test-{}", std::process::id()));
    for scenario in ["latency-min", "find-record"] {
        let out = Command::new(NEEDLE)
            .args(["bench", scenario, "--runs", "3", "--rate", "2000", "--format", "json", "--out"])
            .arg(&out_dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(line["scenario"], scenario);
        assert_eq!(line["needle"]["runs"], 3);
        assert!(line["needle"]["p50_ms"].as_f64().unwrap() > 0.0, "{line}");
        assert!(line["ratio_p50"].as_f64().unwrap() > 0.0, "{line}");
        let file = std::fs::read_to_string(out_dir.join(format!("{scenario}.json"))).unwrap();
        assert_eq!(serde_json::from_str::<serde_json::Value>(&file).unwrap(), line);
    }
    let _ = std::fs::remove_dir_all(&out_dir);
    let bad = Command::new(NEEDLE).args(["bench", "latency-min", "--runs", "0"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn matching_reports_records_per_second_and_the_parse_only_ratio_per_query_count() {
    let out_dir =
        std::env::temp_dir().join(format!("needle-bench-matching-{}", std::process::id()));
    let out = Command::new(NEEDLE)
        .args(["bench", "matching", "--queries", "1,50", "--set", "a,b", "--records", "200"])
        .args(["--seconds", "0.05", "--no-memory", "--format", "json", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let shape: Vec<(String, u64)> = rows
        .iter()
        .map(|r| (r["set"].as_str().unwrap().to_owned(), r["queries"].as_u64().unwrap()))
        .collect();
    let expected = [("a", 1), ("a", 50), ("b", 1), ("b", 50)].map(|(s, n)| (s.to_owned(), n));
    assert_eq!(shape, expected);
    for row in &rows {
        let (needle, parse) = (
            row["records_per_sec"].as_f64().unwrap(),
            row["parse_only_records_per_sec"].as_f64().unwrap(),
        );
        assert!(needle > 0.0 && parse > 0.0, "{row}");
        assert!((row["ratio"].as_f64().unwrap() - needle / parse).abs() < 1e-9, "{row}");
    }
    // set a's ids are absent from the records: nothing matches; set b's mix does match
    assert_eq!(rows[1]["matched_per_record"], 0.0);
    assert!(rows[3]["matched_per_record"].as_f64().unwrap() > 0.0, "{}", rows[3]);
    assert!(out_dir.join("matching.json").exists());
    let _ = std::fs::remove_dir_all(&out_dir);
    let bad = Command::new(NEEDLE).args(["bench", "matching", "--seconds", "0"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
}
