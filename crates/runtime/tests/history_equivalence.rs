//! Golden equivalence of looking back: every query of `history/queries.bql` (each aggregation
//! kind and each window kind) over the records of `history/events.ndjson` gives the same
//! results whether it reads them from a history store (Parquet parts and the write buffer,
//! pruned by zone maps, read on several threads, bucketed per thread and merged) or runs live
//! over the same records arriving one by one in time order (the engine's live path, its clock
//! the records' time). Stores of several shapes are tried: sorted or not, small blocks (many
//! pruned), everything flushed, half of it still in the write buffer, merged parts.

use needle_engine::exec::{CompiledQuery, Emission, QueryRun};
use needle_engine::EvalContext;
use needle_history::{Store, StoreConfig};
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
    let mut config = StoreConfig::new(dir);
    config.time_field = Some("ts".into());
    config.sort_by = sort_by.iter().map(|s| s.to_string()).collect();
    config.block_rows = block_rows;
    config.partition_ms = 120_000;
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
    let mut records = input();
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
