//! Target `history_reader`: the history store reading a damaged part. A small valid part is
//! written once with `needle_history::Store` (a few records of several types, in several
//! blocks); each input edits a copy of its bytes — every 3 bytes are one edit, a 2-byte
//! little-endian offset (modulo the file's length) and the byte to put there, and 2 bytes
//! left over truncate the file at that offset (modulo its length) after the edits — and the
//! copy is read back through the store: opened read-only, scanned whole (every block read),
//! then scanned with a WHERE over two fields (pruning by the zone maps, every block visited
//! column at a time). Each step must return records or an error: a panic, a hang or a crash
//! is a bug, and a copy whose bytes are unchanged must give back exactly the records written.
//!
//! One body serves the fuzzer (`fuzz/fuzz_targets/history_reader.rs`) and the corpus replay
//! test (`crates/history/tests/fuzz_corpus.rs`), which both include this file by path.

use needle_engine::columnar::Filter;
use needle_history::{FailedRows, ScanRequest, Store, StoreConfig, StoredRecord};
use needle_query::parser::parse_expr;
use needle_record::{Map, Record, Value};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn config(dir: &Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.time_field = Some("ts".into());
    c.partition_ms = 60_000;
    c.block_rows = 4;
    c
}

/// The part as written: its path under the store's directory, its bytes, and its records.
struct Fixture {
    part: PathBuf,
    bytes: Vec<u8>,
    records: Vec<StoredRecord>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = Store::open(config(dir.path())).expect("a new store");
        let records = (0..10i64).map(|i| {
            let mut r = Record::new();
            r.insert("ts", Value::Long(1_000 + i * 7));
            r.insert("k", Value::String(format!("k{}", i % 3)));
            r.insert("v", if i % 4 == 3 { Value::Null } else { Value::Long(i) });
            r.insert("d", Value::Double(i as f64 / 4.0));
            if i % 2 == 0 {
                let mut m = Map::default();
                m.insert("a".to_string(), Value::Bool(i % 3 == 0));
                r.insert("m", Value::Map(m));
                r.insert("l", Value::List(vec![Value::Long(i), Value::String("x".into())]));
            }
            (r, 0)
        });
        store.append(records, None).expect("append");
        store.flush().expect("flush");
        let records = everything(&store).expect("the new part reads back");
        drop(store);
        let mut parts = Vec::new();
        for partition in std::fs::read_dir(dir.path()).expect("the store's directory") {
            let partition = partition.expect("an entry").path();
            // (the table's metadata/ beside the partitions)
            let name = partition.file_name().unwrap_or_default().to_string_lossy().into_owned();
            if partition.is_dir() && name.starts_with("p=") {
                for part in std::fs::read_dir(&partition).expect("a partition") {
                    parts.push(part.expect("an entry").path());
                }
            }
        }
        assert_eq!(parts.len(), 1, "one part: {parts:?}");
        let part = parts[0].strip_prefix(dir.path()).expect("under the store").to_path_buf();
        let bytes = std::fs::read(&parts[0]).expect("the part's bytes");
        assert!(bytes.len() <= usize::from(u16::MAX), "a part the edits can reach");
        Fixture { part, bytes, records }
    })
}

/// Every record of the store, in the order read (`Err` on the first error).
fn everything(store: &Store) -> Result<Vec<StoredRecord>, needle_history::HistoryError> {
    let scan = store.scan(&ScanRequest {
        from_ms: i64::MIN,
        to_ms: i64::MAX,
        filter: None,
        fields: None,
    })?;
    let mut out = scan.buffered;
    for block in &scan.blocks {
        out.extend(block.read()?);
    }
    Ok(out)
}

/// The WHERE scan: pruned by the zone maps and page statistics, visited column at a time.
fn filtered(store: &Store) -> Result<(), needle_history::HistoryError> {
    let expr = parse_expr("v > 3 AND k = 'k1'").expect("a filter");
    let filter = Filter::compile(&expr).expect("a filter the columns evaluate");
    let scan = store.scan(&ScanRequest {
        from_ms: 1_010,
        to_ms: 1_060,
        filter: Some(expr),
        fields: Some(vec!["v".into(), "k".into()]),
    })?;
    for block in &scan.blocks {
        let _ = block.column_stats("v");
        for failed in [FailedRows::ByTime, FailedRows::Counted] {
            block.for_each_matching(Some((&filter, failed)), |_| {})?;
        }
    }
    Ok(())
}

pub fn check(data: &[u8]) {
    let fixture = fixture();
    let mut bytes = fixture.bytes.clone();
    let mut edits = data.chunks_exact(3);
    for edit in edits.by_ref() {
        let at = usize::from(u16::from_le_bytes([edit[0], edit[1]])) % bytes.len();
        bytes[at] = edit[2];
    }
    if let [a, b] = *edits.remainder() {
        let at = usize::from(u16::from_le_bytes([a, b])) % bytes.len();
        bytes.truncate(at);
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join(&fixture.part);
    std::fs::create_dir_all(path.parent().expect("a partition")).expect("the partition");
    std::fs::write(&path, &bytes).expect("the damaged part");
    let Ok(store) = Store::open_read_only(config(dir.path())) else { return };
    let read = everything(&store);
    if bytes == fixture.bytes {
        let read = read.expect("the unchanged part reads");
        assert_eq!(read, fixture.records, "the unchanged part gives back its records");
    }
    let _ = filtered(&store);
}
