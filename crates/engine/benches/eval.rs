//! Throughput of expression evaluation over decoded records (records/s): the typical WHERE of
//! the brief (`device = 'ipad' AND timespent > 100 AND browser_name RLIKE 'chrom.*'`), through
//! `test` (WHERE) and `eval` (a projected value), plus IN, arithmetic, a function and a computed
//! RLIKE pattern, beside a baseline of one bare field lookup per record (the
//! floor, and a yardstick when the machine is shared). Records are JSON lines decoded once by `needle_record::decode_record`, with a
//! dozen fields each so that lookups see a realistic record.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use needle_engine::{CompiledExpr, EvalContext};
use needle_query::ast::*;
use needle_record::{decode_record, Record, Value};

const N: usize = 10_000;

fn records() -> Vec<Record> {
    let devices = ["ipad", "iphone", "android", "desktop"];
    let browsers = ["chrome", "chromium", "firefox", "safari", "edge"];
    // A small LCG: deterministic and dependency-free.
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state =
            state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize
    };
    (0..N)
        .map(|i| {
            let line = format!(
                r#"{{"id":"c{i:08x}","ts":{},"user":"u{}","device":"{}","browser_name":"{}","timespent":{},"country":"c{}","page":"/p/{}","ok":{},"latency":{}.5,"tags":["a","b"],"pattern":"{}"}}"#,
                1_700_000_000_000u64 + i as u64,
                next() % 10_000,
                devices[next() % devices.len()],
                browsers[next() % browsers.len()],
                next() % 500,
                next() % 20,
                next() % 100,
                next() % 2 == 0,
                next() % 1000,
                if next() % 2 == 0 { "chrom.*" } else { "f.*x" },
            );
            decode_record(line.as_bytes()).expect("valid JSON")
        })
        .collect()
}

fn e(kind: ExprKind) -> Expr {
    Expr::new(kind, Span::default())
}
fn field(name: &str) -> Expr {
    e(ExprKind::Field(Field { name: name.into(), path: vec![], hint: None }))
}
fn lit(v: Value) -> Expr {
    e(ExprKind::Literal(v))
}
fn cmp(op: CompareOp, l: Expr, r: Expr) -> Expr {
    e(ExprKind::Compare { op, quantifier: None, left: Box::new(l), right: Box::new(r) })
}
fn and(l: Expr, r: Expr) -> Expr {
    e(ExprKind::Binary { op: BinaryOp::And, left: Box::new(l), right: Box::new(r) })
}
fn rlike(value: Expr, pattern: Expr) -> Expr {
    e(ExprKind::Rlike {
        negated: false,
        any: false,
        value: Box::new(value),
        pattern: Box::new(pattern),
    })
}

fn typical_where() -> Expr {
    and(
        and(
            cmp(CompareOp::Eq, field("device"), lit(Value::from("ipad"))),
            cmp(CompareOp::Gt, field("timespent"), lit(Value::Int(100))),
        ),
        rlike(field("browser_name"), lit(Value::from("chrom.*"))),
    )
}

fn bench(c: &mut Criterion) {
    let records = records();
    let ctx = EvalContext::new(1_700_000_000_000);
    let mut group = c.benchmark_group("eval");
    group.throughput(Throughput::Elements(N as u64));

    // The floor: one hash lookup of a top-level field per record, no evaluation.
    group.bench_function("baseline_field_lookup", |b| {
        b.iter(|| records.iter().filter(|r| black_box(r).get("device").is_some()).count())
    });
    let mut run_test = |name: &str, expr: Expr| {
        let compiled = CompiledExpr::compile(&expr).expect("compiles");
        group.bench_function(name, |b| {
            b.iter(|| records.iter().filter(|r| compiled.test(black_box(r), &ctx)).count())
        });
    };
    run_test("typical_where_test", typical_where());
    let in_list = e(ExprKind::In {
        negated: false,
        value: Box::new(field("device")),
        list: Box::new(e(ExprKind::List(
            ["ipad", "iphone", "tv", "watch"].iter().map(|s| lit(Value::from(*s))).collect(),
        ))),
    });
    run_test("in_list_test", in_list);
    let arith = cmp(
        CompareOp::Gt,
        e(ExprKind::Binary {
            op: BinaryOp::Add,
            left: Box::new(e(ExprKind::Binary {
                op: BinaryOp::Mul,
                left: Box::new(field("timespent")),
                right: Box::new(lit(Value::Int(2))),
            })),
            right: Box::new(field("latency")),
        }),
        lit(Value::Double(600.0)),
    );
    run_test("arithmetic_test", arith);
    run_test("computed_rlike_test", rlike(field("browser_name"), field("pattern")));

    // One matching record over and over (hot cache, every conjunct evaluated): the evaluator's
    // own CPU cost, without memory latency.
    let hot = records
        .iter()
        .find(|r| {
            r.get("device") == Some(&Value::from("ipad"))
                && r.get("browser_name") == Some(&Value::from("chrome"))
                && r.get("timespent").and_then(Value::as_i64).is_some_and(|t| t > 100)
        })
        .expect("a matching record")
        .clone();
    let typical = CompiledExpr::compile(&typical_where()).expect("compiles");
    group.bench_function("typical_where_test_hot", |b| {
        b.iter(|| (0..N).filter(|_| typical.test(black_box(&hot), &ctx)).count())
    });
    group.bench_function("baseline_field_lookup_hot", |b| {
        b.iter(|| (0..N).filter(|_| black_box(&hot).get("device").is_some()).count())
    });
    let projected = CompiledExpr::compile(&typical_where()).expect("compiles");
    group.bench_function("typical_where_eval", |b| {
        b.iter(|| records.iter().filter(|r| !projected.eval(black_box(r), &ctx).is_null()).count())
    });
    let upper = CompiledExpr::compile(&e(ExprKind::Call {
        function: Function::Upper,
        args: vec![field("browser_name")],
    }))
    .expect("compiles");
    group.bench_function("upper_eval", |b| {
        b.iter(|| records.iter().filter(|r| !upper.eval(black_box(r), &ctx).is_null()).count())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
