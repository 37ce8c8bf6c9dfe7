//! A store's table kept in an Iceberg REST catalog (`StoreConfig::catalog`): Apache Iceberg's
//! own REST catalog server (its test fixture, fetched into `.cache/iceberg-rest` by
//! `scripts/interop/install.sh`, run by `make test`) on a free port, and pyiceberg's
//! `RestCatalog` loading `needle.history` from it finds what needle wrote, at needle's newest
//! snapshot, for a local store and for one on object storage; a catalog that is down at a
//! commit stops nothing, and the next commit once it is back brings it up to date.

use needle_history::testing::IcebergRestServer as RestServer;
use needle_history::{RemoteConfig, RestCatalogConfig, ScanRequest, Store, StoreConfig};
use needle_record::{Map, Record, Value};
use std::path::Path;
use std::process::Command;

/// The table through the REST catalog, as a pyiceberg user opens it: its rows, schema, a
/// record's values, its snapshots and properties.
const PYICEBERG_REST: &str = r#"
import json, sys
from pyiceberg.catalog.rest import RestCatalog
import pyarrow.compute as pc
catalog = RestCatalog("needle", uri=sys.argv[1])
table = catalog.load_table("needle.history")
rows = table.scan().to_arrow()
seven = rows.filter(pc.equal(rows["id"], 7)).to_pylist()
print(json.dumps({
    "rows": rows.num_rows,
    "distinct_ids": len(pc.unique(rows["id"])),
    "sum_id": pc.sum(rows["id"]).as_py(),
    "columns": sorted(f.name for f in table.schema().fields),
    "seven": [{"sensor": r["sensor"], "temp": r["temp"], "ts": r["ts"]} for r in seven],
    "snapshot": table.current_snapshot().snapshot_id,
    "snapshots": sorted(s.snapshot_id for s in table.snapshots()),
    "properties": sorted(table.properties.keys()),
    "tables": [list(t) for t in catalog.list_tables("needle")],
}))
"#;

fn record(i: i64) -> Record {
    let mut m = Map::default();
    m.insert("ts".into(), Value::Long(1_700_000_000_000 + i * 3_700));
    m.insert("sensor".into(), Value::String(format!("s{}", i % 13)));
    m.insert("temp".into(), Value::Double((i % 100) as f64 + 0.5));
    m.insert("id".into(), Value::Long(i));
    Record::from_map(m)
}

/// Records `from..to`, appended and flushed in batches of 400.
fn ingest(store: &Store, from: i64, to: i64) {
    let mut at = from;
    while at < to {
        let end = (at + 400).min(to);
        store.append((at..end).map(|i| (record(i), 0)), None).unwrap();
        store.flush().unwrap();
        at = end;
    }
}

/// The records needle itself reads back.
fn needle_rows(store: &Store) -> usize {
    let scan = store
        .scan(&ScanRequest { from_ms: i64::MIN, to_ms: i64::MAX, filter: None, fields: None })
        .unwrap();
    scan.buffered.len() + scan.blocks.iter().map(|b| b.read().unwrap().len()).sum::<usize>()
}

/// needle's newest snapshot of the store's table.
fn newest_snapshot(store: &Store) -> i64 {
    store.info().unwrap().snapshots.last().expect("the table has a snapshot").snapshot
}

/// The table as pyiceberg's `RestCatalog` reads it from the catalog at `uri`.
fn pyiceberg(uri: &str, server: &RestServer) -> serde_json::Value {
    let out =
        Command::new("python3").args(["-c", PYICEBERG_REST, uri]).output().expect("python3 runs");
    assert!(
        out.status.success(),
        "pyiceberg could not read the table from the REST catalog (scripts/interop/install.sh \
         installs it):\n{}\nthe server's log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn catalog(uri: &str) -> RestCatalogConfig {
    let mut catalog = RestCatalogConfig::new(uri);
    // each commit tries a catalog that failed before at once
    catalog.retry_ms = 0;
    catalog.request_timeout_ms = 5_000;
    catalog
}

fn sensors(dir: &Path, uri: &str) -> StoreConfig {
    let mut config = StoreConfig::new(dir);
    config.time_field = Some("ts".into());
    config.sort_by = vec!["sensor".into()];
    config.catalog = Some(catalog(uri));
    config
}

/// What pyiceberg read is what needle holds: `n` records, each once, the ids `0..n`, at
/// needle's newest snapshot and with needle's snapshots.
fn assert_same(got: &serde_json::Value, store: &Store, n: i64) {
    assert_eq!(got["rows"], n, "{got}");
    assert_eq!(got["distinct_ids"], n, "no record twice: {got}");
    assert_eq!(got["sum_id"], n * (n - 1) / 2, "{got}");
    assert_eq!(needle_rows(store) as i64, n);
    assert_eq!(got["snapshot"], newest_snapshot(store), "the catalog is at needle's snapshot");
    let mut ours: Vec<i64> = store.info().unwrap().snapshots.iter().map(|s| s.snapshot).collect();
    ours.sort();
    assert_eq!(got["snapshots"], serde_json::json!(ours), "the same snapshots kept");
    assert_eq!(
        got["columns"],
        serde_json::json!(["__needle_layout", "__needle_time", "id", "sensor", "temp", "ts"])
    );
    assert_eq!(
        got["seven"],
        serde_json::json!([{"sensor": "s7", "temp": 7.5, "ts": 1_700_000_000_000i64 + 7 * 3_700}])
    );
    assert_eq!(got["tables"], serde_json::json!([["needle", "history"]]));
}

#[test]
fn pyiceberg_finds_a_local_stores_table_in_the_rest_catalog_at_each_newer_snapshot() {
    let server_dir = tempfile::tempdir().unwrap();
    let port = RestServer::free_port();
    let server = RestServer::start(server_dir.path(), port);
    let uri = format!("http://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let mut config = sensors(dir.path(), &uri);
    config.commit_ms = Some(0);
    let store = Store::open(config).unwrap();
    ingest(&store, 0, 1_200);
    let got = pyiceberg(&uri, &server);
    assert_same(&got, &store, 1_200);

    // more records, then the hours merged: newer snapshots (appends, a replace), no doubles
    ingest(&store, 1_200, 2_000);
    store.compact().unwrap();
    let got = pyiceberg(&uri, &server);
    assert_same(&got, &store, 2_000);
    // needle's own manifest stays in needle's files, not the catalog's
    let properties = got["properties"].as_array().unwrap();
    assert!(!properties.iter().any(|p| p == "needle.manifest"), "{got}");
    assert!(properties.iter().any(|p| p == "schema.name-mapping.default"), "{got}");

    let info = store.rest_catalog().unwrap();
    assert_eq!(info.registrations, 1, "{info:?}");
    assert!(info.commits >= 2, "a commit per version after the first: {info:?}");
    assert_eq!(info.errors, 0, "{info:?}");
    assert_eq!(info.last_error, None);
    assert_eq!(info.synced, store.info().unwrap().table, "{info:?}");
}

#[test]
fn the_catalogs_own_metadata_files_are_kept_to_as_many_as_needle_keeps() {
    let server_dir = tempfile::tempdir().unwrap();
    let port = RestServer::free_port();
    let _server = RestServer::start(server_dir.path(), port);
    let uri = format!("http://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let mut config = sensors(dir.path(), &uri);
    config.commit_ms = Some(0);
    let store = Store::open(config).unwrap();
    for round in 0..30 {
        ingest(&store, round * 10, (round + 1) * 10);
    }
    let info = store.rest_catalog().unwrap();
    assert!(info.commits >= 29, "{info:?}");
    // the catalog's files (`<n>-<uuid>.metadata.json`) beside needle's (`v<n>.metadata.json`)
    let catalogs: Vec<String> = std::fs::read_dir(dir.path().join("metadata"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".metadata.json") && !n.starts_with('v'))
        .collect();
    assert!(!catalogs.is_empty());
    assert!(catalogs.len() <= 21, "{} of the catalog's files: {catalogs:?}", catalogs.len());
}

#[test]
fn a_catalog_down_at_commits_stops_nothing_and_catches_up_at_the_next_commit() {
    let server_dir = tempfile::tempdir().unwrap();
    let port = RestServer::free_port();
    let uri = format!("http://127.0.0.1:{port}");
    // a store on object storage (file://)
    let bucket = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let mut config = sensors(local.path(), &uri);
    // (merged-away parts stay their grace period: a reader of an older snapshot reads them)
    config.remote = Some(RemoteConfig::new(format!("file://{}", bucket.path().display())));
    // each flush's upload committed
    config.commit_ms = Some(0);
    let store = Store::open(config).unwrap();

    // no catalog yet: ingest and uploads go on, the failures are counted
    ingest(&store, 0, 800);
    assert_eq!(needle_rows(&store), 800);
    assert!(store.health().is_ok());
    let info = store.rest_catalog().unwrap();
    assert!(info.errors >= 2, "{info:?}");
    assert!(info.last_error.as_deref().unwrap_or_default().contains(&uri), "{info:?}");
    assert_eq!((info.registrations, info.synced.as_deref()), (0, None), "{info:?}");

    // the catalog comes up: the next commit registers the table
    let server = RestServer::start(server_dir.path(), port);
    ingest(&store, 800, 1_200);
    let got = pyiceberg(&uri, &server);
    assert_same(&got, &store, 1_200);
    assert_eq!(store.rest_catalog().unwrap().last_error, None);

    // down again while more is ingested and merged
    drop(server);
    let errors = store.rest_catalog().unwrap().errors;
    ingest(&store, 1_200, 2_000);
    store.compact().unwrap();
    assert_eq!(needle_rows(&store), 2_000);
    let info = store.rest_catalog().unwrap();
    assert!(info.errors > errors, "{info:?}");
    assert_ne!(info.synced, store.info().unwrap().table);

    // back, the table still registered (its SQLite file kept): one commit catches it up
    let server = RestServer::start(server_dir.path(), port);
    let stale = pyiceberg(&uri, &server);
    assert_eq!(stale["rows"], 1_200, "the catalog still at the version before: {stale}");
    ingest(&store, 2_000, 2_400);
    let got = pyiceberg(&uri, &server);
    assert_same(&got, &store, 2_400);
    let info = store.rest_catalog().unwrap();
    assert_eq!(info.registrations, 1, "{info:?}");
    assert!(info.commits >= 1, "{info:?}");
    assert_eq!(info.last_error, None, "{info:?}");
}

#[test]
fn a_catalog_that_missed_more_versions_than_needle_keeps_or_a_store_made_anew_is_pointed_again() {
    let server_dir = tempfile::tempdir().unwrap();
    let port = RestServer::free_port();
    let uri = format!("http://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let config = {
        let mut config = sensors(dir.path(), &uri);
        config.commit_ms = Some(0);
        config
    };
    let store = Store::open(config.clone()).unwrap();
    ingest(&store, 0, 400);
    // the catalog comes up between commits: the next round of maintenance registers the table
    // with needle's newest metadata file, the catalog's own files none yet
    let server = RestServer::start(server_dir.path(), port);
    store.maintain().unwrap();
    let info = store.rest_catalog().unwrap();
    assert_eq!((info.registrations, info.commits), (1, 0), "{info:?}");
    assert_eq!(info.synced, store.info().unwrap().table);

    // down for more versions than needle keeps: the metadata file it was registered with is
    // gone when it is back
    drop(server);
    for round in 0..25 {
        ingest(&store, 400 + round * 16, 400 + (round + 1) * 16);
    }
    let server = RestServer::start(server_dir.path(), port);
    ingest(&store, 800, 1_200);
    let got = pyiceberg(&uri, &server);
    assert_same(&got, &store, 1_200);
    let info = store.rest_catalog().unwrap();
    assert_eq!((info.registrations, info.last_error), (2, None));

    // the store made anew in the same place: another table, which the catalog then holds
    store.close().unwrap();
    drop(store);
    std::fs::remove_dir_all(dir.path()).unwrap();
    let store = Store::open(config).unwrap();
    ingest(&store, 0, 400);
    let got = pyiceberg(&uri, &server);
    assert_same(&got, &store, 400);
    assert_eq!(store.rest_catalog().unwrap().registrations, 1);
}

#[test]
fn a_catalog_for_a_local_store_that_is_no_table_or_a_url_that_is_not_http_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = sensors(dir.path(), "http://127.0.0.1:1");
    config.commit_ms = None;
    let error = Store::open(config).unwrap_err().to_string();
    assert!(error.contains("history.catalog_url") && error.contains("commit_ms"), "{error}");
    let mut config = sensors(dir.path(), "thrift://metastore:9083");
    config.commit_ms = Some(1_000);
    let error = Store::open(config).unwrap_err().to_string();
    assert!(error.contains("http://"), "{error}");
}
