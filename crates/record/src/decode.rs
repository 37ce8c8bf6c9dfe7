//! Decoding records from JSON text: one NDJSON line → one [`Record`], and lazily: only the
//! top-level fields a caller names ([`decode_fields`], exact; [`FieldSet::decode`], the
//! workers' fast path), skipping the rest without building values. [`decode_record`],
//! [`decode_value`] and [`decode_fields`] read with sonic-rs (a serde stream straight into
//! [`Value`]s). [`FieldSet::decode`] checks the whole line ([`Validation::Line`], the default)
//! with needle's own SIMD checker ([`crate::check`]), which also finds where the wanted fields'
//! values lie, and builds only those (lines of at most [`STREAM_MAX_BYTES`] are read in one
//! scalar pass when they are flat objects of plain values, else by sonic-rs's stream: faster at
//! that size); or it looks the fields up with sonic-rs and checks only them
//! ([`Validation::Fields`]).
//!
//! Rules, the same for every entry point:
//! - an integer that fits in an `i64` is a LONG; any other number (fractions, exponents, integers
//!   beyond the `i64` range) is a DOUBLE; a number too large for a double (`1e400`) is malformed;
//! - objects keep their key order; a key that appears twice keeps the position of its first
//!   occurrence and the value of its last ("last wins");
//! - strings must be valid UTF-8 (also inside skipped values), and nothing but whitespace may
//!   follow the value;
//! - arrays and objects may nest at most [`MAX_DEPTH`] levels deep: the decoders count levels as
//!   they descend (skipped values included) and stop with an error at the first level too deep,
//!   so no input can overflow the stack;
//! - every failure is a [`RecordError`], never a panic: [`RecordError::Malformed`] with the byte
//!   offset where the parser stopped, or [`RecordError::NotAnObject`] for a valid non-object line.

use crate::check::{self, DepthRule, Kernel, KeyLengths, TopLevel, WantedValue};
pub use crate::limits::{FAST_SKIP_MAX_OPENINGS, MAX_DEPTH, STREAM_MAX_BYTES};
use crate::{Map, Record, RecordError, Value};
use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use sonic_rs::{JsonContainerTrait, JsonValueTrait};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// Decodes one JSON object into a record.
pub fn decode_record(bytes: &[u8]) -> Result<Record, RecordError> {
    match decode_value(bytes)? {
        Value::Map(map) => Ok(Record::from_map(map)),
        other => Err(RecordError::NotAnObject { found: kind_name(&other) }),
    }
}

/// [`decode_record`] into `record`, which held an earlier line: where the fields come in the
/// same order as last time (records from one producer do), their names, strings and positions
/// are reused instead of allocated anew. The result equals [`decode_record`]'s, and it fails
/// exactly when that does; after an error, `record` holds some fields of this line or of
/// earlier ones.
pub fn decode_record_into(bytes: &[u8], record: &mut Record) -> Result<(), RecordError> {
    stream_object(bytes, FillSeed { names: &AllKeys, map: record.map_mut() })
}

/// Decodes any JSON value.
pub fn decode_value(bytes: &[u8]) -> Result<Value, RecordError> {
    sonic_rs::from_slice::<Value>(bytes).map_err(|e| malformed(&e))
}

/// Decodes one JSON value found at nesting level 2 (a field of a record), under the same rules
/// as [`decode_record`] applies to it there.
fn decode_nested(bytes: &[u8]) -> Result<Value, RecordError> {
    let mut de = sonic_rs::Deserializer::from_slice(bytes);
    let value = ValueSeed { depth: 2 }.deserialize(&mut de).map_err(|e| malformed(&e))?;
    de.end().map_err(|e| malformed(&e))?;
    Ok(value)
}

/// Decodes only the top-level fields named in `names` of one JSON object; the other fields are
/// skipped (validated, but no value is built for them).
///
/// The result equals [`decode_record`] with every field not in `names` removed (same values, same
/// order, same duplicate-key rule), and it fails exactly when [`decode_record`] fails. Names that
/// the object does not have are simply absent from the record.
pub fn decode_fields(bytes: &[u8], names: &[&str]) -> Result<Record, RecordError> {
    let mut record = Record::new();
    fill_streamed(bytes, names, record.map_mut())?;
    Ok(record)
}

/// `Ok` when the first byte past leading whitespace opens an object; otherwise the error the
/// full decoder gives the line (malformed, or which kind of value it is).
fn starts_an_object(bytes: &[u8]) -> Result<(), RecordError> {
    match bytes.iter().find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
        Some(b'{') => Ok(()),
        Some(_) => decode_record(bytes).map(drop),
        None => Err(RecordError::Malformed {
            message: "EOF while parsing a value".to_owned(),
            offset: Some(bytes.len()),
        }),
    }
}

/// Sets `map` to the fields of the JSON object in `bytes` that `names` wants, reading the line
/// as a stream (sonic-rs's serde deserializer: no tree, skipped values checked but not built,
/// nesting counted level by level) and reusing `map`'s keys, strings and positions where the
/// fields come in the same order as last time.
fn fill_streamed<N: Names + ?Sized>(
    bytes: &[u8],
    names: &N,
    map: &mut Map,
) -> Result<(), RecordError> {
    stream_object(bytes, FillSeed { names, map })
}

/// Runs `seed` over the object `bytes` holds, as a stream, held to the whole line's rules.
fn stream_object<S>(bytes: &[u8], seed: S) -> Result<(), RecordError>
where
    S: for<'de> DeserializeSeed<'de, Value = ()>,
{
    starts_an_object(bytes)?;
    // sonic-rs checks UTF-8 up front only for `&str` input; check it here (std's check is fast
    // on ASCII), so skipped strings are held to the same rule as in the full decode.
    let text = std::str::from_utf8(bytes).map_err(|e| RecordError::Malformed {
        message: format!("invalid UTF-8: {e}"),
        offset: Some(e.valid_up_to()),
    })?;
    let mut de = sonic_rs::Deserializer::from_str(text);
    seed.deserialize(&mut de).map_err(|e| malformed(&e))?;
    de.end().map_err(|e| malformed(&e))
}

/// A set of top-level fields to decode, built once and used for many lines
/// ([`FieldSet::decode`]): what the active queries touch. A field is decoded whole, or, when
/// every query reads it only through constant keys (`demographics.country`), as an object of
/// just those keys.
#[derive(Debug, Clone, Default)]
pub struct FieldSet {
    /// How much of a line is checked ([`Validation`]).
    validation: Validation,
    /// With [`Validation::Fields`]: the names as sonic-rs's lookup tree, in `names` order.
    lookup: Option<Arc<sonic_rs::PointerTree>>,
    names: Vec<Box<str>>,
    /// Per name: `None` to decode the whole value; `Some(keys)` to keep only these keys of an
    /// object value (any other value is decoded whole).
    parts: Vec<Option<Box<[Box<str>]>>>,
    /// For larger sets: name → position in `names` (small sets are scanned, which is faster).
    index: Option<HashMap<Box<str>, usize, foldhash::fast::FixedState>>,
    /// A Bloom filter of the names' (length, first byte, last byte): most other keys of a line
    /// are passed over without a comparison or a hash.
    bloom: [u64; 4],
    /// The names' lengths, for needle's checker to pass other keys over before any call.
    lengths: KeyLengths,
}

/// How much of each line [`FieldSet::decode`] checks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Validation {
    /// The whole line must be valid JSON, whatever is read of it: a line with an error anywhere
    /// is malformed (counted and skipped). The default. Checked by needle's own SIMD checker
    /// ([`crate::check`]), which finds the fields read in the same pass (lines of at most
    /// [`STREAM_MAX_BYTES`]: in one scalar pass when they are flat objects of plain values,
    /// else by sonic-rs's stream, as fast there).
    #[default]
    Line,
    /// Only the fields read are parsed and checked in full; the rest of the line is skipped as
    /// fast as its structure allows, and the search stops once every field read was found. An
    /// error in a part no query reads goes unnoticed (the line is not counted as malformed), a
    /// key that appears twice keeps one of its values (which one is the JSON reader's choice),
    /// and the fields come in the order of the set rather than of the line. Several times
    /// faster on wide records (see `docs/benchmarks.md`). Lines of at most
    /// [`STREAM_MAX_BYTES`] are checked whole, as with `Line`: at that size reading the whole
    /// line is the faster way.
    Fields,
}

impl std::str::FromStr for Validation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "line" => Ok(Validation::Line),
            "fields" => Ok(Validation::Fields),
            other => Err(format!("unknown validation '{other}': line or fields")),
        }
    }
}

/// The largest set looked up by scanning instead of hashing.
const FIELD_SET_SCAN_MAX: usize = 8;

fn bloom_slot(bytes: &[u8]) -> usize {
    let (first, last) = (bytes.first().copied(), bytes.last().copied());
    let h = (bytes.len() as u32).wrapping_mul(0x9e37_79b9)
        ^ u32::from(first.unwrap_or(0)).wrapping_mul(0x85eb_ca6b)
        ^ u32::from(last.unwrap_or(0)).wrapping_mul(0xc2b2_ae35);
    (h >> 24) as usize
}

impl FieldSet {
    /// The set of `names`, each decoded whole (duplicates are kept once).
    pub fn new<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> Self {
        Self::with_parts(names.into_iter().map(|n| (n, None)))
    }

    /// The set of `fields`: `(name, None)` decodes a field whole; `(name, Some(key))` asks for
    /// one key of it. A name keeps every key asked of it, and is decoded whole as soon as one
    /// request is for the whole field.
    pub fn with_parts<S: AsRef<str>>(fields: impl IntoIterator<Item = (S, Option<S>)>) -> Self {
        let mut names: Vec<Box<str>> = Vec::new();
        let mut parts: Vec<Option<Vec<Box<str>>>> = Vec::new();
        for (name, key) in fields {
            let i = match names.iter().position(|n| **n == *name.as_ref()) {
                Some(i) => i,
                None => {
                    names.push(name.as_ref().into());
                    parts.push(Some(Vec::new()));
                    names.len() - 1
                }
            };
            match (key, &mut parts[i]) {
                (None, part) => *part = None,
                (Some(key), Some(keys)) => {
                    if !keys.iter().any(|k| **k == *key.as_ref()) {
                        keys.push(key.as_ref().into());
                    }
                }
                (Some(_), None) => {}
            }
        }
        let index = (names.len() > FIELD_SET_SCAN_MAX).then(|| {
            names.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect::<HashMap<_, _, _>>()
        });
        let mut bloom = [0u64; 4];
        for name in &names {
            let slot = bloom_slot(name.as_bytes());
            bloom[slot / 64] |= 1 << (slot % 64);
        }
        let parts = parts.into_iter().map(|p| p.map(Vec::into_boxed_slice)).collect();
        let lengths = KeyLengths::of(names.iter().map(|n| n.as_bytes()));
        Self { validation: Validation::Line, lookup: None, names, parts, index, bloom, lengths }
    }

    /// The same set, checking `validation` of each line.
    pub fn with_validation(mut self, validation: Validation) -> Self {
        self.validation = validation;
        self.lookup = (validation == Validation::Fields).then(|| {
            let mut tree = sonic_rs::PointerTree::new();
            for name in &self.names {
                tree.add_path([&**name]);
            }
            Arc::new(tree)
        });
        self
    }

    /// How much of a line this set checks.
    pub fn validation(&self) -> Validation {
        self.validation
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn contains(&self, name: &str) -> bool {
        Names::position(self, name).is_some()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(|n| &**n)
    }

    /// The keys kept of field `name` when it is an object; `None` when it is decoded whole (or
    /// not at all).
    pub fn keys_of(&self, name: &str) -> Option<impl Iterator<Item = &str>> {
        let i = Names::position(self, name)?;
        Some(self.parts[i].as_ref()?.iter().map(|k| &**k))
    }

    /// Decodes the fields of this set from one JSON object, skipping the others without building
    /// values: the hot path of a worker, which reads only what its queries use.
    ///
    /// How, with [`Validation::Line`] (the default): needle's checker ([`crate::check`]: SIMD
    /// classification of the bytes, then one walk over the structural characters) checks the
    /// whole line and, in the same walk, notes the bytes of each wanted top-level value; then
    /// only those values are built (plain strings, literals and numbers directly, anything else
    /// through sonic-rs's serde deserializer) — building needle's values is what costs, and
    /// the checker reads a line faster than sonic-rs does (`docs/benchmarks.md`). Lines of at
    /// most [`STREAM_MAX_BYTES`] are read another way, faster at that size: a flat object of
    /// plain values (strings without escapes, ASCII, numbers, literals, nothing nested) in one
    /// scalar pass, any other by sonic-rs's serde stream, which builds the wanted values as it
    /// checks.
    ///
    /// It accepts every line [`decode_record`] accepts, with the same values as
    /// [`decode_record`] restricted to the set (and an object field asked for by keys
    /// restricted to those keys). Skipped values are checked as JSON (syntax, escapes, UTF-8,
    /// numbers within a double's range), and held to the nesting limit ([`MAX_DEPTH`]) except
    /// in one case kept from when sonic-rs's tree read long lines: in a line longer than
    /// [`STREAM_MAX_BYTES`] with at most [`FAST_SKIP_MAX_OPENINGS`] brackets, a value no query
    /// reads may nest 33 to 256 levels deep, which [`decode_record`] rejects. The limit only
    /// matters once a value is built; the checker itself keeps no stack of calls.
    pub fn decode(&self, bytes: &[u8]) -> Result<Record, RecordError> {
        let mut record = Record::new();
        self.decode_into(bytes, &mut record)?;
        Ok(record)
    }

    /// [`FieldSet::decode`] into `record`, which held the previous line's fields: where the
    /// fields come in the same order as last time (records from one producer do), their names,
    /// strings and maps are overwritten in place instead of allocated anew. After an error,
    /// `record` holds some fields of the line or of earlier ones.
    pub fn decode_into(&self, bytes: &[u8], record: &mut Record) -> Result<(), RecordError> {
        match &self.lookup {
            // sonic-rs's lookup recurses into what it skips: lines that may nest deeply take
            // the whole-line path, which bounds its recursion
            // short lines are read whole either way: a stream is faster there than a lookup
            Some(lookup) if bytes.len() > STREAM_MAX_BYTES && !too_many_openings(bytes) => {
                self.decode_fields_only(bytes, lookup, record)
            }
            _ => self.decode_line(bytes, record),
        }
    }

    /// The whole record of `bytes`, a line [`FieldSet::decode_into`] has just accepted: for the
    /// queries that read every field (RAW `SELECT *`). Kept as the line's text, with its fields
    /// decoded only if they are read ([`Record::json_text`]), when [`decode_record`] accepts
    /// it; else [`decode_record`]'s error (a line the set accepted may be refused whole: a value
    /// no query reads nesting too deep, or, with [`Validation::Fields`], an error in a part no
    /// query reads). Whether it accepts is known without a second look when that call checked
    /// the whole line under its rules: a line of at most [`STREAM_MAX_BYTES`], or any line with
    /// [`Validation::Line`] whose `{`/`[` bytes are too few to nest deeper than [`MAX_DEPTH`]
    /// (past that the checker lets an unread value nest up to 256 levels). Other lines are
    /// checked again, whole ([`crate::check::check`]): once, for all the queries taking the
    /// record, and far cheaper than decoding it (a 7 KB `bullet` event has more brackets than
    /// that; decoded, each of 100 `SELECT *` queries copied its fields).
    #[inline(never)] // off the worker's loop over lines, which most lines take without it
    pub fn whole_record(&self, bytes: &[u8]) -> Result<Record, RecordError> {
        let checked_whole = bytes.len() <= STREAM_MAX_BYTES
            || (self.lookup.is_none() && !more_openings_than(bytes, MAX_DEPTH));
        match simdutf8::basic::from_utf8(bytes) {
            Ok(text) if checked_whole => Ok(Record::from_checked_json(text)),
            Ok(text)
                if text.trim_start_matches([' ', '\t', '\n', '\r']).starts_with('{')
                    && crate::check::check(bytes).is_ok() =>
            {
                Ok(Record::from_checked_json(text))
            }
            _ => decode_record(bytes),
        }
    }

    /// [`Validation::Line`]: needle's checker, but for lines of at most [`STREAM_MAX_BYTES`]:
    /// a flat object of plain values in one scalar pass ([`FieldSet::decode_flat`]), any other
    /// short line by sonic-rs's stream. On a 100-byte event of the `small` workload, one field
    /// read into the kept record: 85 ns in one pass, 107 ns through the stream, 115–130 ns
    /// through the SIMD checker (fastest of 1,500 alternating rounds of
    /// `examples/decode_rounds.rs`, 2026-12-01), though the checker alone checks the event in
    /// 66 ns: its setup per 64-byte block and the wanted keys' work do not pay at that size.
    fn decode_line(&self, bytes: &[u8], record: &mut Record) -> Result<(), RecordError> {
        if bytes.len() <= STREAM_MAX_BYTES {
            if self.decode_flat(bytes, record).is_some() {
                return Ok(());
            }
            return fill_streamed(bytes, self, record.map_mut());
        }
        self.decode_checked(Kernel::detect(), bytes, record)
    }

    /// A short line that is a flat object of plain values ([`check::walk_flat`]: strings
    /// without escapes, ASCII, nothing nested — small events mostly are), checked in one scalar
    /// pass and its wanted values built; `None`, having decided nothing, for any other line.
    #[inline]
    fn decode_flat(&self, bytes: &[u8], record: &mut Record) -> Option<()> {
        let mut found = check::Found::new();
        let want = |key: &[u8]| self.position_of_bytes(key);
        check::walk_flat(bytes, self.lengths, want, &mut found)?;
        fill_found(bytes, &found, self, record.map_mut()).ok()
    }

    /// [`Validation::Line`] through needle's checker whatever the line's length (short lines
    /// included, which [`FieldSet::decode_into`] reads in one scalar pass or by sonic-rs's
    /// stream): kept to measure the checker on them in `benches/decode.rs`. Not for production.
    #[doc(hidden)]
    pub fn decode_into_with_checker(
        &self,
        bytes: &[u8],
        record: &mut Record,
    ) -> Result<(), RecordError> {
        self.decode_checked(Kernel::detect(), bytes, record)
    }

    /// [`Validation::Line`] through needle's checker ([`crate::check`]): one walk checks the
    /// whole line and finds the wanted top-level values' bytes; then only those are built.
    fn decode_checked(
        &self,
        kernel: Kernel,
        bytes: &[u8],
        record: &mut Record,
    ) -> Result<(), RecordError> {
        let mut found = check::Found::new();
        let want = |key: &[u8]| self.position_of_bytes(key);
        match check::walk(kernel, bytes, DepthRule::LineMode, self.lengths, want, &mut found)? {
            TopLevel::Object => fill_found(bytes, &found, self, record.map_mut()),
            TopLevel::Other(found) => Err(RecordError::NotAnObject { found }),
        }
    }

    /// [`Validation::Line`] as sonic-rs read it before needle's checker (a serde stream up to
    /// [`STREAM_MAX_BYTES`], sonic-rs's tree beyond): kept to measure the checker against in
    /// `benches/decode.rs` and to hold it to the same decisions in tests. Not for production.
    #[doc(hidden)]
    pub fn decode_into_with_sonic_rs(
        &self,
        bytes: &[u8],
        record: &mut Record,
    ) -> Result<(), RecordError> {
        if bytes.len() <= STREAM_MAX_BYTES || too_many_openings(bytes) {
            return fill_streamed(bytes, self, record.map_mut());
        }
        self.decode_tree(bytes, record)
    }

    /// [`Validation::Line`] through sonic-rs's tree, as long lines were read before needle's
    /// checker ([`FieldSet::decode_into_with_sonic_rs`]), for lines of at most
    /// [`FAST_SKIP_MAX_OPENINGS`] brackets (its parser recurses once per level).
    fn decode_tree(&self, bytes: &[u8], record: &mut Record) -> Result<(), RecordError> {
        let tree = sonic_rs::from_slice::<sonic_rs::Value>(bytes).map_err(|e| malformed(&e))?;
        let Some(object) = tree.as_object() else {
            return Err(RecordError::NotAnObject { found: sonic_kind_name(&tree) });
        };
        fill_object(record.map_mut(), object, 2, |key| {
            Names::position(self, key).map(|i| self.parts[i].as_deref())
        })
    }
}

impl FieldSet {
    /// [`Validation::Fields`]: sonic-rs's lazy lookup finds the fields (skipping the rest
    /// without building or fully checking it); each field found is decoded and checked in
    /// full (syntax, UTF-8, the nesting limit). Lines with more than
    /// [`FAST_SKIP_MAX_OPENINGS`] brackets are checked whole instead.
    fn decode_fields_only(
        &self,
        bytes: &[u8],
        lookup: &sonic_rs::PointerTree,
        record: &mut Record,
    ) -> Result<(), RecordError> {
        let map = record.map_mut();
        map.clear();
        starts_an_object(bytes)?;
        let Ok(found) = sonic_rs::get_many(bytes, lookup) else {
            // the lookup refuses some valid lines (`{}`): the whole-line check decides
            let mut whole = Record::new();
            self.decode_line(bytes, &mut whole)?;
            *map = whole.into_map();
            return Ok(());
        };
        for ((name, part), value) in self.names.iter().zip(&self.parts).zip(found) {
            let Some(value) = value else { continue };
            let mut value = decode_nested(value.as_raw_str().as_bytes())?;
            if let (Some(keys), Value::Map(object)) = (part, &mut value) {
                object.retain(|k, _| keys.iter().any(|wanted| **wanted == *k));
            }
            map.insert(name.to_string(), value);
        }
        Ok(())
    }
}

/// Sets `map` to the wanted values the checker `found` in `bytes`, as [`FillSeed`] does for a
/// stream: in the line's order, a key met twice keeping its first position and last value,
/// reusing `map`'s keys, strings and positions where they line up with the previous line's.
fn fill_found<N: Names + ?Sized>(
    bytes: &[u8],
    found: &[WantedValue],
    names: &N,
    map: &mut Map,
) -> Result<(), RecordError> {
    // entries before `next` are this line's; from `next` on, the previous line's
    let mut next = 0;
    for wanted in found {
        let (name, parts) = (names.name(wanted.name), names.parts(wanted.name));
        let Some(text) = bytes.get(wanted.start..wanted.end) else {
            return Err(RecordError::Malformed {
                message: "a value's bytes are out of the line".to_owned(),
                offset: Some(wanted.start),
            });
        };
        match map.get_index_mut(next) {
            Some((key, target)) if key == name => {
                value_into(text, wanted.start, target, parts)?;
                next += 1;
            }
            _ => match map.get_index_of(name) {
                // the key again (last value wins, first position stays)
                Some(at) if at < next => value_into(text, wanted.start, &mut map[at], parts)?,
                _ => {
                    map.truncate(next);
                    let mut value = Value::Null;
                    value_into(text, wanted.start, &mut value, parts)?;
                    map.insert(name.to_owned(), value);
                    next += 1;
                }
            },
        }
    }
    map.truncate(next);
    Ok(())
}

/// Decodes `text`, one checked JSON value at nesting level 2 found at byte `offset` of its line
/// (maybe followed by whitespace), over `target` ([`ValueInto`]'s rules: a string reuses the
/// target's buffer, an object is restricted to `parts`, [`MAX_DEPTH`] holds). Strings without
/// escapes, literals, integers of up to 18 digits and non-zero doubles are decoded here; the rest
/// by sonic-rs.
#[inline]
fn value_into(
    text: &[u8],
    offset: usize,
    target: &mut Value,
    parts: Option<&[Box<str>]>,
) -> Result<(), RecordError> {
    match text.first() {
        Some(b'"') => {
            if let Some(plain) = plain_string(text) {
                match target {
                    Value::String(s) => {
                        s.clear();
                        s.push_str(plain);
                    }
                    other => *other = Value::String(plain.to_owned()),
                }
                return Ok(());
            }
        }
        Some(b't') => {
            *target = Value::Bool(true);
            return Ok(());
        }
        Some(b'f') => {
            *target = Value::Bool(false);
            return Ok(());
        }
        Some(b'n') => {
            *target = Value::Null;
            return Ok(());
        }
        Some(b'-' | b'0'..=b'9') => {
            if let Some(number) = quick_number(text) {
                *target = number;
                return Ok(());
            }
        }
        _ => {}
    }
    let mut de = sonic_rs::Deserializer::from_slice(text);
    ValueInto { target, depth: 2, parts }.deserialize(&mut de).and_then(|()| de.end()).map_err(
        |e| RecordError::Malformed { message: e.to_string(), offset: Some(offset + e.offset()) },
    )
}

/// The contents of the checked string `text` (a quoted string, maybe followed by whitespace)
/// when it has no escape.
#[inline]
fn plain_string(text: &[u8]) -> Option<&str> {
    let end = text.iter().rposition(|&b| b == b'"')?;
    let inner = text.get(1..end)?;
    if memchr::memchr(b'\\', inner).is_some() {
        return None;
    }
    std::str::from_utf8(inner).ok()
}

/// The checked number `text` (maybe followed by whitespace) as sonic-rs decodes it, where that
/// is quick: an integer of at most 18 digits is a LONG (but `-0`, which sonic-rs reads as a
/// double); a number with a fraction or an exponent is the nearest DOUBLE — computed exactly
/// when its digits fit 2^53 and its power of ten is at most 22 (one exact multiplication or
/// division: Clinger's fast path), else by std's parse; both round correctly, as sonic-rs does.
/// `None` leaves the number to sonic-rs: longer integers, and zeros (sonic-rs drops the sign of
/// `-0.0`).
#[inline]
fn quick_number(text: &[u8]) -> Option<Value> {
    const POWERS: [f64; 23] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ];
    let (negative, rest) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    // the digits as an integer (while it has at most 18 significant digits), and the power of
    // ten it is to be scaled by
    let (mut mantissa, mut significant, mut scale) = (0u64, 0u32, 0i32);
    let (mut fraction, mut long) = (false, false);
    let mut i = 0;
    while let Some(&b) = rest.get(i) {
        match b {
            b'0'..=b'9' if significant < 18 => {
                mantissa = mantissa * 10 + u64::from(b - b'0');
                significant += u32::from(mantissa != 0);
                scale -= i32::from(fraction);
            }
            b'0'..=b'9' => long = true,
            b'.' => fraction = true,
            _ => break,
        }
        i += 1;
    }
    let exponent = matches!(rest.get(i), Some(b'e' | b'E'));
    if !fraction && !exponent {
        return match (long, negative, mantissa) {
            (true, _, _) | (false, true, 0) => None,
            (false, true, n) => Some(Value::Long(-(n as i64))),
            (false, false, n) => Some(Value::Long(n as i64)),
        };
    }
    let mut end = i;
    if exponent {
        let (mut power, mut minus) = (0i32, false);
        end += 1;
        while let Some(&b) = rest.get(end) {
            match b {
                b'-' => minus = true,
                b'+' => {}
                b'0'..=b'9' => power = power.saturating_mul(10).saturating_add(i32::from(b - b'0')),
                _ => break,
            }
            end += 1;
        }
        scale = scale.saturating_add(if minus { -power } else { power });
    }
    let x = match POWERS.get(scale.unsigned_abs() as usize) {
        Some(&power) if !long && significant <= 15 => {
            let magnitude = mantissa as f64;
            let x = if scale >= 0 { magnitude * power } else { magnitude / power };
            if negative {
                -x
            } else {
                x
            }
        }
        _ => std::str::from_utf8(text.get(..end + usize::from(negative))?).ok()?.parse().ok()?,
    };
    (x != 0.0 && x.is_finite()).then_some(Value::Double(x))
}

/// What to keep of an object's entry: `None` skips it; `Some(None)` keeps it whole;
/// `Some(Some(keys))` keeps only these keys of it when it is an object.
type Wanted<'k> = Option<Option<&'k [Box<str>]>>;

/// Sets `map` to the entries of `object` that `want` keeps, their values at nesting level
/// `depth`, reusing `map`'s keys and values where they come in the same order as before.
fn fill_object<'k>(
    map: &mut Map,
    object: &sonic_rs::Object,
    depth: usize,
    want: impl Fn(&str) -> Wanted<'k>,
) -> Result<(), RecordError> {
    let mut next = 0;
    for (key, value) in object.iter() {
        let Some(parts) = want(key) else { continue };
        match map.get_index_mut(next) {
            Some((k, v)) if *k == key => {
                fill_value(v, value, depth, parts)?;
                next += 1;
            }
            _ => match map.get_index_of(key) {
                // the key again (last value wins, first position stays)
                Some(at) if at < next => fill_value(&mut map[at], value, depth, parts)?,
                _ => {
                    map.truncate(next);
                    let mut v = Value::Null;
                    fill_value(&mut v, value, depth, parts)?;
                    map.insert(key.to_owned(), v);
                    next += 1;
                }
            },
        }
    }
    map.truncate(next);
    Ok(())
}

/// Sets `target` to `v` at nesting level `depth` (an object restricted to `parts` when given),
/// reusing `target`'s string or map when it has the same kind.
fn fill_value(
    target: &mut Value,
    v: &sonic_rs::Value,
    depth: usize,
    parts: Option<&[Box<str>]>,
) -> Result<(), RecordError> {
    match (v.get_type(), &mut *target) {
        (sonic_rs::JsonType::String, Value::String(s)) => {
            s.clear();
            s.push_str(v.as_str().unwrap_or_default());
        }
        (sonic_rs::JsonType::Object, _) if parts.is_some() || depth <= MAX_DEPTH => {
            let Some(object) = v.as_object() else { return Ok(()) };
            if !matches!(target, Value::Map(_)) {
                *target = Value::Map(Map::default());
            }
            let Value::Map(map) = target else { unreachable!("made a map above") };
            match parts {
                Some(keys) => fill_object(map, object, depth + 1, |k| {
                    keys.iter().any(|wanted| **wanted == *k).then_some(None)
                })?,
                None => fill_object(map, object, depth + 1, |_| Some(None))?,
            }
        }
        _ => *target = from_sonic(v, depth)?,
    }
    Ok(())
}

/// True when `bytes` holds more than [`FAST_SKIP_MAX_OPENINGS`] `{` and `[` bytes (strings
/// included): a bound on how deep it nests.
fn too_many_openings(bytes: &[u8]) -> bool {
    more_openings_than(bytes, FAST_SKIP_MAX_OPENINGS)
}

/// True when `bytes` holds more than `bound` `{` and `[` bytes (strings included): with at most
/// `bound`, it cannot nest deeper. memchr's SIMD search jumps between them, and the count stops
/// at the bound.
fn more_openings_than(bytes: &[u8], bound: usize) -> bool {
    bytes.len() > bound && memchr::memchr2_iter(b'{', b'[', bytes).nth(bound).is_some()
}

/// Converts a sonic-rs tree value at nesting level `depth` (the same rules as [`ValueSeed`]).
fn from_sonic(v: &sonic_rs::Value, depth: usize) -> Result<Value, RecordError> {
    let too_deep = || RecordError::Malformed {
        message: format!("arrays and objects nest deeper than {MAX_DEPTH} levels"),
        offset: None,
    };
    Ok(match v.get_type() {
        sonic_rs::JsonType::Null => Value::Null,
        sonic_rs::JsonType::Boolean => Value::Bool(v.is_true()),
        sonic_rs::JsonType::Number => match (v.as_i64(), v.as_f64()) {
            (Some(i), _) => Value::Long(i),
            (None, Some(f)) => Value::Double(f),
            (None, None) => Value::Null,
        },
        sonic_rs::JsonType::String => Value::String(v.as_str().unwrap_or_default().to_owned()),
        sonic_rs::JsonType::Array => {
            if depth > MAX_DEPTH {
                return Err(too_deep());
            }
            let items = v.as_array().map_or(&[][..], |a| a.as_slice());
            Value::List(items.iter().map(|i| from_sonic(i, depth + 1)).collect::<Result<_, _>>()?)
        }
        sonic_rs::JsonType::Object => {
            if depth > MAX_DEPTH {
                return Err(too_deep());
            }
            let mut map = Map::default();
            if let Some(object) = v.as_object() {
                map.reserve(object.len());
                for (k, item) in object.iter() {
                    map.insert(k.to_owned(), from_sonic(item, depth + 1)?);
                }
            }
            Value::Map(map)
        }
    })
}

fn sonic_kind_name(v: &sonic_rs::Value) -> &'static str {
    match v.get_type() {
        sonic_rs::JsonType::Null => "null",
        sonic_rs::JsonType::Boolean => "a boolean",
        sonic_rs::JsonType::Number => "a number",
        sonic_rs::JsonType::String => "a string",
        sonic_rs::JsonType::Array => "an array",
        sonic_rs::JsonType::Object => "an object",
    }
}

impl Names for FieldSet {
    /// Most keys of a line are not wanted: the Bloom filter, inlined where keys are read,
    /// passes them over without a call, a comparison or a hash.
    #[inline(always)]
    fn position(&self, key: &str) -> Option<usize> {
        if !self.may_hold(key.as_bytes()) {
            return None;
        }
        self.position_of(key)
    }

    fn name(&self, i: usize) -> &str {
        &self.names[i]
    }

    fn parts(&self, i: usize) -> Option<&[Box<str>]> {
        self.parts[i].as_deref()
    }
}

impl FieldSet {
    /// False when no name is `key` (the Bloom filter); true when one may be.
    #[inline(always)]
    fn may_hold(&self, key: &[u8]) -> bool {
        let slot = bloom_slot(key);
        self.bloom[slot / 64] & (1 << (slot % 64)) != 0
    }

    /// [`Names::position`] of a key given as bytes (not UTF-8: no name).
    #[inline(always)]
    fn position_of_bytes(&self, key: &[u8]) -> Option<usize> {
        if !self.may_hold(key) {
            return None;
        }
        match &self.index {
            Some(index) => index.get(std::str::from_utf8(key).ok()?).copied(),
            None => self.names.iter().position(|n| n.as_bytes() == key),
        }
    }

    /// Where `key` stands among the names, past the Bloom filter.
    #[inline(never)]
    fn position_of(&self, key: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(key).copied(),
            None => self.names.iter().position(|n| **n == *key),
        }
    }
}

fn malformed(e: &sonic_rs::Error) -> RecordError {
    RecordError::Malformed { message: e.to_string(), offset: Some(e.offset()) }
}

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Int(_) | Value::Long(_) | Value::Float(_) | Value::Double(_) => "a number",
        Value::String(_) => "a string",
        Value::List(_) => "an array",
        Value::Map(_) => "an object",
    }
}

fn too_deep<E: de::Error>() -> E {
    E::custom(format_args!("arrays and objects nest deeper than {MAX_DEPTH} levels"))
}

/// Any JSON value as a [`Value`], by the rules in this module's doc (numbers: LONG when the
/// integer fits an `i64`, DOUBLE otherwise; objects keep key order, last duplicate wins; at most
/// [`MAX_DEPTH`] levels of nesting below the value being deserialized).
impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
        ValueSeed { depth: 1 }.deserialize(deserializer)
    }
}

/// A [`Value`] whose arrays and objects would be at nesting level `depth`.
#[derive(Clone, Copy)]
struct ValueSeed {
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Long(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(match i64::try_from(v) {
            Ok(v) => Value::Long(v),
            Err(_) => Value::Double(v as f64),
        })
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Double(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        if self.depth > MAX_DEPTH {
            return Err(too_deep());
        }
        let inner = ValueSeed { depth: self.depth + 1 };
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element_seed(inner)? {
            items.push(item);
        }
        Ok(Value::List(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        if self.depth > MAX_DEPTH {
            return Err(too_deep());
        }
        let inner = ValueSeed { depth: self.depth + 1 };
        // Gather the entries first so the map is built at its final size: growing an IndexMap
        // entry by entry rehashes it at every doubling.
        let mut entries: Vec<(String, Value)> = Vec::with_capacity(8);
        while let Some(key) = access.next_key::<String>()? {
            entries.push((key, access.next_value_seed(inner)?));
        }
        let mut map = crate::map_with_capacity(entries.len());
        for (key, value) in entries {
            map.insert(key, value);
        }
        Ok(Value::Map(map))
    }
}

/// Skips one JSON value whose arrays and objects would be at nesting level `depth`, building
/// nothing: strings are borrowed when they can be, numbers are parsed (so a skipped value is
/// held to exactly the rules of a decoded one).
#[derive(Clone, Copy)]
struct Skip {
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Skip {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if self.depth > MAX_DEPTH {
            return Err(too_deep());
        }
        while seq.next_element_seed(Skip { depth: self.depth + 1 })?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<(), A::Error> {
        if self.depth > MAX_DEPTH {
            return Err(too_deep());
        }
        while access.next_key::<de::IgnoredAny>()?.is_some() {
            access.next_value_seed(Skip { depth: self.depth + 1 })?;
        }
        Ok(())
    }
}

/// Deserializes the top-level object into `map`, keeping only the entries `names` wants: their
/// keys are matched without allocating, their values decode as [`Value`]s into the slots the
/// previous line left where they line up ([`ValueInto`]), every other value is [`Skip`]ped.
struct FillSeed<'a, N: ?Sized> {
    names: &'a N,
    map: &'a mut Map,
}

/// Where a key stands among the wanted names.
trait Names {
    fn position(&self, key: &str) -> Option<usize>;
    fn name(&self, i: usize) -> &str;
    /// The keys to keep of the `i`th name's value when it is an object (`None`: all of it).
    fn parts(&self, _i: usize) -> Option<&[Box<str>]> {
        None
    }
}

impl Names for [&str] {
    fn position(&self, key: &str) -> Option<usize> {
        self.iter().position(|n| *n == key)
    }

    fn name(&self, i: usize) -> &str {
        self[i]
    }
}

impl<'de, N: Names + ?Sized> DeserializeSeed<'de> for FillSeed<'_, N> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, N: Names + ?Sized> Visitor<'de> for FillSeed<'_, N> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<(), A::Error> {
        let map = self.map;
        // entries before `next` are this line's; from `next` on, the previous line's
        let mut next = 0;
        while let Some(wanted) = access.next_key_seed(KeyFilter { names: self.names })? {
            let Some(i) = wanted else {
                access.next_value_seed(Skip { depth: 2 })?;
                continue;
            };
            let (name, parts) = (self.names.name(i), self.names.parts(i));
            match map.get_index_mut(next) {
                Some((key, target)) if key == name => {
                    access.next_value_seed(ValueInto { target, depth: 2, parts })?;
                    next += 1;
                }
                _ => match map.get_index_of(name) {
                    // the key again (last value wins, first position stays)
                    Some(at) if at < next => access.next_value_seed(ValueInto {
                        target: &mut map[at],
                        depth: 2,
                        parts,
                    })?,
                    _ => {
                        map.truncate(next);
                        let mut value = Value::Null;
                        access.next_value_seed(ValueInto {
                            target: &mut value,
                            depth: 2,
                            parts,
                        })?;
                        map.insert(name.to_owned(), value);
                        next += 1;
                    }
                },
            }
        }
        map.truncate(next);
        Ok(())
    }
}

/// A [`Value`] at nesting level `depth` written over `target`: a string reuses the target's
/// buffer; an object is restricted to `parts` when given; anything else is built anew
/// ([`ValueSeed`]).
struct ValueInto<'v> {
    target: &'v mut Value,
    depth: usize,
    parts: Option<&'v [Box<str>]>,
}

impl<'de> DeserializeSeed<'de> for ValueInto<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueInto<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        *self.target = Value::Bool(v);
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        *self.target = Value::Long(v);
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        *self.target = ValueSeed { depth: self.depth }.visit_u64(v)?;
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        *self.target = Value::Double(v);
        Ok(())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        match self.target {
            Value::String(s) => {
                s.clear();
                s.push_str(v);
            }
            other => *other = Value::String(v.to_owned()),
        }
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        *self.target = Value::Null;
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        *self.target = Value::Null;
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        *self.target = ValueSeed { depth: self.depth }.visit_seq(seq)?;
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, access: A) -> Result<(), A::Error> {
        let mut value = ValueSeed { depth: self.depth }.visit_map(access)?;
        if let (Some(keys), Value::Map(map)) = (self.parts, &mut value) {
            map.retain(|k, _| keys.iter().any(|wanted| **wanted == *k));
        }
        *self.target = value;
        Ok(())
    }
}

/// Every key of an object, by its own name: [`decode_record_into`].
struct AllKeys;

impl<'de> DeserializeSeed<'de> for FillSeed<'_, AllKeys> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FillSeed<'_, AllKeys> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<(), A::Error> {
        let map = self.map;
        // entries before `next` are this line's; from `next` on, the previous line's
        let mut next = 0;
        while let Some(key) = access.next_key::<std::borrow::Cow<'de, str>>()? {
            let same_place = map.get_index(next).is_some_and(|(k, _)| **k == *key);
            let at = match if same_place { Some(next) } else { map.get_index_of(key.as_ref()) } {
                // the key again (last value wins, first position stays)
                Some(at) if at < next => at,
                // the key where the previous line had it
                Some(at) if at == next => {
                    next += 1;
                    at
                }
                _ => {
                    map.truncate(next);
                    map.insert(key.into_owned(), Value::Null);
                    next += 1;
                    next - 1
                }
            };
            access.next_value_seed(ValueInto { target: &mut map[at], depth: 2, parts: None })?;
        }
        map.truncate(next);
        Ok(())
    }
}

/// A map key, as the index in `names` of the name it equals (or `None`).
struct KeyFilter<'a, N: ?Sized> {
    names: &'a N,
}

impl<'de, N: Names + ?Sized> DeserializeSeed<'de> for KeyFilter<'_, N> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<usize>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de, N: Names + ?Sized> Visitor<'de> for KeyFilter<'_, N> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Option<usize>, E> {
        Ok(self.names.position(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rec(json: &str) -> Record {
        decode_record(json.as_bytes()).unwrap()
    }

    fn restrict(r: &Record, names: &[&str]) -> Record {
        r.iter()
            .filter(|(k, _)| names.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    #[test]
    fn numbers_follow_the_long_double_rule() {
        let r = rec(r#"{"a":1,"b":-9223372036854775808,"c":9223372036854775807,
            "d":9223372036854775808,"e":18446744073709551616,"f":1.5,"g":1e3}"#);
        assert_eq!(r.get("a"), Some(&Value::Long(1)));
        assert_eq!(r.get("b"), Some(&Value::Long(i64::MIN)));
        assert_eq!(r.get("c"), Some(&Value::Long(i64::MAX)));
        assert_eq!(r.get("d"), Some(&Value::Double(9223372036854775808.0)));
        assert_eq!(r.get("e"), Some(&Value::Double(18446744073709551616.0)));
        assert_eq!(r.get("f"), Some(&Value::Double(1.5)));
        assert_eq!(r.get("g"), Some(&Value::Double(1000.0)));
    }

    #[test]
    fn decodes_every_kind_and_keeps_key_order() {
        let r = rec(r#" {"z":null,"y":true,"x":"h\u00e9\n","w":[1,{"b":2,"a":[]}],"v":{}} "#);
        let keys: Vec<&str> = r.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["z", "y", "x", "w", "v"]);
        assert_eq!(r.get("z"), Some(&Value::Null));
        assert_eq!(r.get("y"), Some(&Value::Bool(true)));
        assert_eq!(r.get("x"), Some(&Value::from("hé\n")));
        let inner: Map = [("b".to_owned(), Value::Long(2)), ("a".to_owned(), Value::List(vec![]))]
            .into_iter()
            .collect();
        assert_eq!(r.get("w"), Some(&Value::List(vec![Value::Long(1), Value::Map(inner)])));
        assert_eq!(r.get("v"), Some(&Value::Map(Map::default())));
        assert_eq!(r.to_json(), r#"{"z":null,"y":true,"x":"hé\n","w":[1,{"b":2,"a":[]}],"v":{}}"#);
    }

    #[test]
    fn duplicate_keys_last_value_wins_at_first_position() {
        let r = rec(r#"{"a":1,"b":2,"a":3}"#);
        assert_eq!(r.to_json(), r#"{"a":3,"b":2}"#);
        let f = decode_fields(br#"{"a":1,"b":2,"a":3}"#, &["a"]).unwrap();
        assert_eq!(f.to_json(), r#"{"a":3}"#);
    }

    #[test]
    fn non_objects_are_reported_by_kind() {
        for (json, found) in [
            ("[1]", "an array"),
            ("3", "a number"),
            ("\"s\"", "a string"),
            ("null", "null"),
            ("true", "a boolean"),
        ] {
            assert_eq!(decode_record(json.as_bytes()), Err(RecordError::NotAnObject { found }));
            assert_eq!(
                decode_fields(json.as_bytes(), &["a"]),
                Err(RecordError::NotAnObject { found })
            );
        }
    }

    #[test]
    fn malformed_input_reports_the_offset() {
        let cases: [(&[u8], usize); 5] = [
            (br#"{"a":1,}"#, 7),
            (br#"{"a":tru}"#, 7),
            (br#"{"a":1} x"#, 8),
            (b"", 0),
            (b"{\"a\":\"\xff\"}", 6),
        ];
        for (json, want) in cases {
            match decode_record(json) {
                Err(RecordError::Malformed { offset: Some(at), .. }) => {
                    assert!(
                        at.abs_diff(want) <= 2,
                        "{:?}: offset {at}, expected near {want}",
                        String::from_utf8_lossy(json)
                    )
                }
                other => panic!("{:?}: {other:?}", String::from_utf8_lossy(json)),
            }
            assert!(
                matches!(
                    decode_fields(json, &["b"]),
                    Err(RecordError::Malformed { offset: Some(_), .. })
                ),
                "{:?}",
                String::from_utf8_lossy(json)
            );
        }
    }

    #[test]
    fn skipped_fields_are_still_validated() {
        for json in [
            &br#"{"a":1,"b":[1,2,}"#[..],
            br#"{"a":1,"b":"x\q"}"#,
            b"{\"a\":1,\"b\":\"\xc3\x28\"}",
            br#"{"a":1,"b":{"c":nul}}"#,
            br#"{"a":1} {"#,
            br#"{"a":1}}"#,
            br#"{"a":1"#,
            br#"{"a":1,"b":[1e400]}"#,
        ] {
            assert!(decode_record(json).is_err(), "{:?}", String::from_utf8_lossy(json));
            assert!(decode_fields(json, &["a"]).is_err(), "{:?}", String::from_utf8_lossy(json));
        }
    }

    #[test]
    fn decode_fields_equals_the_restricted_full_decode() {
        let json = br#"{"id":"ab12","n":7,"m":{"k":"v"},"l":[{"x":1}],"s":"t","d":2.5}"#;
        let full = decode_record(json).unwrap();
        for names in
            [&["id"][..], &["m", "d"], &["l", "id", "zz"], &[], &["id", "n", "m", "l", "s", "d"]]
        {
            assert_eq!(decode_fields(json, names).unwrap(), restrict(&full, names), "{names:?}");
        }
        assert_eq!(decode_fields(b" {} ", &["a"]).unwrap(), Record::new());
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        for depth in [MAX_DEPTH + 1, 300, 100_000] {
            let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            assert!(matches!(decode_value(deep.as_bytes()), Err(RecordError::Malformed { .. })));
            let field = format!(r#"{{"a":1,"b":{deep}}}"#);
            assert!(matches!(
                decode_fields(field.as_bytes(), &["a"]),
                Err(RecordError::Malformed { .. })
            ));
            assert!(matches!(decode_record(field.as_bytes()), Err(RecordError::Malformed { .. })));
            let unclosed = "{\"a\":".to_owned() + &"{\"a\":".repeat(depth);
            assert!(decode_fields(unclosed.as_bytes(), &["a"]).is_err());
        }
        // The deepest accepted nesting decodes (the record itself is level 1).
        let ok = format!(r#"{{"a":{}{}}}"#, "[".repeat(MAX_DEPTH - 1), "]".repeat(MAX_DEPTH - 1));
        assert!(decode_record(ok.as_bytes()).is_ok());
        assert_eq!(
            decode_fields(ok.as_bytes(), &["a"]).unwrap(),
            decode_record(ok.as_bytes()).unwrap()
        );
        // Brackets inside strings do not count.
        let quoted = format!(r#"{{"a":"{}"}}"#, "[".repeat(1000));
        assert!(decode_record(quoted.as_bytes()).is_ok());
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<u64>().prop_map(serde_json::Value::from),
            (-1e12f64..1e12).prop_map(serde_json::Value::from),
            "[a-z\"\\\\é\u{1F600}\n]{0,8}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
                prop::collection::vec(("[a-e]{1,2}", inner), 0..6)
                    .prop_map(|kv| serde_json::Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    fn json_object() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(("[a-e]{1,2}", json_value()), 0..8).prop_map(|kv| {
            serde_json::to_vec(&serde_json::Value::Object(kv.into_iter().collect())).unwrap()
        })
    }

    /// The conversion the first decoder did (serde_json tree, then convert): the reference.
    fn reference(json: serde_json::Value) -> Value {
        match json {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Value::Long(i),
                None => Value::Double(n.as_f64().unwrap()),
            },
            serde_json::Value::String(s) => Value::String(s),
            serde_json::Value::Array(items) => {
                Value::List(items.into_iter().map(reference).collect())
            }
            serde_json::Value::Object(map) => {
                Value::Map(map.into_iter().map(|(k, v)| (k, reference(v))).collect())
            }
        }
    }

    /// The decoders agree on success/failure, and decode_fields equals the restricted decode.
    fn agree(bytes: &[u8]) -> Result<(), TestCaseError> {
        let full = decode_record(bytes);
        for names in [&["a"][..], &["b", "cd"], &[]] {
            let some = decode_fields(bytes, names);
            match (&full, &some) {
                (Ok(full), Ok(some)) => prop_assert_eq!(&restrict(full, names), some),
                (Err(_), Err(_)) => {}
                _ => prop_assert!(false, "decode_record {:?} but decode_fields {:?}", full, some),
            }
        }
        Ok(())
    }

    /// The fast path accepts a superset of what the full decode accepts, with equal values.
    /// [`Validation::Fields`] against the whole-line decoder: where the line decodes whole and
    /// has no key twice, the fields read are the same (in any order); where it does not, either
    /// an error or fields that each decode as they stand.
    fn fields_only_agrees(bytes: &[u8]) -> Result<(), TestCaseError> {
        let parts = [("a", Some("b")), ("cd", None), ("b", None), ("e", None)];
        let line = FieldSet::with_parts(parts);
        let fields = FieldSet::with_parts(parts).with_validation(Validation::Fields);
        let sorted = |r: &Record| {
            let mut v: Vec<(String, Value)> =
                r.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        let duplicates = serde_json::from_slice::<serde_json::Value>(bytes)
            .map(|v| {
                let text = String::from_utf8_lossy(bytes);
                v.as_object().is_some_and(|o| {
                    o.keys().any(|k| text.matches(&format!("\"{k}\":")).count() > 1)
                })
            })
            .unwrap_or(true);
        // short lines are read whole; the lookup itself, whatever the length
        let lookup = fields.lookup.as_deref().expect("a lookup with Validation::Fields");
        let mut looked_up = Record::new();
        let looked_up = (!too_many_openings(bytes))
            .then(|| fields.decode_fields_only(bytes, lookup, &mut looked_up).map(|()| looked_up))
            .into_iter();
        for read in std::iter::once(fields.decode(bytes)).chain(looked_up) {
            match (line.decode(bytes), read) {
                (Ok(whole), Ok(read)) if !duplicates => {
                    prop_assert_eq!(sorted(&whole), sorted(&read))
                }
                (Ok(whole), Err(e)) => {
                    prop_assert!(false, "line check {:?} but fields {:?}", whole, e)
                }
                _ => {}
            }
        }
        Ok(())
    }

    #[test]
    fn checking_only_the_fields_read_skips_the_rest_but_checks_what_it_reads() {
        let set = FieldSet::with_parts([("a", None), ("m", Some("k"))])
            .with_validation(Validation::Fields);
        assert_eq!(set.validation(), Validation::Fields);
        let json = |line: &str| set.decode(line.as_bytes()).map(|r| r.to_json());
        // in a long line, what no query reads is not checked ...
        let pad = format!(r#""pad":"{}""#, "x".repeat(STREAM_MAX_BYTES));
        assert_eq!(
            json(&format!(r#"{{"a":1,"m":{{"k":2,"j":3}},{pad}}} trailing"#)).unwrap(),
            r#"{"a":1,"m":{"k":2}}"#
        );
        assert_eq!(
            json(&format!(r#"{{"a":1,"z":"\ud800",{pad},"m":{{"k":2}}}}"#)).unwrap(),
            r#"{"a":1,"m":{"k":2}}"#
        );
        // ... a short line is read whole, as with Validation::Line
        assert!(json(r#"{"a":1,"m":{"k":2,"j":3}} trailing"#).is_err());
        assert_eq!(json(r#"{"m":{"k":2,"j":3},"a":1}"#).unwrap(), r#"{"m":{"k":2},"a":1}"#);
        // ... what it reads is, in full, nesting limit included
        assert!(json(r#"{"a":[1,}"#).is_err());
        let deep = format!(r#"{{"a":{}1{}}}"#, "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(json(&deep).is_err(), "level 33 inside a record");
        let ok = format!(r#"{{"a":{}1{}}}"#, "[".repeat(MAX_DEPTH - 1), "]".repeat(MAX_DEPTH - 1));
        assert!(json(&ok).is_ok());
        let twice = json(r#"{"a":1,"a":2}"#).unwrap();
        assert!(twice == r#"{"a":1}"# || twice == r#"{"a":2}"#, "one of a key's values: {twice}");
        assert_eq!(json("{}").unwrap(), "{}");
        assert!(matches!(
            set.decode(b"[1,2]"),
            Err(RecordError::NotAnObject { found: "an array" })
        ));
        for bad in ["", "   ", "nonsense", "{\"a\":tru}", "{"] {
            assert!(set.decode(bad.as_bytes()).is_err(), "{bad:?}");
        }
        assert_eq!(json(r#"{"b":1}"#).unwrap(), "{}", "no field read: an empty record");
        // an unread value nested a million levels deep: an answer, not a stack overflow
        let depth = 1_000_000;
        let line = format!(r#"{{"x":{}{},"a":1}}"#, "[".repeat(depth), "]".repeat(depth));
        let _ = set.decode(line.as_bytes());
        let line = format!(r#"{{"a":1,"x":{}"#, "[".repeat(depth));
        let _ = set.decode(line.as_bytes());
    }

    /// [`FieldSet::whole_record`] of a line `set` accepted is [`decode_record`]'s record (the
    /// same fields in the same order, refused when it is), kept as the line's text where the
    /// set checked the line whole, and written out it reads back as that record.
    fn whole_agrees(
        set: &FieldSet,
        bytes: &[u8],
        full: &Result<Record, RecordError>,
    ) -> Result<(), TestCaseError> {
        let whole = set.whole_record(bytes);
        match (full, &whole) {
            (Ok(full), Ok(whole)) => {
                let order = |r: &Record| r.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
                prop_assert_eq!(order(full), order(whole));
                prop_assert_eq!(full, whole);
                let text = whole.to_json();
                prop_assert_eq!(&decode_record(text.as_bytes()).unwrap(), full);
                // kept as its line, however the set read it
                prop_assert_eq!(whole.json_text(), Some(text.as_str()));
                prop_assert_eq!(text.as_str(), std::str::from_utf8(bytes).unwrap().trim());
            }
            (Err(_), Err(_)) => {}
            (full, whole) => prop_assert!(false, "decode_record {:?} but whole {:?}", full, whole),
        }
        Ok(())
    }

    fn fast_agrees(bytes: &[u8]) -> Result<(), TestCaseError> {
        let full = decode_record(bytes);
        // the whole record into a kept one: what decode_record gives, whatever it held before
        let other = br#"{"b":{"a":"y"},"a":"old","cd":"x","zz":1,"a2":[1]}"#;
        for earlier in [&other[..], bytes, b"{}"] {
            let mut kept = decode_record(earlier).unwrap_or_default();
            let again = decode_record_into(bytes, &mut kept).map(|()| kept);
            prop_assert_eq!(full.as_ref().ok(), again.as_ref().ok());
            prop_assert_eq!(full.is_ok(), again.is_ok());
            if let (Ok(full), Ok(again)) = (&full, &again) {
                let order = |r: &Record| r.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
                prop_assert_eq!(order(full), order(again));
            }
        }
        for names in
            [&["a"][..], &["b", "cd"], &[], &["a", "b", "c", "d", "e", "f", "g", "h", "cd"]]
        {
            let set = FieldSet::new(names.iter());
            // short lines are read as a stream: exactly what decode_record accepts
            match (&full, set.decode(bytes)) {
                (Ok(full), Ok(some)) => prop_assert_eq!(restrict(full, names), some),
                (Ok(full), Err(e)) => {
                    prop_assert!(false, "decode_record {:?} but fast {:?}", full, e)
                }
                (Err(e), Ok(some)) if bytes.len() <= STREAM_MAX_BYTES => {
                    prop_assert!(false, "decode_record {:?} but stream {:?}", e, some)
                }
                (Err(_), _) => {}
            }
            // the whole record of a line the set accepted, in both modes
            for validation in [Validation::Line, Validation::Fields] {
                let set = FieldSet::new(names.iter()).with_validation(validation);
                if set.decode(bytes).is_ok() {
                    whole_agrees(&set, bytes, &full)?;
                }
            }
            // long lines take the tree: a superset of what decode_record accepts
            if !too_many_openings(bytes) {
                let mut tree = Record::new();
                match (&full, set.decode_tree(bytes, &mut tree)) {
                    (Ok(full), Ok(())) => prop_assert_eq!(restrict(full, names), tree),
                    (Ok(full), Err(e)) => {
                        prop_assert!(false, "decode_record {:?} but tree {:?}", full, e)
                    }
                    (Err(_), _) => {}
                }
            }
        }
        // keys of object fields: `a` by two keys, `b` whole after a key was asked of it
        let parts =
            [("a", Some("b")), ("a", Some("c")), ("cd", None), ("b", Some("a")), ("b", None)];
        let set = FieldSet::with_parts(parts);
        // decoding into a record that held other lines gives the same record
        let fresh = set.decode(bytes);
        let mut reused = Record::new();
        let other = br#"{"b":{"a":"y","q":[{"r":1}]},"a":{"c":"old","b":[1]},"cd":"x","zz":1}"#;
        for earlier in [&other[..], bytes] {
            if set.decode_into(earlier, &mut reused).is_ok() {
                let again = set.decode_into(bytes, &mut reused).map(|()| reused.clone());
                prop_assert_eq!(fresh.as_ref().ok(), again.as_ref().ok());
                prop_assert_eq!(fresh.is_ok(), again.is_ok());
            }
            // the same through the tree, which reuses the record its own way
            if !too_many_openings(bytes) && set.decode_tree(earlier, &mut reused).is_ok() {
                let mut tree = Record::new();
                let once = set.decode_tree(bytes, &mut tree).map(|()| tree);
                let again = set.decode_tree(bytes, &mut reused).map(|()| reused.clone());
                prop_assert_eq!(once.ok(), again.ok());
            }
        }
        assert!(set.keys_of("a").is_some() && set.keys_of("b").is_none());
        let mut tree = Record::new();
        let tree = (!too_many_openings(bytes))
            .then(|| set.decode_tree(bytes, &mut tree).map(|()| tree))
            .into_iter();
        for decoded in std::iter::once(set.decode(bytes)).chain(tree) {
            match (&full, decoded) {
                (Ok(full), Ok(some)) => {
                    let mut expected = restrict(full, &["a", "cd", "b"]);
                    for (name, value) in expected.fields_mut() {
                        if let (true, Value::Map(map)) = (name == "a", value) {
                            map.retain(|k, _| k == "b" || k == "c");
                        }
                    }
                    prop_assert_eq!(expected, some);
                }
                (Ok(full), Err(e)) => {
                    prop_assert!(false, "decode_record {:?} but parts {:?}", full, e)
                }
                (Err(_), _) => {}
            }
        }
        Ok(())
    }

    #[test]
    fn object_fields_asked_for_by_key_keep_those_keys_on_both_paths() {
        let set = FieldSet::with_parts([("m", Some("k")), ("m", Some("j")), ("n", None)]);
        // past FAST_SKIP_MAX_OPENINGS brackets, the line takes the other decoder
        let wide = format!("[{}]", vec!["[]"; FAST_SKIP_MAX_OPENINGS].join(","));
        for pad in ["1".to_owned(), wide] {
            let line =
                format!(r#"{{"m":{{"z":0,"j":[1],"k":"v","j":2}},"pad":{pad},"n":{{"k":1}}}}"#);
            let record = set.decode(line.as_bytes()).unwrap();
            assert_eq!(record.to_json(), r#"{"m":{"j":2,"k":"v"},"n":{"k":1}}"#, "{pad}");
        }
        // a field that is not an object is decoded whole
        let record = set.decode(br#"{"m":[{"k":1}]}"#).unwrap();
        assert_eq!(record.to_json(), r#"{"m":[{"k":1}]}"#);
    }

    #[test]
    fn field_set_fast_path_skips_validated_json_and_bounds_its_recursion() {
        let set = FieldSet::new(["a"]);
        // skipped values are still held to JSON's syntax
        for bad in [&br#"{"a":1,"b":[1,}"#[..], br#"{"a":1,"b":tru}"#, br#"{"a":1,"b":"x}"#] {
            assert!(set.decode(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        // a skipped value nested past MAX_DEPTH is accepted in a line long enough for the tree
        // (documented), refused in a short one, which is read as a stream ...
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 5), "]".repeat(MAX_DEPTH + 5));
        let line = format!(r#"{{"a":1,"b":{deep}}}"#);
        assert!(line.len() <= STREAM_MAX_BYTES);
        assert!(set.decode(line.as_bytes()).is_err());
        let pad = "x".repeat(STREAM_MAX_BYTES);
        let line = format!(r#"{{"a":1,"b":{deep},"pad":"{pad}"}}"#);
        assert_eq!(set.decode(line.as_bytes()).unwrap().get("a"), Some(&Value::Long(1)));
        // ... while a line with more brackets than the fast path allows is skipped level by
        // level: no stack overflow, the nesting limit applies
        for depth in [FAST_SKIP_MAX_OPENINGS + 1, 100_000] {
            let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            let line = format!(r#"{{"a":1,"b":{deep}}}"#);
            assert!(matches!(set.decode(line.as_bytes()), Err(RecordError::Malformed { .. })));
        }
        // a wanted value is always decoded under the limit
        let line = format!(r#"{{"a":{deep}}}"#);
        assert!(set.decode(line.as_bytes()).is_err());
        assert_eq!(FieldSet::new(["a", "a", "b"]).len(), 2);
        let big = FieldSet::new((0..20).map(|i| format!("f{i}")));
        assert!(big.contains("f19") && !big.contains("f20"));
    }

    /// [`Validation::Line`] through needle's checker, with every stage-1 kernel, against the
    /// way sonic-rs read lines before it: the same decision on every line and the same record,
    /// also when decoding into a record that held other lines; and, where [`decode_record`]
    /// accepts the line, its record restricted to the set.
    fn checker_agrees(bytes: &[u8]) -> Result<(), TestCaseError> {
        let full = decode_record(bytes);
        let parts = [
            ("a", Some("b")),
            ("a", Some("c")),
            ("cd", None),
            ("b", Some("a")),
            ("b", None),
            ("e", None),
        ];
        let sets = [FieldSet::new(["a"]), FieldSet::with_parts(parts), FieldSet::new([""; 0])];
        let other = br#"{"b":{"a":"y","q":[{"r":1}]},"a":{"c":"old","b":[1]},"cd":"x","zz":1}"#;
        for set in &sets {
            let mut before = Record::new();
            let sonic = set.decode_into_with_sonic_rs(bytes, &mut before).map(|()| before);
            for kernel in check::Kernel::available() {
                let mut fresh = Record::new();
                let checked = set.decode_checked(kernel, bytes, &mut fresh).map(|()| fresh);
                match (&sonic, &checked) {
                    (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
                    (Err(_), Err(_)) => {}
                    _ => prop_assert!(
                        false,
                        "{:?}: sonic-rs {:?}, checker {:?} on {:?}",
                        kernel,
                        sonic,
                        checked,
                        String::from_utf8_lossy(bytes)
                    ),
                }
                if let Err(RecordError::Malformed { offset: Some(at), .. }) = &checked {
                    prop_assert!(*at <= bytes.len(), "offset {} past the line", at);
                }
                for earlier in [&other[..], bytes] {
                    let mut reused = Record::new();
                    if set.decode_checked(kernel, earlier, &mut reused).is_ok() {
                        let again = set.decode_checked(kernel, bytes, &mut reused).map(|()| reused);
                        prop_assert_eq!(checked.as_ref().ok(), again.as_ref().ok());
                    }
                }
            }
            if let (Ok(full), Ok(read)) = (&full, &sonic) {
                if set.len() == 1 {
                    prop_assert_eq!(&restrict(full, &["a"]), read);
                }
            }
            if full.is_ok() {
                prop_assert!(sonic.is_ok(), "decode_record accepts what the line mode refuses");
            }
        }
        Ok(())
    }

    #[test]
    fn the_checker_keeps_the_line_modes_decisions_on_long_lines() {
        // past STREAM_MAX_BYTES a value no query reads may nest deeper than MAX_DEPTH (as when
        // sonic-rs's tree read such lines), unless the line has too many brackets for that
        let pad = format!(r#""pad":"{}""#, "x".repeat(STREAM_MAX_BYTES));
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 5), "]".repeat(MAX_DEPTH + 5));
        let many = format!("[{}]", vec!["[]"; FAST_SKIP_MAX_OPENINGS].join(","));
        for line in [
            format!(r#"{{"a":1,"b":{deep},{pad}}}"#),
            format!(r#"{{"a":1,"b":{deep},{pad},"m":{many}}}"#),
            format!(r#"{{"a":{deep},{pad}}}"#),
            format!(r#"{{"a":1,"b":{deep}}}"#),
            format!(r#"{{"a":1,{pad},"b":"{}"}}"#, "[".repeat(FAST_SKIP_MAX_OPENINGS)),
            format!(r#"{{"a":1,{pad},"b":"\ud800"}}"#),
            format!(r#"{{"a":1,{pad},"b":1e400}}"#),
            format!(r#"{{"a":1,{pad},"b":[1,2,]}}"#),
            format!(r#"[{pad}]"#),
        ] {
            checker_agrees(line.as_bytes()).unwrap();
        }
        let set = FieldSet::new(["a"]);
        let accepted = format!(r#"{{"a":1,"b":{deep},{pad}}}"#);
        assert_eq!(set.decode(accepted.as_bytes()).unwrap().get("a"), Some(&Value::Long(1)));
        let refused = format!(r#"{{"a":1,"b":{deep},{pad},"m":{many}}}"#);
        assert!(set.decode(refused.as_bytes()).is_err());
        // a line accepted for the fields read, but not whole: no record for `SELECT *`
        assert!(set.whole_record(accepted.as_bytes()).is_err());
    }

    #[test]
    fn a_whole_record_is_kept_as_its_text_until_its_fields_change() {
        let line = "  {\"a\":1,\"b\":{\"c\":[1e2,\"x\\u00e9\"]},\"a\":3}\r";
        let set = FieldSet::new(["a"]);
        set.decode(line.as_bytes()).unwrap();
        let whole = set.whole_record(line.as_bytes()).unwrap();
        let text = line.trim();
        assert_eq!(whole.json_text(), Some(text));
        assert_eq!(whole.to_json(), text);
        let mut written = Vec::new();
        whole.write_json(&mut written);
        assert_eq!(written, text.as_bytes());
        // its fields are decode_record's (a repeated key: its last value, at its first place)
        let decoded = decode_record(line.as_bytes()).unwrap();
        assert_eq!(whole, decoded);
        assert_eq!(whole.get("a"), Some(&Value::Long(3)));
        assert_eq!(whole.len(), 2);
        assert!(whole.approx_bytes() > text.len());
        let copy = whole.clone();
        assert_eq!(copy.json_text(), Some(text));
        // a change makes it a record of fields, the others unchanged
        let mut changed = whole;
        changed.insert("d", Value::Bool(true));
        assert_eq!(changed.json_text(), None);
        assert_eq!(changed.to_json(), r#"{"a":3,"b":{"c":[100.0,"xé"]},"d":true}"#);
        assert_eq!(copy.into_map(), decoded.into_map());
        // a long line the fields mode did not check whole is checked now, and kept too; one
        // with many brackets as well (the line mode's check let its unread values nest deeper)
        let long = format!(r#"{{"a":1,"pad":"{}"}}"#, "x".repeat(STREAM_MAX_BYTES));
        let nested = format!(
            r#"{{"a":1,"l":[{}],"pad":"{}"}}"#,
            "[1],".repeat(40) + "2",
            " ".repeat(STREAM_MAX_BYTES)
        );
        for line in [&long, &nested] {
            for set in
                [FieldSet::new(["a"]).with_validation(Validation::Fields), FieldSet::new(["a"])]
            {
                set.decode(line.as_bytes()).unwrap();
                let whole = set.whole_record(line.as_bytes()).unwrap();
                assert_eq!(whole.json_text(), Some(&line[..]));
                assert_eq!(whole, decode_record(line.as_bytes()).unwrap());
            }
        }
        // and one the fields mode accepted but that is broken where no query reads: refused
        let broken = format!(r#"{{"a":1,"pad":"{}","b":[1,]}}"#, "x".repeat(STREAM_MAX_BYTES));
        let fields = FieldSet::new(["a"]).with_validation(Validation::Fields);
        assert!(fields.decode(broken.as_bytes()).is_ok());
        assert!(fields.whole_record(broken.as_bytes()).is_err());
    }

    /// A short flat line takes the one-pass path, the same record as the stream gives; a line of
    /// any other shape is left to the stream, whether it is valid or not.
    #[test]
    fn short_flat_lines_take_the_one_pass_path() {
        let set = FieldSet::new(["value", "ok", "id"]);
        let taken: &[&str] = &[
            r#"{"id":"0f3c2a4e-91b7","key":"key_04211","value":5172.346,"ts":1700000000000}"#,
            " {\t\"value\" : -0 ,\"ok\":true, \"n\":null,\"value\":1e-3}\r\n",
            "{}",
            r#"{"":"","id":"a b{}[]:,","f":false}"#,
        ];
        for line in taken {
            let mut flat = Record::new();
            assert!(set.decode_flat(line.as_bytes(), &mut flat).is_some(), "{line}");
            let mut streamed = Record::new();
            fill_streamed(line.as_bytes(), &set, streamed.map_mut()).unwrap();
            assert_eq!(flat, streamed, "{line}");
        }
        let left: &[&str] = &[
            r#"{"value":{"a":1}}"#,
            r#"{"value":[1]}"#,
            r#"{"id":"\u00e9"}"#,
            "{\"id\":\"\u{e9}\"}",
            r#"{"value":1,}"#,
            r#"{"value":01}"#,
            r#"{"value":1e400}"#,
            r#"{"value":tru}"#,
            r#"{"value":1} x"#,
            r#"{"value" 1}"#,
            r#"["value"]"#,
            "{\"id\":\"a\tb\"}",
            r#"{"id":"abcdefghijklmnopq"#,
        ];
        for line in left {
            let mut flat = Record::new();
            assert!(set.decode_flat(line.as_bytes(), &mut flat).is_none(), "{line}");
        }
    }

    /// A flat line, JSON's whitespace here and there; `plain` values only (strings of printable
    /// ASCII without a quote or backslash, valid numbers and literals), or any value.
    fn flat_line(plain: bool) -> impl Strategy<Value = Vec<u8>> {
        let ws = prop_oneof![Just(""), Just(" "), Just("\t\r\n ")];
        let plain_value = prop_oneof![
            "\"[ !#-\\[\\]-~]{0,12}\"",
            "-?(0|[1-9][0-9]{0,20})(\\.[0-9]{1,4})?([eE][-+]?[0-9]{1,2})?",
            Just("true".to_owned()),
            Just("false".to_owned()),
            Just("null".to_owned()),
        ];
        let value = if plain {
            plain_value.boxed()
        } else {
            prop_oneof![
                4 => plain_value,
                1 => "\"[ -~\u{80}-\u{ff}\u{0}-\u{1f}]{0,6}\"",
                1 => prop_oneof![Just("1e400"), Just("-"), Just("01"), Just("{}"), Just("[1]"), Just("1E813")]
                    .prop_map(str::to_owned),
            ]
            .boxed()
        };
        prop::collection::vec(("[a-e]{0,2}", ws.clone(), value, ws.clone()), 0..6).prop_flat_map(
            move |entries| {
                let body = entries
                    .iter()
                    .map(|(k, w1, v, w2)| format!("{w1}\"{k}\"{w2}:{w1}{v}{w2}"))
                    .collect::<Vec<_>>()
                    .join(",");
                ws.clone().prop_map(move |w| format!("{w}{{{body}}}{w}").into_bytes())
            },
        )
    }

    /// Damages `bytes`: per edit, a byte replaced, removed, the rest cut off, or a byte that
    /// matters to JSON inserted.
    fn edit(bytes: &mut Vec<u8>, edits: &[(prop::sample::Index, u8, u8)]) {
        for &(at, byte, op) in edits {
            let i = at.index(bytes.len() + 1);
            match op {
                0 if i < bytes.len() => bytes[i] = byte,
                1 if i < bytes.len() => {
                    bytes.remove(i);
                }
                2 => bytes.truncate(i),
                _ => bytes.insert(i, b"{}[]\",:\\0e-.ntfu \xff\x01\t"[byte as usize % 20]),
            }
        }
    }

    /// Whatever the one-pass path accepts, the stream accepts, with the same record; what it
    /// leaves is decided by the stream.
    fn flat_agrees(bytes: &[u8], plain: bool) -> Result<(), TestCaseError> {
        for names in [&["a"][..], &["b", "cd"], &[], &["a", "b", "c", "d", "e", ""]] {
            let set = FieldSet::new(names.iter());
            let mut streamed = Record::new();
            let stream = fill_streamed(bytes, &set, streamed.map_mut());
            let mut flat = Record::new();
            let took = set.decode_flat(bytes, &mut flat);
            let text = String::from_utf8_lossy(bytes);
            if took.is_some() {
                prop_assert!(stream.is_ok(), "one pass took {:?}, the stream: {:?}", text, stream);
                prop_assert_eq!(&flat, &streamed, "{:?}", text);
            } else {
                prop_assert!(!plain, "a plain flat line left to the stream: {:?}", text);
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn checking_only_the_fields_read_decodes_them_as_the_whole_line_check_does(
            bytes in json_object(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            fields_only_agrees(&bytes)?;
            // and on damaged lines: an error or the same fields, never a panic
            let mut damaged = bytes.clone();
            if !damaged.is_empty() {
                let i = at.index(damaged.len());
                damaged[i] = byte;
            }
            fields_only_agrees(&damaged)?;
        }

        #[test]
        fn the_one_pass_path_decodes_as_the_stream_does(
            plain in flat_line(true),
            any_values in flat_line(false),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 1..3),
        ) {
            flat_agrees(&plain, true)?;
            flat_agrees(&any_values, false)?;
            let mut bytes = plain;
            edit(&mut bytes, &edits);
            flat_agrees(&bytes, false)?;
        }

        #[test]
        fn field_set_accepts_what_decode_record_accepts(bytes in json_object()) {
            fast_agrees(&bytes)?;
        }

        #[test]
        fn field_set_never_panics_on_mutated_json(
            bytes in json_object(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let mut bytes = bytes;
            if !bytes.is_empty() {
                let i = at.index(bytes.len());
                bytes[i] = byte;
            }
            fast_agrees(&bytes)?;
        }

        #[test]
        fn doubles_read_without_sonic_rs_are_the_nearest_doubles(
            negative in any::<bool>(),
            integer in prop_oneof![0u64..10_000_000, any::<u64>()],
            digits in "[0-9]{0,12}",
            exponent in prop::option::of(-40i32..40),
        ) {
            let mut text = format!("{}{integer}", if negative { "-" } else { "" });
            if !digits.is_empty() {
                text = format!("{text}.{digits}");
            }
            if let Some(e) = exponent {
                text = format!("{text}e{e}");
            }
            let nearest: f64 = text.parse().unwrap();
            let quick = quick_number(format!("{text} ").as_bytes());
            if digits.is_empty() && exponent.is_none() {
                // up to 18 digits read here, longer ones (and -0) left to sonic-rs
                let short = integer < 1_000_000_000_000_000_000 && text != "-0";
                let want = short.then(|| Value::Long(text.parse().unwrap()));
                prop_assert_eq!(quick, want, "{}", text);
            } else if nearest != 0.0 {
                let bits = match quick {
                    Some(Value::Double(x)) => Some(x.to_bits()),
                    _ => None,
                };
                prop_assert_eq!(bits, Some(nearest.to_bits()), "{}", text);
            } else {
                prop_assert_eq!(quick, None, "{}", text);
            }
        }

        #[test]
        fn the_checker_decodes_as_the_line_mode_did(
            bytes in json_object(),
            pad in prop::option::of(0usize..700),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 0..3),
        ) {
            let mut bytes = bytes;
            // long lines too, past STREAM_MAX_BYTES
            if let (Some(pad), Some(b'{')) = (pad, bytes.first()) {
                let comma = if bytes.len() > 2 { "," } else { "" };
                let field = format!(r#""pad":"{}"{comma}"#, "p".repeat(pad));
                bytes.splice(1..1, field.into_bytes());
            }
            checker_agrees(&bytes)?;
            edit(&mut bytes, &edits);
            checker_agrees(&bytes)?;
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_value(&bytes);
            agree(&bytes)?;
        }

        #[test]
        fn valid_json_matches_serde_json(bytes in json_object()) {
            let ours = decode_value(&bytes).unwrap();
            prop_assert_eq!(ours, reference(serde_json::from_slice(&bytes).unwrap()));
            agree(&bytes)?;
        }

        #[test]
        fn mutated_json_never_panics_and_decoders_agree(
            bytes in json_object(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
        ) {
            let mut bytes = bytes;
            for (at, byte, op) in edits {
                let i = at.index(bytes.len() + 1);
                match op {
                    0 if i < bytes.len() => bytes[i] = byte,
                    1 if i < bytes.len() => { bytes.remove(i); }
                    _ => bytes.insert(i, *b"{}[]\",:\\0e-.ntf \xff".get(byte as usize % 17).unwrap()),
                }
            }
            let _ = decode_value(&bytes);
            agree(&bytes)?;
        }
    }
}
