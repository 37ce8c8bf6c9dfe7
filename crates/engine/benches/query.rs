//! Records per second through the full engine path of one query (explode → filter → partial
//! aggregation on a worker, flush, merge and the final emission on the join side), one bench per
//! aggregation kind, on Bullet-like records; and JSON decoding alone of the same bytes, so the
//! engine's cost above decoding is visible.
//!
//! The records are generated here (deterministic, ~1 KB each, Bullet-shaped: ids, a timestamp,
//! strings, numbers, a map and a list). Run with `cargo bench -p needle-engine --bench query`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use needle_engine::eval::EvalContext;
use needle_engine::exec::{CompiledQuery, QueryRun};
use needle_query::QueryConfig;
use needle_record::Record;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

const RECORDS: usize = 10_000;

/// A tiny deterministic generator (xorshift), enough for varied field values.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// NDJSON lines of Bullet-like events.
fn lines() -> Vec<Vec<u8>> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let types = ["click", "view", "purchase", "scroll", "login", "logout"];
    let countries = ["us", "in", "br", "de", "fr", "jp", "gb", "ca", "mx", "es"];
    (0..RECORDS)
        .map(|i| {
            let browser = ["chrome", "firefox", "safari", "edge"][rng.below(4) as usize];
            let os = ["linux", "mac", "windows", "android", "ios"][rng.below(5) as usize];
            let tags: Vec<String> =
                (0..rng.below(4)).map(|t| format!("t{}", rng.below(30) + t)).collect();
            let record = serde_json::json!({
                "id": format!("{:010x}", rng.next() & 0xff_ffff_ffff),
                "timestamp": 1_700_000_000_000u64 + i as u64 * 7,
                "event": types[rng.below(types.len() as u64) as usize],
                "user_id": format!("u{}", rng.below(5000)),
                "country": countries[rng.below(countries.len() as u64) as usize],
                "duration_ms": rng.below(60_000),
                "price": rng.below(100_000) as f64 / 100.0,
                "session": {
                    "browser": browser,
                    "os": os,
                    "depth": rng.below(20).to_string(),
                },
                "tags": tags,
                "page": format!("/section/{}/item/{}", rng.below(50), rng.below(10_000)),
                "referrer": format!("https://example.com/{}", "r".repeat(rng.below(200) as usize)),
                "payload": "x".repeat(400 + rng.below(400) as usize),
            });
            serde_json::to_vec(&record).unwrap()
        })
        .collect()
}

fn queries() -> Vec<(&'static str, &'static str)> {
    vec![
        ("raw", "SELECT id, event FROM STREAM() WHERE event = 'purchase' AND price > 900 LIMIT 500"),
        ("group_all", "SELECT COUNT(*), SUM(price), AVG(duration_ms), MAX(price) FROM STREAM() WHERE event = 'view'"),
        ("group_by", "SELECT country, event, COUNT(*), AVG(price) FROM STREAM() GROUP BY country, event"),
        ("count_distinct", "SELECT COUNT(DISTINCT user_id) FROM STREAM()"),
        ("quantile", "SELECT QUANTILE(duration_ms, LINEAR, 11) FROM STREAM()"),
        ("top_k", "SELECT TOP(10, page) FROM STREAM()"),
        ("explode_group_by", "SELECT t, COUNT(*) FROM STREAM() LATERAL VIEW EXPLODE(tags) AS t GROUP BY t"),
    ]
}

fn bench(c: &mut Criterion) {
    let lines = lines();
    let bytes: usize = lines.iter().map(Vec::len).sum();
    let records: Vec<Record> =
        lines.iter().map(|l| needle_record::decode_record(l).unwrap()).collect();
    eprintln!("{RECORDS} records, {} bytes on average", bytes / RECORDS);

    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(RECORDS as u64));
    g.sample_size(10).warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    g.bench_function("json_to_record", |b| {
        b.iter(|| {
            for l in &lines {
                black_box(needle_record::decode_record(black_box(l)).unwrap());
            }
        })
    });
    g.finish();

    let mut g = c.benchmark_group("query");
    g.throughput(Throughput::Elements(RECORDS as u64));
    g.sample_size(10).warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    for (name, text) in queries() {
        let plan = needle_query::compile(text, &QueryConfig::default())
            .unwrap_or_else(|e| panic!("{name}: {}", e.render(text)));
        let query = Arc::new(CompiledQuery::compile(&plan).unwrap());
        g.bench_function(name, |b| {
            b.iter_batched(
                || (query.new_worker(), QueryRun::new(query.clone(), "bench", 0)),
                |(mut worker, mut run)| {
                    let ctx = EvalContext::new(0);
                    let raw = query.is_raw();
                    for r in &records {
                        if query.process(&mut worker, r, &ctx) && raw {
                            if let Some(p) = query.flush(&mut worker) {
                                black_box(run.merge(p, 0).unwrap());
                            }
                        }
                    }
                    if let Some(p) = query.flush(&mut worker) {
                        black_box(run.merge(p, 1).unwrap());
                    }
                    black_box(run.finish(1))
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
