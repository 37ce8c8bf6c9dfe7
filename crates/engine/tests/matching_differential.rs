//! The matching index against brute force: random queries (equality, IN, ranges, BETWEEN, AND,
//! OR, NOT, `!=`, RLIKE, IS NULL, nested fields, mixed types, NULLs) over random records. For
//! every record, the queries that match it through `MatchSet` + `MatchWorker` (lazy decoding,
//! index, incremental updates with removals) must be exactly those whose filter holds when every
//! query runs on the whole record, and each query's final result must be the same.

use needle_engine::exec::{CompiledQuery, Partial, QueryRun};
use needle_engine::matching::{MatchSet, MatchWorker, Member};
use needle_engine::EvalContext;
use needle_query::QueryConfig;
use needle_record::{decode_record, Validation};
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::sync::Arc;

fn literal() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec!["'a'", "'b'", "'10'", "''"]).prop_map(str::to_owned),
        prop::sample::select(vec!["-1", "0", "1", "2", "10"]).prop_map(str::to_owned),
        prop::sample::select(vec!["-1L", "0L", "2L", "10L", "9007199254740992L"])
            .prop_map(str::to_owned),
        prop::sample::select(vec!["0.0", "-0.0", "1.0", "2.5", "-1.5"]).prop_map(str::to_owned),
        Just("TRUE".to_owned()),
        Just("FALSE".to_owned()),
        Just("NULL".to_owned()),
    ]
}

fn field() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "s",
        "n",
        "d",
        "b",
        "x",
        "m.k",
        "m['j']",
        "l[0]",
        "absent",
        "n : STRING",
    ])
    .prop_map(str::to_owned)
}

fn leaf() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (field(), literal()).prop_map(|(f, v)| format!("{f} = {v}")),
        1 => (literal(), field()).prop_map(|(v, f)| format!("{v} = {f}")),
        2 => (field(), prop::collection::vec(literal(), 1..6))
            .prop_map(|(f, vs)| format!("{f} IN ({})", vs.join(", "))),
        2 => (field(), prop::sample::select(vec!["<", "<=", ">", ">="]), literal())
            .prop_map(|(f, op, v)| format!("{f} {op} {v}")),
        1 => (field(), literal(), literal())
            .prop_map(|(f, lo, hi)| format!("{f} BETWEEN ({lo}, {hi})")),
        1 => (field(), literal()).prop_map(|(f, v)| format!("{f} != {v}")),
        1 => field().prop_map(|f| format!("{f} IS NULL")),
        1 => field().prop_map(|f| format!("{f} RLIKE '[ab].*'")),
        1 => (field(), field()).prop_map(|(f, g)| format!("{f} = {g}")),
    ]
}

fn filter() -> impl Strategy<Value = String> {
    leaf().prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} AND {b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} OR {b})")),
            inner.prop_map(|a| format!("NOT ({a})")),
        ]
    })
}

/// Conjunctions of equalities, IN lists and ranges on different fields: what the index files
/// under composite keys, with clauses left to check.
fn conjunction() -> impl Strategy<Value = String> {
    let eq = (field(), literal()).prop_map(|(f, v)| format!("{f} = {v}"));
    let within = (field(), prop::collection::vec(literal(), 1..4))
        .prop_map(|(f, vs)| format!("{f} IN ({})", vs.join(", ")));
    let range = (field(), prop::sample::select(vec!["<", "<=", ">", ">="]), literal())
        .prop_map(|(f, op, v)| format!("{f} {op} {v}"));
    let clause = prop_oneof![3 => eq, 2 => within, 2 => range];
    prop::collection::vec(clause, 2..5).prop_map(|clauses| clauses.join(" AND "))
}

fn query() -> impl Strategy<Value = String> {
    let shape = prop::sample::select(vec![
        "SELECT * FROM STREAM()",
        "SELECT s, n FROM STREAM()",
        "SELECT COUNT(*), SUM(n) FROM STREAM()",
        "SELECT s, COUNT(*) FROM STREAM()",
    ]);
    let filter = prop_oneof![3 => filter(), 1 => conjunction()];
    (shape, prop::option::weighted(0.9, filter)).prop_map(|(shape, filter)| {
        let group = if shape.starts_with("SELECT s, COUNT") { " GROUP BY s" } else { "" };
        match filter {
            Some(f) => format!("{shape} WHERE {f}{group}"),
            None => format!("{shape}{group}"),
        }
    })
}

fn json_scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec!["\"a\"", "\"b\"", "\"10\"", "\"\"", "\"bz\""])
            .prop_map(str::to_owned),
        prop::sample::select(vec!["-1", "0", "1", "2", "10", "9007199254740993"])
            .prop_map(str::to_owned),
        prop::sample::select(vec!["0.0", "-0.0", "1.0", "2.5", "-1.5", "1e300"])
            .prop_map(str::to_owned),
        Just("true".to_owned()),
        Just("false".to_owned()),
        Just("null".to_owned()),
    ]
}

fn record() -> impl Strategy<Value = String> {
    let entry = |name: &'static str, value: BoxedStrategy<String>| {
        prop::option::weighted(0.8, value).prop_map(move |v| v.map(|v| format!("\"{name}\":{v}")))
    };
    let map =
        prop::collection::vec((prop::sample::select(vec!["k", "j", "z"]), json_scalar()), 0..3)
            .prop_map(|kv| {
                let body: Vec<String> = kv.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!("{{{}}}", body.join(","))
            })
            .boxed();
    let list = prop::collection::vec(json_scalar(), 0..3)
        .prop_map(|vs| format!("[{}]", vs.join(",")))
        .boxed();
    (
        entry("s", json_scalar().boxed()),
        entry("n", json_scalar().boxed()),
        entry("d", json_scalar().boxed()),
        entry("b", json_scalar().boxed()),
        entry("x", json_scalar().boxed()),
        entry("m", prop_oneof![map, json_scalar()].boxed()),
        entry("l", prop_oneof![list, json_scalar()].boxed()),
        entry("pad", Just("{\"deep\":[1,{\"e\":2}]}".to_owned()).boxed()),
    )
        .prop_map(|(a, b, c, d, e, f, g, h)| {
            let fields: Vec<String> = [a, b, c, d, e, f, g, h].into_iter().flatten().collect();
            format!("{{{}}}", fields.join(","))
        })
}

fn compile(bql: &str) -> Option<Arc<CompiledQuery>> {
    let plan = needle_query::compile(bql, &QueryConfig::default()).ok()?;
    CompiledQuery::compile(&plan).ok().map(Arc::new)
}

/// The records each query's final emission holds, as the JSON of their fields (a record kept
/// as its line's text is compared by what it decodes to, not by how its line was written).
fn results(run: QueryRun) -> Vec<String> {
    let mut run = run;
    let emission = run.finish(1).expect("a final emission");
    emission
        .records
        .iter()
        .map(|r| serde_json::to_string(r).expect("a record serializes"))
        .collect()
}

fn check(
    queries: Vec<String>,
    records: Vec<String>,
    removed: Vec<usize>,
    validation: Validation,
) -> Result<(), TestCaseError> {
    let ctx = EvalContext::new(0);
    let compiled: Vec<(u64, Arc<CompiledQuery>)> = queries
        .iter()
        .filter_map(|q| compile(q))
        .enumerate()
        .map(|(i, q)| (i as u64 + 1, q))
        .collect();
    // the set is built in two steps and loses some queries on the way, with the additions and
    // after them, so several levels, rebuilds and members retired but still indexed take part
    let members: Vec<Arc<Member>> =
        compiled.iter().map(|(s, q)| Member::new(*s, format!("q{s}").into(), q.clone())).collect();
    let half = members.len() / 2;
    let set = MatchSet::with_validation(validation).update(members[..half].to_vec(), &[]);
    let gone: Vec<u64> = removed.iter().map(|i| (*i % members.len().max(1)) as u64 + 1).collect();
    let (with_additions, after) = gone.split_at(gone.len() / 2);
    let set = set.update(members[half..].to_vec(), with_additions);
    let set = set.update(vec![], after);
    let live: Vec<&(u64, Arc<CompiledQuery>)> =
        compiled.iter().filter(|(s, _)| !gone.contains(s)).collect();
    prop_assert_eq!(set.len(), live.len());

    let mut brute_runs: Vec<QueryRun> =
        live.iter().map(|(s, q)| QueryRun::new(q.clone(), format!("q{s}"), 0)).collect();
    let mut indexed_runs: Vec<QueryRun> =
        live.iter().map(|(s, q)| QueryRun::new(q.clone(), format!("q{s}"), 0)).collect();
    let position = |serial: u64| live.iter().position(|(s, _)| *s == serial).unwrap();
    let mut worker = MatchWorker::new();
    for line in &records {
        let whole = decode_record(line.as_bytes()).unwrap();
        let mut expected = BTreeSet::new();
        for (i, (serial, q)) in live.iter().enumerate() {
            let mut state = q.new_worker();
            if q.process(&mut state, &whole, &ctx) {
                expected.insert(*serial);
            }
            if let Some(p) = q.flush(&mut state) {
                brute_runs[i].merge(p, 0).unwrap();
            }
        }
        let mut got = BTreeSet::new();
        let mut partials: Vec<(u64, Partial)> = Vec::new();
        worker.process(&set, line.as_bytes(), &ctx).unwrap();
        worker.flush_raw(|m, p| {
            got.insert(m.serial);
            partials.push((m.serial, p));
        });
        worker.flush(|m, p| {
            if p.matched > 0 {
                got.insert(m.serial);
            }
            partials.push((m.serial, p));
        });
        prop_assert_eq!(&got, &expected, "record {}", line);
        for (serial, p) in partials {
            indexed_runs[position(serial)].merge(p, 0).unwrap();
        }
    }
    for ((b, i), (serial, _)) in brute_runs.into_iter().zip(indexed_runs).zip(&live) {
        let query = &queries[*serial as usize - 1];
        prop_assert_eq!(results(b), results(i), "query {}", query);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn indexed_matching_equals_brute_force(
        queries in prop::collection::vec(query(), 1..40),
        records in prop::collection::vec(record(), 1..30),
        removed in prop::collection::vec(any::<usize>(), 0..8),
        fields_only in any::<bool>(),
    ) {
        // the records are valid JSON without a top-level key twice: checking the whole line
        // or only the fields read must match the same
        let validation = if fields_only { Validation::Fields } else { Validation::Line };
        check(queries, records, removed, validation)?;
    }
}

/// Many queries through many incremental updates: the base/delta split folds over several
/// times, and matching stays exact.
#[test]
fn thousands_of_equality_queries_through_incremental_updates() {
    let ctx = EvalContext::new(0);
    let mut set = MatchSet::new();
    let mut serial = 0;
    for i in 0..3000u64 {
        serial += 1;
        let q =
            compile(&format!("SELECT * FROM STREAM() WHERE s = 'v{}' LIMIT 10", i % 1500)).unwrap();
        set = set.update(vec![Member::new(serial, format!("q{serial}").into(), q)], &[]);
        if i % 7 == 6 {
            set = set.update(vec![], &[serial - 3]);
        }
    }
    let mut worker = MatchWorker::new();
    for v in [0u64, 17, 1499, 1500] {
        let line = format!(r#"{{"s":"v{v}","n":1}}"#);
        let mut got = BTreeSet::new();
        let outcome = worker.process(&set, line.as_bytes(), &ctx);
        worker.flush_raw(|m, _| {
            got.insert(m.serial);
        });
        let expected: BTreeSet<u64> = set
            .members()
            .filter(|m| {
                let w = &mut m.query.new_worker();
                m.query.process(w, &decode_record(line.as_bytes()).unwrap(), &ctx)
            })
            .map(|m| m.serial)
            .collect();
        assert_eq!(got, expected, "v{v}");
        assert_eq!(outcome.unwrap().candidates, expected.len());
        assert!(v == 1500 || !expected.is_empty());
    }
    let (fields, unindexed) = set.shape();
    assert_eq!((fields, unindexed), (vec!["s".to_owned()], 0));
}
