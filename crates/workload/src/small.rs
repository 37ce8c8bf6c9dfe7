//! The `small` workload: ~100-byte events for raw runtime throughput (events per second).
//!
//! ```text
//! {"id":"0f3c2a4e-91b7-4d05-8e6a-3b1f9c0d7e52","key":"key_04211","value":5172.346,"ts":1700000000000}
//! ```
//! - `id`: a random UUID-shaped string (version 4 layout, 36 characters);
//! - `key`: one of 100,000 keys `key_00000 .. key_99999`, uniform;
//! - `value`: a double in [0, 100000) with exactly three decimals;
//! - `ts`: ms, [`TS_START`] plus the record's index (one event per ms).

use crate::write::{hex, u64_dec, u64_dec_padded};
use crate::WorkloadSpec;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The first `ts` (2023-11-14T22:13:20Z).
pub const TS_START: u64 = 1_700_000_000_000;
/// The number of distinct keys.
pub const KEYS: u64 = 100_000;

#[derive(Debug, Clone)]
pub(crate) struct Small {
    rng: ChaCha8Rng,
    produced: u64,
}

impl Small {
    pub(crate) fn new(spec: &WorkloadSpec) -> Self {
        Self { rng: ChaCha8Rng::seed_from_u64(spec.seed), produced: 0 }
    }

    pub(crate) fn write_next(&mut self, out: &mut Vec<u8>) {
        let (a, b) = (self.rng.next_u64(), self.rng.next_u64());
        let draw = self.rng.next_u64();
        out.extend_from_slice(b"{\"id\":\"");
        hex(out, a >> 32, 8);
        out.push(b'-');
        hex(out, a >> 16, 4);
        out.extend_from_slice(b"-4");
        hex(out, a, 3);
        out.push(b'-');
        hex(out, 8 | (b >> 62), 1);
        hex(out, b >> 48, 3);
        out.push(b'-');
        hex(out, b, 12);
        out.extend_from_slice(b"\",\"key\":\"key_");
        u64_dec_padded(out, ((draw & 0xffff_ffff) * KEYS) >> 32, 5);
        out.extend_from_slice(b"\",\"value\":");
        let milli = ((draw >> 32) * 100_000_000) >> 32;
        u64_dec(out, milli / 1000);
        out.push(b'.');
        u64_dec_padded(out, milli % 1000, 3);
        out.extend_from_slice(b",\"ts\":");
        u64_dec(out, TS_START + self.produced);
        out.push(b'}');
        self.produced += 1;
    }

    pub(crate) fn produced(&self) -> u64 {
        self.produced
    }
}
