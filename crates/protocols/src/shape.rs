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

/// [`is_integer`]'s text as an `i64` in one pass; `None` when it is not one or out of range
/// (a caller that must tell the two apart asks [`is_integer`] after). Up to 19 digits (every
/// timestamp in nanoseconds) cannot overflow a `u64`: those are read eight at a time, checked
/// and summed in a few word operations, not a multiply-and-check per digit (a line protocol
/// source's 19-digit timestamps were a tenth of its time).
pub(crate) fn integer(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let (negative, digits) = match bytes.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, bytes),
    };
    if digits.is_empty() {
        return None;
    }
    let n = if digits.len() <= 19 {
        let (head, eights) = digits.split_at(digits.len() % 8);
        let mut n = 0u64;
        for &b in head {
            let digit = b.wrapping_sub(b'0');
            if digit > 9 {
                return None;
            }
            n = n * 10 + u64::from(digit);
        }
        for eight in eights.chunks_exact(8) {
            n = n * 100_000_000 + eight_digits(eight.try_into().expect("eight bytes"))?;
        }
        n
    } else {
        let mut n: u64 = 0;
        for &b in digits {
            let digit = b.wrapping_sub(b'0');
            if digit > 9 {
                return None;
            }
            n = n.checked_mul(10)?.checked_add(u64::from(digit))?;
        }
        n
    };
    if negative {
        // down to -2^63, which is i64::MIN
        (n <= 1 << 63).then(|| (n as i64).wrapping_neg())
    } else {
        i64::try_from(n).ok()
    }
}

/// Eight ASCII digits (the first the most significant) as their value; `None` when a byte is
/// not a digit. Each byte is a digit when its high half is 3 and stays 3 once 6 is added to it
/// (no byte carries into the next); then pairs, fours and the eight are summed by multiplies
/// of the whole word.
#[inline]
fn eight_digits(eight: [u8; 8]) -> Option<u64> {
    const HIGH: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    let word = u64::from_le_bytes(eight);
    if word & HIGH != ZEROS || word.wrapping_add(0x0606_0606_0606_0606) & HIGH != ZEROS {
        return None;
    }
    let digits = word - ZEROS;
    // each byte pair as a two-digit number in its lower byte
    let pairs = digits.wrapping_mul(10).wrapping_add(digits >> 8);
    let pairs = pairs & 0x00FF_00FF_00FF_00FF;
    // each four as a four-digit number in its lower half
    let fours = pairs.wrapping_mul(100).wrapping_add(pairs >> 16) & 0x0000_FFFF_0000_FFFF;
    Some(fours.wrapping_mul(10_000).wrapping_add(fours >> 32) & 0xFFFF_FFFF)
}

/// Exact powers of ten as `f64` (every one up to 10^22 is).
const POWERS_OF_TEN: [f64; 16] =
    [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];

/// A number as agents mostly write them (`-12.34`, `7`, `.5`): a sign, then at most 15 digits
/// with a point among them; `None` for anything else. Its digits as an integer are below 2^53
/// and the power of ten it is divided by is exact, so the one correctly rounded division is the
/// correctly rounded value: what `str::parse` answers, without its general algorithm.
fn short_decimal(text: &str) -> Option<f64> {
    let bytes = text.as_bytes();
    let (negative, rest) = match bytes.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, bytes),
    };
    let (mut digits, mut mantissa, mut scale, mut point) = (0usize, 0u64, 0usize, false);
    for &b in rest {
        match b {
            b'0'..=b'9' => {
                mantissa = mantissa * 10 + u64::from(b - b'0');
                digits += 1;
                scale += usize::from(point);
                if digits > 15 {
                    return None;
                }
            }
            b'.' if !point => point = true,
            _ => return None,
        }
    }
    if digits == 0 {
        return None;
    }
    let value = mantissa as f64 / POWERS_OF_TEN[scale];
    Some(if negative { -value } else { value })
}

/// A finite decimal number (`1`, `-1.5`, `.5`, `6.02e23`): digits, point, sign and exponent
/// only, so Rust's `inf` and `NaN` spellings are refused with the non-finite results.
pub(crate) fn finite_float(text: &str) -> Option<f64> {
    short_decimal(text).or_else(|| any_finite_float(text))
}

/// [`finite_float`] of any text, by `str::parse` (exponents, long digit strings).
fn any_finite_float(text: &str) -> Option<f64> {
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

    /// The two passes the parsers made before `integer`.
    fn integer_in_two_passes(text: &str) -> Option<i64> {
        is_integer(text).then(|| text.parse().ok()).flatten()
    }

    #[test]
    fn an_integer_is_read_in_one_pass_as_in_two() {
        let edges = [
            "0",
            "-0",
            "7",
            "-7",
            "007",
            "",
            "-",
            "--1",
            "+1",
            "1-",
            "1.0",
            "1e3",
            " 1",
            "1 ",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999999",
            "1795956028000000000",
            "12a",
            "٣",
        ];
        for text in edges {
            assert_eq!(integer(text), integer_in_two_passes(text), "{text:?}");
        }
        // a byte that is no digit anywhere in eight at a time, beside the digits' neighbours
        for base in ["1795956028000000000", "-12345678", "9876543210123456"] {
            for at in 0..base.len() {
                for bad in ['/', ':', '?', '@', 'O', ' ', '\u{3}', '~', 'é'] {
                    let mut text = base.to_owned();
                    text.replace_range(at..at + 1, &bad.to_string());
                    assert_eq!(integer(&text), integer_in_two_passes(&text), "{text:?}");
                }
            }
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let text = match seed % 3 {
                0 => (seed >> 8).to_string(),
                1 => format!("-{}", seed >> (seed % 60)),
                _ => format!("{}", (seed as i64) / 3),
            };
            assert_eq!(integer(&text), integer_in_two_passes(&text), "{text:?}");
        }
    }

    #[test]
    fn a_short_decimal_is_the_value_the_long_way_gives_to_the_bit() {
        let edges = [
            "0",
            "-0",
            "0.0",
            "-0.0",
            "1.",
            ".5",
            "-.5",
            ".",
            "-",
            "",
            "1.2.3",
            "12.34",
            "999999999999999",
            "9999999999999999",
            "0.000000000000001",
            "123456789.012345",
            "1234567890123456",
            "0.1",
            "0.3",
            "-12.34",
            "1e3",
            "+1.5",
            "1,5",
            "inf",
            "NaN",
        ];
        let same = |text: &str| {
            let (short, long) = (finite_float(text), any_finite_float(text));
            assert_eq!(short.map(f64::to_bits), long.map(f64::to_bits), "{text:?}");
        };
        edges.into_iter().for_each(same);
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..100_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let digits = (seed >> 4) % 10u64.pow(1 + (seed % 15) as u32);
            let mut text = digits.to_string();
            let point = ((seed >> 50) as usize) % (text.len() + 1);
            text.insert(point, '.');
            if seed & 8 != 0 {
                text.insert(0, '-');
            }
            same(&text);
        }
    }

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
