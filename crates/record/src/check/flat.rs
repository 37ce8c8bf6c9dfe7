//! The checker's path for short flat lines: an object whose values are strings, numbers and
//! literals, nothing nested, its strings ASCII without escapes or control characters — what
//! small events mostly are. Used by [`crate::FieldSet::decode`] for lines of at most
//! [`crate::limits::STREAM_MAX_BYTES`]. One scalar pass from left to right, no SIMD setup: on a
//! 100-byte event that is cheaper than classifying two 64-byte blocks and than a serde stream.
//!
//! Like the masks' pass ([`super::masks`]) it answers only "valid" (with the wanted top-level
//! values found, as the other walks find them) or "not sure": anything outside that shape, and
//! every malformed line, is left to the caller's other path, which decides and says where a
//! line is wrong. Inside the shape its rules are the checker's own: numbers by
//! [`super::check_number`] (JSON's syntax and the range rule), literals by
//! [`super::check_literal`], whitespace as JSON has it.

use super::{check_literal, check_number, Found, KeyLengths, WantedValue};

/// Checks `bytes` as a flat object; `Some(())` when it is one and valid, with `found` holding
/// the values whose keys `want` maps to a name (keys of a length not in `lengths` are not
/// offered), in the order of the line; `None` when the line is not of that shape or not valid.
#[inline]
pub(crate) fn walk_flat<W: FnMut(&[u8]) -> Option<usize>>(
    bytes: &[u8],
    lengths: KeyLengths,
    mut want: W,
    found: &mut Found,
) -> Option<()> {
    found.clear();
    let mut at = skip_whitespace(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_whitespace(bytes, at + 1);
    if bytes.get(at) == Some(&b'}') {
        return (skip_whitespace(bytes, at + 1) == bytes.len()).then_some(());
    }
    loop {
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let key_close = plain_string_close(bytes, at + 1)?;
        let key = &bytes[at + 1..key_close];
        at = skip_whitespace(bytes, key_close + 1);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        let start = skip_whitespace(bytes, at + 1);
        let end = match *bytes.get(start)? {
            b'"' => plain_string_close(bytes, start + 1)? + 1,
            b'-' | b'0'..=b'9' => check_number(bytes, start).ok()?,
            b't' => literal(bytes, start, b"true")?,
            b'f' => literal(bytes, start, b"false")?,
            b'n' => literal(bytes, start, b"null")?,
            // nested values, and anything that is no value
            _ => return None,
        };
        at = skip_whitespace(bytes, end);
        let separator = *bytes.get(at)?;
        if separator != b',' && separator != b'}' {
            return None;
        }
        if lengths.may_hold(key.len()) {
            if let Some(name) = want(key) {
                found.push(WantedValue { name, start, end: at });
            }
        }
        if separator == b'}' {
            return (skip_whitespace(bytes, at + 1) == bytes.len()).then_some(());
        }
        at = skip_whitespace(bytes, at + 1);
    }
}

/// Past the JSON whitespace from `at`.
#[inline(always)]
fn skip_whitespace(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(at) {
        at += 1;
    }
    at
}

/// Where the literal at `at` ends, when it is `literal` followed by what may follow a value.
#[inline(always)]
fn literal(bytes: &[u8], at: usize, literal: &[u8]) -> Option<usize> {
    check_literal(bytes, at, literal).ok().map(|()| at + literal.len())
}

/// The closing quote of the string whose contents start at `at`, when every byte before it is
/// ASCII from 0x20 up, other than a backslash; `None` otherwise (an escape, a control
/// character, a byte of a multibyte character, or no closing quote).
#[inline(always)]
fn plain_string_close(bytes: &[u8], mut at: usize) -> Option<usize> {
    // eight bytes at a time while eight are left: the lowest byte flagged is a quote, a
    // backslash, below 0x20 or above 0x7F (a flag above it may be a borrow's; it is not read)
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(eight) = bytes.get(at..).and_then(|rest| rest.first_chunk::<8>()) {
        let word = u64::from_le_bytes(*eight);
        let quote = word ^ (ONES * u64::from(b'"'));
        let backslash = word ^ (ONES * u64::from(b'\\'));
        let zero_in = |x: u64| x.wrapping_sub(ONES) & !x;
        let special =
            (zero_in(quote) | zero_in(backslash) | (word.wrapping_sub(ONES * 0x20) & !word) | word)
                & HIGH;
        if special != 0 {
            at += (special.trailing_zeros() / 8) as usize;
            break;
        }
        at += 8;
    }
    loop {
        match *bytes.get(at)? {
            b'"' => return Some(at),
            b'\\' | 0..=0x1f | 0x80..=0xff => return None,
            _ => at += 1,
        }
    }
}
