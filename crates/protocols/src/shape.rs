//! What the three parsers share: building a record of the protocol's shape from its own parts
//! and the line's tags and fields (reserved names and duplicates, as the crate doc says), and
//! reading the numbers the protocols write.

use crate::ProtocolError;
use needle_record::{Record, Value};
use std::collections::HashSet;

/// A record: the protocol's `lead` part (its name), the line's tags and fields (`user`, in line
/// order), then its `trail` parts (value, timestamp). A user name equal to one of the
/// protocol's own gets `_` before it until it is free; a user name given twice is an error.
pub(crate) fn build(
    protocol: &'static str,
    lead: (&'static str, Value),
    user: Vec<(String, Value)>,
    trail: &[(&'static str, Value)],
) -> Result<Record, ProtocolError> {
    let mut seen: HashSet<&str> = HashSet::with_capacity(user.len());
    for (name, _) in &user {
        if !seen.insert(name.as_str()) {
            return Err(ProtocolError::DuplicateKey { protocol, key: name.clone() });
        }
    }
    let reserved = |name: &str| name == lead.0 || trail.iter().any(|(own, _)| *own == name);
    let mut taken: HashSet<String> = seen.iter().map(|s| (*s).to_owned()).collect();
    let mut record = Record::new();
    record.insert(lead.0, lead.1);
    for (name, value) in user {
        if reserved(&name) {
            let mut renamed = format!("_{name}");
            while reserved(&renamed) || taken.contains(&renamed) {
                renamed.insert(0, '_');
            }
            taken.insert(renamed.clone());
            record.insert(renamed, value);
        } else {
            record.insert(name, value);
        }
    }
    for (name, value) in trail {
        record.insert(*name, value.clone());
    }
    Ok(record)
}

/// An optional `-` then one or more ASCII digits.
pub(crate) fn is_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A finite decimal number (`1`, `-1.5`, `.5`, `6.02e23`): digits, point, sign and exponent
/// only, so Rust's `inf` and `NaN` spellings are refused with the non-finite results.
pub(crate) fn finite_float(text: &str) -> Option<f64> {
    let plain = !text.is_empty()
        && text.bytes().any(|b| b.is_ascii_digit())
        && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-'));
    plain.then(|| text.parse::<f64>().ok()).flatten().filter(|v| v.is_finite())
}

/// Whole seconds since the epoch as milliseconds, if they fit.
pub(crate) fn seconds_to_ms(seconds: i64) -> Option<i64> {
    seconds.checked_mul(1000)
}
