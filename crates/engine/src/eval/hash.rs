//! `HASH(x)`: a stable 64-bit hash of a value, the same on every machine, run and version.
//!
//! Algorithm: 64-bit FNV-1a (offset basis `0xcbf29ce484222325`, prime `0x100000001b3`) over the
//! value's canonical JSON text, returned as a LONG (the 64 bits read as a signed integer). The
//! canonical text is compact JSON as `serde_json` writes it (strings escaped, integers in
//! decimal, floats in shortest round-trip form, NaN and infinities as `null`) with map keys
//! sorted by bytes, so maps that are equal hash equally whatever their key order. INTEGER and
//! LONG of the same value hash equally (`5` and `5L`); `5.0` differs (its text is `5.0`).
//! `HASH(NULL)` is NULL.

use needle_record::Value;
use std::io;

const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// An FNV-1a 64 hasher that bytes can be written into.
#[derive(Debug, Clone, Copy)]
pub struct Fnv1a64(u64);

impl Default for Fnv1a64 {
    fn default() -> Self {
        Fnv1a64(OFFSET_BASIS)
    }
}

impl Fnv1a64 {
    pub fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(PRIME);
        }
    }

    pub fn finish(&self) -> u64 {
        self.0
    }
}

impl io::Write for Fnv1a64 {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes the canonical JSON text of `v` (map keys sorted) into `w`.
pub fn write_canonical<W: io::Write>(v: &Value, w: &mut W) -> io::Result<()> {
    match v {
        Value::List(items) => {
            w.write_all(b"[")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    w.write_all(b",")?;
                }
                write_canonical(item, w)?;
            }
            w.write_all(b"]")
        }
        Value::Map(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            w.write_all(b"{")?;
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    w.write_all(b",")?;
                }
                serde_json::to_writer(&mut *w, k).map_err(io::Error::other)?;
                w.write_all(b":")?;
                write_canonical(&map[k], w)?;
            }
            w.write_all(b"}")
        }
        scalar => serde_json::to_writer(&mut *w, scalar).map_err(io::Error::other),
    }
}

/// The canonical JSON text of a value (what [`hash`] hashes).
pub fn canonical_json(v: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(v, &mut out).expect("writing to a Vec cannot fail");
    String::from_utf8(out).expect("JSON text is UTF-8")
}

/// `HASH(v)`; `None` for NULL.
pub fn hash(v: &Value) -> Option<i64> {
    if v.is_null() {
        return None;
    }
    let mut h = Fnv1a64::default();
    write_canonical(v, &mut h).expect("hashing cannot fail");
    Some(h.finish() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use needle_record::Map;

    #[test]
    fn fnv1a_matches_the_published_test_vectors() {
        let fnv = |s: &str| {
            let mut h = Fnv1a64::default();
            h.update(s.as_bytes());
            h.finish()
        };
        assert_eq!(fnv(""), 0xcbf29ce484222325);
        assert_eq!(fnv("a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv("foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn hash_is_fnv_of_the_canonical_text() {
        let mut h = Fnv1a64::default();
        h.update(b"\"a\"");
        assert_eq!(hash(&Value::from("a")), Some(h.finish() as i64));
        assert_eq!(hash(&Value::Int(5)), hash(&Value::Long(5)));
        assert_ne!(hash(&Value::Int(5)), hash(&Value::Double(5.0)));
        assert_eq!(hash(&Value::Null), None);
    }

    #[test]
    fn maps_hash_the_same_in_any_key_order() {
        let mut a = Map::default();
        a.insert("x".into(), Value::Int(1));
        a.insert("y".into(), Value::List(vec![Value::from("q\""), Value::Double(f64::NAN)]));
        let mut b = Map::default();
        b.insert("y".into(), a["y"].clone());
        b.insert("x".into(), Value::Int(1));
        assert_eq!(canonical_json(&Value::Map(a.clone())), r#"{"x":1,"y":["q\"",null]}"#);
        assert_eq!(hash(&Value::Map(a)), hash(&Value::Map(b)));
    }
}
