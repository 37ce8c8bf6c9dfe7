//! The benchmark scenarios of WORKLOADS.md (`needle bench SCENARIO`), one file each. A scenario
//! measures needle and, in the same run, a baseline (a peer, or the bare cost of the same work
//! without needle), and reports both with their ratio, because this machine is shared and
//! absolute figures drift from run to run.

pub mod harness;
pub mod latency;
pub mod matching;

use std::time::Duration;

/// Percentiles of a set of durations, in milliseconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Summary {
    pub runs: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Summary {
    pub fn of(samples: &[Duration]) -> Self {
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        ms.sort_by(f64::total_cmp);
        let at = |q: f64| -> f64 {
            if ms.is_empty() {
                return f64::NAN;
            }
            let rank = ((q * ms.len() as f64).ceil() as usize).clamp(1, ms.len());
            ms[rank - 1]
        };
        Self { runs: ms.len(), p50_ms: at(0.5), p90_ms: at(0.9), p99_ms: at(0.99), max_ms: at(1.0) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let s = Summary::of(&samples);
        assert_eq!((s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms), (50.0, 90.0, 99.0, 100.0));
        assert!(Summary::of(&[]).p50_ms.is_nan());
    }
}
