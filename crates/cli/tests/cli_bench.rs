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
    // measured again beside stalled subscribers, whose results the server drops past its bounds
    let out = Command::new(NEEDLE)
        .args(["bench", "find-record", "--runs", "3", "--rate", "2000", "--stalled", "3"])
        .args(["--busy", "2"])
        .args(["--format", "json", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (line["stalled"].as_u64(), line["needle_beside_stalled"]["runs"].as_u64()),
        (Some(3), Some(3)),
        "{line}"
    );
    assert!(line["stalled_result_bytes"].as_f64().is_some_and(|b| b > 0.0), "{line}");
    // and beside queries matching every record, whose clients read what they are sent
    assert_eq!(
        (line["busy"].as_u64(), line["needle_beside_busy"]["runs"].as_u64()),
        (Some(2), Some(3)),
        "{line}"
    );
    assert!(line["busy_bytes_per_sec"].as_f64().is_some_and(|b| b > 0.0), "{line}");
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
        let check = row["check_only_records_per_sec"].as_f64().unwrap();
        assert!(check > 0.0, "{row}");
        assert!((row["check_ratio"].as_f64().unwrap() - needle / check).abs() < 1e-9, "{row}");
    }
    // set a's ids are absent from the records: nothing matches; set b's mix does match
    assert_eq!(rows[1]["matched_per_record"], 0.0);
    assert!(rows[3]["matched_per_record"].as_f64().unwrap() > 0.0, "{}", rows[3]);
    assert!(out_dir.join("matching.json").exists());
    let _ = std::fs::remove_dir_all(&out_dir);
    let bad = Command::new(NEEDLE).args(["bench", "matching", "--seconds", "0"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    // checking only the fields read: the same matches, said in the result
    let out = Command::new(NEEDLE)
        .args(["bench", "matching", "--queries", "50", "--set", "b", "--records", "200"])
        .args(["--seconds", "0.05", "--no-memory", "--validate", "fields", "--format", "json"])
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let row: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(row["validate"], "fields");
    assert_eq!(row["matched_per_record"], rows[3]["matched_per_record"], "{row}");
    let _ = std::fs::remove_dir_all(&out_dir);
    let bad = Command::new(NEEDLE).args(["bench", "matching", "--validate", "some"]).output();
    assert_eq!(bad.unwrap().status.code(), Some(2));
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

/// Runs `needle bench ARGS --format json --out DIR` and returns its JSON lines and DIR.
fn bench_json(name: &str, args: &[&str]) -> (Vec<serde_json::Value>, std::path::PathBuf) {
    let out_dir = std::env::temp_dir().join(format!("needle-bench-{name}-{}", std::process::id()));
    let out = Command::new(NEEDLE)
        .arg("bench")
        .args(args)
        .args(["--format", "json", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (rows, out_dir)
}

fn exits_2(args: &[&str]) {
    let out = Command::new(NEEDLE).arg("bench").args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn assert_svg(path: &std::path::Path) {
    let svg = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
    assert!(svg.contains("<polyline") || svg.contains("<path"), "no line drawn: {svg}");
}

#[test]
fn max_raw_queries_finds_every_needle_record_of_every_query() {
    let (rows, out_dir) = bench_json(
        "max-raw",
        &["max-raw-queries", "--queries", "20,60", "--copies", "3", "--duration-ms", "8000"]
            .into_iter()
            .chain(["--rate", "500", "--inject-seconds", "1"])
            .collect::<Vec<_>>(),
    );
    let counts: Vec<u64> = rows.iter().map(|r| r["queries"].as_u64().unwrap()).collect();
    assert_eq!(counts, [20, 60]);
    for row in &rows {
        let n = row["queries"].as_u64().unwrap();
        assert_eq!(row["submitted"].as_u64(), Some(n), "{row}");
        assert_eq!(row["records_expected"].as_u64(), Some(3 * n), "{row}");
        assert_eq!(row["records_found"], row["records_expected"], "{row}");
        assert_eq!(row["records_wrong"], 0, "{row}");
        assert_eq!(row["queries_complete"].as_u64(), Some(n), "{row}");
        assert_eq!(row["all_found"], true, "{row}");
        assert_eq!(row["latency"]["runs"].as_u64(), Some(n), "{row}");
        assert!(row["latency"]["p50_ms"].as_f64().unwrap() > 0.0, "{row}");
    }
    assert!(out_dir.join("max-raw-queries.json").exists());
    let _ = std::fs::remove_dir_all(&out_dir);
    exits_2(&["max-raw-queries", "--queries", "0"]);
    exits_2(&["max-raw-queries", "--copies", "0"]);
}

#[test]
fn eps_counts_every_event_exactly_and_reports_the_baselines() {
    let (rows, out_dir) =
        bench_json("eps", &["eps", "--events", "300000", "--pool", "50000", "--workers", "2"]);
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row["scenario"], "eps");
    assert_eq!(row["result_events"].as_u64(), Some(300_000), "{row}");
    assert_eq!(row["result_ok"], true, "{row}");
    for field in ["events_per_core_sec", "read_split_per_core_sec", "parse_only_per_core_sec"] {
        assert!(row[field].as_f64().unwrap() > 0.0, "{field}: {row}");
    }
    let ratio = row["events_per_core_sec"].as_f64().unwrap()
        / row["read_split_per_core_sec"].as_f64().unwrap();
    assert!((row["ratio_read_split"].as_f64().unwrap() - ratio).abs() < 1e-9, "{row}");
    assert!(out_dir.join("eps.json").exists());
    let _ = std::fs::remove_dir_all(&out_dir);
    exits_2(&["eps", "--events", "0"]);
}

#[test]
fn eps_of_typed_pushes_counts_every_event_exactly_and_reports_the_hand_offs() {
    let (rows, out_dir) = bench_json(
        "eps-typed",
        &["eps", "--push", "typed", "--events", "300001", "--pool", "5000", "--workers", "2"],
    );
    let row = &rows[0];
    assert_eq!((row["scenario"].as_str(), row["push"].as_str()), (Some("eps"), Some("typed")));
    assert_eq!(row["result_events"].as_u64(), Some(300_001), "{row}");
    assert_eq!(row["result_ok"], true, "{row}");
    assert_eq!(row["workers"].as_u64(), Some(2), "{row}");
    let per_core = row["events_per_core_sec"].as_f64().unwrap();
    for (rate, ratio) in [
        ("handoff_one_per_core_sec", "ratio_handoff_one"),
        ("handoff_structs_per_core_sec", "ratio_handoff_structs"),
        ("handoff_records_per_core_sec", "ratio_handoff_records"),
    ] {
        let rate = row[rate].as_f64().unwrap();
        assert!(rate > 0.0 && rate.is_finite(), "{row}");
        assert!((row[ratio].as_f64().unwrap() - per_core / rate).abs() < 1e-9, "{row}");
    }
    let _ = std::fs::remove_dir_all(&out_dir);
    exits_2(&["eps", "--push", "sideways"]);
}

#[test]
fn query_scaling_measures_latency_per_query_count_and_draws_the_curve() {
    let (rows, out_dir) = bench_json(
        "query-scaling",
        &["query-scaling", "--queries", "1,200", "--rate", "500", "--seconds", "0.5"],
    );
    let counts: Vec<u64> = rows.iter().map(|r| r["queries"].as_u64().unwrap()).collect();
    assert_eq!(counts, [1, 200]);
    for row in &rows {
        assert_eq!(row["refused"], 0, "{row}");
        let sent = row["probes_sent"].as_u64().unwrap();
        assert!(sent >= 5, "{row}");
        assert_eq!(row["probes_back"].as_u64(), Some(sent), "every probe comes back: {row}");
        assert!(row["write_to_result"]["p50_ms"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["read_to_match_observations"].as_u64().unwrap() > 0, "{row}");
    }
    assert_svg(&out_dir.join("query-scaling.svg"));
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("query-scaling.json")).unwrap())
            .unwrap();
    assert_eq!(file["rows"].as_array().unwrap().len(), 2);
    let _ = std::fs::remove_dir_all(&out_dir);
    exits_2(&["query-scaling", "--probe-rate", "0"]);
}

#[test]
fn data_scaling_reports_each_trial_and_draws_records_per_second_against_workers() {
    let (rows, out_dir) = bench_json(
        "data-scaling",
        &["data-scaling", "--workers", "1,2", "--queries", "40", "--seconds", "0.5"]
            .into_iter()
            .chain(["--warmup", "0.2", "--fractions", "0.5"])
            .collect::<Vec<_>>(),
    );
    let shape: Vec<(u64, bool)> =
        rows.iter().map(|r| (r["workers"].as_u64().unwrap(), r["offered"].is_null())).collect();
    assert_eq!(shape, [(1, true), (1, false), (2, true), (2, false)]);
    for row in &rows {
        assert!(row["records_per_sec"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["mib_per_sec_per_core"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(row["source"], "tcp");
    }
    assert_svg(&out_dir.join("data-scaling.svg"));
    let _ = std::fs::remove_dir_all(&out_dir);
    let (rows, out_dir) = bench_json(
        "data-scaling-file",
        &["data-scaling", "--source", "file", "--workers", "1", "--file-records", "3000"]
            .into_iter()
            .chain(["--queries", "40"])
            .collect::<Vec<_>>(),
    );
    assert_eq!(rows.len(), 1, "a file is read once per worker count");
    assert!(rows[0]["records_per_sec"].as_f64().unwrap() > 0.0, "{}", rows[0]);
    let _ = std::fs::remove_dir_all(&out_dir);
    exits_2(&["data-scaling", "--source", "kafka", "--topic-records", "5"]);
    exits_2(&["data-scaling", "--workers", "0"]);
}

#[test]
fn history_checks_needle_and_duckdb_agree_then_reports_both() {
    // blocks and pages smaller than the defaults, so that 36,000 records fill several
    let (rows, out_dir) = bench_json(
        "history",
        &[
            "history",
            "--sensors",
            "200",
            "--minutes",
            "180",
            "--runs",
            "1",
            "--block-rows",
            "8192",
            "--page-rows",
            "2048",
            "--stream-seconds",
            "3",
        ],
    );
    let result = &rows[0];
    assert_eq!(result["scenario"], "history");
    // the table beside a store that is no table: both ingested, a live stream committed
    let table = &result["table"];
    assert!(table["ingest_ratio_with_commits"].as_f64().unwrap() > 0.0, "{table}");
    assert!(table["ingest_commits"].as_u64().unwrap() >= 1, "{table}");
    let stream = &table["stream"];
    assert!(stream["records"].as_u64().unwrap() > 0, "{stream}");
    assert!(stream["commits"].as_u64().unwrap() >= 2, "{stream}");
    assert!(
        stream["metadata_bytes_written"].as_u64() >= stream["metadata_bytes_kept"].as_u64(),
        "{stream}"
    );
    assert!(stream["metadata_bytes_kept"].as_u64().unwrap() > 0, "{stream}");
    assert_eq!(result["points"], 200 * 180 * 10);
    assert!(result["ingest"]["points_per_cpu_second"].as_f64().unwrap() > 0.0, "{result}");
    assert!(result["bytes_per_point"].as_f64().unwrap() > 0.0, "{result}");
    assert!(result["duckdb_bytes_per_point"].as_f64().unwrap() > 0.0, "{result}");
    let queries = result["queries"].as_array().unwrap();
    assert_eq!(queries.len(), 4);
    for q in queries {
        // the answers were checked equal before these figures were kept
        assert!(q["needle_ms"].as_f64().unwrap() > 0.0, "{q}");
        assert!(q["duckdb_table_ms"].as_f64().unwrap() > 0.0, "{q}");
        assert!(q["no_table_ms"].as_f64().unwrap() > 0.0, "{q}");
    }
    assert_eq!(queries[0]["rows"], 200, "one MAX per sensor");
    assert_eq!(queries[2]["rows"], 3, "three hours of one sensor");
    let filter = &queries[1];
    assert!(filter["blocks_read"].as_u64() < filter["blocks_total"].as_u64(), "{filter}");
    // and inside the blocks read, the pages the WHERE rules out are not read
    assert!(filter["records_read_share"].as_f64() < Some(0.2), "{filter}");
    let _ = std::fs::remove_dir_all(&out_dir);
    exits_2(&["history", "--sensors", "0"]);
    exits_2(&["history", "--page-rows", "0"]);
    exits_2(&["history", "--store", "gcs"]);
}

#[test]
fn history_on_s3_reports_the_object_store_beside_the_local_store() {
    // MinIO started by the bench itself; every answer read from it, warm and cold, was
    // checked equal to the local store's before these figures were kept
    let (rows, out_dir) = bench_json(
        "history-s3",
        &["history", "--store", "s3", "--peer", "none", "--sensors", "50", "--minutes", "120"]
            .into_iter()
            .chain(["--runs", "1", "--block-rows", "2048", "--page-rows", "512"])
            .collect::<Vec<_>>(),
    );
    let result = &rows[0];
    let s3 = &result["s3"];
    assert!(s3["url"].as_str().is_some_and(|u| u.starts_with("s3://")), "{result}");
    assert!(s3["ingest"]["points_per_cpu_second"].as_f64() > Some(0.0), "{s3}");
    assert!(s3["ingest_ratio_to_local"].as_f64() > Some(0.0), "{s3}");
    // the same records in the same layout: the manifest names as many bytes as the local disk
    // holds, but for each part's footer (its writer's name; the columns' Iceberg field ids,
    // which a local store gives every part and a shared one only once its manifest has them)
    let (s3_bytes, local_bytes) =
        (s3["bytes"].as_u64().unwrap(), result["ingest"]["bytes"].as_u64().unwrap());
    let footers = local_bytes / 20;
    assert!(
        s3_bytes.abs_diff(local_bytes) <= footers,
        "{s3_bytes} against {local_bytes}: {result}"
    );
    // a store opened afresh fetches at least the manifest and the footers
    assert!(s3["cold_open"]["fetched_bytes"].as_u64() > Some(0), "{s3}");
    assert!(s3["cold_open"]["fetch_requests"].as_u64() > Some(0), "{s3}");
    let queries = result["queries"].as_array().unwrap();
    assert_eq!(queries.len(), 4);
    for q in queries {
        let o = &q["s3"];
        assert!(o["warm_ms"].as_f64() > Some(0.0) && o["cold_ms"].as_f64() > Some(0.0), "{q}");
        assert!(q["s3_warm_ratio_to_local"].as_f64().is_some(), "{q}");
        assert!(q["s3_cold_ratio_to_local"].as_f64().is_some(), "{q}");
        // the warm-up filled the cache: the timed warm runs fetch nothing
        assert_eq!(o["warm_fetched_bytes_per_run"], 0, "{q}");
    }
    let _ = std::fs::remove_dir_all(&out_dir);
    // without --store s3, the figures are the local store's alone
    let (rows, out_dir) = bench_json(
        "history-local",
        &["history", "--peer", "none", "--sensors", "10", "--minutes", "60", "--runs", "1"],
    );
    assert!(rows[0].get("s3").is_none(), "{}", rows[0]);
    assert!(rows[0]["queries"][0].get("s3").is_none(), "{}", rows[0]);
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn ingest_keeps_every_protocols_points_in_history_beside_json_lines() {
    // 4 hosts × 2 metrics × 50 points; remote write in bodies of 30 samples (the last shorter)
    let (rows, out_dir) = bench_json(
        "ingest",
        &["ingest", "--hosts", "4", "--metrics", "2", "--points", "50"]
            .into_iter()
            .chain(["--samples-per-request", "30", "--workers", "2"])
            .collect::<Vec<_>>(),
    );
    let names: Vec<&str> = rows.iter().map(|r| r["protocol"].as_str().unwrap()).collect();
    assert_eq!(names, ["json", "influx", "opentsdb", "graphite", "json-http", "remote-write"]);
    let rate = |name: &str| {
        let row = rows.iter().find(|r| r["protocol"] == name).unwrap();
        row["points_per_cpu_second"].as_f64().unwrap()
    };
    for row in &rows {
        assert_eq!(row["scenario"], "ingest");
        assert_eq!(row["points"], 400, "{row}");
        // each store was read back and checked before the figures were kept
        let (stored, expected) = (&row["stored"], &row["expected"]);
        for field in ["points", "first_ms", "last_ms"] {
            assert_eq!(stored[field], expected[field], "{field}: {row}");
        }
        let sum = expected["sum"].as_f64().unwrap();
        assert!((stored["sum"].as_f64().unwrap() - sum).abs() <= 1e-9 * sum, "{row}");
        for field in ["points_per_cpu_second", "points_per_second", "decode_per_cpu_second"] {
            let value = row[field].as_f64().unwrap();
            assert!(value > 0.0 && value.is_finite(), "{field}: {row}");
        }
        let baseline = row["baseline"].as_str().unwrap();
        let ratio = row["points_per_cpu_second"].as_f64().unwrap() / rate(baseline);
        assert!((row["ratio_to_json"].as_f64().unwrap() - ratio).abs() < 1e-9, "{row}");
        let remote_write = row["protocol"] == "remote-write";
        assert_eq!(row["snappy_protobuf_per_cpu_second"].is_number(), remote_write, "{row}");
    }
    assert_eq!(rows[5]["baseline"], "json-http");
    assert!(out_dir.join("ingest.json").exists());
    let _ = std::fs::remove_dir_all(&out_dir);
    // one protocol: its JSON lines baseline runs beside it
    let (rows, out_dir) = bench_json(
        "ingest-one",
        &["ingest", "--protocol", "graphite", "--hosts", "2", "--metrics", "1", "--points", "5"],
    );
    let names: Vec<&str> = rows.iter().map(|r| r["protocol"].as_str().unwrap()).collect();
    assert_eq!(names, ["json", "graphite"]);
    let _ = std::fs::remove_dir_all(&out_dir);
    exits_2(&["ingest", "--points", "0"]);
    exits_2(&["ingest", "--metrics", "11"]);
    exits_2(&["ingest", "--protocol", "statsd"]);
}
