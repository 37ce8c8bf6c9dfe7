//! Criterion bench of the BQL front end: parsing a typical GROUP BY query (text → syntax tree).
//! Run with `cargo bench -p needle-query --bench parse`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};

/// A typical dashboard query: grouped counts and averages over a filtered, windowed stream.
const GROUP_BY: &str = "SELECT browser, country, COUNT(*) AS n, AVG(latency) AS avg_latency \
    FROM STREAM(30000, TIME) \
    WHERE status >= 500 AND page RLIKE '.*/checkout.*' AND country IN ('US', 'DE', 'FR') \
    GROUP BY browser, country HAVING COUNT(*) > 10 ORDER BY n DESC \
    WINDOWING TUMBLING(5000, TIME) LIMIT 20";

fn parse(c: &mut Criterion) {
    c.bench_function("parse_group_by", |b| {
        b.iter(|| needle_query::parse_bql(black_box(GROUP_BY)).expect("the query parses"))
    });
}

criterion_group!(benches, parse);
criterion_main!(benches);
