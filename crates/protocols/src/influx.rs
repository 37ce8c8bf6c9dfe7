//! InfluxDB line protocol: `measurement[,tag=value...] field=value[,field=value...] [timestamp]`,
//! one point a line, turned into `{"measurement": ..., <tags>..., <fields>..., "timestamp": ms}`.
//!
//! As InfluxDB documents it:
//! - a backslash escapes a comma or a space in the measurement; a comma, `=` or a space in tag
//!   keys, tag values and field keys; a `"` in a string field value; and a backslash itself
//!   everywhere (`\\` is one backslash). A backslash before anything else is a literal backslash.
//! - field values: floats (`1`, `-1.5`, `1e3`: a DOUBLE), integers `12i` (a LONG), unsigned
//!   integers `12u` (a LONG; above the largest LONG, a DOUBLE, the nearest one), strings in
//!   double quotes (commas, spaces and `=` inside need no escape), booleans `t T true True TRUE`
//!   and `f F false False FALSE`.
//! - the timestamp is optional (a point without one gets its arrival time), an integer in the
//!   writer's precision (`ns` unless said otherwise; `us`, `ms`, `s`), floored to milliseconds.
//! - a line starting with `#` is a comment: no point, and not malformed.
//!
//! Leniencies, where InfluxDB's servers differ among themselves: more than one space between
//! the parts, and whitespace around the line, are accepted. Only a space separates the parts (a
//! tab is part of the text around it).

use crate::point::{Point, PointValue};
use crate::shape::{finite_float, integer, is_integer, seconds_to_ms};
use crate::{Precision, ProtocolError};
use needle_record::Record;
use std::borrow::Cow;

const PROTOCOL: &str = "influx";

/// Bytes a backslash escapes in the measurement, and in tag keys, tag values and field keys.
const MEASUREMENT_ESCAPES: &[u8] = b", \\";
const KEY_ESCAPES: &[u8] = b",= \\";

/// Where [`scan`] stops: the bytes that end a part, and a backslash (an escape), as a table a
/// byte is looked up in once (a search of the stop bytes for every byte of the line was a
/// tenth of a line protocol source's time).
struct Stops {
    table: [bool; 256],
}

impl Stops {
    const fn new(bytes: &[u8]) -> Stops {
        let mut table = [false; 256];
        table[b'\\' as usize] = true;
        let mut i = 0;
        while i < bytes.len() {
            table[bytes[i] as usize] = true;
            i += 1;
        }
        Stops { table }
    }
}

/// The end of the measurement, and of a tag key, tag value or field key.
static MEASUREMENT_END: Stops = Stops::new(b", ");
static KEY_END: Stops = Stops::new(b",= ");

fn malformed(reason: impl Into<String>) -> ProtocolError {
    ProtocolError::malformed(PROTOCOL, reason)
}

/// One line (trimmed, not empty) as a record; `None` for a comment.
pub fn parse(
    line: &str,
    precision: Precision,
    now_ms: i64,
) -> Result<Option<Record>, ProtocolError> {
    let mut point = Point::new();
    if !parse_into(line, precision, now_ms, &mut point)? {
        return Ok(None);
    }
    point.to_record().map(Some)
}

/// One line (trimmed, not empty) into `point`; false for a comment.
pub fn parse_into(
    line: &str,
    precision: Precision,
    now_ms: i64,
    point: &mut Point,
) -> Result<bool, ProtocolError> {
    point.start(PROTOCOL);
    if line.starts_with('#') {
        return Ok(false);
    }
    let bytes = line.as_bytes();
    let mut pos = series(line, point)?;
    skip_spaces(bytes, &mut pos);
    if pos >= bytes.len() {
        return Err(malformed("no field set"));
    }
    loop {
        let key = scan(line, &mut pos, &KEY_END, KEY_ESCAPES);
        if key.is_empty() {
            return Err(malformed("a field with no key"));
        }
        if bytes.get(pos) != Some(&b'=') {
            return Err(malformed(format!("field '{key}' has no '=' and value")));
        }
        pos += 1;
        let value = field_value(line, &mut pos, &key)?;
        point.push_user(&key, value.as_point_value());
        match bytes.get(pos) {
            Some(b',') => pos += 1,
            Some(b' ') | None => break,
            Some(_) => return Err(malformed("a field value runs into other text")),
        }
    }
    skip_spaces(bytes, &mut pos);
    let timestamp =
        if pos >= bytes.len() { now_ms } else { timestamp_ms(&line[pos..], precision)? };
    point.push_trail("timestamp", PointValue::Long(timestamp));
    Ok(true)
}

/// Reads the measurement and the tags into `point`; returns where they end. They end at the
/// line's first space unless an escaped space comes first: a series part that ends there was
/// parsed from those bytes alone, and is looked up by them among the series the point kept, so
/// a series an agent sends again is not parsed again (same bytes, same measurement and tags).
/// A series part that does not parse is not kept.
fn series(line: &str, point: &mut Point) -> Result<usize, ProtocolError> {
    let bytes = line.as_bytes();
    let end = memchr::memchr(b' ', bytes).unwrap_or(bytes.len());
    let part = &bytes[..end];
    if point.series_from(part) {
        return Ok(end);
    }
    let pos = measurement_and_tags(line, point)?;
    if pos == end {
        point.keep_series(part);
    } else {
        point.end_series();
    }
    Ok(pos)
}

/// Reads the measurement and the tags into `point`; returns where they end.
fn measurement_and_tags(line: &str, point: &mut Point) -> Result<usize, ProtocolError> {
    let bytes = line.as_bytes();
    let mut pos = 0;
    let measurement = scan(line, &mut pos, &MEASUREMENT_END, MEASUREMENT_ESCAPES);
    if measurement.is_empty() {
        return Err(malformed("no measurement"));
    }
    point.set_lead("measurement", &measurement);
    while bytes.get(pos) == Some(&b',') {
        pos += 1;
        let key = scan(line, &mut pos, &KEY_END, KEY_ESCAPES);
        if bytes.get(pos) != Some(&b'=') {
            return Err(malformed(format!("tag '{key}' has no '=' and value")));
        }
        pos += 1;
        let value = scan(line, &mut pos, &KEY_END, KEY_ESCAPES);
        if bytes.get(pos) == Some(&b'=') {
            return Err(malformed(format!("tag '{key}': an unescaped '=' in its value")));
        }
        if key.is_empty() || value.is_empty() {
            return Err(malformed(format!("a tag needs a key and a value ('{key}={value}')")));
        }
        point.push_user(&key, PointValue::Text(&value));
    }
    Ok(pos)
}

/// A field's value: a string's text unescaped, or its number or boolean.
enum FieldValue<'a> {
    Text(Cow<'a, str>),
    Double(f64),
    Long(i64),
    Bool(bool),
}

impl FieldValue<'_> {
    fn as_point_value(&self) -> PointValue<'_> {
        match self {
            FieldValue::Text(text) => PointValue::Text(text),
            FieldValue::Double(d) => PointValue::Double(*d),
            FieldValue::Long(l) => PointValue::Long(*l),
            FieldValue::Bool(b) => PointValue::Bool(*b),
        }
    }
}

/// Reads from `pos` up to the first unescaped byte of `stops` (or the end), unescaping the
/// bytes of `escapes` that follow a backslash.
fn scan<'a>(line: &'a str, pos: &mut usize, stops: &Stops, escapes: &[u8]) -> Cow<'a, str> {
    let bytes = line.as_bytes();
    let start = *pos;
    let end = bytes[start..]
        .iter()
        .position(|b| stops.table[usize::from(*b)])
        .map_or(bytes.len(), |at| start + at);
    *pos = end;
    // (split at ASCII bytes, so at characters' boundaries)
    let plain = &line[start..end];
    if bytes.get(end) != Some(&b'\\') {
        // no escape (nearly every name and tag): the text as it is
        return Cow::Borrowed(plain);
    }
    let mut out = plain.as_bytes().to_vec();
    while let Some(&b) = bytes.get(*pos) {
        if b == b'\\' {
            match bytes.get(*pos + 1) {
                Some(&next) if escapes.contains(&next) => {
                    out.push(next);
                    *pos += 2;
                }
                _ => {
                    out.push(b'\\');
                    *pos += 1;
                }
            }
            continue;
        }
        // (a backslash was taken above: the table's other bytes are the stops)
        if stops.table[usize::from(b)] {
            break;
        }
        out.push(b);
        *pos += 1;
    }
    // Only ASCII bytes were split off or joined, so the text is still UTF-8.
    Cow::Owned(String::from_utf8(out).expect("unescaping ASCII keeps UTF-8 whole"))
}

fn skip_spaces(bytes: &[u8], pos: &mut usize) {
    while bytes.get(*pos) == Some(&b' ') {
        *pos += 1;
    }
}

/// A field's value from `pos`, leaving `pos` after it.
fn field_value<'a>(
    line: &'a str,
    pos: &mut usize,
    key: &str,
) -> Result<FieldValue<'a>, ProtocolError> {
    let bytes = line.as_bytes();
    if bytes.get(*pos) == Some(&b'"') {
        *pos += 1;
        let start = *pos;
        // no escape inside (nearly every string): the text as it is
        if let Some(end) = bytes[start..].iter().position(|b| matches!(b, b'"' | b'\\')) {
            if bytes[start + end] == b'"' {
                *pos = start + end + 1;
                return Ok(FieldValue::Text(Cow::Borrowed(&line[start..start + end])));
            }
        }
        let mut out = Vec::new();
        loop {
            match bytes.get(*pos) {
                None => {
                    return Err(malformed(format!("field '{key}': a string with no closing '\"'")))
                }
                Some(b'"') => {
                    *pos += 1;
                    break;
                }
                Some(b'\\') if matches!(bytes.get(*pos + 1), Some(b'"' | b'\\')) => {
                    out.push(bytes[*pos + 1]);
                    *pos += 2;
                }
                Some(&b) => {
                    out.push(b);
                    *pos += 1;
                }
            }
        }
        let text = String::from_utf8(out).expect("unescaping ASCII keeps UTF-8 whole");
        return Ok(FieldValue::Text(Cow::Owned(text)));
    }
    let start = *pos;
    while let Some(&b) = bytes.get(*pos) {
        if matches!(b, b',' | b' ') {
            break;
        }
        *pos += 1;
    }
    let raw = &line[start..*pos];
    let bad = || malformed(format!("field '{key}': '{raw}' is not a line protocol value"));
    Ok(match raw {
        "" => return Err(malformed(format!("field '{key}' has no value"))),
        "t" | "T" | "true" | "True" | "TRUE" => FieldValue::Bool(true),
        "f" | "F" | "false" | "False" | "FALSE" => FieldValue::Bool(false),
        _ => {
            if let Some(digits) = raw.strip_suffix('i') {
                if !is_integer(digits) {
                    return Err(bad());
                }
                FieldValue::Long(digits.parse().map_err(|_| {
                    malformed(format!("field '{key}': {raw} is out of the integer range"))
                })?)
            } else if let Some(digits) = raw.strip_suffix('u') {
                if !is_integer(digits) || digits.starts_with('-') {
                    return Err(bad());
                }
                let n: u64 = digits.parse().map_err(|_| {
                    malformed(format!("field '{key}': {raw} is out of the unsigned range"))
                })?;
                match i64::try_from(n) {
                    Ok(n) => FieldValue::Long(n),
                    Err(_) => FieldValue::Double(n as f64),
                }
            } else {
                FieldValue::Double(finite_float(raw).ok_or_else(bad)?)
            }
        }
    })
}

/// The timestamp's text in `precision`, as epoch milliseconds (floored).
fn timestamp_ms(text: &str, precision: Precision) -> Result<i64, ProtocolError> {
    let bad =
        || malformed(format!("'{text}' is not a timestamp (an integer, in {})", precision.name()));
    let n = integer(text).ok_or_else(bad)?;
    match precision {
        Precision::Nanoseconds => Ok(n.div_euclid(1_000_000)),
        Precision::Microseconds => Ok(n.div_euclid(1_000)),
        Precision::Milliseconds => Ok(n),
        Precision::Seconds => seconds_to_ms(n).ok_or_else(bad),
    }
}
