//! `[history] catalog_url`, end to end: `needle ingest` with a needle.toml naming Apache
//! Iceberg's own REST catalog server (fetched with pyspark and Iceberg's Spark runtime by
//! `scripts/interop/install.sh`, run by `make test`) keeps the store's table there, and Spark
//! finds `needle.history` through its REST catalog by name alone: the records needle ingested,
//! then, after a second ingest into the same store, all of them once.

mod common;

use common::{needle, spark_runtime, stdout};
use needle_history::testing::IcebergRestServer;
use std::path::Path;
use std::process::Command;

/// Spark SQL over `rest.needle.history`, the REST catalog at argv[2].
const SPARK_REST: &str = r#"
import json, sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]")
    .config("spark.jars", sys.argv[1])
    .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
    .config("spark.sql.catalog.rest", "org.apache.iceberg.spark.SparkCatalog")
    .config("spark.sql.catalog.rest.type", "rest")
    .config("spark.sql.catalog.rest.uri", sys.argv[2])
    .config("spark.ui.enabled", "false")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
row = spark.sql("SELECT count(*) AS n, count(DISTINCT id) AS ids, sum(id) AS s FROM rest.needle.history").collect()[0]
snapshots = spark.sql("SELECT snapshot_id FROM rest.needle.history.snapshots").collect()
print(json.dumps({"rows": row["n"], "ids": row["ids"], "sum": row["s"], "snapshots": len(snapshots)}))
spark.stop()
"#;

fn spark(jar: &Path, server: &IcebergRestServer) -> serde_json::Value {
    let out = Command::new("python3")
        .args(["-c", SPARK_REST, jar.to_str().unwrap(), &server.uri])
        .env("SPARK_LOCAL_IP", "127.0.0.1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "Spark could not read the table from the REST catalog (scripts/interop/install.sh \
         installs pyspark and the runtime):\n{}\nthe server's log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

/// Records `from..to` as NDJSON, a minute apart, 7 sensors.
fn records(from: u64, to: u64) -> String {
    (from..to)
        .map(|i| {
            let line = serde_json::json!({
                "ts": 1_700_000_000_000u64 + i * 60_000,
                "sensor": format!("s{}", i % 7),
                "id": i,
            });
            format!("{line}\n")
        })
        .collect()
}

#[test]
fn needle_ingest_keeps_the_table_in_the_rest_catalog_where_spark_finds_it_by_name() {
    let jar = spark_runtime();
    let dir = tempfile::tempdir().unwrap();
    let port = IcebergRestServer::free_port();
    let server = IcebergRestServer::start(dir.path(), port);
    let store = dir.path().join("store");
    let config = dir.path().join("needle.toml");
    std::fs::write(
        &config,
        format!(
            "[history]\ndir = \"{}\"\ntime_field = \"ts\"\nsort_by = [\"sensor\"]\n\
             catalog_url = \"{}\"\n",
            store.display(),
            server.uri
        ),
    )
    .unwrap();
    let ingest = |from: u64, to: u64| {
        let input = dir.path().join(format!("records-{from}.ndjson"));
        std::fs::write(&input, records(from, to)).unwrap();
        let source = format!("file:{}", input.display());
        let out = needle(&["ingest", "--source", &source, "--config", config.to_str().unwrap()]);
        stdout(&out);
        let log = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!log.contains("REST catalog"), "the catalog took every commit: {log}");
    };

    ingest(0, 3_000);
    let got = spark(&jar, &server);
    assert_eq!(got["rows"], 3_000, "{got}");
    assert_eq!(got["ids"], 3_000, "{got}");
    assert_eq!(got["sum"], 3_000 * 2_999 / 2, "{got}");

    // a second run into the same store: the catalog's table follows, nothing twice
    ingest(3_000, 5_000);
    let got = spark(&jar, &server);
    assert_eq!(got["rows"], 5_000, "{got}");
    assert_eq!(got["ids"], 5_000, "{got}");
    assert_eq!(got["sum"], 5_000 * 4_999 / 2, "{got}");
    assert!(got["snapshots"].as_u64().unwrap() >= 2, "{got}");
}
