//! Throughput of `Aggregator::update` per aggregation kind over pre-decoded records (records/s),
//! plus the cost of merging and encoding a partial. Records are generated here: a user id among
//! 10,000, a country among 20, a LONG amount and a DOUBLE latency.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use needle_engine::aggregate::Aggregator;
use needle_engine::EvalContext;
use needle_query::ast::{DistributionKind, Expr, ExprKind, Field, Points, Span};
use needle_query::plan::{AggregateFunction, Aggregation, NamedAggregate, NamedExpr, Projection};
use needle_record::{Record, Value};

const N: usize = 10_000;

fn field(name: &str) -> Expr {
    Expr::new(
        ExprKind::Field(Field { name: name.into(), path: vec![], hint: None }),
        Span::default(),
    )
}

fn named(name: &str) -> NamedExpr {
    NamedExpr { name: name.into(), expr: field(name) }
}

fn agg(name: &str, function: AggregateFunction, input: Option<&str>) -> NamedAggregate {
    NamedAggregate { name: name.into(), function, input: input.map(field) }
}

fn records() -> Vec<Record> {
    // A small LCG: deterministic and dependency-free.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        x >> 33
    };
    (0..N)
        .map(|_| {
            let mut r = Record::new();
            r.insert("user", Value::String(format!("user-{}", next() % 10_000)));
            r.insert("country", Value::String(format!("c{}", next() % 20)));
            r.insert("amount", Value::Long((next() % 1000) as i64));
            r.insert("latency", Value::Double((next() % 100_000) as f64 / 100.0));
            r
        })
        .collect()
}

fn kinds() -> Vec<(&'static str, Aggregation)> {
    let aggregates = vec![
        agg("COUNT(*)", AggregateFunction::Count, None),
        agg("sum", AggregateFunction::Sum, Some("amount")),
        agg("max", AggregateFunction::Max, Some("latency")),
        agg("avg", AggregateFunction::Avg, Some("latency")),
    ];
    vec![
        ("raw_all", Aggregation::Raw { projection: Projection::All, size: u64::MAX }),
        (
            "raw_fields",
            Aggregation::Raw {
                projection: Projection::Fields { fields: vec![named("user"), named("amount")] },
                size: u64::MAX,
            },
        ),
        ("group_all", Aggregation::GroupAll { aggregates: aggregates.clone() }),
        (
            "group_by_country",
            Aggregation::GroupBy {
                keys: vec![named("country")],
                aggregates: aggregates.clone(),
                max_groups: 512,
            },
        ),
        (
            "group_by_user",
            Aggregation::GroupBy { keys: vec![named("user")], aggregates, max_groups: 100_000 },
        ),
        (
            "count_distinct_user",
            Aggregation::CountDistinct {
                name: "n".into(),
                fields: vec![field("user")],
                nominal_entries: 16384,
            },
        ),
        (
            "quantile_latency",
            Aggregation::Distribution {
                kind: DistributionKind::Quantile,
                value: field("latency"),
                points: Points::Linear { count: 11 },
                k: 200,
            },
        ),
        (
            "top_k_user",
            Aggregation::TopK {
                k: 10,
                threshold: None,
                fields: vec![named("user")],
                count_name: "Count".into(),
                max_map_size: 1024,
            },
        ),
    ]
}

fn update(c: &mut Criterion) {
    let rs = records();
    let ctx = EvalContext { now_ms: 0 };
    let mut group = c.benchmark_group("update");
    group.throughput(Throughput::Elements(N as u64));
    for (name, aggregation) in kinds() {
        let a = Aggregator::new(&aggregation).unwrap();
        // A warm state (groups and sketch already populated), as in a running query.
        let mut state = a.new_state();
        for r in &rs {
            a.update(&mut state, r, &ctx);
        }
        group.bench_function(name, |b| {
            b.iter(|| {
                for r in &rs {
                    a.update(&mut state, black_box(r), &ctx);
                }
                if a.raw_size().is_some() {
                    black_box(a.take_raw(&mut state));
                }
            })
        });
    }
    group.finish();
}

fn merge_and_encode(c: &mut Criterion) {
    let rs = records();
    let ctx = EvalContext { now_ms: 0 };
    let mut group = c.benchmark_group("partial");
    for (name, aggregation) in kinds().into_iter().filter(|(n, _)| !n.starts_with("raw")) {
        let a = Aggregator::new(&aggregation).unwrap();
        let mut state = a.new_state();
        for r in &rs {
            a.update(&mut state, r, &ctx);
        }
        let bytes = a.encode(&state);
        group.bench_function(format!("encode_decode_merge/{name}"), |b| {
            b.iter_batched(
                || a.new_state(),
                |mut into| {
                    let other = a.decode(&a.encode(&state)).unwrap();
                    a.merge(&mut into, &other).unwrap();
                    into
                },
                BatchSize::SmallInput,
            )
        });
        println!("{name}: encoded partial of {N} records is {} bytes", bytes.len());
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1));
    targets = update, merge_and_encode
}
criterion_main!(benches);
