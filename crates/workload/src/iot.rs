//! The `iot` workload: the Akumuli sensor readings at any scale.
//!
//! One record per sensor per minute, minute by minute (all sensors for minute 0, then minute 1):
//! ```text
//! {"ts":1577836800000,"sensor":"sensor_3","group":7,"region":"EMEA","firmware_version":"v1.4.12",
//!  "temp0":21,"temp1":21,...,"temp9":21}
//! ```
//! - `ts` is ms since the epoch, starting at 2020-01-01T00:00:00Z ([`TS_START`]), +60,000 a minute.
//! - Tags are drawn once per sensor: `group` 0–11 (a long), `region` one of APAC, AMER, EMEA,
//!   `firmware_version` `v1.X.Y` with X in 0–9 and Y in 0–19.
//! - Each reading is a random walk that starts at 21.5 and takes one step before every record:
//!   normal sensors step by N(0, 0.05), clamped up to 19 below 19 and reset to 19 at 35 or more;
//!   outlier sensors step by N(1.0, 5.0), with no lower clamp, and reset to -99 on reaching 100.
//!   Readings are written truncated towards zero to an integer.
//! - The outliers are the last sensors: `sensor_{S-n} .. sensor_{S-1}` with
//!   n = [`outlier_count`]`(S)` = min(100, max(1, S / 100)). They are not flagged in the data.

use crate::write::{i64_dec, u64_dec};
use crate::{WorkloadError, WorkloadSpec};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

/// The first `ts`: 2020-01-01T00:00:00Z in ms.
pub const TS_START: u64 = 1_577_836_800_000;
/// Readings per record (`temp0 .. temp9`).
pub const READINGS: usize = 10;
const REGIONS: [&str; 3] = ["APAC", "AMER", "EMEA"];

/// How many of `sensors` sensors are outliers: 100, or 1% when there are fewer than 10,000
/// sensors, and at least one.
pub fn outlier_count(sensors: u64) -> u64 {
    (sensors / 100).clamp(1, 100).min(sensors)
}

/// Whether `sensor_{index}` of `sensors` is an outlier (the outliers are the last ones).
pub fn is_outlier(index: u64, sensors: u64) -> bool {
    index < sensors && index >= sensors - outlier_count(sensors)
}

#[derive(Debug, Clone)]
pub(crate) struct Iot {
    rng: ChaCha8Rng,
    sensors: u64,
    first_outlier: u64,
    /// Per sensor: the JSON between `ts` and the readings (`,"sensor":...,"firmware_version":"..."`).
    tags: Vec<Vec<u8>>,
    /// Per sensor, per reading: the walk's current value.
    walks: Vec<[f64; READINGS]>,
    normal: Normal<f64>,
    outlier: Normal<f64>,
    produced: u64,
}

impl Iot {
    pub(crate) fn new(spec: &WorkloadSpec) -> Result<Self, WorkloadError> {
        let sensors = spec.sensors;
        let count =
            usize::try_from(sensors).ok().filter(|n| *n <= 100_000_000).ok_or_else(|| {
                WorkloadError::Spec(format!("{sensors} sensors is more than 100,000,000"))
            })?;
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
        let pick = |rng: &mut ChaCha8Rng, n: u64| (rng.next_u32() as u64 * n) >> 32;
        let tags = (0..sensors)
            .map(|s| {
                let mut t = Vec::with_capacity(96);
                t.extend_from_slice(b",\"sensor\":\"sensor_");
                u64_dec(&mut t, s);
                t.extend_from_slice(b"\",\"group\":");
                u64_dec(&mut t, pick(&mut rng, 12));
                t.extend_from_slice(b",\"region\":\"");
                t.extend_from_slice(REGIONS[pick(&mut rng, 3) as usize].as_bytes());
                t.extend_from_slice(b"\",\"firmware_version\":\"v1.");
                u64_dec(&mut t, pick(&mut rng, 10));
                t.push(b'.');
                u64_dec(&mut t, pick(&mut rng, 20));
                t.push(b'"');
                t
            })
            .collect();
        Ok(Self {
            rng,
            sensors,
            first_outlier: sensors - outlier_count(sensors),
            tags,
            walks: vec![[21.5; READINGS]; count],
            normal: Normal::new(0.0, 0.05).expect("a valid normal distribution"),
            outlier: Normal::new(1.0, 5.0).expect("a valid normal distribution"),
            produced: 0,
        })
    }

    pub(crate) fn write_next(&mut self, out: &mut Vec<u8>) {
        let minute = self.produced / self.sensors;
        let sensor = self.produced % self.sensors;
        self.produced += 1;
        let s = sensor as usize;
        out.extend_from_slice(b"{\"ts\":");
        u64_dec(out, TS_START + minute * 60_000);
        out.extend_from_slice(&self.tags[s]);
        let outlier = sensor >= self.first_outlier;
        for (r, v) in self.walks[s].iter_mut().enumerate() {
            if outlier {
                *v += self.outlier.sample(&mut self.rng);
                if *v >= 100.0 {
                    *v = -99.0;
                }
            } else {
                *v += self.normal.sample(&mut self.rng);
                if *v < 19.0 || *v >= 35.0 {
                    *v = 19.0;
                }
            }
            out.extend_from_slice(b",\"temp");
            out.push(b'0' + r as u8);
            out.extend_from_slice(b"\":");
            i64_dec(out, v.trunc() as i64);
        }
        out.push(b'}');
    }

    pub(crate) fn produced(&self) -> u64 {
        self.produced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outliers_are_the_last_one_percent_up_to_100() {
        assert_eq!(
            [1, 99, 100, 250, 9_999, 10_000, 100_000].map(outlier_count),
            [1, 1, 1, 2, 99, 100, 100]
        );
        assert!(is_outlier(99, 100) && !is_outlier(98, 100) && !is_outlier(100, 100));
        assert!(is_outlier(0, 1));
        assert!(is_outlier(99_900, 100_000) && !is_outlier(99_899, 100_000));
    }
}
