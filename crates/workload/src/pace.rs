//! [`Pacer`]: how many records a generator driven at a target rate should have produced by a
//! given moment (the runtime's `gen:bullet?rate=20000` source uses it between batches).

use std::time::{Duration, Instant};

/// Paces a generator at `rate` records per second from `start`: the driver asks
/// [`Pacer::due`] how many records should exist by now, produces the difference, and sleeps
/// until [`Pacer::when`] the next one is due.
#[derive(Debug, Clone, Copy)]
pub struct Pacer {
    rate: f64,
    start: Instant,
}

impl Pacer {
    /// A pacer at `rate` records per second (must be positive and finite) starting at `start`.
    pub fn new(rate: f64, start: Instant) -> Self {
        Self { rate, start }
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Total number of records due by `now`: `floor(rate × elapsed)`, plus the first one at once.
    pub fn due(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.start).as_secs_f64();
        (elapsed * self.rate).floor() as u64 + 1
    }

    /// When record number `n` (0-based) is due.
    pub fn when(&self, n: u64) -> Instant {
        self.start + Duration::from_secs_f64(n as f64 / self.rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_follows_the_rate() {
        let t0 = Instant::now();
        let p = Pacer::new(20_000.0, t0);
        assert_eq!(p.due(t0), 1);
        assert_eq!(p.due(t0 + Duration::from_millis(1)), 21);
        assert_eq!(p.due(t0 + Duration::from_secs(3)), 60_001);
        assert_eq!(p.when(20_000), t0 + Duration::from_secs(1));
        // A moment before the start is not an underflow.
        assert_eq!(Pacer::new(5.0, t0 + Duration::from_secs(1)).due(t0), 1);
    }
}
