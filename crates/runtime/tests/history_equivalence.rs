//! Golden equivalence of looking back: every query of `history/queries.bql` (each aggregation
//! kind and each window kind) over the records of `history/events.ndjson` gives the same
//! results whether it reads them from a history store (Parquet parts and the write buffer,
//! pruned by zone maps, read on several threads, bucketed per thread and merged) or runs live
//! over the same records arriving one by one in time order (the engine's live path, its clock
//! the records' time). Stores of several shapes are tried: sorted or not, small blocks (many
//! pruned), everything flushed, half of it still in the write buffer, merged parts.

use needle_engine::exec::{CompiledQuery, Emission, QueryRun};
use needle_engine::EvalContext;
use needle_history::{RemoteConfig, Store, StoreConfig};
use needle_query::QueryConfig;
use needle_record::Record;
use needle_runtime::history::replay::{run_local, Replay};
use serde_json::Value as Json;
use std::path::Path;
use std::sync::Arc;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/history/events.ndjson");
const QUERIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/history/queries.bql");

/// Queries planned with "now" fixed, and RAW results large enough to hold the whole input.
fn query_config() -> QueryConfig {
    QueryConfig { now_ms: Some(1_800_000_000_000), max_raw_size: 100_000, ..QueryConfig::default() }
}

/// The input records with their times, in the order they arrived.
fn input() -> Vec<(i64, Record)> {
    std::fs::read_to_string(DATA)
        .unwrap()
        .lines()
        .map(|line| {
            let record = needle_record::decode_record(line.as_bytes()).unwrap();
            let ts = record.get("ts").and_then(|v| v.as_i64()).unwrap();
            (ts, record)
        })
        .collect()
}

fn queries() -> Vec<String> {
    let input = input();
    let from = input.iter().map(|r| r.0).min().unwrap();
    let to = input.iter().map(|r| r.0).max().unwrap() + 1;
    std::fs::read_to_string(QUERIES)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.replace("$RANGE", &format!("{from}, {to}")))
        .collect()
}

/// A store of the input in `dir`: `flushed` of the records made durable (in parts of
/// `part_records`), the rest left in the write buffer; merged when `merge`.
fn store(dir: &Path, sort_by: &[&str], block_rows: usize, flushed: usize, merge: bool) -> Store {
    fill(store_config(dir, None, sort_by, block_rows), flushed, merge)
}

/// The settings of the stores of these tests, kept in `remote` when given.
fn store_config(
    dir: &Path,
    remote: Option<RemoteConfig>,
    sort_by: &[&str],
    block_rows: usize,
) -> StoreConfig {
    let mut config = StoreConfig::new(dir);
    config.remote = remote;
    config.time_field = Some("ts".into());
    config.sort_by = sort_by.iter().map(|s| s.to_string()).collect();
    config.block_rows = block_rows;
    // pages of an eighth of a block: the page index prunes inside blocks too
    config.page_rows = (block_rows / 8).max(1);
    config.partition_ms = 120_000;
    config
}

/// A store opened with `config`, holding the input: `flushed` of the records made durable (in
/// parts of 97 records), the rest in the write buffer; merged when `merge`.
fn fill(config: StoreConfig, flushed: usize, merge: bool) -> Store {
    let store = Store::open(config).unwrap();
    let input = input();
    for (i, chunk) in input.chunks(97).enumerate() {
        let arrival = 0;
        store.append(chunk.iter().map(|(_, r)| (r.clone(), arrival)), Some(i.to_string())).unwrap();
        if (i + 1) * 97 <= flushed {
            store.flush().unwrap();
        }
    }
    if merge {
        store.flush().unwrap();
        store.maintain().unwrap();
    }
    store
}

/// The live path on record time: each record, in time order, through a worker and straight
/// to the join at its own time.
fn live(query: &Arc<CompiledQuery>, start: i64, end: i64) -> Vec<Emission> {
    live_over(input(), query, start, end)
}

/// [`live`] over `records` (with their times).
fn live_over(
    mut records: Vec<(i64, Record)>,
    query: &Arc<CompiledQuery>,
    start: i64,
    end: i64,
) -> Vec<Emission> {
    records.sort_by_key(|r| r.0);
    let mut run = QueryRun::on_record_time(query.clone(), "q", 0, start, end);
    let mut out = Vec::new();
    let ctx = EvalContext::new(0);
    for (time, record) in records.iter().filter(|(t, _)| *t >= start && *t < end) {
        let mut worker = query.new_worker();
        query.process(&mut worker, record, &ctx);
        if let Some(partial) = query.flush(&mut worker) {
            out.extend(run.merge(partial, *time).unwrap());
        }
    }
    out.extend(run.tick(end));
    out.extend(run.finish(end));
    out
}

/// What must agree: the records, and each window's number, bucket and matched count.
fn shape(emissions: &[Emission]) -> Vec<Json> {
    emissions
        .iter()
        .map(|e| {
            let w = &e.meta["Window"];
            serde_json::json!({
                "records": serde_json::to_value(&e.records).unwrap(),
                "window": [w["Number"], w["Start"], w["End"], w["Final"]],
                "matched": e.meta["Stats"]["Records Matched"],
            })
        })
        .collect()
}

/// Equal, but for doubles that differ only in the order they were summed (a merge of partials
/// adds in another order than one record at a time): within a relative 1e-9.
fn same(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs())
        }
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len()
                && x.iter().zip(y).all(|((kx, vx), (ky, vy))| kx == ky && same(vx, vy))
        }
        _ => a == b,
    }
}

/// Runs every query over `store`; returns how many blocks were answered from their statistics.
fn check(store: &Store, label: &str) -> u64 {
    let config = query_config();
    let mut from_aggregates = 0;
    for text in queries() {
        let plan = needle_query::compile(&text, &config).unwrap_or_else(|e| panic!("{text}: {e}"));
        let past = plan.history.expect("a HISTORY query");
        let query = Arc::new(CompiledQuery::compile(&plan).unwrap());
        let replay = Replay::plan(
            store,
            &query,
            plan.stage.filter.as_ref(),
            !plan.stage.explode.is_empty(),
            past.from_ms,
            past.to_ms,
        )
        .unwrap();
        let (start, end) = (replay.window_start_ms, replay.end_ms);
        let (got, report) = run_local(replay, query.clone(), "q", 0, 3).unwrap();
        from_aggregates += report.blocks_from_aggregates;
        let want = live(&query, start, end);
        let (got_shape, want_shape) = (shape(&got), shape(&want));
        assert!(
            same(&Json::Array(got_shape.clone()), &Json::Array(want_shape.clone())),
            "{label}: {text}\nover history: {got_shape:?}\nlive: {want_shape:?}"
        );
        assert!(got.last().is_some_and(|e| e.is_final), "{label}: {text}: no final emission");
    }
    from_aggregates
}

#[test]
fn every_query_over_history_equals_the_same_query_live() {
    let shapes: [(&str, &[&str], usize, usize, bool); 5] = [
        ("unsorted, one block a part", &[], 10_000, usize::MAX, false),
        ("sorted by k, small blocks", &["k"], 16, usize::MAX, false),
        ("half in the write buffer", &["k"], 32, 300, false),
        ("all in the write buffer", &[], 32, 0, false),
        ("merged", &["k"], 64, usize::MAX, true),
    ];
    for (label, sort_by, block_rows, flushed, merge) in shapes {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path(), sort_by, block_rows, flushed, merge);
        let from_aggregates = check(&store, label);
        // (the write buffer has no statistics: its records are always read)
        assert_eq!(from_aggregates > 0, flushed > 0, "{label}: blocks answered from statistics");
    }
}

#[test]
fn every_query_over_history_on_object_storage_equals_the_same_query_live() {
    let bucket = tempfile::tempdir().unwrap();
    let minio = needle_history::testing::Minio::shared();
    let mut on_file = RemoteConfig::new(format!("file://{}", bucket.path().display()));
    on_file.delete_grace_ms = 0;
    let stores = [("file://", on_file), ("MinIO", minio.remote("equivalence"))];
    for (label, remote) in stores {
        let dir = tempfile::tempdir().unwrap();
        let writer = fill(store_config(dir.path(), Some(remote.clone()), &["k"], 16), 500, true);
        check(&writer, &format!("{label}, the writer (half merged, the rest buffered)"));
        writer.flush().unwrap();
        // (the uploads since the last commit join the table as the writer stops)
        writer.close().unwrap();
        drop(writer);
        // another machine, every range read from the object store
        let elsewhere = tempfile::tempdir().unwrap();
        let reader =
            Store::open_read_only(store_config(elsewhere.path(), Some(remote), &["k"], 16))
                .unwrap();
        assert_eq!(reader.info().unwrap().records, input().len() as u64, "{label}");
        check(&reader, &format!("{label}, read by another machine"));
    }
}

#[test]
fn select_star_gives_back_each_record_exactly_as_it_came_in() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), &["k"], 16, usize::MAX, true);
    let config = query_config();
    let plan = needle_query::compile("SELECT * FROM HISTORY(0) LIMIT 100000", &config).unwrap();
    let past = plan.history.unwrap();
    let query = Arc::new(CompiledQuery::compile(&plan).unwrap());
    let replay = Replay::plan(&store, &query, None, false, past.from_ms, past.to_ms).unwrap();
    let (got, report) = run_local(replay, query, "q", 0, 2).unwrap();
    let got: Vec<String> = got.iter().flat_map(|e| e.records.iter().map(Record::to_json)).collect();
    let mut want = input();
    want.sort_by_key(|r| r.0);
    let want: Vec<String> = want.iter().map(|r| r.1.to_json()).collect();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    assert_eq!(report.records_read, want.len() as u64);
}

#[test]
fn a_selective_filter_reads_few_blocks_and_finds_every_match() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), &["k"], 16, usize::MAX, true);
    let config = query_config();
    let plan = needle_query::compile("SELECT COUNT(*) AS n FROM HISTORY(0) WHERE k = 'e'", &config)
        .unwrap();
    let past = plan.history.unwrap();
    let query = Arc::new(CompiledQuery::compile(&plan).unwrap());
    let replay =
        Replay::plan(&store, &query, plan.stage.filter.as_ref(), false, past.from_ms, past.to_ms)
            .unwrap();
    let stats = replay.scan_stats().clone();
    let (got, _) = run_local(replay, query, "q", 0, 2).unwrap();
    let want =
        input().iter().filter(|(_, r)| r.get("k").and_then(|v| v.as_str()) == Some("e")).count();
    assert_eq!(got.last().unwrap().records[0].get("n").and_then(|v| v.as_i64()), Some(want as i64));
    assert!(stats.blocks_skipped_minmax > 0, "{stats:?}");
    assert!(stats.blocks_to_read < stats.blocks_in_range, "{stats:?}");
}

#[test]
fn pages_a_where_rules_out_are_not_read_and_every_match_is_found() {
    let dir = tempfile::tempdir().unwrap();
    // one block a partition, of pages of 8 rows
    let mut config = StoreConfig::new(dir.path());
    config.time_field = Some("ts".into());
    config.sort_by = vec!["k".into()];
    config.block_rows = 100_000;
    config.page_rows = 8;
    config.partition_ms = 3_600_000_000;
    let store = Store::open(config).unwrap();
    let input = input();
    store.append(input.iter().map(|(_, r)| (r.clone(), 0)), None).unwrap();
    store.flush().unwrap();
    let query_config = query_config();
    for text in [
        "SELECT COUNT(*) AS n FROM HISTORY(0) WHERE k = 'e'",
        "SELECT id FROM HISTORY(0) WHERE k = 'e' LIMIT 100000",
    ] {
        let plan = needle_query::compile(text, &query_config).unwrap();
        let past = plan.history.unwrap();
        let query = Arc::new(CompiledQuery::compile(&plan).unwrap());
        let replay =
            Replay::plan(&store, &query, plan.stage.filter.as_ref(), false, past.from_ms, None)
                .unwrap();
        assert_eq!(replay.scan_stats().blocks_to_read, 1, "{text}");
        let (got, report) = run_local(replay, query, "q", 0, 2).unwrap();
        let want =
            input.iter().filter(|(_, r)| r.get("k").and_then(|v| v.as_str()) == Some("e")).count();
        let found = match got.last().unwrap().records.first().and_then(|r| r.get("n")) {
            Some(n) => n.as_i64().unwrap() as usize,
            None => got.iter().map(|e| e.records.len()).sum(),
        };
        assert_eq!(found, want, "{text}");
        // the block is read only where its pages may hold k = 'e' (sorted by k: a few pages)
        assert!(report.records_read < input.len() as u64 / 2, "{text}: {report:?}");
        assert!(report.records_read >= want as u64, "{text}: {report:?}");
    }
}

mod column_path {
    //! The column path (a WHERE over whole columns, GROUP ALL and GROUP BY folded from columns
    //! into summaries, RAW records built only for the rows that pass) against the engine
    //! record by record: random records of every type (NULLs, missing fields, a field stored
    //! with two types, which becomes a JSON column and is read as records), random WHEREs of
    //! what the column path evaluates (and of what it does not), random aggregations.
    use super::*;
    use proptest::prelude::*;

    /// A record's fields as JSON text, without its time.
    fn record() -> impl Strategy<Value = String> {
        let g = prop_oneof![
            Just("\"g\":\"a\",".to_string()),
            Just("\"g\":\"b\",".to_string()),
            Just("\"g\":\"c\",".to_string()),
            Just("\"g\":null,".to_string()),
            Just(String::new()),
        ];
        let n = prop_oneof![
            (-5i64..6).prop_map(|v| format!("\"n\":{v},")),
            Just("\"n\":null,".to_string()),
            Just(String::new()),
        ];
        let x = prop_oneof![
            (-40i32..40).prop_map(|v| format!("\"x\":{},", f64::from(v) / 4.0 + 0.125)),
            Just(String::new()),
        ];
        let b = prop_oneof![
            any::<bool>().prop_map(|v| format!("\"b\":{v},")),
            Just("\"b\":null,".to_string()),
            Just(String::new()),
        ];
        let s =
            prop_oneof!["[a-e]{0,2}".prop_map(|v| format!("\"s\":\"{v}\",")), Just(String::new()),];
        // a field that is a number in some records and text in others (a JSON column)
        let m = prop_oneof![
            4 => Just(String::new()),
            1 => (0i64..3).prop_map(|v| format!("\"m\":{v},")),
            1 => Just("\"m\":\"z\",".to_string()),
        ];
        (g, n, x, b, s, m).prop_map(|(g, n, x, b, s, m)| format!("{g}{n}{x}{b}{s}{m}"))
    }

    fn atom() -> impl Strategy<Value = String> {
        prop_oneof![
            (-5i64..6, 0usize..6).prop_map(|(v, op)| format!("n {} {v}", OPS[op])),
            (-10i32..10, 0usize..6).prop_map(|(v, op)| format!(
                "x {} {}",
                OPS[op],
                f64::from(v) / 2.0
            )),
            ("[a-e]{0,2}", 0usize..6).prop_map(|(v, op)| format!("s {} '{v}'", OPS[op])),
            ("[a-d]", 0usize..6).prop_map(|(v, op)| format!("g {} '{v}'", OPS[op])),
            (any::<bool>(), 0usize..2).prop_map(|(v, op)| format!("b {} {v}", OPS[op])),
            Just("b".to_string()),
            Just("g IS NULL".to_string()),
            Just("n IS NOT NULL".to_string()),
            (-5i64..6, 0i64..6).prop_map(|(lo, w)| format!("n BETWEEN ({lo}, {})", lo + w)),
            (-5i64..6).prop_map(|lo| format!("x NOT BETWEEN ({lo}, {}.5)", lo + 2)),
            Just("g IN ('a', 'c')".to_string()),
            Just("n NOT IN (1, 2, 3, 4)".to_string()),
            Just("g > 3".to_string()),
            Just("n = 'a'".to_string()),
            Just("2 < n".to_string()),
            Just("m = 1".to_string()),
            Just("NULL".to_string()),
            Just("TRUE".to_string()),
            Just("SIZEOF(s) > 1".to_string()),
        ]
    }

    const OPS: [&str; 6] = ["=", "!=", "<", "<=", ">", ">="];

    fn condition() -> impl Strategy<Value = String> {
        atom().prop_recursive(3, 8, 2, |inner| {
            prop_oneof![
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} AND {b})")),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} OR {b})")),
                inner.prop_map(|a| format!("NOT ({a})")),
            ]
        })
    }

    fn query() -> impl Strategy<Value = String> {
        let select = prop_oneof![
            Just(("COUNT(*) AS c, SUM(n) AS sn, MIN(x) AS lo, MAX(x) AS hi, AVG(x) AS a", "")),
            Just(("g, COUNT(*) AS c, MAX(s) AS ms, MIN(b) AS mb, SUM(x) AS sx", " GROUP BY g")),
            Just(("g, b, COUNT(*) AS c, AVG(n) AS an", " GROUP BY g, b")),
            Just(("n, MIN(s) AS s0, MAX(n) AS n1", " GROUP BY n")),
            Just(("x, COUNT(*) AS c", " GROUP BY x")),
            Just(("COUNT(*) AS c, MAX(m) AS mm", "")),
            Just(("m, COUNT(*) AS c", " GROUP BY m")),
            Just(("*", "")),
            Just(("g, n, x", "")),
        ];
        let window = prop_oneof![
            Just(""),
            Just(" WINDOWING TUMBLING(1000, TIME)"),
            Just(" WINDOWING EVERY(1500, TIME, FIRST, 500, TIME)"),
        ];
        (select, proptest::option::of(condition()), window).prop_map(|((s, g), w, win)| {
            let w = w.map(|w| format!(" WHERE {w}")).unwrap_or_default();
            let limit = if s == "*" || s == "g, n, x" { " LIMIT 100000" } else { "" };
            format!("SELECT {s} FROM HISTORY($RANGE){w}{g}{win}{limit}")
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
        #[test]
        fn the_column_path_answers_as_the_engine_does_record_by_record(
            lines in proptest::collection::vec(record(), 1..300),
            texts in proptest::collection::vec(query(), 1..6),
            block_rows in prop_oneof![Just(8usize), Just(64), Just(1000)],
            page_rows in prop_oneof![Just(4usize), Just(16), Just(100_000)],
            sorted in any::<bool>(),
        ) {
            // distinct times (records of one time would come back in store order), shuffled
            let records: Vec<(i64, Record)> = lines
                .iter()
                .enumerate()
                .map(|(i, fields)| {
                    let ts = 1_700_000_000_000 + (i as i64 * 7_919) % 4_001;
                    let line = format!("{{{fields}\"ts\":{ts}}}");
                    (ts, needle_record::decode_record(line.as_bytes()).unwrap())
                })
                .collect();
            let dir = tempfile::tempdir().unwrap();
            let mut config = StoreConfig::new(dir.path());
            config.time_field = Some("ts".into());
            config.sort_by = if sorted { vec!["g".into()] } else { vec![] };
            config.block_rows = block_rows;
            config.page_rows = page_rows;
            config.partition_ms = 1_000;
            let store = Store::open(config).unwrap();
            // two parts a partition at most: a field's type may differ between them
            let half = records.len() / 2;
            for chunk in [&records[..half], &records[half..]] {
                store.append(chunk.iter().map(|(_, r)| (r.clone(), 0)), None).unwrap();
                store.flush().unwrap();
            }
            let from = records.iter().map(|r| r.0).min().unwrap();
            let to = records.iter().map(|r| r.0).max().unwrap() + 1;
            let config = query_config();
            for text in &texts {
                let text = text.replace("$RANGE", &format!("{from}, {to}"));
                let plan = needle_query::compile(&text, &config)
                    .unwrap_or_else(|e| panic!("{text}: {}", e.render(&text)));
                let past = plan.history.unwrap();
                let query = Arc::new(CompiledQuery::compile(&plan).unwrap());
                let replay = Replay::plan(
                    &store,
                    &query,
                    plan.stage.filter.as_ref(),
                    false,
                    past.from_ms,
                    past.to_ms,
                )
                .unwrap();
                let (start, end) = (replay.window_start_ms, replay.end_ms);
                let (got, _) = run_local(replay, query.clone(), "q", 0, 2).unwrap();
                let want = live_over(records.clone(), &query, start, end);
                let (got, want) = (shape(&got), shape(&want));
                prop_assert!(
                    same(&Json::Array(got.clone()), &Json::Array(want.clone())),
                    "{}\nover history: {:?}\nlive: {:?}", text, got, want
                );
            }
        }
    }

    /// The proptest above would pass if nothing took the column path: these queries must.
    #[test]
    fn groups_with_a_where_are_folded_from_columns_and_records_are_built_only_for_matches() {
        let dir = tempfile::tempdir().unwrap();
        let store = super::store(dir.path(), &["k"], 16, usize::MAX, true);
        let config = query_config();
        let run = |text: &str| {
            let input = input();
            let from = input.iter().map(|r| r.0).min().unwrap();
            let to = input.iter().map(|r| r.0).max().unwrap() + 1;
            let text = text.replace("$RANGE", &format!("{from}, {to}"));
            let plan = needle_query::compile(&text, &config).unwrap();
            let past = plan.history.unwrap();
            let query = Arc::new(CompiledQuery::compile(&plan).unwrap());
            let replay =
                Replay::plan(&store, &query, None, false, past.from_ms, past.to_ms).unwrap();
            run_local(replay, query, "q", 0, 2).unwrap().1
        };
        let grouped = run("SELECT k, MAX(d) AS m FROM HISTORY($RANGE) WHERE d > 0 GROUP BY k");
        assert_eq!(grouped.blocks_by_columns, grouped.scan.blocks_to_read, "{grouped:?}");
        assert!(grouped.blocks_by_columns > 0);
        // a WHERE the columns cannot evaluate: records
        let called =
            run("SELECT k, MAX(d) AS m FROM HISTORY($RANGE) WHERE SIZEOF(k) = 1 GROUP BY k");
        assert_eq!(called.blocks_by_columns, 0, "{called:?}");
    }
}
