//! The binary format of encoded partials: a versioned, checksummed envelope around a payload, and
//! the little writer/reader pair the aggregation kinds use to lay out their payloads (varints,
//! fixed-width numbers, strings, typed [`Value`]s and [`Record`]s).
//!
//! Envelope (all integers little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `NDLP` |
//! | 1 | format version ([`VERSION`]) |
//! | 1 | aggregation kind tag |
//! | 8 | fingerprint of the aggregation (FNV-1a 64 of its plan JSON) |
//! | 4 | payload length |
//! | 8 | FNV-1a 64 checksum of the payload |
//! | n | payload |
//!
//! Reading never panics and never trusts a length: every read is bounds-checked, collection
//! capacities are capped by the bytes that remain, and nested values are limited to
//! [`MAX_DEPTH`] levels. Anything unexpected is [`EngineError::CorruptPartial`].

use crate::EngineError;
use needle_record::{Map, Record, Value};

/// The current envelope format version.
pub const VERSION: u8 = 1;
const MAGIC: &[u8; 4] = b"NDLP";
const HEADER_LEN: usize = 4 + 1 + 1 + 8 + 4 + 8;
/// Deepest nesting of lists and maps a payload may hold.
pub const MAX_DEPTH: usize = 64;

/// FNV-1a, 64 bits: the envelope checksum and the aggregation fingerprint (stable across builds
/// and platforms, unlike `std`'s hasher).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

pub(crate) fn corrupt(what: impl Into<String>) -> EngineError {
    EngineError::CorruptPartial(what.into())
}

/// Wraps a payload in the envelope.
pub fn seal(kind: u8, fingerprint: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.push(kind);
    out.extend_from_slice(&fingerprint.to_le_bytes());
    let len = u32::try_from(payload.len()).expect("a partial payload is smaller than 4 GiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&fnv1a64(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Checks the envelope (magic, version, kind, fingerprint, length, checksum) and returns the
/// payload.
pub fn open(bytes: &[u8], kind: u8, fingerprint: u64) -> Result<&[u8], EngineError> {
    if bytes.len() < HEADER_LEN {
        return Err(corrupt(format!("{} bytes is shorter than the header", bytes.len())));
    }
    if &bytes[..4] != MAGIC {
        return Err(corrupt("not a needle partial (bad magic)"));
    }
    if bytes[4] != VERSION {
        return Err(corrupt(format!("format version {} (this build reads {VERSION})", bytes[4])));
    }
    if bytes[5] != kind {
        return Err(corrupt(format!(
            "partial of kind {} where kind {kind} was expected",
            bytes[5]
        )));
    }
    let mut r = Reader::new(&bytes[6..HEADER_LEN]);
    let got_fingerprint = r.u64()?;
    if got_fingerprint != fingerprint {
        return Err(corrupt("partial of a different aggregation (fingerprint mismatch)"));
    }
    let len = r.u32()? as usize;
    let checksum = r.u64()?;
    let payload = &bytes[HEADER_LEN..];
    if payload.len() != len {
        return Err(corrupt(format!("payload is {} bytes, header says {len}", payload.len())));
    }
    if fnv1a64(payload) != checksum {
        return Err(corrupt("checksum mismatch"));
    }
    Ok(payload)
}

const TAG_NULL: u8 = 0;
const TAG_FALSE: u8 = 1;
const TAG_TRUE: u8 = 2;
const TAG_INT: u8 = 3;
const TAG_LONG: u8 = 4;
const TAG_FLOAT: u8 = 5;
const TAG_DOUBLE: u8 = 6;
const TAG_STRING: u8 = 7;
const TAG_LIST: u8 = 8;
const TAG_MAP: u8 = 9;

/// Appends payload fields.
#[derive(Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn i128(&mut self, v: i128) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_bits().to_le_bytes());
    }

    /// LEB128 unsigned varint.
    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    /// Length-prefixed bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    /// A typed value: a tag byte, then the value.
    pub fn value(&mut self, v: &Value) {
        match v {
            Value::Null => self.u8(TAG_NULL),
            Value::Bool(false) => self.u8(TAG_FALSE),
            Value::Bool(true) => self.u8(TAG_TRUE),
            Value::Int(x) => {
                self.u8(TAG_INT);
                self.u32(*x as u32);
            }
            Value::Long(x) => {
                self.u8(TAG_LONG);
                self.u64(*x as u64);
            }
            Value::Float(x) => {
                self.u8(TAG_FLOAT);
                self.u32(x.to_bits());
            }
            Value::Double(x) => {
                self.u8(TAG_DOUBLE);
                self.f64(*x);
            }
            Value::String(s) => {
                self.u8(TAG_STRING);
                self.str(s);
            }
            Value::List(items) => {
                self.u8(TAG_LIST);
                self.varint(items.len() as u64);
                for item in items {
                    self.value(item);
                }
            }
            Value::Map(map) => {
                self.u8(TAG_MAP);
                self.map(map);
            }
        }
    }

    fn map(&mut self, map: &Map) {
        self.varint(map.len() as u64);
        for (k, v) in map {
            self.str(k);
            self.value(v);
        }
    }

    /// A record: its fields in order.
    pub fn record(&mut self, r: &Record) {
        self.map(r.fields());
    }
}

/// Reads payload fields back; every method fails cleanly on short or malformed input.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Fails unless every byte was read.
    pub fn finish(&self) -> Result<(), EngineError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(corrupt(format!("{n} trailing bytes"))),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], EngineError> {
        if self.remaining() < n {
            return Err(corrupt(format!("truncated: wanted {n} bytes, {} left", self.remaining())));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], EngineError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8, EngineError> {
        Ok(self.take(1)?[0])
    }

    pub fn u32(&mut self) -> Result<u32, EngineError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, EngineError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub fn i128(&mut self) -> Result<i128, EngineError> {
        Ok(i128::from_le_bytes(self.array()?))
    }

    pub fn f64(&mut self) -> Result<f64, EngineError> {
        Ok(f64::from_bits(self.u64()?))
    }

    pub fn varint(&mut self) -> Result<u64, EngineError> {
        let mut out: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(corrupt("varint overflows 64 bits"));
            }
            out |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err(corrupt("varint longer than 10 bytes"))
    }

    /// A length (a varint) that cannot exceed the bytes left, each element taking at least
    /// `min_element_bytes`.
    pub fn len(&mut self, min_element_bytes: usize) -> Result<usize, EngineError> {
        let n = self.varint()?;
        let max = self.remaining() / min_element_bytes.max(1);
        if n > max as u64 {
            return Err(corrupt(format!("length {n} exceeds the {} bytes left", self.remaining())));
        }
        Ok(n as usize)
    }

    pub fn bytes(&mut self) -> Result<&'a [u8], EngineError> {
        let n = self.len(1)?;
        self.take(n)
    }

    pub fn string(&mut self) -> Result<String, EngineError> {
        let b = self.bytes()?;
        String::from_utf8(b.to_vec()).map_err(|_| corrupt("string is not UTF-8"))
    }

    pub fn value(&mut self) -> Result<Value, EngineError> {
        self.value_at(0)
    }

    fn value_at(&mut self, depth: usize) -> Result<Value, EngineError> {
        if depth > MAX_DEPTH {
            return Err(corrupt("values nested too deeply"));
        }
        Ok(match self.u8()? {
            TAG_NULL => Value::Null,
            TAG_FALSE => Value::Bool(false),
            TAG_TRUE => Value::Bool(true),
            TAG_INT => Value::Int(self.u32()? as i32),
            TAG_LONG => Value::Long(self.u64()? as i64),
            TAG_FLOAT => Value::Float(f32::from_bits(self.u32()?)),
            TAG_DOUBLE => Value::Double(self.f64()?),
            TAG_STRING => Value::String(self.string()?),
            TAG_LIST => {
                let n = self.len(1)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value_at(depth + 1)?);
                }
                Value::List(items)
            }
            TAG_MAP => Value::Map(self.map_at(depth + 1)?),
            tag => return Err(corrupt(format!("unknown value tag {tag}"))),
        })
    }

    fn map_at(&mut self, depth: usize) -> Result<Map, EngineError> {
        let n = self.len(2)?;
        let mut map = needle_record::map_with_capacity(n);
        for _ in 0..n {
            let k = self.string()?;
            let v = self.value_at(depth)?;
            map.insert(k, v);
        }
        Ok(map)
    }

    pub fn record(&mut self) -> Result<Record, EngineError> {
        Ok(Record::from_map(self.map_at(0)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Value {
        let mut m = Map::default();
        m.insert("k".into(), Value::Float(1.5));
        m.insert("n".into(), Value::Null);
        Value::List(vec![
            Value::Bool(true),
            Value::Int(-7),
            Value::Long(i64::MIN),
            Value::Double(f64::NAN),
            Value::from("é"),
            Value::Map(m),
            Value::List(vec![]),
        ])
    }

    #[test]
    fn values_round_trip_with_their_types() {
        let mut w = Writer::new();
        w.value(&sample());
        w.varint(u64::MAX);
        w.i128(-5);
        let bytes = w.into_bytes();
        let mut r = Reader::new(&bytes);
        let back = r.value().unwrap();
        // NaN != NaN, so compare the encodings.
        let mut w2 = Writer::new();
        w2.value(&back);
        assert_eq!(w2.into_bytes(), bytes[..bytes.len() - 10 - 16]);
        assert_eq!(r.varint().unwrap(), u64::MAX);
        assert_eq!(r.i128().unwrap(), -5);
        r.finish().unwrap();
    }

    #[test]
    fn every_truncation_of_a_value_is_an_error() {
        let mut w = Writer::new();
        w.value(&sample());
        let bytes = w.into_bytes();
        for cut in 0..bytes.len() {
            let mut r = Reader::new(&bytes[..cut]);
            assert!(r.value().is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn envelope_rejects_flipped_bits_and_wrong_kind_or_fingerprint() {
        let sealed = seal(3, 42, b"payload");
        assert_eq!(open(&sealed, 3, 42).unwrap(), b"payload");
        assert!(open(&sealed, 4, 42).is_err());
        assert!(open(&sealed, 3, 43).is_err());
        for i in 0..sealed.len() {
            let mut bad = sealed.clone();
            bad[i] ^= 0x10;
            assert!(open(&bad, 3, 42).is_err(), "flip at {i}");
        }
        assert!(open(&sealed[..sealed.len() - 1], 3, 42).is_err());
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let bytes = [TAG_LIST, 1].repeat(10_000);
        assert!(Reader::new(&bytes).value().is_err());
    }
}
