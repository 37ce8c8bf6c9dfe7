//! Criterion bench: records/s of each workload generator writing into a reused buffer.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use needle_workload::{Generator, WorkloadKind, WorkloadSpec};
use std::hint::black_box;

fn generators(c: &mut Criterion) {
    let mut group = c.benchmark_group("gen");
    const BATCH: u64 = 1000;
    group.throughput(Throughput::Elements(BATCH));
    for kind in WorkloadKind::ALL {
        let mut generator = Generator::new(&WorkloadSpec::new(kind).with_seed(1)).unwrap();
        let mut buf = Vec::with_capacity(4096);
        group.bench_function(kind.name(), |b| {
            b.iter(|| {
                for _ in 0..BATCH {
                    buf.clear();
                    generator.write_next(&mut buf);
                    black_box(&buf);
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, generators);
criterion_main!(benches);
