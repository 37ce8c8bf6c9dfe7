//! Criterion bench: decoding the same bytes several ways, with throughput in bytes.
//! - 1,000 bullet records (1.8 KiB, from the workload crate, seed 1): the full decode into a
//!   `Record`, `decode_fields` of two fields, `FieldSet::decode_into` (the workers' path,
//!   `Validation::Line`: needle's checker) of one and two fields into the kept record, the
//!   same through sonic-rs as the line mode read lines before the checker (`*_sonic_rs`: its
//!   tree, at this length), and sonic-rs's lazy `get_many` of two fields, which stops early and
//!   validates nothing after them;
//! - 1,000 `small` events (~100 bytes): `FieldSet::decode_into` of one field into the kept
//!   record (one scalar pass at this length for a flat event like these; sonic-rs's stream, as
//!   for any other short line and before the checker: `*_sonic_rs`; `*_checker` forces the
//!   SIMD checker, slower here) and `decode_fields`;
//! - for both, the baselines: needle's checker alone (`needle_check_*`, validating the whole
//!   line and building nothing, with each stage-1 kernel the CPU runs), sonic-rs's and
//!   serde_json's validate-only reads (`IgnoredAny`) and trees (`sonic_rs::Value`,
//!   arena-allocated; `serde_json::Value`, with `preserve_order`, for bullet records only).

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use needle_record::check::{check_with, Kernel};
use needle_record::{decode_fields, decode_record, FieldSet, Record, RecordError};
use needle_workload::{Generator, WorkloadKind, WorkloadSpec};
use std::hint::black_box;

const RECORDS: usize = 1000;

/// The line mode as sonic-rs read lines before needle's checker (a stream up to 512 bytes, its
/// tree beyond), and through the checker whatever the length.
const SONIC_RS: ReadInto = FieldSet::decode_into_with_sonic_rs;
const CHECKER: ReadInto = FieldSet::decode_into_with_checker;

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

/// How a `FieldSet` reads a line into the kept record.
type ReadInto = fn(&FieldSet, &[u8], &mut Record) -> Result<(), RecordError>;

/// Times `read` of `set` over every line into one kept record, as a worker does.
fn field_set_into(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    lines: &[Vec<u8>],
    set: &FieldSet,
    read: ReadInto,
) {
    group.bench_function(name, |b| {
        let mut record = Record::new();
        b.iter(|| {
            for line in lines {
                read(set, line, &mut record).unwrap();
                black_box(&record);
            }
        })
    });
}

/// Times `read` over every line, as one iteration.
fn per_line(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    lines: &[Vec<u8>],
    read: impl Fn(&[u8]),
) {
    group.bench_function(name, |b| {
        b.iter(|| {
            for line in lines {
                read(line);
            }
        })
    });
}

/// The validate-only reads and the trees of both JSON crates on `lines`: the baselines.
fn json_baselines(group: &mut BenchmarkGroup<'_, WallTime>, lines: &[Vec<u8>]) {
    // needle's own whole-line checker alone, with each stage-1 kernel this CPU runs
    for kernel in Kernel::available() {
        let name = format!("needle_check_{kernel:?}").to_lowercase();
        per_line(group, &name, lines, |line| {
            assert!(black_box(check_with(kernel, line)).is_ok());
        });
    }
    // the fastest way sonic-rs reads and validates the same bytes: a parse-only baseline
    per_line(group, "sonic_rs_ignored_any", lines, |line| {
        black_box(sonic_rs::from_slice::<serde::de::IgnoredAny>(line).unwrap());
    });
    per_line(group, "serde_json_ignored_any", lines, |line| {
        black_box(serde_json::from_slice::<serde::de::IgnoredAny>(line).unwrap());
    });
    per_line(group, "sonic_rs_value", lines, |line| {
        black_box(sonic_rs::from_slice::<sonic_rs::Value>(line).unwrap());
    });
}

fn decode(c: &mut Criterion) {
    let lines = bullet_lines();
    let bytes: usize = lines.iter().map(Vec::len).sum();
    let mut group = c.benchmark_group("decode_bullet_1000");
    group.throughput(Throughput::Bytes(bytes as u64));
    per_line(&mut group, "decode_record", &lines, |line| {
        black_box(decode_record(line).unwrap());
    });
    per_line(&mut group, "decode_fields_2", &lines, |line| {
        black_box(decode_fields(line, &["device", "demographics"]).unwrap());
    });
    let id = FieldSet::new(["id"]);
    field_set_into(&mut group, "field_set_id", &lines, &id, FieldSet::decode_into);
    field_set_into(&mut group, "field_set_id_sonic_rs", &lines, &id, SONIC_RS);
    let two = FieldSet::new(["device", "demographics"]);
    field_set_into(&mut group, "field_set_2", &lines, &two, FieldSet::decode_into);
    field_set_into(&mut group, "field_set_2_sonic_rs", &lines, &two, SONIC_RS);
    json_baselines(&mut group, &lines);
    // What skipping validation buys: sonic-rs's lazy lookup stops once both fields are found
    // and does not check the rest of the line.
    let mut tree = sonic_rs::PointerTree::new();
    tree.add_path(["device"]);
    tree.add_path(["demographics"]);
    per_line(&mut group, "sonic_rs_get_many_2_unvalidated", &lines, |line| {
        black_box(sonic_rs::get_many(line, &tree).unwrap());
    });
    per_line(&mut group, "serde_json_value", &lines, |line| {
        black_box(serde_json::from_slice::<serde_json::Value>(line).unwrap());
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
    field_set_into(&mut group, "field_set_value_into", &lines, &value, FieldSet::decode_into);
    field_set_into(&mut group, "field_set_value_into_checker", &lines, &value, CHECKER);
    field_set_into(&mut group, "field_set_value_into_sonic_rs", &lines, &value, SONIC_RS);
    per_line(&mut group, "decode_fields_value", &lines, |line| {
        black_box(decode_fields(line, &["value"]).unwrap());
    });
    json_baselines(&mut group, &lines);
    group.finish();
}

criterion_group!(benches, decode, decode_small);
criterion_main!(benches);
