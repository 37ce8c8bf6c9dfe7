//! Graphite's plaintext protocol: `path value [timestamp]`, the path maybe tagged
//! (`disk.used;host=a;dc=x`), turned into `{"path": ..., <tags>..., "value": ..., "timestamp": ms}`.
//!
//! As carbon reads it:
//! - the value is a floating point number (a DOUBLE). A `nan` value (any case, maybe signed:
//!   collectd's `write_graphite` writes `nan` for a rate's first reading, and for any value it
//!   has none of) is no point: the line is skipped, not counted as malformed, as carbon drops
//!   NaN values without a word. Infinities are refused (carbon would keep them; a record's JSON
//!   cannot hold them).
//! - the timestamp is in seconds since the epoch, maybe with a fraction (floored to
//!   milliseconds); `-1`, or none, means now (the arrival time).
//! - a tagged path is its name, then `;key=value` pairs: `path` is the name alone, each tag a
//!   field. A tag is split at its first `=`; neither part may be empty, nor a key be given twice.
//!
//! Leniency: carbon checks the characters of tag names and values (no `;!^=` in a key, no `~`
//! starting a value); needle keeps them as given.

use crate::point::{Point, PointValue};
use crate::shape::{finite_float, integer, is_integer, seconds_to_ms};
use crate::ProtocolError;
use needle_record::Record;

const PROTOCOL: &str = "graphite";

fn malformed(reason: impl Into<String>) -> ProtocolError {
    ProtocolError::malformed(PROTOCOL, reason)
}

/// One line (trimmed, not empty) as a record; `Ok(None)` for a well-formed line whose value is
/// NaN (see the module doc). `now_ms` stands for a timestamp of `-1` or none.
pub fn parse(line: &str, now_ms: i64) -> Result<Option<Record>, ProtocolError> {
    let mut point = Point::new();
    if !parse_into(line, now_ms, &mut point)? {
        return Ok(None);
    }
    point.to_record().map(Some)
}

/// One line (trimmed, not empty) into `point`; false for a well-formed line whose value is NaN.
pub fn parse_into(line: &str, now_ms: i64, point: &mut Point) -> Result<bool, ProtocolError> {
    point.start(PROTOCOL);
    let mut words = line.split_ascii_whitespace();
    let (Some(path), Some(value)) = (words.next(), words.next()) else {
        return Err(malformed("a line needs a path and a value"));
    };
    let timestamp = match words.next() {
        None | Some("-1") => now_ms,
        Some(text) => timestamp_ms(text)?,
    };
    if let Some(extra) = words.next() {
        return Err(malformed(format!("'{extra}' after the timestamp")));
    }
    let value = if is_nan(value) {
        None
    } else {
        Some(finite_float(value).ok_or_else(|| malformed(format!("'{value}' is not a number")))?)
    };
    // the series: the path and its tags, which parse the same from the same bytes (a series
    // a client sends again is taken from the point's kept ones)
    if !point.series_from(path.as_bytes()) {
        let mut parts = path.split(';');
        let name = parts.next().unwrap_or_default();
        if name.is_empty() {
            return Err(malformed("a tagged path with no name"));
        }
        point.set_lead("path", name);
        point.push_tags(parts)?;
        point.keep_series(path.as_bytes());
    }
    let Some(value) = value else {
        // no point, but a line malformed otherwise (its tags too) is still malformed
        point.check()?;
        return Ok(false);
    };
    point.push_trail("value", PointValue::Double(value));
    point.push_trail("timestamp", PointValue::Long(timestamp));
    Ok(true)
}

/// `nan` as carbon's `float()` reads it: any case, maybe signed (C's `printf` writes `-nan`).
fn is_nan(text: &str) -> bool {
    text.strip_prefix(['+', '-']).unwrap_or(text).eq_ignore_ascii_case("nan")
}

/// Seconds since the epoch, maybe with a fraction, as milliseconds (floored).
fn timestamp_ms(text: &str) -> Result<i64, ProtocolError> {
    let bad = || malformed(format!("'{text}' is not a timestamp (seconds, or -1 for now)"));
    if let Some(seconds) = integer(text) {
        return seconds_to_ms(seconds).ok_or_else(bad);
    }
    if is_integer(text) {
        return Err(bad()); // out of range
    }
    let seconds = finite_float(text).ok_or_else(bad)?;
    let ms = (seconds * 1000.0).floor();
    // i64's range as f64: the upper end rounds up to 2^63, which does not fit
    if !(-9.223_372_036_854_775e18..9.223_372_036_854_775e18).contains(&ms) {
        return Err(bad());
    }
    Ok(ms as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nan_value_is_no_point_and_not_malformed_as_carbon_drops_it() {
        // what collectd's write_graphite sends for a rate's first reading
        for line in [
            "needle-test.cpu.0.cpu.user nan 1795840664",
            "a.b -nan 1795840664",
            "a.b NaN",
            "a.b +NAN -1",
            "disk.used;host=a nan 1356998400",
        ] {
            assert_eq!(parse(line, 0), Ok(None), "{line}");
        }
        // the rest of the line is still checked
        for line in ["a.b nan abc", "a.b nan 1 extra", "a;x nan 1", "a;k=1;k=2 nan 1", ";k=v nan 1"]
        {
            assert!(parse(line, 0).is_err(), "{line}");
        }
        // infinities and other words are not numbers
        for value in ["inf", "-inf", "Infinity", "nanx", "nan1", "n"] {
            let err = parse(&format!("a.b {value} 1"), 0).unwrap_err().to_string();
            assert!(err.contains("is not a number"), "{value}: {err}");
        }
        let record = parse("a.b 2.5 1", 0).unwrap().unwrap();
        assert_eq!(record.to_json(), r#"{"path":"a.b","value":2.5,"timestamp":1000}"#);
    }
}
