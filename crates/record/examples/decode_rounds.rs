//! The JSON readers of needle-record on the same lines, timed as the fastest of many short
//! rounds rather than as a mean: on a shared machine whose load comes and goes, the fastest
//! round of each reader is what it costs undisturbed, and the rounds of all readers alternate so
//! that each sees the same machine. Complements `benches/decode.rs` (criterion, means) there.
//!
//! `cargo run --release -p needle-record --example decode_rounds -- [ROUNDS] [small|bullet] [READER]`
//! (defaults: 200 rounds of 1,000 lines, both workloads, every reader). The readers: sonic-rs's
//! and serde_json's validate-only reads and sonic-rs's tree; needle's checker alone with each
//! kernel (a kernel the CPU lacks runs as the best one it has); `FieldSet::decode_into` of one field into the kept record (`field_set_into`: the
//! line mode as it is; `..._checker`: through the checker whatever the length; `..._sonic_rs`:
//! as sonic-rs read lines before the checker).

use needle_record::check::{check_with, Kernel};
use needle_record::{FieldSet, Record};
use needle_workload::{Generator, WorkloadKind, WorkloadSpec};
use std::hint::black_box;
use std::time::Instant;
const READERS: [&str; 10] = [
    "sonic_rs_ignored_any",
    "serde_json_ignored_any",
    "sonic_rs_value",
    "needle_check_avx512",
    "needle_check_avx2",
    "needle_check_sse2",
    "needle_check_portable",
    "field_set_into",
    "field_set_into_checker",
    "field_set_into_sonic_rs",
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).map_or(200, |a| a.parse().expect("a number of rounds"));
    let kinds = match args.get(2).map(String::as_str) {
        Some("small") => vec![WorkloadKind::Small],
        Some("bullet") => vec![WorkloadKind::Bullet],
        _ => vec![WorkloadKind::Small, WorkloadKind::Bullet],
    };
    let only = args.get(3).cloned();
    for kind in kinds {
        let spec = WorkloadSpec::new(kind).with_seed(1);
        let mut generator = Generator::new(&spec).expect("a workload");
        let lines: Vec<Vec<u8>> = (0..1000)
            .map(|_| {
                let mut line = Vec::new();
                generator.write_next(&mut line);
                line
            })
            .collect();
        // the field the decode bench reads of each workload
        let one = FieldSet::new([if kind == WorkloadKind::Small { "value" } else { "id" }]);
        let mut record = Record::new();
        let mut best = [f64::MAX; READERS.len()];
        for _ in 0..rounds {
            for (reader, best) in best.iter_mut().enumerate() {
                if only.as_deref().is_some_and(|o| o != READERS[reader]) {
                    continue;
                }
                let started = Instant::now();
                for line in &lines {
                    let ok = match reader {
                        0 => sonic_rs::from_slice::<serde::de::IgnoredAny>(line).is_ok(),
                        1 => serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok(),
                        2 => sonic_rs::from_slice::<sonic_rs::Value>(line).is_ok(),
                        3 => check_with(Kernel::Avx512, line).is_ok(),
                        4 => check_with(Kernel::Avx2, line).is_ok(),
                        5 => check_with(Kernel::Sse2, line).is_ok(),
                        6 => check_with(Kernel::Portable, line).is_ok(),
                        7 => one.decode_into(line, &mut record).is_ok(),
                        8 => one.decode_into_with_checker(line, &mut record).is_ok(),
                        _ => one.decode_into_with_sonic_rs(line, &mut record).is_ok(),
                    };
                    black_box((ok, &record));
                }
                *best = best.min(started.elapsed().as_nanos() as f64 / lines.len() as f64);
            }
        }
        let bytes_per_line = lines.iter().map(Vec::len).sum::<usize>() as f64 / lines.len() as f64;
        println!("{kind:?} events, {bytes_per_line:.0} bytes a line, fastest of {rounds} rounds:");
        for (name, ns) in READERS.iter().zip(best).filter(|(_, ns)| *ns < f64::MAX) {
            println!("  {name:24} {ns:8.1} ns/line {:6.2} GB/s", bytes_per_line / ns);
        }
    }
}
