//! The history store through its public API: records come back exactly (property test over
//! random nested records), scans return exactly the range asked for, pruning never hides a
//! match (property test against a brute-force evaluation), merges keep every record once,
//! corrupt files and failing writes are survived, retention drops whole partitions.

use needle_history::{Health, ScanRequest, Store, StoreConfig, StoredRecord};
use needle_query::ast::Expr;
use needle_record::{Map, Record, Value};
use proptest::prelude::*;
use std::path::Path;

fn config(dir: &Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.time_field = Some("ts".into());
    c.partition_ms = 60_000;
    c.block_rows = 8;
    // replaced parts go as soon as no scan reads them (the table's grace has tests of its own)
    c.delete_grace_ms = 0;
    c
}

/// The store's partition directories (beside them, the table's `metadata/`).
fn partitions(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("p="))
        .collect();
    found.sort();
    found
}

/// Everything in the store, whole, in time order (ties by JSON text).
fn everything(store: &Store) -> Vec<StoredRecord> {
    let scan = store
        .scan(&ScanRequest { from_ms: i64::MIN, to_ms: i64::MAX, filter: None, fields: None })
        .unwrap();
    let mut out = scan.buffered;
    for block in &scan.blocks {
        out.extend(block.read().unwrap());
    }
    sorted(out)
}

fn sorted(mut rows: Vec<StoredRecord>) -> Vec<StoredRecord> {
    rows.sort_by_cached_key(|r| (r.time_ms, r.record.to_json()));
    rows
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Long),
        prop_oneof![any::<f64>().prop_filter("finite", |f| f.is_finite()), Just(1.0), Just(-0.0)]
            .prop_map(Value::Double),
        "[a-zé☃\u{1F600} ]{0,6}".prop_map(Value::String),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::List),
            prop::collection::vec(("[a-c]{1,2}", inner), 0..4).prop_map(|entries| {
                let mut map = Map::default();
                for (k, v) in entries {
                    map.insert(k, v);
                }
                Value::Map(map)
            }),
        ]
    })
}

/// A record with a time and a few fields of varying types and shapes (some missing, some
/// null, some nested, some whose type differs from record to record).
fn record() -> impl Strategy<Value = (i64, Record)> {
    (
        0i64..300_000,
        prop::collection::vec((prop::sample::select(vec!["a", "b", "c", "d", "e"]), value()), 0..5),
        any::<bool>(),
    )
        .prop_map(|(ts, fields, ts_first)| {
            let mut r = Record::new();
            if ts_first {
                r.insert("ts", Value::Long(ts));
            }
            for (k, v) in fields {
                r.insert(k, v);
            }
            if !ts_first {
                r.insert("ts", Value::Long(ts));
            }
            (ts, r)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Whatever goes in comes back exactly, from the buffer, from parts, after merges and after
    /// compaction; with parts sorted by time alone, or by the text fields first (the rows of
    /// a part gathered block by block in that order).
    #[test]
    fn records_come_back_exactly(
        rows in prop::collection::vec(record(), 0..60),
        flushes in 0usize..5,
        by_text in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let config = |dir: &Path| {
            let mut c = config(dir);
            if by_text {
                c.sort_by = vec![needle_history::SORT_BY_TEXT_FIELDS.to_owned()];
            }
            c
        };
        let store = Store::open(config(dir.path())).unwrap();
        let want = sorted(rows.iter().map(|(t, r)| StoredRecord { time_ms: *t, record: r.clone() }).collect());
        let chunk = (rows.len() / (flushes + 1)).max(1);
        for (i, part) in rows.chunks(chunk).enumerate() {
            store.append(part.iter().map(|(_, r)| (r.clone(), 0)), None).unwrap();
            if i < flushes {
                store.flush().unwrap();
            }
        }
        prop_assert_eq!(&everything(&store), &want, "with some still buffered");
        store.flush().unwrap();
        prop_assert_eq!(&everything(&store), &want, "all in parts");
        store.maintain().unwrap();
        prop_assert_eq!(&everything(&store), &want, "merged");
        store.compact().unwrap();
        prop_assert_eq!(&everything(&store), &want, "compacted");
        if !by_text {
            // then one part per partition (sorted by time alone, every merge streams)
            let info = store.info().unwrap();
            prop_assert_eq!(info.parts, info.partitions, "{:?}", info);
        }
        // and after reopening the directory
        let again = Store::open(config(dir.path())).unwrap();
        prop_assert_eq!(&everything(&again), &want, "reopened");
        // key order survives: records compare equal field by field, in order
        for (got, want) in everything(&again).iter().zip(&want) {
            let got: Vec<&String> = got.record.iter().map(|(k, _)| k).collect();
            let want: Vec<&String> = want.record.iter().map(|(k, _)| k).collect();
            prop_assert_eq!(got, want);
        }
    }
}

/// Numeric records for the pruning property: `x` sorted within a part, `y` random, `s` a
/// string, some nulls.
fn numeric_rows() -> impl Strategy<Value = Vec<(i64, Record)>> {
    prop::collection::vec((0i64..120_000, -50i64..50, prop::option::of(-50i64..50), "[a-e]"), 1..80)
        .prop_map(|rows| {
            rows.into_iter()
                .map(|(ts, x, y, s)| {
                    let mut r = Record::new();
                    r.insert("ts", Value::Long(ts));
                    r.insert("x", Value::Long(x));
                    r.insert("y", y.map_or(Value::Null, |y| Value::Double(y as f64 / 2.0)));
                    r.insert("s", Value::String(s));
                    (ts, r)
                })
                .collect()
        })
}

/// Filters over x, y and s, written in BQL.
fn filter() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        (
            prop::sample::select(vec!["x", "y"]),
            prop::sample::select(vec!["=", "!=", "<", "<=", ">", ">="]),
            -60i64..60
        )
            .prop_map(|(f, op, v)| format!("{f} {op} {v}")),
        (prop::sample::select(vec!["x", "y"]), -60i64..60, 0i64..30)
            .prop_map(|(f, lo, w)| format!("{f} BETWEEN ({lo}, {})", lo + w)),
        ("[a-f]", "[a-f]").prop_map(|(a, b)| format!("s IN ('{a}', '{b}')")),
        prop::sample::select(vec!["y IS NULL", "y IS NOT NULL", "z IS NULL", "z = 1"])
            .prop_map(String::from),
        ("[a-f]").prop_map(|a| format!("s = '{a}'")),
    ];
    leaf.prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) AND ({b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) OR ({b})")),
            inner.prop_map(|a| format!("NOT ({a})")),
        ]
    })
}

fn parse_filter(text: &str) -> Expr {
    let plan =
        needle_query::compile(&format!("SELECT * FROM STREAM() WHERE {text}"), &Default::default())
            .unwrap_or_else(|e| panic!("{text}: {e}"));
    plan.stage.filter.unwrap()
}

/// SQL's three-valued logic over the subset the filters use: Some(true/false), or None (NULL).
fn eval(text_record: &Record, e: &Expr) -> Option<bool> {
    use needle_query::ast::{BinaryOp, CompareOp, ExprKind, UnaryOp};
    let value = |e: &Expr| -> Option<Value> {
        match &e.kind {
            ExprKind::Field(f) => text_record.get(&f.name).cloned().filter(|v| !v.is_null()),
            ExprKind::Literal(v) => Some(v.clone()).filter(|v| !v.is_null()),
            ExprKind::List(_) => None,
            _ => panic!("not in the subset: {e:?}"),
        }
    };
    let cmp = |a: &Value, b: &Value| -> Option<std::cmp::Ordering> {
        match (a, b) {
            (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
            (a, b) if a.is_numeric() && b.is_numeric() => a.as_f64()?.partial_cmp(&b.as_f64()?),
            _ => None,
        }
    };
    match &e.kind {
        ExprKind::Binary { op: BinaryOp::And, left, right } => {
            match (eval(text_record, left), eval(text_record, right)) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            }
        }
        ExprKind::Binary { op: BinaryOp::Or, left, right } => {
            match (eval(text_record, left), eval(text_record, right)) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            }
        }
        ExprKind::Unary { op: UnaryOp::Not, operand } => eval(text_record, operand).map(|b| !b),
        ExprKind::Compare { op, left, right, .. } => {
            let o = cmp(&value(left)?, &value(right)?)?;
            Some(match op {
                CompareOp::Eq => o.is_eq(),
                CompareOp::Ne => o.is_ne(),
                CompareOp::Lt => o.is_lt(),
                CompareOp::Le => o.is_le(),
                CompareOp::Gt => o.is_gt(),
                CompareOp::Ge => o.is_ge(),
            })
        }
        ExprKind::Between { negated, value: v, low, high } => {
            let v = value(v)?;
            let inside = cmp(&v, &value(low)?)?.is_ge() && cmp(&v, &value(high)?)?.is_le();
            Some(inside != *negated)
        }
        ExprKind::In { negated, value: v, list } => {
            let v = value(v)?;
            let ExprKind::List(items) = &list.kind else { panic!() };
            let found =
                items.iter().any(|i| value(i).and_then(|i| cmp(&v, &i)).is_some_and(|o| o.is_eq()));
            Some(found != *negated)
        }
        ExprKind::IsNull { negated, value: v } => Some(value(v).is_none() != *negated),
        other => panic!("not in the subset: {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// A block skipped by its zone map never holds a row the filter is TRUE for.
    #[test]
    fn pruning_never_hides_a_match(rows in numeric_rows(), text in filter(), sort_by_x in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config(dir.path());
        c.block_rows = 4;
        c.bloom_fields = vec!["s".into()];
        if sort_by_x {
            c.sort_by = vec!["x".into()];
        }
        let store = Store::open(c).unwrap();
        store.append(rows.iter().map(|(_, r)| (r.clone(), 0)), None).unwrap();
        store.flush().unwrap();
        let expr = parse_filter(&text);
        let want: usize = rows.iter().filter(|(_, r)| eval(r, &expr) == Some(true)).count();
        let scan = store.scan(&ScanRequest { from_ms: i64::MIN, to_ms: i64::MAX, filter: Some(expr.clone()), fields: None }).unwrap();
        let mut got = 0;
        for block in &scan.blocks {
            got += block.read().unwrap().iter().filter(|r| eval(&r.record, &expr) == Some(true)).count();
        }
        prop_assert_eq!(got, want, "{} ({:?})", text, scan.stats);
    }
}

fn numbered(n: i64, step: i64) -> Vec<(Record, i64)> {
    (0..n)
        .map(|i| {
            let mut r = Record::new();
            r.insert("ts", Value::Long(i * step));
            r.insert("k", Value::String(format!("k{}", i % 5)));
            r.insert("v", Value::Long(i));
            (r, 0)
        })
        .collect()
}

#[test]
fn scans_return_exactly_the_range_and_prune_on_the_sorted_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.sort_by = vec!["k".into()];
    let store = Store::open(c).unwrap();
    store.append(numbered(1_000, 1_000), None).unwrap();
    store.flush().unwrap();
    for (from, to) in
        [(0, 1_000_000), (12_345, 456_789), (60_000, 120_000), (999_000, 999_001), (5, 5)]
    {
        let scan = store
            .scan(&ScanRequest { from_ms: from, to_ms: to, filter: None, fields: None })
            .unwrap();
        let mut got: Vec<i64> =
            scan.blocks.iter().flat_map(|b| b.read().unwrap()).map(|r| r.time_ms).collect();
        got.sort();
        let want: Vec<i64> =
            (0..1_000).map(|i| i * 1_000).filter(|t| *t >= from && *t < to).collect();
        assert_eq!(got, want, "[{from}, {to})");
    }
    let filter = parse_filter("k = 'k3'");
    let scan = store
        .scan(&ScanRequest {
            from_ms: 0,
            to_ms: i64::MAX,
            filter: Some(filter),
            fields: Some(vec!["v".into()]),
        })
        .unwrap();
    assert!(scan.stats.blocks_skipped_minmax > scan.stats.blocks_in_range / 2, "{:?}", scan.stats);
    let rows: Vec<StoredRecord> = scan.blocks.iter().flat_map(|b| b.read().unwrap()).collect();
    // only the fields asked for
    assert!(rows.iter().all(|r| r.record.len() == 1 && r.record.get("v").is_some()));
    // block statistics: each block's count and sum of a numeric column are its rows'
    let all = store
        .scan(&ScanRequest { from_ms: i64::MIN, to_ms: i64::MAX, filter: None, fields: None })
        .unwrap();
    for block in &all.blocks {
        let stats = block.column_stats("v").unwrap();
        let values: Vec<i64> = block
            .read()
            .unwrap()
            .iter()
            .map(|r| r.record.get("v").and_then(Value::as_i64).unwrap())
            .collect();
        assert_eq!(stats.count, values.len() as u64);
        assert_eq!(stats.sum, Some(values.iter().sum::<i64>() as f64));
        assert_eq!(stats.min, values.iter().min().map(|v| Value::Long(*v)));
        assert!(block.fully_in_range());
    }
}

#[test]
fn merges_keep_every_record_once_and_leave_fewer_parts() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    for chunk in numbered(800, 50).chunks(50) {
        store.append(chunk.to_vec(), Some("p".into())).unwrap();
        store.flush().unwrap();
    }
    let before = store.info().unwrap();
    let report = store.maintain().unwrap();
    let after = store.info().unwrap();
    assert!(report.merges > 0 && after.parts < before.parts, "{before:?} → {after:?}");
    assert_eq!(after.records, 800);
    let times: Vec<i64> = everything(&store).iter().map(|r| r.time_ms).collect();
    assert_eq!(times, (0..800).map(|i| i * 50).collect::<Vec<_>>());
    assert_eq!(store.durable_position().as_deref(), Some("p"));
}

#[test]
fn a_merge_interrupted_before_removing_its_inputs_leaves_each_record_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    for chunk in numbered(400, 100).chunks(100) {
        store.append(chunk.to_vec(), None).unwrap();
        store.flush().unwrap();
    }
    // keep copies of the inputs, merge, then put them back as a crash before removal would
    let partition = partitions(dir.path()).remove(0);
    let copies: Vec<(std::path::PathBuf, Vec<u8>)> = std::fs::read_dir(&partition)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
        .collect();
    store.maintain().unwrap();
    drop(store);
    for (path, bytes) in &copies {
        std::fs::write(path, bytes).unwrap();
    }
    std::fs::write(partition.join(".tmp-part-9999999999-L0.parquet"), b"half a file").unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    assert_eq!(everything(&store).len(), 400);
    assert_eq!(store.counters().corrupt_files.load(std::sync::atomic::Ordering::Relaxed), 0);
    let left: Vec<String> = std::fs::read_dir(&partition)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left.len(), 1, "the replaced parts and the temporary file are gone: {left:?}");
}

#[test]
fn corrupt_and_truncated_files_are_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    store.append(numbered(100, 1_000), None).unwrap();
    store.flush().unwrap();
    store.append(numbered(10, 100_000), None).unwrap();
    store.flush().unwrap();
    drop(store);
    let mut parts: Vec<std::path::PathBuf> = Vec::new();
    for partition in partitions(dir.path()) {
        for part in std::fs::read_dir(partition).unwrap() {
            parts.push(part.unwrap().path());
        }
    }
    parts.sort();
    // truncate one part, and drop a garbage file beside it
    let victim = &parts[0];
    let bytes = std::fs::read(victim).unwrap();
    std::fs::write(victim, &bytes[..bytes.len() / 2]).unwrap();
    std::fs::write(victim.with_file_name("part-0000000777-L0.parquet"), b"PAR1 garbage").unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    assert_eq!(store.counters().corrupt_files.load(std::sync::atomic::Ordering::Relaxed), 2);
    let rows = everything(&store);
    assert!(!rows.is_empty() && rows.len() < 110, "the other parts are read: {}", rows.len());
    assert_eq!(store.info().unwrap().corrupt_files, 2);
}

#[test]
fn a_failing_write_stops_writes_keeps_the_records_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    // a file where the partition's directory should go: the flush cannot write there
    std::fs::write(dir.path().join("p=0"), b"in the way").unwrap();
    store.append(numbered(20, 1_000), Some("7".into())).unwrap();
    assert!(store.flush().is_err());
    assert!(matches!(store.health(), Health::WritesStopped { .. }));
    assert_eq!(store.durable_position(), None);
    // reads go on, from the buffer
    assert_eq!(everything(&store).len(), 20);
    std::fs::remove_file(dir.path().join("p=0")).unwrap();
    store.flush().unwrap();
    assert_eq!(store.health(), Health::Ok);
    assert_eq!(store.durable_position().as_deref(), Some("7"));
    assert_eq!(Store::open(config(dir.path())).map(|s| everything(&s).len()).unwrap(), 20);
}

#[test]
fn the_buffer_is_bounded_while_writes_are_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.max_buffer_records = 30;
    let store = Store::open(c).unwrap();
    std::fs::write(dir.path().join("p=0"), b"in the way").unwrap();
    store.append(numbered(20, 1_000), None).unwrap();
    assert!(store.flush().is_err());
    store.append(numbered(20, 1_000), None).unwrap();
    assert_eq!(everything(&store).len(), 30);
    assert_eq!(store.counters().dropped_records.load(std::sync::atomic::Ordering::Relaxed), 10);
}

#[test]
fn retention_drops_whole_partitions_by_age_and_by_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            as i64;
    let mut c = config(dir.path());
    c.retention_ms = Some(3_600_000);
    let store = Store::open(c.clone()).unwrap();
    let at = |t: i64| {
        let mut r = Record::new();
        r.insert("ts", Value::Long(t));
        (r, 0)
    };
    store.append(vec![at(now - 7_200_000), at(now - 60_000)], None).unwrap();
    store.flush().unwrap();
    assert_eq!(store.maintain().unwrap().partitions_dropped, 1);
    assert_eq!(everything(&store).len(), 1);

    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.max_bytes = Some(1);
    let store = Store::open(c).unwrap();
    store.append(vec![at(0), at(120_000)], None).unwrap();
    store.flush().unwrap();
    assert_eq!(store.maintain().unwrap().partitions_dropped, 2);
    assert!(everything(&store).is_empty());
}

#[test]
fn records_without_a_usable_time_get_their_arrival_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    let mut iso = Record::new();
    iso.insert("ts", Value::String("2026-11-24T10:00:00.5Z".into()));
    let mut none = Record::new();
    none.insert("x", Value::Long(1));
    let mut bad = Record::new();
    bad.insert("ts", Value::String("yesterday".into()));
    store.append(vec![(iso, 1), (none, 42), (bad, 43)], None).unwrap();
    let times: Vec<i64> = everything(&store).iter().map(|r| r.time_ms).collect();
    assert_eq!(times, [42, 43, 1_795_514_400_500]);
    assert_eq!(store.counters().missing_time.load(std::sync::atomic::Ordering::Relaxed), 2);
}

#[test]
fn keeping_only_some_fields_keeps_the_time_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.fields = Some(vec!["k".into()]);
    let store = Store::open(c).unwrap();
    store.append(numbered(3, 10), None).unwrap();
    store.flush().unwrap();
    let rows = everything(&store);
    assert!(rows.iter().all(|r| r.record.len() == 2 && r.record.get("v").is_none()), "{rows:?}");
}

#[test]
fn a_read_only_store_changes_nothing_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    store.append(numbered(10, 1_000), None).unwrap();
    store.flush().unwrap();
    let partition = partitions(dir.path()).remove(0);
    std::fs::write(partition.join(".tmp-part-0000000099-L0.parquet"), b"a writer's").unwrap();
    let reader = Store::open_read_only(config(dir.path())).unwrap();
    assert_eq!(everything(&reader).len(), 10);
    assert!(partition.join(".tmp-part-0000000099-L0.parquet").exists());
    assert!(reader.append(numbered(1, 1), None).is_err());
    let info = reader.info().unwrap();
    assert_eq!((info.records, info.partitions), (10, 1));
    assert!(info.columns.iter().any(|c| c.name == "v" && c.compressed_bytes > 0), "{info:?}");
}

#[test]
fn a_scan_under_way_keeps_reading_the_parts_a_merge_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    for chunk in numbered(400, 100).chunks(100) {
        store.append(chunk.to_vec(), None).unwrap();
        store.flush().unwrap();
    }
    let scan = store
        .scan(&ScanRequest { from_ms: i64::MIN, to_ms: i64::MAX, filter: None, fields: None })
        .unwrap();
    assert!(store.maintain().unwrap().merges > 0);
    // the scan saw the four parts: they are still there for it
    let read: usize = scan.blocks.iter().map(|b| b.read().unwrap().len()).sum();
    assert_eq!(read, 400);
    let files = |d: &Path| -> usize {
        partitions(d).into_iter().map(|p| std::fs::read_dir(p).unwrap().count()).sum()
    };
    assert_eq!(files(dir.path()), 5);
    drop(scan);
    store.maintain().unwrap();
    assert_eq!(files(dir.path()), 1, "once no scan can read them, they go");
    assert_eq!(everything(&store).len(), 400);
}

/// Each block's time range is its own rows' (the time column is a timestamp, whose statistics
/// are its ms), so a narrow range reads only the blocks that overlap it.
#[test]
fn blocks_are_pruned_by_their_own_time_range() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.partition_ms = 1_000_000;
    let store = Store::open(c).unwrap();
    store.append(numbered(400, 1_000), None).unwrap();
    store.flush().unwrap();
    let all = store
        .scan(&ScanRequest { from_ms: i64::MIN, to_ms: i64::MAX, filter: None, fields: None })
        .unwrap();
    assert_eq!(all.blocks.len(), 50);
    for block in &all.blocks {
        let times: Vec<i64> = block.read().unwrap().iter().map(|r| r.time_ms).collect();
        let want = (*times.iter().min().unwrap(), *times.iter().max().unwrap());
        assert_eq!(block.time_range(), want);
    }
    let scan = store
        .scan(&ScanRequest { from_ms: 104_000, to_ms: 120_000, filter: None, fields: None })
        .unwrap();
    assert_eq!(scan.stats.blocks_to_read, 2, "{:?}", scan.stats);
    assert!(scan.blocks.iter().all(|b| b.fully_in_range()));
}

/// Rows appended as columns take their time from the time field whatever its column's type
/// (a LONG, a DOUBLE floored, RFC 3339 text), the arrival time when it is NULL or absent
/// (counted), and read back as the records they are.
#[test]
fn rows_appended_as_columns_are_timed_by_their_time_field_of_any_type() {
    use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    let arrival = 5_000_000;
    let columns = |ts: ArrayRef| {
        let name: ArrayRef = Arc::new(StringArray::from(vec!["a", "b"]));
        RecordBatch::try_from_iter([("name", name), ("ts", ts)]).unwrap()
    };
    let longs = columns(Arc::new(Int64Array::from(vec![Some(1_000), None])));
    let doubles = columns(Arc::new(Float64Array::from(vec![2_000.9, 3_000.0])));
    let text = columns(Arc::new(StringArray::from(vec!["1970-01-01T00:00:04Z", "never"])));
    let no_time =
        RecordBatch::try_from_iter([("name", Arc::new(StringArray::from(vec!["c"])) as ArrayRef)])
            .unwrap();
    let batches = [longs, doubles, text, no_time];
    store.append_columns(&batches, arrival, None, &Default::default()).unwrap();
    assert_eq!(store.counters().missing_time.load(std::sync::atomic::Ordering::Relaxed), 3);
    store.flush().unwrap();
    let scan = store
        .scan(&ScanRequest { from_ms: i64::MIN, to_ms: i64::MAX, ..Default::default() })
        .unwrap();
    let mut got: Vec<(i64, String)> = scan
        .blocks
        .iter()
        .flat_map(|b| b.read().unwrap())
        .chain(scan.buffered)
        .map(|r| (r.time_ms, r.record.to_json()))
        .collect();
    got.sort();
    let want = [
        (1_000, r#"{"name":"a","ts":1000}"#),
        (2_000, r#"{"name":"a","ts":2000.9}"#),
        (3_000, r#"{"name":"b","ts":3000.0}"#),
        (4_000, r#"{"name":"a","ts":"1970-01-01T00:00:04Z"}"#),
        (arrival, r#"{"name":"b","ts":"never"}"#),
        (arrival, r#"{"name":"b"}"#),
        (arrival, r#"{"name":"c"}"#),
    ];
    let want: Vec<(i64, String)> = want.iter().map(|(t, j)| (*t, (*j).to_owned())).collect();
    assert_eq!(got, want);
}
