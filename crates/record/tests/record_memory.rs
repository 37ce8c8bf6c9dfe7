//! What the bounds in bytes count against what records really hold: [`Record::approx_bytes`]
//! beside the heap a counting allocator sees records take, for the workloads' records decoded
//! both ways a worker keeps them (as fields, and as their line with the fields decoded).

use needle_record::{decode_record, FieldSet, Record};
use needle_workload::{Generator, WorkloadKind, WorkloadSpec};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn lines(kind: WorkloadKind, n: usize) -> Vec<Vec<u8>> {
    let mut generator = Generator::new(&WorkloadSpec::new(kind).with_seed(7)).unwrap();
    (0..n)
        .map(|_| {
            let mut line = Vec::new();
            generator.write_next(&mut line);
            line
        })
        .collect()
}

/// (heap the records took, what they say they take), for records made by `make` and kept in a
/// vector as results are.
fn measure(lines: &[Vec<u8>], make: impl Fn(&[u8]) -> Record) -> (usize, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    let mut kept = Vec::with_capacity(lines.len());
    for line in lines {
        kept.push(make(line));
    }
    let heap = (LIVE.load(Ordering::Relaxed) - before) as usize;
    let said = kept.iter().map(Record::approx_bytes).sum();
    (heap, said)
}

#[test]
fn a_records_counted_size_is_near_the_heap_it_holds() {
    for kind in [WorkloadKind::Bullet, WorkloadKind::Iot, WorkloadKind::Small] {
        let lines = lines(kind, 2_000);
        let as_fields = measure(&lines, |l| decode_record(l).unwrap());
        let set = FieldSet::new(["id"]);
        let as_line = measure(&lines, |l| {
            let record = set.whole_record(l).unwrap();
            record.get("id"); // its fields decoded too, as a filter reading one field does
            record
        });
        let as_line_only = measure(&lines, |l| set.whole_record(l).unwrap());
        for (how, (heap, said)) in
            [("fields", as_fields), ("line and fields", as_line), ("line", as_line_only)]
        {
            let ratio = heap as f64 / said as f64;
            println!("{kind:?} as {how}: heap {heap}, counted {said}, heap/counted {ratio:.2}");
            assert!((0.9..=1.1).contains(&ratio), "{kind:?} as {how}: heap/counted {ratio:.2}");
        }
    }
}
