//! What the three parsers share: building a record of the protocol's shape from its own parts
//! and the line's tags and fields (reserved names and duplicates, as the crate doc says), and
//! reading the numbers the protocols write.

use crate::ProtocolError;
use needle_record::{Record, Value};
use std::collections::HashSet;

/// A record: the protocol's `lead` part (its name), the line's tags and fields (`user`, in line
/// order), then its `trail` parts (value, timestamp). A user name equal to one of the
/// protocol's own gets `_` before it until it is free; a user name given twice is an error.
///
/// Once per point of every protocol, so it hashes nothing of its own: the record's map is made
/// at its size and finds a name given twice as it takes the names in (the map's hash); only a
/// line that uses one of the protocol's own names goes the long way, which renames it.
pub(crate) fn build(
    protocol: &'static str,
    lead: (&'static str, Value),
    user: Vec<(String, Value)>,
    trail: &[(&'static str, Value)],
) -> Result<Record, ProtocolError> {
    let reserved = |name: &str| name == lead.0 || trail.iter().any(|(own, _)| *own == name);
    if user.iter().any(|(name, _)| reserved(name)) {
        return build_renaming(protocol, lead, user, trail);
    }
    let mut fields = needle_record::map_with_capacity(1 + user.len() + trail.len());
    fields.insert(lead.0.to_owned(), lead.1);
    for (name, value) in user {
        let (at, earlier) = fields.insert_full(name, value);
        if earlier.is_some() {
            let key = fields.get_index(at).map(|(k, _)| k.clone()).unwrap_or_default();
            return Err(ProtocolError::DuplicateKey { protocol, key });
        }
    }
    for (name, value) in trail {
        fields.insert((*name).to_owned(), value.clone());
    }
    Ok(Record::from_map(fields))
}

/// [`build`] for a line that uses one of the protocol's own names: duplicates are looked for
/// first, among the names as given, then the reserved ones are renamed.
fn build_renaming(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn user(names: &[&str]) -> Vec<(String, Value)> {
        names.iter().enumerate().map(|(i, n)| ((*n).to_owned(), Value::Long(i as i64))).collect()
    }

    fn names(record: &Record) -> Vec<&str> {
        record.iter().map(|(k, _)| k.as_str()).collect()
    }

    const TRAIL: [(&str, Value); 2] =
        [("value", Value::Double(1.5)), ("timestamp", Value::Long(7))];

    #[test]
    fn names_keep_the_line_order_between_the_lead_and_the_trail() {
        let lead = ("metric", Value::String("m".into()));
        let record = build("p", lead, user(&["host", "dc", "_value"]), &TRAIL).unwrap();
        assert_eq!(names(&record), ["metric", "host", "dc", "_value", "value", "timestamp"]);
        assert_eq!(record.get("dc"), Some(&Value::Long(1)));
    }

    #[test]
    fn a_name_given_twice_is_refused_with_or_without_a_reserved_name() {
        for given in [&["a", "b", "a"][..], &["a", "value", "a"], &["value", "a", "a"]] {
            let lead = ("metric", Value::String("m".into()));
            let error = build("p", lead, user(given), &TRAIL).unwrap_err();
            assert_eq!(error, ProtocolError::DuplicateKey { protocol: "p", key: "a".into() });
        }
    }

    #[test]
    fn a_reserved_name_is_renamed_past_the_names_taken() {
        let lead = ("metric", Value::String("m".into()));
        let record = build("p", lead, user(&["_value", "value", "metric"]), &TRAIL).unwrap();
        assert_eq!(
            names(&record),
            ["metric", "_value", "__value", "_metric", "value", "timestamp"]
        );
        assert_eq!(record.get("__value"), Some(&Value::Long(1)));
    }
}
