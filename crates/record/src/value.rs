//! [`Value`]: one typed datum (null, boolean, the four numeric types, string, list, map), and
//! [`Record`]: the named top-level fields of one event.

use crate::types::Type;
use indexmap::IndexMap;
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// A map value, and the fields of a record: keys keep their insertion order so that results print
/// fields in the order they arrived or were projected. Hashed with foldhash (randomly seeded per
/// process, so keys from a stream cannot be chosen to collide), several times faster than the
/// standard library's SipHash on the short keys of events: decoding inserts every key of a
/// record, and filters look keys up in nested maps.
pub type Map = IndexMap<String, Value, MapHasher>;

/// The hasher of [`Map`]; `Map::default()` and [`map_with_capacity`] build maps with it.
pub type MapHasher = foldhash::fast::RandomState;

/// An empty [`Map`] with room for `n` entries.
pub fn map_with_capacity(n: usize) -> Map {
    Map::with_capacity_and_hasher(n, MapHasher::default())
}

/// One typed value. NULL stands for both a JSON `null` and a missing field.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Int(i32),
    Long(i64),
    Float(f32),
    Double(f64),
    String(String),
    List(Vec<Value>),
    Map(Map),
}

/// What a value takes in its list or map, beside what it owns on the heap.
const VALUE_BYTES: usize = std::mem::size_of::<Value>();
/// What one entry of a [`Map`] takes beside its key's and value's contents: its slot in the
/// map's vector of entries (its hash, key and value).
const ENTRY_BYTES: usize = std::mem::size_of::<(u64, String, Value)>();

/// The heap a map holds: a slot per entry it has room for, its index table, and its entries'
/// keys and values. Counted from capacities, not lengths: the bounds in bytes on results stand
/// for memory, and a record's decoded fields took 1.4–1.6 times what their lengths said
/// (`tests/record_memory.rs` measures it).
fn map_heap_bytes(map: &Map) -> usize {
    let slots = map.capacity();
    let index = if slots == 0 {
        0
    } else {
        // hashbrown: buckets a power of two at most 7/8 full, each a usize and a control byte
        let buckets = (slots * 8).div_ceil(7).next_power_of_two();
        buckets * (std::mem::size_of::<usize>() + 1)
    };
    slots * ENTRY_BYTES
        + index
        + map.iter().map(|(k, v)| k.capacity() + v.approx_bytes() - VALUE_BYTES).sum::<usize>()
}

impl Value {
    /// Roughly the memory the value holds, in bytes: its own place and what it owns on the heap
    /// (see [`Record::approx_bytes`]).
    pub fn approx_bytes(&self) -> usize {
        VALUE_BYTES
            + match self {
                Value::String(s) => s.capacity(),
                Value::List(items) => {
                    (items.capacity() - items.len()) * VALUE_BYTES
                        + items.iter().map(Value::approx_bytes).sum::<usize>()
                }
                Value::Map(map) => map_heap_bytes(map),
                _ => 0,
            }
    }

    /// The value's type, or `None` for NULL. A list's or map's element type is taken from its
    /// first non-null element (STRING when empty).
    pub fn type_of(&self) -> Option<Type> {
        fn element<'a>(mut values: impl Iterator<Item = &'a Value>) -> Type {
            values.find_map(Value::type_of).unwrap_or(Type::String)
        }
        Some(match self {
            Value::Null => return None,
            Value::Bool(_) => Type::Boolean,
            Value::Int(_) => Type::Integer,
            Value::Long(_) => Type::Long,
            Value::Float(_) => Type::Float,
            Value::Double(_) => Type::Double,
            Value::String(_) => Type::String,
            Value::List(items) => Type::List(Box::new(element(items.iter()))),
            Value::Map(map) => Type::Map(Box::new(element(map.values()))),
        })
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// True for INTEGER, LONG, FLOAT and DOUBLE values.
    pub fn is_numeric(&self) -> bool {
        matches!(self, Value::Int(_) | Value::Long(_) | Value::Float(_) | Value::Double(_))
    }

    /// The value as a double, for any numeric value; `None` otherwise.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(v) => Some(*v as f64),
            Value::Long(v) => Some(*v as f64),
            Value::Float(v) => Some(*v as f64),
            Value::Double(v) => Some(*v),
            _ => None,
        }
    }

    /// The value as a long, for INTEGER and LONG values; `None` otherwise.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v as i64),
            Value::Long(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&Map> {
        match self {
            Value::Map(map) => Some(map),
            _ => None,
        }
    }

    /// The value as JSON text (compact).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a Value always serializes")
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_owned())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}
impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Long(v)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Double(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(v) => s.serialize_i32(*v),
            Value::Long(v) => s.serialize_i64(*v),
            // JSON has no NaN or infinities; they print as null.
            Value::Float(v) if !v.is_finite() => s.serialize_unit(),
            Value::Float(v) => s.serialize_f32(*v),
            Value::Double(v) if !v.is_finite() => s.serialize_unit(),
            Value::Double(v) => s.serialize_f64(*v),
            Value::String(v) => s.serialize_str(v),
            Value::List(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Value::Map(map) => serialize_map(map, s),
        }
    }
}

fn serialize_map<S: Serializer>(map: &Map, s: S) -> Result<S::Ok, S::Error> {
    let mut out = s.serialize_map(Some(map.len()))?;
    for (k, v) in map {
        out.serialize_entry(k, v)?;
    }
    out.end()
}

/// One event: its top-level fields by name, in arrival order.
///
/// A record is held either as its fields, or as the JSON text of a line already checked whole
/// ([`crate::FieldSet::whole_record`]): a RAW `SELECT *` result is most often only written back
/// out, so its line is kept as it came — one allocation, written out by copying it
/// ([`Record::json_text`]) — and its fields are decoded only if something reads them (once,
/// then kept). Either way every method answers as for the decoded fields. Copies of a record
/// kept as text share its text and decoded fields (a record matched by 100 `SELECT *` queries
/// is one line and one decoding, not 100); changing a copy gives it fields of its own.
#[derive(Default)]
pub struct Record {
    repr: Repr,
    /// [`Record::approx_bytes`] once worked out (0: not yet, or changed since), kept by clones:
    /// a RAW record copied to 100 queries was walked field by field for each copy, by the
    /// worker's and the joiner's bounds in bytes (60% of the joiner's time beside 100 queries
    /// matching every record).
    bytes: AtomicUsize,
}

impl Clone for Record {
    /// A copy that knows its size: worked out here once for the original, which keeps it too
    /// (unless it may still grow: a line whose fields are not decoded yet, which any copy may
    /// decode for all, is cheap to size again).
    fn clone(&self) -> Self {
        self.approx_bytes();
        Self {
            repr: self.repr.clone(),
            bytes: AtomicUsize::new(self.bytes.load(Ordering::Relaxed)),
        }
    }
}

#[derive(Clone)]
enum Repr {
    Fields(Map),
    /// A line kept as text, shared by the record's copies.
    Json(Arc<JsonLine>),
}

/// The text of one JSON object that [`crate::decode_record`] accepts (whitespace at its ends
/// trimmed), and its fields once decoded.
struct JsonLine {
    text: Box<str>,
    fields: OnceLock<Map>,
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Fields(Map::default())
    }
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record").field("fields", self.fields()).finish()
    }
}

impl PartialEq for Record {
    fn eq(&self, other: &Self) -> bool {
        self.fields() == other.fields()
    }
}

impl Record {
    pub fn new() -> Self {
        Self::default()
    }

    /// A record kept as `text`, which the caller knows [`crate::decode_record`] accepts (a
    /// JSON object checked whole under the same rules): see [`crate::FieldSet::whole_record`].
    pub(crate) fn from_checked_json(text: &str) -> Self {
        let text = text.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r'));
        Self {
            repr: Repr::Json(Arc::new(JsonLine { text: text.into(), fields: OnceLock::new() })),
            bytes: AtomicUsize::new(0),
        }
    }

    /// The record's JSON text when it is kept as the line it came in (see the type's doc):
    /// what a writer of results copies instead of serializing the fields. `None` for a record
    /// held as fields.
    pub fn json_text(&self) -> Option<&str> {
        match &self.repr {
            Repr::Json(line) => Some(&line.text),
            Repr::Fields(_) => None,
        }
    }

    /// Roughly the memory the record holds, in bytes (its place in a vector, its fields' names
    /// and values with the containers' room for more; for a record kept as text, its text too):
    /// what bounds on buffered results count. The allocator's own rounding is not counted.
    pub fn approx_bytes(&self) -> usize {
        let known = self.bytes.load(Ordering::Relaxed);
        if known != 0 {
            return known;
        }
        // its own place (in a vector of results), and what it owns on the heap; a line shared
        // by copies is counted whole by each (it stays while any of them does)
        let bytes = std::mem::size_of::<Record>()
            + match &self.repr {
                // (its fields may yet be decoded: not kept, and cheap to work out again)
                Repr::Json(line) => match line.fields.get() {
                    None => {
                        return std::mem::size_of::<Record>() + JSON_LINE_BYTES + line.text.len()
                    }
                    Some(fields) => JSON_LINE_BYTES + line.text.len() + map_heap_bytes(fields),
                },
                Repr::Fields(fields) => map_heap_bytes(fields),
            };
        self.bytes.store(bytes, Ordering::Relaxed);
        bytes
    }

    pub fn from_map(fields: Map) -> Self {
        Self { repr: Repr::Fields(fields), bytes: AtomicUsize::new(0) }
    }

    /// The field's value; a missing field is `None` (the engine treats it as NULL).
    #[inline]
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields().get(name)
    }

    /// Sets a field, replacing any earlier value and keeping its position.
    pub fn insert(&mut self, name: impl Into<String>, value: Value) {
        self.map_mut().insert(name.into(), value);
    }

    pub fn remove(&mut self, name: &str) -> Option<Value> {
        self.map_mut().shift_remove(name)
    }

    pub fn len(&self) -> usize {
        self.fields().len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields().is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.fields().iter()
    }

    /// The fields (decoded now, once, for a record kept as text). Inlined to one test of the
    /// representation: every field a filter reads comes through here.
    #[inline]
    pub fn fields(&self) -> &Map {
        match &self.repr {
            Repr::Fields(fields) => fields,
            Repr::Json(line) => json_fields(line),
        }
    }

    /// The fields to change: a record kept as text becomes one held as fields.
    #[inline]
    pub(crate) fn map_mut(&mut self) -> &mut Map {
        *self.bytes.get_mut() = 0; // its size is worked out again after the change
        if let Repr::Json(_) = &self.repr {
            self.make_fields();
        }
        match &mut self.repr {
            Repr::Fields(fields) => fields,
            Repr::Json(_) => unreachable!("made fields above"),
        }
    }

    /// Turns a record kept as text into one held as fields: its decoded fields taken when no
    /// other copy shares the line, else copied (or decoded) for this one.
    #[cold]
    fn make_fields(&mut self) {
        let Repr::Json(line) = std::mem::take(&mut self.repr) else { return };
        let decoded = match Arc::try_unwrap(line) {
            Ok(JsonLine { text, fields }) => {
                fields.into_inner().unwrap_or_else(|| decode_checked(&text))
            }
            Err(shared) => json_fields(&shared).clone(),
        };
        self.repr = Repr::Fields(decoded);
    }

    /// The fields, with their values changeable (names and order are not).
    pub fn fields_mut(&mut self) -> impl Iterator<Item = (&String, &mut Value)> {
        self.map_mut().iter_mut()
    }

    pub fn into_map(mut self) -> Map {
        std::mem::take(self.map_mut())
    }

    /// The record as compact JSON text (for a record kept as text, that text).
    pub fn to_json(&self) -> String {
        match self.json_text() {
            Some(text) => text.to_owned(),
            None => serde_json::to_string(self).expect("a Record always serializes"),
        }
    }

    /// Appends the record as JSON to `out`: its text copied when it is kept as text, else its
    /// fields serialized (what [`Record::to_json`] gives, without a new string).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self.json_text() {
            Some(text) => out.extend_from_slice(text.as_bytes()),
            None => serde_json::to_writer(out, self).expect("a Record always serializes"),
        }
    }
}

/// The fields of a record kept as text, decoded the first time they are read.
#[inline(never)]
fn json_fields(line: &JsonLine) -> &Map {
    line.fields.get_or_init(|| decode_checked(&line.text))
}

/// A kept line's shared allocation beside its text: the counts of its holders and the line.
const JSON_LINE_BYTES: usize = 2 * std::mem::size_of::<usize>() + std::mem::size_of::<JsonLine>();

/// The fields of a text [`crate::decode_record`] accepts. The constructor's caller vouches for
/// that ([`Record::from_checked_json`]); were it ever wrong, the record reads as empty and the
/// error is logged, rather than a worker or a writer of results failing.
fn decode_checked(text: &str) -> Map {
    match crate::decode_record(text.as_bytes()) {
        Ok(record) => record.into_map(),
        Err(error) => {
            debug_assert!(false, "a record kept as checked text does not decode: {error}");
            eprintln!("needle: a record kept as checked text does not decode ({error})");
            Map::default()
        }
    }
}

impl Serialize for Record {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_map(self.fields(), s)
    }
}

impl FromIterator<(String, Value)> for Record {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        Self::from_map(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_of_a_line_share_it_until_one_changes() {
        let line = Record::from_checked_json(r#"{"id":"n-1","t":5}"#);
        let mut copy = line.clone();
        let (a, b) = (line.json_text().unwrap(), copy.json_text().unwrap());
        assert_eq!(a.as_ptr(), b.as_ptr(), "one text for both");
        assert_eq!(copy.get("t"), Some(&Value::Long(5)));
        assert!(std::ptr::eq(line.fields(), copy.fields()), "decoded once, for both");
        copy.insert("t", Value::Long(6));
        assert_eq!((line.get("t"), copy.get("t")), (Some(&Value::Long(5)), Some(&Value::Long(6))));
        assert_eq!(line.to_json(), r#"{"id":"n-1","t":5}"#, "the original is still its line");
        // a copy made before another decodes the shared line counts the decoded fields too
        let text_only = Record::from_checked_json(r#"{"id":"n-2"}"#);
        let early_copy = text_only.clone();
        let undecoded = early_copy.approx_bytes();
        assert!(text_only.get("id").is_some());
        assert!(early_copy.approx_bytes() > undecoded, "{undecoded} before the decoding");
        assert_eq!(copy.to_json(), r#"{"id":"n-1","t":6}"#);
        // the last holder of a line takes its decoded fields rather than copying them
        let mut only = Record::from_checked_json(r#"{"a":[1,2]}"#);
        only.remove("a");
        assert!(only.is_empty() && only.json_text().is_none());
    }

    #[test]
    fn a_records_size_is_kept_by_its_copies_and_worked_out_again_after_a_change() {
        let mut r = Record::new();
        r.insert("a", Value::from("x".repeat(100)));
        let size = r.approx_bytes();
        let copy = r.clone();
        assert_eq!((copy.approx_bytes(), r.approx_bytes()), (size, size));
        r.insert("b", Value::from("y".repeat(1_000)));
        assert!(r.approx_bytes() >= size + 1_000, "{} after growing from {size}", r.approx_bytes());
        r.remove("b");
        assert_eq!(r.approx_bytes(), size);
        for (_, value) in r.fields_mut() {
            *value = Value::Long(1);
        }
        assert!(r.approx_bytes() < size - 90);
        assert_eq!(copy.approx_bytes(), size, "the copy is its own");
        // kept as text: its size grows once its fields are decoded, then stays
        let text = Record::from_checked_json(r#"{"k":"a longer value"}"#);
        let before = text.approx_bytes();
        assert!(text.get("k").is_some());
        assert!(text.approx_bytes() > before);
        assert_eq!(text.clone().approx_bytes(), text.approx_bytes());
    }

    #[test]
    fn serializes_nan_as_null_and_keeps_field_order() {
        let mut r = Record::new();
        r.insert("z", Value::Double(f64::NAN));
        r.insert("a", Value::List(vec![Value::Long(1), Value::from("x")]));
        assert_eq!(r.to_json(), r#"{"z":null,"a":[1,"x"]}"#);
    }

    #[test]
    fn type_of_containers_uses_first_non_null_element() {
        let v = Value::List(vec![Value::Null, Value::Long(3)]);
        assert_eq!(v.type_of(), Some(Type::List(Box::new(Type::Long))));
        assert_eq!(Value::Null.type_of(), None);
    }
}
