//! A store on object storage is an Apache Iceberg table: pyiceberg (PyPI, installed by `make
//! test`) reads it through its metadata file alone and finds the records needle wrote: their
//! count, sums and schema, a filter's rows, and one snapshot per change.

use needle_history::{RemoteConfig, ScanRequest, Store, StoreConfig};
use needle_record::{Map, Record, Value};
use std::path::Path;
use std::process::Command;

const PYICEBERG: &str = r#"
import json, sys
from pyiceberg.table import StaticTable
import pyarrow.compute as pc
table = StaticTable.from_metadata(sys.argv[1])
rows = table.scan().to_arrow()
hot = table.scan(row_filter="temp > 95.0").to_arrow()
out = {
    "rows": rows.num_rows,
    "sum_id": pc.sum(rows["id"]).as_py(),
    "max_temp": pc.max(rows["temp"]).as_py(),
    "sensors": len(pc.unique(rows["sensor"])),
    "hot": hot.num_rows,
    "columns": [f.name for f in table.schema().fields],
    "time": str(rows.schema.field("__needle_time").type),
    "spec": str(table.spec()),
    "operations": [s.summary.operation.value for s in sorted(table.snapshots(), key=lambda s: s.sequence_number)],
    "current": table.current_snapshot().summary.operation.value,
    "files": len(table.inspect.files()),
    "sort": [table.schema().find_column_name(f.source_id) + " " + str(f.direction) for f in table.sort_order().fields],
}
print(json.dumps(out, default=str))
"#;

/// The table through the SQL catalog beside the store, as a pyiceberg user opens it.
const PYICEBERG_CATALOG: &str = r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
catalog = SqlCatalog("needle", uri=f"sqlite:///{sys.argv[1]}/catalog.db", warehouse=f"file://{sys.argv[1]}")
table = catalog.load_table("needle.history")
print(json.dumps({"rows": table.scan().to_arrow().num_rows, "tables": [list(t) for t in catalog.list_tables("needle")], "location": table.metadata_location}))
"#;

fn record(i: i64) -> Record {
    let mut m = Map::default();
    // two hours and more: three hourly partitions
    m.insert("ts".into(), Value::Long(1_700_000_000_000 + i * 3_700));
    m.insert("sensor".into(), Value::String(format!("s{}", i % 13)));
    m.insert("temp".into(), Value::Double((i % 100) as f64 + 0.5));
    m.insert("id".into(), Value::Long(i));
    Record::from_map(m)
}

/// A store of 13 sensors' readings, its time the records' `ts`.
fn sensors(dir: &Path) -> StoreConfig {
    let mut config = StoreConfig::new(dir);
    config.time_field = Some("ts".into());
    config.sort_by = vec!["sensor".into()];
    config
}

/// 2,400 records in six flushes; their count.
fn fill(store: &Store) -> i64 {
    for round in 0..6 {
        let records = (round * 400..(round + 1) * 400).map(|i| (record(i), 0));
        store.append(records, None).unwrap();
        store.flush().unwrap();
    }
    2_400
}

fn pyiceberg(metadata: &Path) -> serde_json::Value {
    let out = Command::new("python3")
        .args(["-c", PYICEBERG, metadata.to_str().unwrap()])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "pyiceberg could not read the table (make test installs it from PyPI: python3 -m pip \
         install 'pyiceberg[pyarrow,sql-sqlite]'):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn pyiceberg_reads_what_needle_keeps_from_the_metadata_file_alone() {
    let bucket = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let mut config = sensors(local.path());
    // (the default grace: the snapshots before the merges stay, their files with them)
    let remote = RemoteConfig::new(format!("file://{}", bucket.path().display()));
    config.remote = Some(remote);
    // a snapshot for each upload and merge
    config.commit_ms = Some(0);
    let store = Store::open(config).unwrap();
    let n = fill(&store);
    store.compact().unwrap();
    let version = store.info().unwrap().remote.unwrap().manifest_version;
    let metadata = bucket.path().join(format!("metadata/v{version}.metadata.json"));
    let got = pyiceberg(&metadata);

    assert_eq!(got["rows"], n, "{got}");
    assert_eq!(got["sum_id"], n * (n - 1) / 2);
    assert_eq!(got["max_temp"], 99.5);
    assert_eq!(got["sensors"], 13);
    let hot = (0..n).filter(|i| (i % 100) as f64 + 0.5 > 95.0).count();
    assert_eq!(got["hot"], hot);
    let mut columns: Vec<String> = serde_json::from_value(got["columns"].clone()).unwrap();
    columns.sort();
    assert_eq!(columns, ["__needle_layout", "__needle_time", "id", "sensor", "temp", "ts"]);
    assert_eq!(got["time"], "timestamp[us, tz=UTC]");
    assert!(got["spec"].as_str().unwrap().contains("hour(1)"), "{got}");
    // the order parts are written in: the store's sort_by, then the time
    let sort: Vec<String> = serde_json::from_value(got["sort"].clone()).unwrap();
    assert_eq!(sort.len(), 2, "{sort:?}");
    assert!(sort[0].starts_with("sensor ") && sort[1].starts_with("__needle_time "), "{sort:?}");
    assert!(sort.iter().all(|s| s.to_lowercase().contains("asc")), "{sort:?}");
    // six uploads, then merges: each partition's parts replaced by one
    let operations: Vec<String> = serde_json::from_value(got["operations"].clone()).unwrap();
    assert_eq!(operations.iter().filter(|o| *o == "append").count(), 6, "{operations:?}");
    assert!(operations.iter().any(|o| o == "replace"), "{operations:?}");
    let live = store.info().unwrap().parts;
    assert_eq!(got["files"], live as u64, "{got}");

    // and needle reads the same
    let scan = store
        .scan(&ScanRequest { from_ms: i64::MIN, to_ms: i64::MAX, filter: None, fields: None })
        .unwrap();
    let rows: usize =
        scan.buffered.len() + scan.blocks.iter().map(|b| b.read().unwrap().len()).sum::<usize>();
    assert_eq!(rows as i64, n);
}

#[test]
fn a_local_store_is_a_table_whose_older_snapshot_still_reads_while_it_compacts() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = sensors(dir.path());
    config.commit_ms = Some(0);
    let store = Store::open(config).unwrap();
    let n = fill(&store);
    let newest = |dir: &Path| {
        let hint = std::fs::read_to_string(dir.join("metadata/version-hint.text")).unwrap();
        dir.join(format!("metadata/v{}.metadata.json", hint.trim()))
    };
    let before = newest(dir.path());
    let first = pyiceberg(&before);
    assert_eq!(
        (first["rows"].as_i64(), first["sum_id"].as_i64()),
        (Some(n), Some(n * (n - 1) / 2))
    );
    assert!(first["spec"].as_str().unwrap().contains("hour(1)"), "{first}");

    // merges replace the parts; a reader of the snapshot before still reads them all, once
    store.compact().unwrap();
    let after = newest(dir.path());
    assert_ne!(before, after);
    let old = pyiceberg(&before);
    let new = pyiceberg(&after);
    assert_eq!(old["rows"], n, "{old}");
    assert_eq!(new["rows"], n, "{new}");
    assert_eq!(new["sum_id"], old["sum_id"]);
    assert_eq!(new["files"], store.info().unwrap().parts, "{new}");
    let operations: Vec<String> = serde_json::from_value(new["operations"].clone()).unwrap();
    assert_eq!(operations.last().map(String::as_str), Some("replace"), "{operations:?}");
    assert_eq!(new["current"], "replace");

    // closed: the last snapshot names every part, and the replaced ones are gone
    store.close().unwrap();
    let out = Command::new("python3")
        .args(["-c", PYICEBERG_CATALOG, dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let through_catalog: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(through_catalog["rows"], n, "{through_catalog}");
    assert_eq!(through_catalog["tables"], serde_json::json!([["needle", "history"]]));
    let location = through_catalog["location"].as_str().unwrap().to_owned();
    assert!(location.ends_with(&format!("{}", newest(dir.path()).display())), "{location}");
    let files: usize = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("p="))
        .map(|p| std::fs::read_dir(p).unwrap().count())
        .sum();
    assert_eq!(files as u64, store.info().unwrap().parts);
}

const PYICEBERG_COLUMNS: &str = r#"
import json, sys
from pyiceberg.table import StaticTable
table = StaticTable.from_metadata(sys.argv[1])
rows = table.scan().to_arrow().sort_by("n").to_pylist()
print(json.dumps({
    "columns": {f.name: str(f.field_type) for f in table.schema().fields},
    "rows": [{k: v for k, v in r.items() if not k.startswith("__needle")} for r in rows],
}, default=str))
"#;

#[test]
fn a_field_that_changes_type_between_parts_gets_a_column_per_type() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = StoreConfig::new(dir.path());
    config.time_field = Some("ts".into());
    config.commit_ms = Some(0);
    let store = Store::open(config).unwrap();
    let point = |n: i64, x: Value| {
        let mut m = Map::default();
        m.insert("ts".into(), Value::Long(1_700_000_000_000 + n));
        m.insert("n".into(), Value::Long(n));
        m.insert("x".into(), x);
        (Record::from_map(m), 0)
    };
    let mut tags = Map::default();
    tags.insert("a".into(), Value::Long(1));
    // a long, then an int (the same column), then a double, then a map: three columns
    store.append([point(0, Value::Long(7))], None).unwrap();
    store.flush().unwrap();
    store.append([point(1, Value::Int(8))], None).unwrap();
    store.flush().unwrap();
    store.append([point(2, Value::Double(2.5))], None).unwrap();
    store.flush().unwrap();
    store.append([point(3, Value::Map(tags))], None).unwrap();
    store.flush().unwrap();
    store.close().unwrap();
    let hint = std::fs::read_to_string(dir.path().join("metadata/version-hint.text")).unwrap();
    let metadata = dir.path().join(format!("metadata/v{}.metadata.json", hint.trim()));
    let out = Command::new("python3")
        .args(["-c", PYICEBERG_COLUMNS, metadata.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["columns"]["x"], "long", "{got}");
    assert_eq!(got["columns"]["x__double"], "double", "{got}");
    assert_eq!(got["columns"]["x__json"], "string", "{got}");
    let x = |row: usize, column: &str| got["rows"][row][column].clone();
    assert_eq!(
        (x(0, "x"), x(0, "x__double"), x(0, "x__json")),
        (7.into(), serde_json::Value::Null, serde_json::Value::Null)
    );
    assert_eq!(x(1, "x"), 8);
    assert_eq!((x(2, "x"), x(2, "x__double")), (serde_json::Value::Null, 2.5.into()));
    assert_eq!((x(3, "x"), x(3, "x__json")), (serde_json::Value::Null, "{\"a\":1}".into()));
}

/// Every manifest list of every snapshot the newest metadata file keeps, and every manifest
/// they list, is on disk.
fn every_snapshot_file_is_there(dir: &Path) {
    let hint = std::fs::read_to_string(dir.join("metadata/version-hint.text")).unwrap();
    let metadata = dir.join(format!("metadata/v{}.metadata.json", hint.trim()));
    let table: serde_json::Value =
        serde_json::from_slice(&std::fs::read(metadata).unwrap()).unwrap();
    let snapshots = table["snapshots"].as_array().unwrap();
    assert!(!snapshots.is_empty(), "{table}");
    for snapshot in snapshots {
        let list = snapshot["manifest-list"].as_str().unwrap();
        let path = list.strip_prefix("file://").unwrap();
        assert!(Path::new(path).is_file(), "{list} is gone");
    }
}

#[test]
fn a_manifest_no_snapshot_names_is_swept_once_its_grace_is_over() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = sensors(dir.path());
    config.commit_ms = Some(0);
    config.delete_grace_ms = 600_000;
    let store = Store::open(config.clone()).unwrap();
    let n = fill(&store);
    store.compact().unwrap();
    store.close().unwrap();
    drop(store);
    // what a commit that failed after writing its manifest leaves
    let stray = dir.path().join("metadata/0000-lost-m0.avro");
    std::fs::write(&stray, b"Obj\x01").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    // within its grace it stays (a commit may be on its way)
    let store = Store::open(config.clone()).unwrap();
    assert!(stray.is_file());
    assert_eq!(store.sweep_orphans().unwrap(), 0);
    drop(store);
    // past it, the writer's open sweeps it, and nothing a snapshot names
    config.delete_grace_ms = 0;
    let store = Store::open(config).unwrap();
    assert!(!stray.exists());
    assert!(snapshots_and_properties(dir.path()).0 > 1);
    every_snapshot_file_is_there(dir.path());
    let newest = {
        let hint = std::fs::read_to_string(dir.path().join("metadata/version-hint.text")).unwrap();
        dir.path().join(format!("metadata/v{}.metadata.json", hint.trim()))
    };
    assert_eq!(pyiceberg(&newest)["rows"], n);
    assert_eq!(store.sweep_orphans().unwrap(), 0);
}

/// The snapshots the newest metadata file of the table in `dir` keeps, and its properties.
fn snapshots_and_properties(dir: &Path) -> (usize, serde_json::Value) {
    let hint = std::fs::read_to_string(dir.join("metadata/version-hint.text")).unwrap();
    let metadata = dir.join(format!("metadata/v{}.metadata.json", hint.trim()));
    let table: serde_json::Value =
        serde_json::from_slice(&std::fs::read(metadata).unwrap()).unwrap();
    (table["snapshots"].as_array().unwrap().len(), table["properties"].clone())
}

#[test]
fn snapshots_expire_once_older_than_the_grace_their_files_have() {
    for (grace, kept) in [(600_000, 6), (0, 1)] {
        let dir = tempfile::tempdir().unwrap();
        let mut config = sensors(dir.path());
        config.commit_ms = Some(0);
        config.delete_grace_ms = grace;
        let store = Store::open(config).unwrap();
        fill(&store);
        let (snapshots, properties) = snapshots_and_properties(dir.path());
        // six flushes, a snapshot each; with no grace, none but the newest (the files the
        // others alone name may be gone at once)
        assert_eq!(snapshots, kept, "grace {grace}");
        // each file with the snapshot that added it: one a flush
        let files = store.info().unwrap().files;
        let mut added: Vec<i64> = files.iter().map(|f| f.snapshot.unwrap()).collect();
        added.sort();
        added.dedup();
        assert_eq!(added.len(), 6, "{files:?}");
        assert_eq!(properties["history.expire.max-snapshot-age-ms"], grace.to_string());
        every_snapshot_file_is_there(dir.path());
    }
}

/// Loads the table through the SQL catalog again and again until the file `argv[2]` exists,
/// printing each load's row count, then one more after; `argv[2].ready` says the first load
/// is done.
const PYICEBERG_WHILE_WRITING: &str = r#"
import json, os, sys, time
from pyiceberg.catalog.sql import SqlCatalog
catalog = SqlCatalog("needle", uri=f"sqlite:///{sys.argv[1]}/catalog.db", warehouse=f"file://{sys.argv[1]}")
counts = []
while True:
    done = os.path.exists(sys.argv[2])
    table = catalog.load_table("needle.history")
    counts.append(table.scan().to_arrow().num_rows)
    open(sys.argv[2] + ".ready", "w").close()
    if done:
        break
print(json.dumps(counts))
"#;

#[test]
fn a_reader_of_the_table_while_needle_writes_and_compacts_never_sees_a_count_jump_or_double() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = sensors(dir.path());
    config.commit_ms = Some(0);
    let store = Store::open(config).unwrap();
    store.append((0..400).map(|i| (record(i), 0)), None).unwrap();
    store.flush().unwrap();
    let done = dir.path().join("done");
    let reader = Command::new("python3")
        .args(["-c", PYICEBERG_WHILE_WRITING, dir.path().to_str().unwrap()])
        .arg(&done)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ready = dir.path().join("done.ready");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !ready.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // flushes of 400 records, each third round every partition's parts merged into one
    let rounds = 12;
    for round in 1..rounds {
        let records = (round * 400..(round + 1) * 400).map(|i| (record(i), 0));
        store.append(records, None).unwrap();
        store.flush().unwrap();
        if round % 3 == 0 {
            store.compact().unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    std::fs::write(&done, b"").unwrap();
    let out = reader.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let counts: Vec<i64> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(counts.len() >= 3, "{counts:?}");
    // each load a whole snapshot: a count of whole flushes, never less than the one before
    // (a merge's snapshot has the same rows in fewer files), never more than were written
    for pair in counts.windows(2) {
        assert!(pair[0] <= pair[1], "{counts:?}");
    }
    assert!(counts.iter().all(|n| n % 400 == 0 && *n <= rounds * 400), "{counts:?}");
    assert_eq!(*counts.last().unwrap(), rounds * 400, "{counts:?}");
}
