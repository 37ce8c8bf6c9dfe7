//! `needle bench` runs its scenarios end to end (few runs: speed is for docs/benchmarks.md,
//! never for a test).

use std::process::Command;

const NEEDLE: &str = env!("CARGO_BIN_EXE_needle");

/// `--format json` output: one object per line.
fn json_lines(stdout: &[u8]) -> Vec<serde_json::Value> {
    let text = std::str::from_utf8(stdout).unwrap();
    text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

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
    let rows = json_lines(&out.stdout);
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

/// Runs the real Bullet peer (bench/peers/bullet, built by `run.sh` with Maven if its jar is
/// missing; `scripts/test.sh` builds it before the Rust tests) on a tiny configuration.
#[test]
fn vs_bullet_checks_both_engines_agree_then_reports_both_rates_and_the_ratio() {
    let out_dir =
        std::env::temp_dir().join(format!("needle-bench-vs-bullet-{}", std::process::id()));
    let vs_bullet = |extra: &[&str]| {
        Command::new(NEEDLE)
            .args(["bench", "vs-bullet", "--records", "300", "--check-records", "100"])
            .args(["--seconds", "0.05", "--format", "json", "--out"])
            .arg(&out_dir)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = vs_bullet(&["--queries", "1,3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = json_lines(&out.stdout);
    assert_eq!(rows.iter().map(|r| r["queries"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 3]);
    for row in &rows {
        let needle = row["needle_records_per_sec"].as_f64().unwrap();
        let bullet = row["bullet_records_per_sec"].as_f64().unwrap();
        assert!(needle > 0.0 && bullet > 0.0, "{row}");
        assert!((row["ratio"].as_f64().unwrap() / (needle / bullet) - 1.0).abs() < 1e-9, "{row}");
        // decoding plus querying is slower than querying alone
        assert!(bullet < row["bullet_engine_records_per_sec"].as_f64().unwrap(), "{row}");
        assert_eq!(row["records"], 300);
    }
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("vs-bullet.json")).unwrap())
            .unwrap();
    // query 2 of 3 looks for an id that is in the checked records: a non-empty result compared
    assert_eq!(
        (file["check"]["queries"].as_u64(), file["check"]["non_empty"].as_u64()),
        (Some(3), Some(1))
    );
    assert_eq!(file["check"]["records"], 100);

    // the peer runs other queries than needle: the same-results check stops the bench
    let other = out_dir.join("other.bql");
    std::fs::write(&other, "SELECT * FROM STREAM(30000, TIME) LIMIT 10\n".repeat(3)).unwrap();
    let out = vs_bullet(&["--queries", "3", "--check-peer-queries", other.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the same-results check failed"), "{stderr}");
    assert!(stderr.contains("needle and Bullet disagree on 3 of 3 queries"), "{stderr}");
    assert!(out.stdout.is_empty());

    // no peer, or no Java: a clear error, exit 1
    let out = vs_bullet(&["--peer", "/nonexistent"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--peer /nonexistent: no run.sh"));
    let out = Command::new(NEEDLE)
        .args(["bench", "vs-bullet", "--no-pin", "--out"])
        .arg(&out_dir)
        .env("PATH", &out_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`java` is not on PATH"));
    let _ = std::fs::remove_dir_all(&out_dir);

    for bad in [
        &["--queries", "0"][..],
        &["--queries", "x"],
        &["--seconds", "0"],
        &["--records", "0"],
        &["--set", "z"],
        &["--cpu", "100000"],
    ] {
        let out = Command::new(NEEDLE).args(["bench", "vs-bullet"]).args(bad).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}
