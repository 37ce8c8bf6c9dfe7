//! Windows: when a running query emits, and what each emission covers. Pure bookkeeping on the
//! injected clock (`now_ms` passed in); the join side ([`super::join`]) owns one [`WindowClock`].
//!
//! | BQL | [`WindowPlan`] | emits | covers |
//! |---|---|---|---|
//! | none | `None` | once, when the query ends | everything |
//! | `TUMBLING(n, TIME)`, `EVERY(n, TIME, FIRST, n, TIME)` | `Time { every_ms: n, include_ms: n, additive: false }` | at start + n, start + 2n, ... | that interval's data (reset after each) |
//! | `EVERY(n, TIME, FIRST, m, TIME)`, m < n | `Time { include_ms: m, .. }` | as above | records arriving in the first m ms of each interval; later ones are dropped (counted) |
//! | `EVERY(n, TIME, ALL)` | `Time { additive: true, .. }` | as above | everything since the start (never reset) |
//! | `TUMBLING(n, RECORD)`, `EVERY(n, RECORD, FIRST, n, RECORD)` | `Record { every: n, include: n }` | each n-th record arriving at the join | those n records |
//! | `EVERY(n, RECORD, FIRST, m, RECORD)`, m < n | `Record { include: m, .. }` | each n-th record | the first m of them |
//!
//! Time windows follow a fixed schedule from the query's start (Bullet's `nextCloseTime +=
//! windowLength`): a late tick emits what arrived so far and the schedule skips the boundaries it
//! missed, so windows never drift. Not supported (an [`EngineError::Unsupported`] at compile
//! time): FIRST longer than EVERY (overlapping windows), FIRST in a different unit than EVERY,
//! and `EVERY(n, RECORD, ALL)` (Bullet has neither).

use crate::EngineError;
use needle_query::ast::{Include, WindowKind, WindowUnit};

/// A window, normalized from [`WindowKind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowPlan {
    /// One emission when the query ends.
    None,
    /// Emit every `every_ms`; keep records arriving in the first `include_ms` of each window;
    /// `additive`: cover everything since the start.
    Time { every_ms: u64, include_ms: u64, additive: bool },
    /// Emit after every `every` records arriving at the join, keeping the first `include`.
    Record { every: u64, include: u64 },
}

impl WindowPlan {
    pub fn from_kind(kind: Option<&WindowKind>) -> Result<Self, EngineError> {
        let unsupported = |what: &str| Err(EngineError::Unsupported(format!("window {what}")));
        let Some(kind) = kind else { return Ok(WindowPlan::None) };
        let (every, unit, include) = match *kind {
            WindowKind::Tumbling { every, unit } => {
                (every, unit, Include::First { count: every, unit })
            }
            WindowKind::Every { every, unit, include } => (every, unit, include),
        };
        if every == 0 {
            return unsupported("of size 0");
        }
        match (unit, include) {
            (WindowUnit::Time, Include::All) => {
                Ok(WindowPlan::Time { every_ms: every, include_ms: every, additive: true })
            }
            (WindowUnit::Record, Include::All) => unsupported("EVERY(n, RECORD, ALL)"),
            (_, Include::First { unit: first_unit, .. }) if first_unit != unit => {
                unsupported("whose FIRST unit differs from its EVERY unit")
            }
            (_, Include::First { count, .. }) if count > every || count == 0 => {
                unsupported("whose FIRST is 0 or longer than its EVERY (overlapping windows)")
            }
            (WindowUnit::Time, Include::First { count, .. }) => {
                Ok(WindowPlan::Time { every_ms: every, include_ms: count, additive: false })
            }
            (WindowUnit::Record, Include::First { count, .. }) => {
                Ok(WindowPlan::Record { every, include: count })
            }
        }
    }

    /// Bullet's window names.
    pub fn name(&self) -> &'static str {
        match self {
            WindowPlan::None => "Windowless",
            WindowPlan::Time { additive: true, .. } => "Additive Tumbling",
            WindowPlan::Time { .. } => "Tumbling",
            WindowPlan::Record { .. } => "Sliding",
        }
    }

    /// True when the state is reset after each emission.
    pub fn resets(&self) -> bool {
        !matches!(self, WindowPlan::Time { additive: true, .. })
    }
}

/// Whether a record that just arrived at the join belongs to the current window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// Keep it (false: it falls outside the window's FIRST part; drop it).
    pub keep: bool,
    /// This arrival completes a record window: emit now.
    pub closes: bool,
}

/// The current window: its number, when it started, when it is due.
#[derive(Debug, Clone)]
pub struct WindowClock {
    plan: WindowPlan,
    start_ms: i64,
    number: u64,
    window_start_ms: i64,
    next_close_ms: Option<i64>,
    arrived: u64,
}

impl WindowClock {
    pub fn new(plan: WindowPlan, start_ms: i64) -> Self {
        let next_close_ms = match plan {
            WindowPlan::Time { every_ms, .. } => Some(start_ms.saturating_add(every_ms as i64)),
            _ => None,
        };
        Self { plan, start_ms, number: 1, window_start_ms: start_ms, next_close_ms, arrived: 0 }
    }

    pub fn plan(&self) -> WindowPlan {
        self.plan
    }

    /// 1-based number of the current window.
    pub fn number(&self) -> u64 {
        self.number
    }

    pub fn start_ms(&self) -> i64 {
        self.start_ms
    }

    /// When the current window started.
    pub fn window_start_ms(&self) -> i64 {
        self.window_start_ms
    }

    /// When the current time window is due; `None` for other windows.
    pub fn expected_emit_ms(&self) -> Option<i64> {
        self.next_close_ms
    }

    /// Records that arrived in the current window (kept or not).
    pub fn arrived(&self) -> u64 {
        self.arrived
    }

    /// Counts one record arriving at the join at `now_ms`.
    pub fn admit(&mut self, now_ms: i64) -> Admission {
        self.arrived += 1;
        match self.plan {
            WindowPlan::None => Admission { keep: true, closes: false },
            WindowPlan::Time { include_ms, .. } => Admission {
                keep: now_ms.saturating_sub(self.window_start_ms) < include_ms as i64,
                closes: false,
            },
            WindowPlan::Record { every, include } => {
                Admission { keep: self.arrived <= include, closes: self.arrived >= every }
            }
        }
    }

    /// True when a time window is due at `now_ms`.
    pub fn due(&self, now_ms: i64) -> bool {
        self.next_close_ms.is_some_and(|t| now_ms >= t)
    }

    /// Starts the next window after an emission at `now_ms`. A time window that closed early
    /// (a full RAW window) keeps its schedule; a late one skips the boundaries it missed.
    pub fn advance(&mut self, now_ms: i64) {
        self.number += 1;
        self.arrived = 0;
        if let (WindowPlan::Time { every_ms, .. }, Some(next)) = (self.plan, self.next_close_ms) {
            let every = every_ms as i64;
            if now_ms >= next {
                let missed = (now_ms - next) / every;
                self.window_start_ms = next + missed * every;
                self.next_close_ms = Some(self.window_start_ms + every);
            } else {
                self.window_start_ms = now_ms;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(kind: WindowKind) -> WindowPlan {
        WindowPlan::from_kind(Some(&kind)).unwrap()
    }

    #[test]
    fn normalizes_the_window_kinds() {
        use WindowUnit::*;
        assert_eq!(WindowPlan::from_kind(None).unwrap(), WindowPlan::None);
        assert_eq!(
            plan(WindowKind::Tumbling { every: 1000, unit: Time }),
            WindowPlan::Time { every_ms: 1000, include_ms: 1000, additive: false }
        );
        assert_eq!(
            plan(WindowKind::Every {
                every: 5,
                unit: Record,
                include: Include::First { count: 5, unit: Record }
            }),
            WindowPlan::Record { every: 5, include: 5 }
        );
        assert_eq!(
            plan(WindowKind::Every { every: 2000, unit: Time, include: Include::All }).name(),
            "Additive Tumbling"
        );
        for bad in [
            WindowKind::Every { every: 5, unit: Record, include: Include::All },
            WindowKind::Every {
                every: 5,
                unit: Record,
                include: Include::First { count: 6, unit: Record },
            },
            WindowKind::Every {
                every: 5,
                unit: Time,
                include: Include::First { count: 5, unit: Record },
            },
        ] {
            assert!(WindowPlan::from_kind(Some(&bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn time_windows_keep_their_schedule() {
        let mut c = WindowClock::new(
            WindowPlan::Time { every_ms: 1000, include_ms: 400, additive: false },
            10_000,
        );
        assert!(!c.due(10_999));
        assert!(c.admit(10_399).keep);
        assert!(!c.admit(10_400).keep);
        assert!(c.due(11_000));
        c.advance(11_050);
        assert_eq!((c.number(), c.expected_emit_ms()), (2, Some(12_000)));
        assert!(c.admit(11_100).keep);
        // a tick 2.5 windows late emits once and skips the missed boundaries
        c.advance(14_500);
        assert_eq!((c.number(), c.expected_emit_ms()), (3, Some(15_000)));
        assert!(c.admit(14_300).keep);
        // an early close (a full RAW window) keeps the schedule
        c.advance(14_950);
        assert_eq!(c.expected_emit_ms(), Some(15_000));
    }

    #[test]
    fn record_windows_close_on_the_nth_arrival_and_keep_the_first_m() {
        let mut c = WindowClock::new(WindowPlan::Record { every: 3, include: 2 }, 0);
        let got: Vec<_> = (0..3).map(|_| c.admit(0)).collect();
        assert_eq!(got.iter().map(|a| a.keep).collect::<Vec<_>>(), [true, true, false]);
        assert_eq!(got.iter().map(|a| a.closes).collect::<Vec<_>>(), [false, false, true]);
        c.advance(0);
        assert_eq!((c.number(), c.arrived()), (2, 0));
        assert!(!c.due(i64::MAX));
    }
}
