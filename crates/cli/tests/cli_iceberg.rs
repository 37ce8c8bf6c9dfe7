//! needle's history as an Apache Iceberg table, read by Apache Spark in local mode (pyspark
//! from PyPI, Iceberg's Spark runtime jar from Maven Central: `scripts/interop/install.sh`,
//! run by `make test`): `needle gen iot` into `needle ingest`, then the same questions asked of
//! `needle query --history ... FROM HISTORY` and of Spark SQL over the table, with the same
//! answers; and DuckDB still reads the data files.

mod common;

use common::{needle, spark_runtime, stdout};
use std::path::Path;
use std::process::Command;

const SENSORS: u64 = 40;
const MINUTES: u64 = 180;

/// The records of the last result of `needle query --history STORE --format json QUERY`.
fn needle_answer(store: &Path, query: &str) -> Vec<serde_json::Value> {
    let out = needle(&["query", "--history", store.to_str().unwrap(), "--format", "json", query]);
    let text = stdout(&out);
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    last["records"].as_array().unwrap().clone()
}

const SPARK: &str = r#"
import json, sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]")
    .config("spark.jars", sys.argv[1])
    .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
    .config("spark.ui.enabled", "false")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
spark.read.format("iceberg").load(sys.argv[2]).createOrReplaceTempView("history")
top = spark.sql("SELECT sensor, max(temp0) AS top FROM history GROUP BY sensor").collect()
hot = spark.sql("SELECT count(*) AS n, sum(temp0) AS s FROM history WHERE temp0 > 95").collect()[0]
print(json.dumps({
    "top": {r["sensor"]: r["top"] for r in top},
    "hot": [hot["n"], hot["s"]],
    "rows": spark.sql("SELECT count(*) FROM history").collect()[0][0],
}))
spark.stop()
"#;

const DUCKDB: &str = r#"
import json, sys
import duckdb
con = duckdb.connect()
print(con.execute(f"SELECT count(*) FROM read_parquet('{sys.argv[1]}/p=*/*.parquet', union_by_name=true)").fetchone()[0])
"#;

#[test]
fn spark_reads_the_history_table_and_answers_as_from_history_does() {
    let jar = spark_runtime();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("iot.ndjson");
    let count = (SENSORS * MINUTES).to_string();
    let out = needle(&["gen", "iot", "--sensors", &SENSORS.to_string(), "--count", &count]);
    std::fs::write(&input, stdout(&out)).unwrap();
    let store = dir.path().join("store");
    let source = format!("file:{}", input.display());
    let args = ["ingest", "--source", &source, "--history", store.to_str().unwrap()];
    stdout(&needle(&[&args[..], &["--time-field", "ts", "--sort-by", "sensor"]].concat()));

    let hint = std::fs::read_to_string(store.join("metadata/version-hint.text")).unwrap();
    let metadata = store.join(format!("metadata/v{}.metadata.json", hint.trim()));
    let out = Command::new("python3")
        .args(["-c", SPARK, jar.to_str().unwrap(), metadata.to_str().unwrap()])
        .env("SPARK_LOCAL_IP", "127.0.0.1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "Spark could not read the table (scripts/interop/install.sh installs pyspark and the \
         runtime):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let spark: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(spark["rows"], SENSORS * MINUTES, "{spark}");

    let top =
        needle_answer(&store, "SELECT sensor, MAX(temp0) AS top FROM HISTORY(0) GROUP BY sensor");
    assert_eq!(top.len() as u64, SENSORS);
    for row in &top {
        let sensor = row["sensor"].as_str().unwrap();
        let needle_top = row["top"].as_f64().unwrap();
        let spark_top = spark["top"][sensor].as_f64().unwrap();
        assert_eq!(needle_top, spark_top, "{sensor}");
    }
    let hot = needle_answer(
        &store,
        "SELECT COUNT(*) AS n, SUM(temp0) AS s FROM HISTORY(0) WHERE temp0 > 95",
    );
    assert_eq!(hot[0]["n"], spark["hot"][0], "{hot:?} {spark}");
    assert_eq!(hot[0]["s"].as_f64(), spark["hot"][1].as_f64(), "{hot:?} {spark}");
    assert!(hot[0]["n"].as_u64().unwrap() > 0, "the filter finds some records: {hot:?}");

    // and DuckDB reads the data files as they are
    let out =
        Command::new("python3").args(["-c", DUCKDB, store.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), (SENSORS * MINUTES).to_string());
}
