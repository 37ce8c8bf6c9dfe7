//! Criterion bench: decoding bullet records (from the workload crate, seed 1) three ways on the
//! same bytes — the full decode into a `Record`, `decode_fields` of two fields, and serde_json
//! validation only (`IgnoredAny`) as the reference; `FieldSet::decode` (the workers' fast path)
//! of one and two fields beside sonic-rs's own validate-only read (`IgnoredAny`) — with throughput in bytes. For context, the
//! trees of serde_json (`serde_json::Value`, with `preserve_order`) and sonic-rs
//! (`sonic_rs::Value`, arena-allocated) on the same bytes, and sonic-rs's lazy `get_many` of the
//! same two fields, which stops early and validates nothing after them.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use needle_record::{decode_fields, decode_record, FieldSet};
use needle_workload::{Generator, WorkloadKind, WorkloadSpec};
use std::hint::black_box;

const RECORDS: usize = 1000;

fn bullet_lines() -> Vec<Vec<u8>> {
    lines(WorkloadKind::Bullet)
}

fn lines(kind: WorkloadKind) -> Vec<Vec<u8>> {
    let spec = WorkloadSpec::new(kind).with_seed(1);
    let mut generator = Generator::new(&spec).unwrap();
    (0..RECORDS)
        .map(|_| {
            let mut line = Vec::new();
            generator.write_next(&mut line);
            line
        })
        .collect()
}

fn decode(c: &mut Criterion) {
    let lines = bullet_lines();
    let bytes: usize = lines.iter().map(Vec::len).sum();
    let mut group = c.benchmark_group("decode_bullet_1000");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("decode_record", |b| {
        b.iter(|| {
            for line in &lines {
                black_box(decode_record(line).unwrap());
            }
        })
    });
    group.bench_function("decode_fields_2", |b| {
        b.iter(|| {
            for line in &lines {
                black_box(decode_fields(line, &["device", "demographics"]).unwrap());
            }
        })
    });
    let id = FieldSet::new(["id"]);
    group.bench_function("field_set_id", |b| {
        b.iter(|| {
            for line in &lines {
                black_box(id.decode(line).unwrap());
            }
        })
    });
    let two = FieldSet::new(["device", "demographics"]);
    group.bench_function("field_set_2", |b| {
        b.iter(|| {
            for line in &lines {
                black_box(two.decode(line).unwrap());
            }
        })
    });
    // The fastest way sonic-rs reads and validates the same bytes: the parse-only baseline of
    // `needle bench matching`.
    group.bench_function("sonic_rs_ignored_any", |b| {
        b.iter(|| {
            for line in &lines {
                black_box(sonic_rs::from_slice::<serde::de::IgnoredAny>(line).unwrap());
            }
        })
    });
    group.bench_function("serde_json_ignored_any", |b| {
        b.iter(|| {
            for line in &lines {
                black_box(serde_json::from_slice::<serde::de::IgnoredAny>(line).unwrap());
            }
        })
    });
    // What skipping validation buys: sonic-rs's lazy lookup stops once both fields are found
    // and does not check the rest of the line.
    let mut tree = sonic_rs::PointerTree::new();
    tree.add_path(["device"]);
    tree.add_path(["demographics"]);
    group.bench_function("sonic_rs_get_many_2_unvalidated", |b| {
        b.iter(|| {
            for line in &lines {
                black_box(sonic_rs::get_many(line.as_slice(), &tree).unwrap());
            }
        })
    });
    group.bench_function("serde_json_value", |b| {
        b.iter(|| {
            for line in &lines {
                black_box(serde_json::from_slice::<serde_json::Value>(line).unwrap());
            }
        })
    });
    group.bench_function("sonic_rs_value", |b| {
        b.iter(|| {
            for line in &lines {
                black_box(sonic_rs::from_slice::<sonic_rs::Value>(line).unwrap());
            }
        })
    });
    group.finish();
}

/// The `small` workload (~100-byte events, `needle bench eps`): one field read, as by
/// `SUM(value)`, with the record reused as the workers do, against the validate-only reads.
fn decode_small(c: &mut Criterion) {
    let lines = lines(WorkloadKind::Small);
    let bytes: usize = lines.iter().map(Vec::len).sum();
    let mut group = c.benchmark_group("decode_small_1000");
    group.throughput(Throughput::Bytes(bytes as u64));
    let value = FieldSet::new(["value"]);
    group.bench_function("field_set_value_into", |b| {
        let mut record = needle_record::Record::new();
        b.iter(|| {
            for line in &lines {
                value.decode_into(line, &mut record).unwrap();
                black_box(&record);
            }
        })
    });
    group.bench_function("decode_fields_value", |b| {
        b.iter(|| {
            for line in &lines {
                black_box(decode_fields(line, &["value"]).unwrap());
            }
        })
    });
    group.bench_function("sonic_rs_ignored_any", |b| {
        b.iter(|| {
            for line in &lines {
                black_box(sonic_rs::from_slice::<serde::de::IgnoredAny>(line).unwrap());
            }
        })
    });
    group.bench_function("serde_json_ignored_any", |b| {
        b.iter(|| {
            for line in &lines {
                black_box(serde_json::from_slice::<serde::de::IgnoredAny>(line).unwrap());
            }
        })
    });
    group.bench_function("sonic_rs_value", |b| {
        b.iter(|| {
            for line in &lines {
                black_box(sonic_rs::from_slice::<sonic_rs::Value>(line).unwrap());
            }
        })
    });
    group.finish();
}

criterion_group!(benches, decode, decode_small);
criterion_main!(benches);
