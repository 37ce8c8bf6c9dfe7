//! History from the command line, end to end on the real binary: `needle gen iot` into
//! `needle ingest`, then `needle history`, `needle query --history` and `needle explain
//! --history` over the store; and the errors a user meets.

mod common;

use common::{needle, stdout};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SENSORS: u64 = 40;
const MINUTES: u64 = 180;
/// The iot workload's first timestamp: 2020-01-01T00:00:00Z.
const T0: i64 = 1_577_836_800_000;

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect()
}

/// The generated input and a store made from it by `needle ingest`.
fn ingested(dir: &Path) -> (PathBuf, PathBuf, serde_json::Value) {
    let input = dir.join("iot.ndjson");
    let count = (SENSORS * MINUTES).to_string();
    let sensors = SENSORS.to_string();
    let out = needle(&["gen", "iot", "--sensors", &sensors, "--count", &count]);
    std::fs::write(&input, stdout(&out)).unwrap();
    let store = dir.join("store");
    let source = format!("file:{}", input.display());
    let out = needle(&[
        "ingest",
        "--source",
        &source,
        "--history",
        store.to_str().unwrap(),
        "--time-field",
        "ts",
        "--sort-by",
        "sensor",
        "--format",
        "json",
    ]);
    let summary = json_lines(&stdout(&out)).remove(0);
    (input, store, summary)
}

#[test]
fn ingest_then_query_the_past() {
    let dir = tempfile::tempdir().unwrap();
    let (input, store, summary) = ingested(dir.path());
    let store_arg = store.to_str().unwrap();
    assert_eq!(summary["records"], SENSORS * MINUTES);
    assert!(summary["bytes"].as_u64().unwrap() > 0, "{summary}");
    assert!(summary["seconds"].as_f64().is_some(), "{summary}");

    // what the store holds
    let info = json_lines(&stdout(&needle(&["history", store_arg, "--format", "json"]))).remove(0);
    assert_eq!(info["records"], SENSORS * MINUTES, "{info}");
    let table = stdout(&needle(&["history", store_arg]));
    assert!(table.contains("records"), "{table}");

    // one hour, counted
    let hour = format!(
        "SELECT COUNT(*) AS n FROM HISTORY({T0}, {}) WHERE sensor = 'sensor_7'",
        T0 + 3_600_000
    );
    let out = needle(&["query", "--history", store_arg, "--format", "json", &hour]);
    let lines = json_lines(&stdout(&out));
    assert_eq!(lines.last().unwrap()["records"][0]["n"], 60);

    // an hourly downsample of one sensor: one result per hour, epoch-aligned
    let downsample = format!(
        "SELECT MAX(temp0) AS hi, COUNT(*) AS n FROM HISTORY({T0}, {}) WHERE sensor = 'sensor_3' \
         WINDOWING TUMBLING(3600000, TIME)",
        T0 + 3 * 3_600_000
    );
    let lines = json_lines(&stdout(&needle(&[
        "query",
        "--history",
        store_arg,
        "--format",
        "json",
        &downsample,
    ])));
    assert_eq!(lines.len(), 3, "{lines:?}");
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["records"][0]["n"], 60, "{line}");
        assert_eq!(line["meta"]["Window"]["Start"], T0 + i as i64 * 3_600_000, "{line}");
    }

    // SELECT * gives back the records exactly as they came in
    let first = format!("SELECT * FROM HISTORY({T0}) WHERE sensor = 'sensor_0' LIMIT 3");
    let lines = json_lines(&stdout(&needle(&[
        "query",
        "--history",
        store_arg,
        "--format",
        "json",
        &first,
    ])));
    let text = std::fs::read_to_string(&input).unwrap();
    let want: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["sensor"] == "sensor_0")
        .take(3)
        .collect();
    assert_eq!(lines.last().unwrap()["records"], serde_json::Value::Array(want));

    // the needle filter reads few blocks, and explain says so
    let needles = format!("SELECT sensor, temp0 FROM HISTORY({T0}) WHERE temp0 > 95 LIMIT 500");
    let explained = stdout(&needle(&["explain", "--history", store_arg, &needles]));
    assert!(explained.contains("skipped by min/max"), "{explained}");
    assert!(explained.contains("records built only for the rows that pass"), "{explained}");
    let out = stdout(&needle(&["query", "--history", store_arg, "--format", "json", &needles]));
    let found = json_lines(&out).last().unwrap()["records"].as_array().unwrap().len();
    let expected = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["temp0"].as_f64().unwrap() > 95.0)
        .count();
    assert_eq!(found, expected.min(500));

    // a GROUP BY with a WHERE is folded from the columns, and explain says so
    let grouped = format!(
        "SELECT sensor, MAX(temp0) AS top FROM HISTORY({T0}) WHERE temp0 > 50 GROUP BY sensor"
    );
    let explained = stdout(&needle(&["explain", "--history", store_arg, &grouped]));
    assert!(explained.contains("column at a time"), "{explained}");
    let out = stdout(&needle(&["query", "--history", store_arg, "--format", "json", &grouped]));
    let last = json_lines(&out).pop().unwrap();
    assert!(last["meta"]["History"]["blocks_by_columns"].as_u64() > Some(0), "{last}");
    let mut want = std::collections::BTreeMap::<String, f64>::new();
    for line in text.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let t = r["temp0"].as_f64().unwrap();
        if t > 50.0 {
            let top = want.entry(r["sensor"].as_str().unwrap().to_owned()).or_insert(t);
            *top = top.max(t);
        }
    }
    let got: std::collections::BTreeMap<String, f64> = last["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["sensor"].as_str().unwrap().to_owned(), r["top"].as_f64().unwrap()))
        .collect();
    assert_eq!(got, want);

    // an aggregate of whole blocks is answered from their statistics, and explain says so
    let whole = format!("SELECT COUNT(*) AS n, MAX(temp0) AS top FROM HISTORY({T0})");
    let explained = stdout(&needle(&["explain", "--history", store_arg, &whole]));
    let answered = explained
        .split("of which ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{explained}"));
    assert!(answered > 0, "{explained}");
    let out = stdout(&needle(&["query", "--history", store_arg, "--format", "json", &whole]));
    let last = json_lines(&out).pop().unwrap();
    let values: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let top = values.iter().map(|r| r["temp0"].as_f64().unwrap()).fold(f64::MIN, f64::max);
    assert_eq!(last["records"][0]["n"], values.len(), "{last}");
    assert_eq!(last["records"][0]["top"].as_f64(), Some(top), "{last}");
    assert_eq!(last["meta"]["History"]["blocks_from_aggregates"], answered, "{last}");
}

#[test]
fn history_errors_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("empty");
    std::fs::create_dir_all(&store).unwrap();
    let store_arg = store.to_str().unwrap();

    // from after to: line and column
    let out = needle(&["query", "--history", store_arg, "SELECT * FROM HISTORY(2000, 1000)"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 1"), "{err}");

    // a live query against a store
    let out = needle(&["query", "--history", store_arg, "SELECT * FROM STREAM()"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("FROM HISTORY"));

    // SINCE needs a live stream
    let out =
        needle(&["query", "--history", store_arg, "SELECT * FROM STREAM(1000, TIME) SINCE 0"]);
    assert_eq!(out.status.code(), Some(2));

    // a directory that is not there
    let missing = dir.path().join("missing");
    let out =
        needle(&["query", "--history", missing.to_str().unwrap(), "SELECT * FROM HISTORY(0)"]);
    assert_eq!(out.status.code(), Some(1));

    // an empty store: the query ends at once, with an empty result
    let out =
        needle(&["query", "--history", store_arg, "--format", "json", "SELECT * FROM HISTORY(0)"]);
    let lines = json_lines(&stdout(&out));
    assert_eq!(lines.last().unwrap()["records"], serde_json::json!([]));

    // ingest without a store directory
    let out = needle(&["ingest", "--source", "stdin"]);
    assert_eq!(out.status.code(), Some(2));
}

/// DuckDB's own sorted zstd Parquet of an NDJSON file: its bytes.
const DUCKDB_SORTED_PARQUET: &str = r#"
import os, sys
import duckdb
con = duckdb.connect()
con.execute(f"CREATE TABLE t AS SELECT * FROM read_json_auto('{sys.argv[1]}')")
con.execute(f"COPY (SELECT * FROM t ORDER BY sensor, ts) TO '{sys.argv[2]}' (FORMAT parquet, COMPRESSION zstd)")
print(os.path.getsize(sys.argv[2]))
"#;

/// Cold hours merge into a day: a day of 300 sensors ingested into an object store (a
/// `file://` URL) ends at most at DuckDB's sorted zstd Parquet of the same records (with hourly
/// partitions that never merge it was about twice that), and every query answers as it does
/// over the same records kept hour by hour.
#[test]
fn cold_hours_compact_into_a_day_at_most_at_duckdbs_bytes_and_answer_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("day.ndjson");
    let out = needle(&["gen", "iot", "--sensors", "300", "--count", "432000"]);
    std::fs::write(&input, stdout(&out)).unwrap();
    let source = format!("file:{}", input.display());
    let ingest = |store: &str, compact_after: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_needle"))
            .args(["ingest", "--source", &source, "--history", store])
            .args(["--time-field", "ts", "--sort-by", "sensor", "--format", "json"])
            .env("NEEDLE_HISTORY__COMPACT_AFTER_MS", compact_after)
            .env("NEEDLE_HISTORY__CACHE_DIR", dir.path().join("cache").to_str().unwrap())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        json_lines(&stdout(&out)).remove(0)
    };
    let hourly = dir.path().join("hourly");
    let hourly_summary = ingest(hourly.to_str().unwrap(), "0");
    let bucket = dir.path().join("bucket");
    let url = format!("file://{}", bucket.display());
    let daily_summary = ingest(&url, "3600000");

    let duck = Command::new("python3")
        .args(["-c", DUCKDB_SORTED_PARQUET, input.to_str().unwrap()])
        .arg(dir.path().join("duck.parquet"))
        .output()
        .unwrap();
    assert!(duck.status.success(), "{}", String::from_utf8_lossy(&duck.stderr));
    let duck_bytes: u64 = String::from_utf8_lossy(&duck.stdout).trim().parse().unwrap();
    let daily_bytes = daily_summary["bytes"].as_u64().unwrap();
    let hourly_bytes = hourly_summary["bytes"].as_u64().unwrap();
    assert!(
        daily_bytes <= duck_bytes,
        "compacted {daily_bytes} bytes, DuckDB's sorted zstd Parquet {duck_bytes} (hourly: \
         {hourly_bytes})"
    );
    let info: serde_json::Value =
        serde_json::from_str(&stdout(&needle(&["history", &url, "--format", "json"]))).unwrap();
    assert_eq!(info["partitions"], 1, "{info}");
    assert_eq!(info["records"], 432_000);
    // each data file, with the snapshot of the table that added it
    let files = info["files"].as_array().unwrap();
    assert_eq!(files.len() as u64, info["parts"].as_u64().unwrap(), "{info}");
    let rows: u64 = files.iter().map(|f| f["records"].as_u64().unwrap()).sum();
    assert_eq!(rows, 432_000);
    assert!(files.iter().all(|f| f["snapshot"].as_i64().is_some()), "{info}");

    for query in [
        "SELECT sensor, MAX(temp0) AS m, COUNT(*) AS n FROM HISTORY(0) GROUP BY sensor",
        "SELECT COUNT(*) AS n, SUM(temp3) AS s FROM HISTORY(0) WHERE temp0 > 30",
        "SELECT * FROM HISTORY(1577840400000, 1577840460000) WHERE sensor = 'sensor_7' LIMIT 10",
        "SELECT region, AVG(temp9) AS a FROM HISTORY(0) GROUP BY region \
         WINDOWING TUMBLING(3600000, TIME)",
    ] {
        let answer = |store: &str| {
            // the records of each emission (its metadata says how much of the store was read,
            // which compaction changes on purpose)
            let out = stdout(&needle(&["query", query, "--history", store, "--format", "json"]));
            let mut rows: Vec<String> = json_lines(&out)
                .iter()
                .flat_map(|e| e["records"].as_array().cloned().unwrap_or_default())
                .map(|r| r.to_string())
                .collect();
            rows.sort();
            rows
        };
        assert_eq!(answer(&url), answer(hourly.to_str().unwrap()), "{query}");
    }
}
