//! Resolving the times of a query that looks back (`FROM HISTORY(from[, to])`, `... SINCE
//! from`) into a [`HistoryPlan`].
//!
//! A time is written as:
//! - ms since the epoch: `1600000000000`;
//! - an ISO-8601 string: `'2026-11-24T10:00:00Z'`, with an offset (`'...+02:00'`), fractions of
//!   a second (`'...10:00:00.250Z'`), a time without a zone (taken as UTC), or a date alone
//!   (`'2026-11-24'`, midnight UTC);
//! - a time relative to now: `'-15m'`, `'-2h'`, `'-7d'` (units `ms`, `s`, `m`, `h`, `d`, `w`;
//!   `'now'` is now).
//!
//! The range is `[from, to)`; `to` defaults to now. `from` after `to` is an error (`from` equal
//! to `to` is an empty range, and the query ends at once with an empty result). Times before
//! the epoch are refused, as are times after the year 9999.

use crate::ast::{HistoryClause, TimeBound, TimeLiteral};
use crate::error::QueryError;
use crate::plan::HistoryPlan;
use chrono::{DateTime, NaiveDate, NaiveDateTime};

/// The largest time accepted: the last ms of the year 9999.
const MAX_MS: i64 = 253_402_300_799_999;

const FORMS: &str = "write a time as ms since the epoch (1600000000000), an ISO-8601 string \
                     ('2026-11-24T10:00:00Z') or a time relative to now ('-15m', '-2h', '-7d')";

/// The clause's times, resolved against `now_ms`.
pub fn resolve(clause: &HistoryClause, now_ms: i64) -> Result<HistoryPlan, QueryError> {
    let from_ms = time(&clause.from, now_ms)?;
    let to_ms = match (&clause.to, clause.live) {
        (Some(to), _) => Some(time(to, now_ms)?),
        (None, true) => None,
        (None, false) => Some(now_ms),
    };
    if let Some(to) = to_ms {
        if from_ms > to {
            return Err(QueryError::semantic(
                format!("the range starts after it ends: from {} to {}", iso(from_ms), iso(to)),
                Some(clause.span),
            )
            .with_hint(if clause.to.is_some() {
                "write HISTORY(from, to) with from before to (the range is [from, to))"
            } else {
                "HISTORY(from) reads from `from` up to now: give a time in the past"
            }));
        }
    }
    Ok(HistoryPlan { from_ms, to_ms, live: clause.live, span: clause.span })
}

/// One time, in ms since the epoch.
fn time(bound: &TimeBound, now_ms: i64) -> Result<i64, QueryError> {
    let ms = match &bound.value {
        TimeLiteral::Millis(ms) => Some(*ms),
        TimeLiteral::Text(text) => parse_text(text.trim(), now_ms),
    };
    match ms {
        Some(ms) if (0..=MAX_MS).contains(&ms) => Ok(ms),
        Some(ms) => Err(QueryError::semantic(
            format!("the time {ms} is out of range (before 1970 or after the year 9999)"),
            Some(bound.span),
        )
        .with_hint(FORMS)),
        None => Err(QueryError::semantic("this is not a time needle can read", Some(bound.span))
            .with_hint(FORMS)),
    }
}

fn parse_text(text: &str, now_ms: i64) -> Option<i64> {
    if text.eq_ignore_ascii_case("now") {
        return Some(now_ms);
    }
    if let Some(rest) = text.strip_prefix('-') {
        return relative(rest).and_then(|ms| now_ms.checked_sub(ms));
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(t.timestamp_millis());
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, format) {
            return Some(t.and_utc().timestamp_millis());
        }
    }
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return date.and_hms_opt(0, 0, 0).map(|t| t.and_utc().timestamp_millis());
    }
    None
}

/// `15m` → 900000: a whole number and a unit.
fn relative(text: &str) -> Option<i64> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let n: i64 = number.parse().ok()?;
    let unit_ms = match unit.trim().to_ascii_lowercase().as_str() {
        "ms" => 1,
        "s" | "sec" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        _ => return None,
    };
    n.checked_mul(unit_ms)
}

/// A time as ISO-8601 UTC, for messages.
pub fn iso(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .map_or_else(|| ms.to_string(), |t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
}

/// The wall clock, ms since the epoch.
pub(crate) fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::Span;

    fn bound(value: TimeLiteral) -> TimeBound {
        TimeBound { value, span: Span::new(3, 9) }
    }

    fn text(s: &str) -> TimeBound {
        bound(TimeLiteral::Text(s.into()))
    }

    const NOW: i64 = 1_795_000_000_000;

    #[test]
    fn reads_every_form() {
        assert_eq!(
            time(&bound(TimeLiteral::Millis(1_600_000_000_000)), NOW).unwrap(),
            1_600_000_000_000
        );
        assert_eq!(time(&text("2026-11-24T10:00:00Z"), NOW).unwrap(), 1_795_514_400_000);
        assert_eq!(time(&text("2026-11-24T12:00:00+02:00"), NOW).unwrap(), 1_795_514_400_000);
        assert_eq!(time(&text("2026-11-24T10:00:00.250Z"), NOW).unwrap(), 1_795_514_400_250);
        assert_eq!(time(&text("2026-11-24T10:00:00"), NOW).unwrap(), 1_795_514_400_000);
        assert_eq!(time(&text("2026-11-24"), NOW).unwrap(), 1_795_478_400_000);
        assert_eq!(time(&text("-15m"), NOW).unwrap(), NOW - 900_000);
        assert_eq!(time(&text("-2h"), NOW).unwrap(), NOW - 7_200_000);
        assert_eq!(time(&text("-7d"), NOW).unwrap(), NOW - 604_800_000);
        assert_eq!(time(&text("-1w"), NOW).unwrap(), NOW - 604_800_000);
        assert_eq!(time(&text("-30s"), NOW).unwrap(), NOW - 30_000);
        assert_eq!(time(&text("now"), NOW).unwrap(), NOW);
    }

    #[test]
    fn refuses_what_is_not_a_time_with_its_place_and_the_forms() {
        for bad in ["yesterday", "-15x", "-m", "2026-13-01", "", "15m"] {
            let e = time(&text(bad), NOW).unwrap_err();
            assert_eq!(e.span, Some(Span::new(3, 9)), "{bad}");
            assert!(e.hint.as_deref().unwrap().contains("'-15m'"), "{bad}");
        }
        let e = time(&bound(TimeLiteral::Millis(-5)), NOW).unwrap_err();
        assert!(e.message.contains("out of range"), "{}", e.message);
        let e = time(&bound(TimeLiteral::Millis(MAX_MS + 1)), NOW).unwrap_err();
        assert!(e.message.contains("out of range"), "{}", e.message);
    }

    #[test]
    fn a_range_that_ends_before_it_starts_is_refused_and_an_empty_one_is_not() {
        let clause = |from: i64, to: Option<i64>, live: bool| HistoryClause {
            from: bound(TimeLiteral::Millis(from)),
            to: to.map(|t| bound(TimeLiteral::Millis(t))),
            live,
            span: Span::new(14, 40),
        };
        let e = resolve(&clause(2_000, Some(1_000), false), NOW).unwrap_err();
        assert_eq!(e.span, Some(Span::new(14, 40)));
        assert!(e.message.contains("1970-01-01T00:00:02.000Z"), "{}", e.message);
        let empty = resolve(&clause(1_000, Some(1_000), false), NOW).unwrap();
        assert_eq!((empty.from_ms, empty.to_ms), (1_000, Some(1_000)));
        let open = resolve(&clause(1_000, None, false), NOW).unwrap();
        assert_eq!(open.to_ms, Some(NOW));
        let since = resolve(&clause(1_000, None, true), NOW).unwrap();
        assert_eq!((since.to_ms, since.live), (None, true));
        assert!(resolve(&clause(NOW + 1, None, false), NOW).is_err());
    }
}
