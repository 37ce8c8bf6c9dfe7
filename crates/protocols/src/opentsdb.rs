//! OpenTSDB's telnet-style `put` lines: `put <metric> <timestamp> <value> <tagk1=tagv1 ...>`,
//! turned into `{"metric": ..., <tags>..., "value": ..., "timestamp": ms}`.
//!
//! As OpenTSDB reads them:
//! - the timestamp is in seconds or in milliseconds, told apart by its size: a number that fits
//!   in 32 bits (10 digits until 2106) is seconds, a larger one milliseconds (13 digits; more is
//!   refused). `1364410924.250`, ten digits, a point and three, is milliseconds too. It must be
//!   positive: OpenTSDB has no point without a time.
//! - the value is an integer (a LONG) when written without a point or an exponent, else a
//!   floating point number (a DOUBLE); `NaN` and infinities are refused.
//! - tags are `key=value`, split at the first `=`, neither part empty, no key twice.
//!
//! Leniencies: OpenTSDB wants at least one tag and checks the characters of names; needle keeps
//! a point without tags and any characters but whitespace and the first `=`. Any command but
//! `put` (`version`, `stats`, ...) is not a point: a malformed line.

use crate::point::{Point, PointValue};
use crate::shape::{finite_float, integer, is_integer, seconds_to_ms};
use crate::ProtocolError;
use needle_record::Record;

const PROTOCOL: &str = "opentsdb";

/// The largest timestamp read as seconds: above it, milliseconds.
const MAX_SECONDS: i64 = u32::MAX as i64;
/// The largest timestamp in milliseconds OpenTSDB takes (13 digits).
const MAX_MILLISECONDS: i64 = 9_999_999_999_999;

fn malformed(reason: impl Into<String>) -> ProtocolError {
    ProtocolError::malformed(PROTOCOL, reason)
}

/// One line (trimmed, not empty) as a record.
pub fn parse(line: &str) -> Result<Record, ProtocolError> {
    let mut point = Point::new();
    parse_into(line, &mut point)?;
    point.to_record()
}

/// One line (trimmed, not empty) into `point`.
pub fn parse_into(line: &str, point: &mut Point) -> Result<(), ProtocolError> {
    point.start(PROTOCOL);
    let mut words = line.split_ascii_whitespace();
    match words.next() {
        Some("put") => {}
        Some(other) => return Err(malformed(format!("'{other}' is not a put command"))),
        None => return Err(malformed("an empty line")),
    }
    let (Some(metric), Some(timestamp), Some(value)) = (words.next(), words.next(), words.next())
    else {
        return Err(malformed("put needs a metric, a timestamp and a value"));
    };
    let timestamp = timestamp_ms(timestamp)?;
    let value = if let Some(n) = integer(value) {
        PointValue::Long(n)
    } else if is_integer(value) {
        return Err(malformed(format!("{value} is out of the integer range")));
    } else {
        PointValue::Double(
            finite_float(value).ok_or_else(|| malformed(format!("'{value}' is not a number")))?,
        )
    };
    point.set_lead("metric", metric);
    point.push_tags(words)?;
    point.end_series();
    point.push_trail("value", value);
    point.push_trail("timestamp", PointValue::Long(timestamp));
    Ok(())
}

/// A put's timestamp as epoch milliseconds (see the module doc).
fn timestamp_ms(text: &str) -> Result<i64, ProtocolError> {
    let bad = || malformed(format!("'{text}' is not a timestamp (seconds or milliseconds)"));
    if let Some((seconds, millis)) = text.split_once('.') {
        let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(seconds, 10) || !digits(millis, 3) {
            return Err(bad());
        }
        let seconds: i64 = seconds.parse().map_err(|_| bad())?;
        let millis: i64 = millis.parse().map_err(|_| bad())?;
        return Ok(seconds * 1000 + millis);
    }
    let n = integer(text).filter(|_| !text.starts_with('-')).ok_or_else(bad)?;
    match n {
        0 => Err(bad()),
        1..=MAX_SECONDS => seconds_to_ms(n).ok_or_else(bad),
        ..=MAX_MILLISECONDS => Ok(n),
        _ => Err(bad()),
    }
}
