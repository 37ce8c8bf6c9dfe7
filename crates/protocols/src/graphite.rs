//! Graphite's plaintext protocol: `path value [timestamp]`, the path maybe tagged
//! (`disk.used;host=a;dc=x`), turned into `{"path": ..., <tags>..., "value": ..., "timestamp": ms}`.
//!
//! As carbon reads it:
//! - the value is a floating point number (a DOUBLE); `nan` and infinities are refused.
//! - the timestamp is in seconds since the epoch, maybe with a fraction (floored to
//!   milliseconds); `-1`, or none, means now (the arrival time).
//! - a tagged path is its name, then `;key=value` pairs: `path` is the name alone, each tag a
//!   field. A tag is split at its first `=`; neither part may be empty, nor a key be given twice.
//!
//! Leniency: carbon checks the characters of tag names and values (no `;!^=` in a key, no `~`
//! starting a value); needle keeps them as given.

use crate::shape::{build, finite_float, is_integer, seconds_to_ms};
use crate::ProtocolError;
use needle_record::{Record, Value};

const PROTOCOL: &str = "graphite";

fn malformed(reason: impl Into<String>) -> ProtocolError {
    ProtocolError::malformed(PROTOCOL, reason)
}

/// One line (trimmed, not empty) as a record; `now_ms` stands for a timestamp of `-1` or none.
pub fn parse(line: &str, now_ms: i64) -> Result<Record, ProtocolError> {
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
    let value =
        finite_float(value).ok_or_else(|| malformed(format!("'{value}' is not a number")))?;
    let mut parts = path.split(';');
    let name = parts.next().unwrap_or_default();
    if name.is_empty() {
        return Err(malformed("a tagged path with no name"));
    }
    let mut tags = Vec::new();
    for tag in parts {
        match tag.split_once('=') {
            Some((key, tag_value)) if !key.is_empty() && !tag_value.is_empty() => {
                tags.push((key.to_owned(), Value::String(tag_value.to_owned())));
            }
            _ => return Err(malformed(format!("'{tag}' is not a tag (key=value)"))),
        }
    }
    let trail = [("value", Value::Double(value)), ("timestamp", Value::Long(timestamp))];
    build(PROTOCOL, ("path", Value::String(name.to_owned())), tags, &trail)
}

/// Seconds since the epoch, maybe with a fraction, as milliseconds (floored).
fn timestamp_ms(text: &str) -> Result<i64, ProtocolError> {
    let bad = || malformed(format!("'{text}' is not a timestamp (seconds, or -1 for now)"));
    if is_integer(text) {
        return seconds_to_ms(text.parse().map_err(|_| bad())?).ok_or_else(bad);
    }
    let seconds = finite_float(text).ok_or_else(bad)?;
    let ms = (seconds * 1000.0).floor();
    // i64's range as f64: the upper end rounds up to 2^63, which does not fit
    if !(-9.223_372_036_854_775e18..9.223_372_036_854_775e18).contains(&ms) {
        return Err(bad());
    }
    Ok(ms as i64)
}
