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
