//! DuckDB (PyPI `duckdb`, installed by `make test`) reads a store as it is: the counts, sums and
//! a few values it finds are the ones written.

use needle_history::{Store, StoreConfig};
use needle_record::{Map, Record, Value};
use std::process::Command;

const DUCKDB: &str = r#"
import json, sys
import duckdb
con = duckdb.connect()
t = f"read_parquet('{sys.argv[1]}/**/*.parquet', union_by_name=true)"
out = {
    "rows": con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0],
    "sum_v": con.execute(f"SELECT SUM(v) FROM {t}").fetchone()[0],
    "max_temp": con.execute(f"SELECT MAX(temp) FROM {t}").fetchone()[0],
    "sensors": con.execute(f"SELECT COUNT(DISTINCT sensor) FROM {t}").fetchone()[0],
    "first": con.execute(f"SELECT sensor, ts, v, tags FROM {t} ORDER BY ts, sensor LIMIT 1").fetchone(),
    "hour": con.execute(f"SELECT COUNT(*) FROM {t} WHERE __needle_time >= TIMESTAMPTZ '1970-01-01 01:00:00+00' AND __needle_time < to_timestamp(7200)").fetchone()[0],
    "time": con.execute(f"SELECT typeof(__needle_time), epoch_ms(MAX(__needle_time)) FROM {t} GROUP BY 1").fetchone(),
}
print(json.dumps(out, default=str))
"#;

#[test]
fn duckdb_reads_the_store_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = StoreConfig::new(dir.path());
    config.time_field = Some("ts".into());
    config.sort_by = vec!["sensor".into()];
    config.bloom_fields = vec!["sensor".into()];
    let store = Store::open(config).unwrap();
    let mut sum = 0i64;
    let mut max_temp = f64::MIN;
    let mut records = Vec::new();
    for minute in 0..180i64 {
        for s in 0..20i64 {
            let v = minute * 20 + s;
            let temp = 20.0 + ((v * 37) % 100) as f64 / 10.0;
            sum += v;
            max_temp = max_temp.max(temp);
            let mut tags = Map::default();
            tags.insert("region".into(), Value::String(["APAC", "EMEA"][s as usize % 2].into()));
            let mut r = Record::new();
            r.insert("ts", Value::Long(minute * 60_000));
            r.insert("sensor", Value::String(format!("sensor_{s}")));
            r.insert("v", Value::Long(v));
            r.insert("temp", Value::Double(temp));
            r.insert("tags", Value::Map(tags));
            records.push((r, 0));
        }
    }
    for chunk in records.chunks(1_000) {
        store.append(chunk.to_vec(), None).unwrap();
        store.flush().unwrap();
    }
    store.maintain().unwrap();

    let out = Command::new("python3")
        .args(["-c", DUCKDB, dir.path().to_str().unwrap()])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "DuckDB could not read the store (make test installs duckdb from PyPI: \
         python3 -m pip install duckdb):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["rows"], 3_600);
    assert_eq!(got["sum_v"].as_f64(), Some(sum as f64));
    assert_eq!(got["max_temp"].as_f64(), Some(max_temp));
    assert_eq!(got["sensors"], 20);
    assert_eq!(got["first"], serde_json::json!(["sensor_0", 0, 0, "{\"region\":\"APAC\"}"]));
    assert_eq!(got["hour"], 60 * 20);
    // the time is a time, to DuckDB as to Iceberg's readers
    assert_eq!(got["time"], serde_json::json!(["TIMESTAMP WITH TIME ZONE", 179 * 60_000]));
}

const DUCKDB_DOUBLES: &str = r#"
import json, sys
import duckdb
con = duckdb.connect()
t = f"read_parquet('{sys.argv[1]}/**/*.parquet')"
encodings = con.execute(f"SELECT DISTINCT encodings FROM parquet_metadata('{sys.argv[1]}/**/*.parquet') WHERE path_in_schema = 'reading'").fetchall()
out = {
    "rows": con.execute(f"SELECT COUNT(*), COUNT(DISTINCT reading), SUM(reading), MIN(reading), MAX(reading) FROM {t}").fetchone(),
    "encodings": sorted(e for row in encodings for e in row[0].split(", ")),
}
print(json.dumps(out))
"#;

/// A DOUBLE column of more distinct values than its dictionary takes (a gauge's readings) goes
/// on as BYTE_STREAM_SPLIT, and DuckDB reads it back value for value.
#[test]
fn duckdb_reads_a_double_column_past_its_dictionary() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = StoreConfig::new(dir.path());
    config.time_field = Some("ts".into());
    config.sort_by = vec!["sensor".into()];
    let store = Store::open(config).unwrap();
    let rows = 20_000i64;
    // quarters: every sum and bound exact
    let reading = |i: i64| ((i * 7_919) % rows) as f64 * 0.25 - 1_000.0;
    let records: Vec<(Record, i64)> = (0..rows)
        .map(|i| {
            let mut r = Record::new();
            r.insert("ts", Value::Long(i));
            r.insert("sensor", Value::String(format!("sensor_{}", i % 10)));
            r.insert("reading", Value::Double(reading(i)));
            (r, 0)
        })
        .collect();
    store.append(records, None).unwrap();
    store.flush().unwrap();
    let out = Command::new("python3")
        .args(["-c", DUCKDB_DOUBLES, dir.path().to_str().unwrap()])
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sum: f64 = (0..rows).map(reading).sum();
    let (min, max) = (reading(0), (0..rows).map(reading).fold(f64::MIN, f64::max));
    assert_eq!(got["rows"], serde_json::json!([rows, rows, sum, min, max]));
    let encodings: Vec<&str> =
        got["encodings"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
    assert!(encodings.contains(&"BYTE_STREAM_SPLIT"), "{encodings:?}");
    assert!(
        encodings.contains(&"RLE_DICTIONARY"),
        "the values before the dictionary filled: {encodings:?}"
    );
}
