//! The workloads of docs/workloads.md, generated deterministically from a seed: `bullet` (Bullet-shaped
//! 1.8 KiB records, with needle records injected on demand), `iot` (the Akumuli sensor readings)
//! and `small` (~100-byte events).
//!
//! A [`Generator`] is an endless, incremental stream: each call writes the next record's JSON
//! into a caller's reusable buffer ([`Generator::write_next`]) or returns it as a [`Record`]
//! ([`Generator::next_record`]). The same [`WorkloadSpec`] (kind, seed, options) always yields
//! the same bytes: every random draw comes from one `ChaCha8Rng` seeded with the seed. The spec's
//! `count` is where drivers stop ([`Generator::is_done`], and the `Iterator` impl honours it); its
//! `rate` is for drivers too ([`Pacer`]). Each module documents its workload's NDJSON shape.
//!
//! Its place in the flow: beside it — the input of `needle gen`, of the `gen:` source and of the
//! benchmarks; nothing in the query path depends on it.

pub mod bullet;
mod error;
pub mod iot;
mod pace;
pub mod small;
mod spec;
mod write;

pub use error::WorkloadError;
pub use pace::Pacer;
pub use spec::{
    parse_needle_field, parse_spec, NeedleSpec, WorkloadKind, WorkloadSpec, DEFAULT_SENSORS,
};

use needle_record::Record;

/// The stream of one workload.
#[derive(Debug, Clone)]
pub struct Generator {
    inner: Inner,
    count: Option<u64>,
    scratch: Vec<u8>,
}

#[derive(Debug, Clone)]
enum Inner {
    Bullet(Box<bullet::Bullet>),
    Iot(iot::Iot),
    Small(small::Small),
}

impl Generator {
    /// A generator for `spec`, which is validated first (including the needle's fields and
    /// values for bullet).
    pub fn new(spec: &WorkloadSpec) -> Result<Self, WorkloadError> {
        spec.validate()?;
        let inner = match spec.kind {
            WorkloadKind::Bullet => Inner::Bullet(Box::new(bullet::Bullet::new(spec)?)),
            WorkloadKind::Iot => Inner::Iot(iot::Iot::new(spec)?),
            WorkloadKind::Small => Inner::Small(small::Small::new(spec)),
        };
        Ok(Self { inner, count: spec.count, scratch: Vec::new() })
    }

    pub fn kind(&self) -> WorkloadKind {
        match self.inner {
            Inner::Bullet(_) => WorkloadKind::Bullet,
            Inner::Iot(_) => WorkloadKind::Iot,
            Inner::Small(_) => WorkloadKind::Small,
        }
    }

    /// Appends the next record's JSON (one line's worth, without the newline) to `out`. Clear
    /// `out` first to reuse it for one record, or keep appending to build a batch. The stream is
    /// endless: this writes a record even past the spec's `count`.
    #[inline]
    pub fn write_next(&mut self, out: &mut Vec<u8>) {
        match &mut self.inner {
            Inner::Bullet(g) => g.write_next(out),
            Inner::Iot(g) => g.write_next(out),
            Inner::Small(g) => g.write_next(out),
        }
    }

    /// The next record, decoded (a convenience for tests and demos; the fast path is
    /// [`Generator::write_next`]).
    pub fn next_record(&mut self) -> Record {
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        self.write_next(&mut buf);
        let record = needle_record::decode_record(&buf).expect("generated JSON is a valid object");
        self.scratch = buf;
        record
    }

    /// How many records were generated so far (the index of the next one).
    pub fn produced(&self) -> u64 {
        match &self.inner {
            Inner::Bullet(g) => g.produced(),
            Inner::Iot(g) => g.produced(),
            Inner::Small(g) => g.produced(),
        }
    }

    /// The spec's `count`, if any.
    pub fn count(&self) -> Option<u64> {
        self.count
    }

    /// True once `count` records were generated (never for an endless spec).
    pub fn is_done(&self) -> bool {
        self.count.is_some_and(|c| self.produced() >= c)
    }
}

/// Records up to the spec's `count` (endless without one).
impl Iterator for Generator {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        (!self.is_done()).then(|| self.next_record())
    }
}
