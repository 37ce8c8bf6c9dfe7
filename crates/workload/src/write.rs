//! Small, allocation-free writers of JSON pieces (integers, hex, strings) into a `Vec<u8>`: the
//! generators build every record with these.

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends the decimal digits of `n`.
#[inline]
pub(crate) fn u64_dec(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends the decimal digits of `n`, with a leading `-` when negative.
#[inline]
pub(crate) fn i64_dec(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    u64_dec(out, n.unsigned_abs());
}

/// Appends `n` in decimal, left-padded with zeros to `width` digits.
#[inline]
pub(crate) fn u64_dec_padded(out: &mut Vec<u8>, n: u64, width: usize) {
    let start = out.len();
    u64_dec(out, n);
    let len = out.len() - start;
    if len < width {
        let pad = width - len;
        out.splice(start..start, std::iter::repeat_n(b'0', pad));
    }
}

/// Appends the low `digits` hex digits of `n` (most significant first).
#[inline]
pub(crate) fn hex(out: &mut Vec<u8>, n: u64, digits: u32) {
    for i in (0..digits).rev() {
        out.push(HEX[((n >> (4 * i)) & 0xf) as usize]);
    }
}

/// Appends a JSON string literal (quotes included), escaping as JSON requires.
pub(crate) fn json_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    for &b in s.as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..=0x1f => {
                out.extend_from_slice(b"\\u00");
                hex(out, b as u64, 2);
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_hex() {
        let mut v = Vec::new();
        u64_dec(&mut v, 0);
        v.push(b' ');
        u64_dec(&mut v, u64::MAX);
        v.push(b' ');
        i64_dec(&mut v, i64::MIN);
        v.push(b' ');
        u64_dec_padded(&mut v, 42, 5);
        v.push(b' ');
        u64_dec_padded(&mut v, 123456, 3);
        v.push(b' ');
        hex(&mut v, 0xabc, 5);
        assert_eq!(
            String::from_utf8(v).unwrap(),
            "0 18446744073709551615 -9223372036854775808 00042 123456 00abc"
        );
    }

    #[test]
    fn strings_escape_like_serde_json() {
        for s in ["plain", "q\"b\\s", "nl\n\t\r\u{1}\u{1f}", "é☃"] {
            let mut v = Vec::new();
            json_str(&mut v, s);
            assert_eq!(String::from_utf8(v).unwrap(), serde_json::to_string(s).unwrap());
        }
    }
}
