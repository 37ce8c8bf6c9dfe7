use needle_record::check::{check_with, Kernel};
use needle_workload::{Generator, WorkloadKind, WorkloadSpec};
use std::hint::black_box;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).map_or(200, |a| a.parse().unwrap());
    let only: Option<usize> = args.get(2).map(|a| a.parse().unwrap());
    let kinds: Vec<WorkloadKind> = match args.get(3).map(String::as_str) {
        Some("small") => vec![WorkloadKind::Small],
        Some("bullet") => vec![WorkloadKind::Bullet],
        _ => vec![WorkloadKind::Small, WorkloadKind::Bullet],
    };
    for kind in kinds {
        let spec = WorkloadSpec::new(kind).with_seed(1);
        let mut g = Generator::new(&spec).unwrap();
        let lines: Vec<Vec<u8>> = (0..1000)
            .map(|_| {
                let mut l = Vec::new();
                g.write_next(&mut l);
                l
            })
            .collect();
        let one = needle_record::FieldSet::new([if kind == WorkloadKind::Small {
            "value"
        } else {
            "id"
        }]);
        let mut rec = needle_record::Record::new();
        let names = [
            "sonic_ignored",
            "serde_ignored",
            "sonic_value",
            "avx2",
            "sse2",
            "portable",
            "fieldset_line",
            "fieldset_sonic",
        ];
        let mut best = vec![f64::MAX; names.len()];
        for _ in 0..rounds {
            for (m, b) in best.iter_mut().enumerate() {
                if only.is_some_and(|o| o != m) {
                    continue;
                }
                let t = std::time::Instant::now();
                for l in &lines {
                    match m {
                        0 => {
                            black_box(sonic_rs::from_slice::<serde::de::IgnoredAny>(l).is_ok());
                        }
                        1 => {
                            black_box(serde_json::from_slice::<serde::de::IgnoredAny>(l).is_ok());
                        }
                        2 => {
                            black_box(sonic_rs::from_slice::<sonic_rs::Value>(l).is_ok());
                        }
                        3 => {
                            black_box(check_with(Kernel::Avx2, l).is_ok());
                        }
                        4 => {
                            black_box(check_with(Kernel::Sse2, l).is_ok());
                        }
                        5 => {
                            black_box(check_with(Kernel::Portable, l).is_ok());
                        }
                        6 => {
                            black_box(one.decode_into(l, &mut rec).is_ok());
                        }
                        _ => {
                            black_box(one.decode_into_with_sonic_rs(l, &mut rec).is_ok());
                        }
                    }
                }
                *b = b.min(t.elapsed().as_nanos() as f64 / lines.len() as f64);
            }
        }
        let bytes: usize = lines.iter().map(Vec::len).sum();
        let per = bytes as f64 / lines.len() as f64;
        for (n, b) in names.iter().zip(&best) {
            println!("{kind:?} {n:15} {b:8.1} ns/line {:6.2} GB/s", per / b);
        }
    }
}
