//! What a running query hands back: [`Emission`]s, each `{"records": [...], "meta": {...}}`.
//!
//! The metadata keys follow Bullet's defaults (`bullet.result.metadata.metrics`) so that existing
//! clients read them unchanged; the keys needle adds are marked *needle*:
//!
//! | key | value |
//! |---|---|
//! | `Query` → `ID`, `Body`, `Receive Time`, `Finish Time` | the query's id and text, when it was received (ms) and, on the last emission only, when it finished (ms) |
//! | `Window` → `Name` | `Windowless`, `Tumbling`, `Additive Tumbling` or `Sliding` (Bullet's names) |
//! | `Window` → `Number` | 1 for the first emission, counting up |
//! | `Window` → `Size` | the matching records this emission covers (for `EVERY(.., ALL)`: since the start) |
//! | `Window` → `Emit Time` | when this emission was made (ms, the injected clock) |
//! | `Window` → `Expected Emit Time` | time windows: when the window was due (ms) |
//! | `Window` → `Final` *needle* | `true` on the query's last emission |
//! | `Sketch` | the aggregation's sketch facts, passed through from [`crate::aggregate`] (`Was Estimated`, `Standard Deviations`, `Family`, `Theta`, `Normalized Rank Error`, `Maximum Count Error`, ...) |
//! | `Groups`, `Ignored Values` | from the aggregation: GROUP BY past its group limit, inputs of the wrong type skipped (see [`crate::aggregate`]) |
//! | `Outer Query` *needle* | the outer query's aggregation metadata (its `Sketch`, ...), when it has any |
//! | `Stats` *needle* | `Records Seen`, `Records Matched` (after explode and WHERE), `Records Dropped` (RAW records past the LIMIT or outside a window's FIRST part, or not kept while the query's subscriber read slower than they came), cumulative since the start |
//! | `Warnings` | a list of `{"error": ..., "resolutions": [...]}` (Bullet's `BulletError` shape): what went wrong and what the user can do. The engine warns when GROUP BY reached its group limit and when a time window was emitted late (windows merged) |
//! | `Errors` | the same shape; the engine itself never fails a running query (bad values are NULL), so this key is the runtime's, e.g. for a query it had to kill |

use needle_record::Record;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value as Json};
use std::sync::{Arc, OnceLock};

/// An emission's JSON text in pieces ([`Emission::into_json_pieces`]); joined, they are
/// [`Emission::write_json`]'s text.
#[derive(Debug)]
pub struct JsonPieces {
    emission: Emission,
    /// The record the next piece starts with.
    next: usize,
    started: bool,
    done: bool,
    piece_bytes: usize,
}

impl JsonPieces {
    /// True once the last piece was made.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Appends the next piece to `out` (nothing once done).
    pub fn write_next(&mut self, out: &mut Vec<u8>) {
        if self.done {
            return;
        }
        let start = out.len();
        if !std::mem::replace(&mut self.started, true) {
            out.extend_from_slice(RECORDS_OPEN);
        }
        let until = start.saturating_add(self.piece_bytes);
        self.next = self.emission.write_records(out, self.next, until);
        if self.next == self.emission.records.len() {
            self.emission.write_close(out);
            self.done = true;
        }
    }
}

/// How an emission's JSON text opens.
const RECORDS_OPEN: &[u8] = b"{\"records\":[";

/// The metadata keys, in one place (Bullet's names where Bullet has one).
pub mod keys {
    pub const QUERY: &str = "Query";
    pub const ID: &str = "ID";
    pub const BODY: &str = "Body";
    pub const RECEIVE_TIME: &str = "Receive Time";
    pub const FINISH_TIME: &str = "Finish Time";
    pub const WINDOW: &str = "Window";
    pub const NAME: &str = "Name";
    pub const NUMBER: &str = "Number";
    pub const SIZE: &str = "Size";
    pub const EMIT_TIME: &str = "Emit Time";
    pub const EXPECTED_EMIT_TIME: &str = "Expected Emit Time";
    pub const FINAL: &str = "Final";
    /// A window over stored records: its bucket of record time, `[Start, End)`.
    pub const START: &str = "Start";
    pub const END: &str = "End";
    pub const SKETCH: &str = "Sketch";
    pub const STATS: &str = "Stats";
    pub const RECORDS_SEEN: &str = "Records Seen";
    pub const RECORDS_MATCHED: &str = "Records Matched";
    pub const RECORDS_DROPPED: &str = "Records Dropped";
    pub const ERRORS: &str = "Errors";
    pub const OUTER_QUERY: &str = "Outer Query";
    pub const WARNINGS: &str = "Warnings";
}

/// A problem worth telling the user about, and what they can do about it (Bullet's
/// `BulletError`: `{"error": ..., "resolutions": [...]}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub message: String,
    pub resolutions: Vec<String>,
}

impl Notice {
    pub fn new(message: impl Into<String>, resolution: impl Into<String>) -> Self {
        Self { message: message.into(), resolutions: vec![resolution.into()] }
    }

    pub fn to_json(&self) -> Json {
        serde_json::json!({ "error": self.message, "resolutions": self.resolutions })
    }
}

/// One result of a query: the records of one window (or of the whole query) and its metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct Emission {
    pub records: Vec<Record>,
    /// See the module doc for the keys.
    pub meta: Meta,
    /// True for the query's last emission (after it the query is done).
    pub is_final: bool,
}

impl Emission {
    /// `{"records": [...], "meta": {...}}`
    pub fn to_json(&self) -> Json {
        let records = self
            .records
            .iter()
            .map(|r| serde_json::to_value(r).expect("a Record always serializes"))
            .collect();
        let mut out = Map::new();
        out.insert("records".into(), Json::Array(records));
        out.insert("meta".into(), Json::Object(self.meta.to_map()));
        Json::Object(out)
    }

    /// Roughly the memory the emission holds, in bytes: its records' and its metadata's (what
    /// the bounds on results waiting for a subscriber count).
    pub fn approx_bytes(&self) -> usize {
        64 + self.meta.approx_bytes() + self.records.iter().map(Record::approx_bytes).sum::<usize>()
    }

    /// [`Emission::to_json`] as compact text (one line), written straight from the records
    /// ([`Emission::write_json`]).
    pub fn to_json_string(&self) -> String {
        let mut out = Vec::with_capacity(self.approx_bytes());
        self.write_json(&mut out);
        String::from_utf8(out).expect("JSON text is UTF-8")
    }

    /// Appends `{"records": [...], "meta": {...}}` to `out` without building a JSON tree: a
    /// record kept as its line's text ([`Record::json_text`]) is copied as it came, the others
    /// are serialized. The same JSON as [`Emission::to_json`], except that a number of a kept
    /// line keeps the way it was written (`1e2`, an integer past the `i64` range in full).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(RECORDS_OPEN);
        self.write_records(out, 0, usize::MAX);
        self.write_close(out);
    }

    /// Appends the records from `from` on, comma-separated, until `out` is `until` bytes long
    /// or past it (or every record is written); the record to write next.
    fn write_records(&self, out: &mut Vec<u8>, from: usize, until: usize) -> usize {
        let mut next = from;
        while next < self.records.len() && out.len() < until {
            if next > 0 {
                out.push(b',');
            }
            self.records[next].write_json(out);
            next += 1;
        }
        next
    }

    /// Closes the records' list and appends the metadata: the text's end.
    fn write_close(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"],\"meta\":");
        serde_json::to_writer(&mut *out, &self.meta).expect("JSON metadata always serializes");
        out.push(b'}');
    }

    /// [`Emission::write_json`]'s text in pieces of about `piece_bytes` each (a piece ends
    /// after the record that takes it past that; the last piece carries the metadata), made
    /// one at a time as they are asked for: a writer that sends each piece before it asks for
    /// the next holds one piece of an emission's text, not all of it, and does not keep its
    /// thread for the whole emission (one of 10,000 records of 7 KB is 70 MB of text).
    pub fn into_json_pieces(self, piece_bytes: usize) -> JsonPieces {
        JsonPieces { emission: self, next: 0, started: false, done: false, piece_bytes }
    }

    /// The window number from the metadata (0 when absent).
    pub fn window_number(&self) -> u64 {
        self.meta
            .get(keys::WINDOW)
            .and_then(|w| w.get(keys::NUMBER))
            .and_then(Json::as_u64)
            .unwrap_or(0)
    }
}

/// An emission's metadata (the module doc lists its keys): a JSON object, read as a
/// [`Map`] through `Deref`. The engine makes it from the facts of the emission and builds the
/// map only when something reads it as one; written out ([`Emission::write_json`],
/// `Serialize`) it goes straight from the facts to JSON text, the same text as the map's. A
/// query's result path (make, queue, write, free) so costs one allocation for the metadata
/// instead of one per key and value: with 100,000 queries completing within seconds, building
/// and freeing the maps was a quarter of the joiner's time and a tenth of the HTTP threads'.
#[derive(Clone, Default)]
pub struct Meta {
    repr: MetaRepr,
}

#[derive(Clone)]
enum MetaRepr {
    Map(Map<String, Json>),
    Facts { facts: Box<Facts>, map: OnceLock<Map<String, Json>> },
}

impl Default for MetaRepr {
    fn default() -> Self {
        MetaRepr::Map(Map::new())
    }
}

/// What an emission's metadata says, as the engine knows it.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    pub id: Arc<str>,
    pub body: Arc<str>,
    pub receive_ms: i64,
    /// On the last emission: when the query finished.
    pub finish_ms: Option<i64>,
    pub window_name: &'static str,
    pub number: u64,
    pub size: u64,
    pub emit_ms: i64,
    /// A time window's bounds on record time, `[Start, End)`.
    pub bounds: Option<(i64, i64)>,
    pub expected_emit_ms: Option<i64>,
    pub is_final: bool,
    /// The aggregation's own keys (`Sketch`, `Groups`, ...), passed through.
    pub sketch: Map<String, Json>,
    /// The outer query's, when it has any.
    pub outer: Option<Map<String, Json>>,
    pub seen: u64,
    pub matched: u64,
    pub dropped: u64,
    pub warnings: Vec<Json>,
}

impl Facts {
    /// The metadata as a JSON map: what its `Serialize` writes, read back as a map (one
    /// description of the keys and their order, for both).
    fn to_map(&self) -> Map<String, Json> {
        match serde_json::to_value(self) {
            Ok(Json::Object(map)) => map,
            _ => unreachable!("the facts serialize as a JSON object"),
        }
    }

    fn approx_bytes(&self) -> usize {
        // the keys and numbers of the map it stands for, roughly
        600 + self.id.len()
            + self.body.len()
            + map_bytes(&self.sketch)
            + self.outer.as_ref().map_or(0, map_bytes)
            + self.warnings.iter().map(json_bytes).sum::<usize>()
    }
}

impl Serialize for Facts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut meta = s.serialize_map(None)?;
        meta.serialize_entry(keys::QUERY, &QueryFacts(self))?;
        meta.serialize_entry(keys::WINDOW, &WindowFacts(self))?;
        for (key, value) in &self.sketch {
            meta.serialize_entry(key, value)?;
        }
        if let Some(outer) = &self.outer {
            meta.serialize_entry(keys::OUTER_QUERY, outer)?;
        }
        meta.serialize_entry(keys::STATS, &StatsFacts(self))?;
        if !self.warnings.is_empty() {
            meta.serialize_entry(keys::WARNINGS, &self.warnings)?;
        }
        meta.end()
    }
}

struct QueryFacts<'a>(&'a Facts);

impl Serialize for QueryFacts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let f = self.0;
        let mut query = s.serialize_map(None)?;
        query.serialize_entry(keys::ID, &*f.id)?;
        query.serialize_entry(keys::BODY, &*f.body)?;
        query.serialize_entry(keys::RECEIVE_TIME, &f.receive_ms)?;
        if let Some(finish) = f.finish_ms {
            query.serialize_entry(keys::FINISH_TIME, &finish)?;
        }
        query.end()
    }
}

struct WindowFacts<'a>(&'a Facts);

impl Serialize for WindowFacts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let f = self.0;
        let mut window = s.serialize_map(None)?;
        window.serialize_entry(keys::NAME, f.window_name)?;
        window.serialize_entry(keys::NUMBER, &f.number)?;
        window.serialize_entry(keys::SIZE, &f.size)?;
        window.serialize_entry(keys::EMIT_TIME, &f.emit_ms)?;
        if let Some((start, end)) = f.bounds {
            window.serialize_entry(keys::START, &start)?;
            window.serialize_entry(keys::END, &end)?;
        }
        if let Some(expected) = f.expected_emit_ms {
            window.serialize_entry(keys::EXPECTED_EMIT_TIME, &expected)?;
        }
        window.serialize_entry(keys::FINAL, &f.is_final)?;
        window.end()
    }
}

struct StatsFacts<'a>(&'a Facts);

impl Serialize for StatsFacts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let f = self.0;
        let mut stats = s.serialize_map(Some(3))?;
        stats.serialize_entry(keys::RECORDS_SEEN, &f.seen)?;
        stats.serialize_entry(keys::RECORDS_MATCHED, &f.matched)?;
        stats.serialize_entry(keys::RECORDS_DROPPED, &f.dropped)?;
        stats.end()
    }
}

impl Meta {
    pub(crate) fn from_facts(facts: Facts) -> Self {
        Self { repr: MetaRepr::Facts { facts: Box::new(facts), map: OnceLock::new() } }
    }

    /// The metadata as a JSON map of its own.
    pub fn to_map(&self) -> Map<String, Json> {
        match &self.repr {
            MetaRepr::Map(map) => map.clone(),
            MetaRepr::Facts { facts, map } => map.get().cloned().unwrap_or_else(|| facts.to_map()),
        }
    }

    /// Roughly the memory the metadata holds, in bytes, without building its map.
    pub fn approx_bytes(&self) -> usize {
        match &self.repr {
            MetaRepr::Map(map) => map_bytes(map),
            MetaRepr::Facts { facts, map } => facts.approx_bytes() + map.get().map_or(0, map_bytes),
        }
    }
}

impl std::ops::Deref for Meta {
    type Target = Map<String, Json>;

    fn deref(&self) -> &Map<String, Json> {
        match &self.repr {
            MetaRepr::Map(map) => map,
            MetaRepr::Facts { facts, map } => map.get_or_init(|| facts.to_map()),
        }
    }
}

impl std::ops::DerefMut for Meta {
    /// A change makes the metadata a map of its own.
    fn deref_mut(&mut self) -> &mut Map<String, Json> {
        if let MetaRepr::Facts { facts, map } = &mut self.repr {
            let built = map.take().unwrap_or_else(|| facts.to_map());
            self.repr = MetaRepr::Map(built);
        }
        match &mut self.repr {
            MetaRepr::Map(map) => map,
            MetaRepr::Facts { .. } => unreachable!("made a map above"),
        }
    }
}

impl Serialize for Meta {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.repr {
            MetaRepr::Map(map) => map.serialize(s),
            MetaRepr::Facts { facts, .. } => facts.serialize(s),
        }
    }
}

impl std::fmt::Debug for Meta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl PartialEq for Meta {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl From<Map<String, Json>> for Meta {
    fn from(map: Map<String, Json>) -> Self {
        Self { repr: MetaRepr::Map(map) }
    }
}

impl FromIterator<(String, Json)> for Meta {
    fn from_iter<I: IntoIterator<Item = (String, Json)>>(iter: I) -> Self {
        Self::from(iter.into_iter().collect::<Map<String, Json>>())
    }
}

/// Roughly the memory a JSON map's entries hold.
fn map_bytes(map: &Map<String, Json>) -> usize {
    map.iter().map(|(k, v)| 40 + k.len() + json_bytes(v)).sum()
}

/// Roughly the memory a JSON value holds.
fn json_bytes(value: &Json) -> usize {
    32 + match value {
        Json::String(s) => s.len(),
        Json::Array(items) => items.iter().map(json_bytes).sum(),
        Json::Object(map) => map_bytes(map),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use needle_record::Value;

    #[test]
    fn json_pieces_join_to_the_whole_text_and_stay_near_their_size() {
        let record = |i: i64| {
            let mut r = Record::new();
            r.insert("i", Value::Long(i));
            r.insert("s", Value::String("x".repeat(100)));
            r
        };
        for count in [0, 1, 2, 7, 100] {
            let mut meta = Map::new();
            meta.insert("n".into(), (count as u64).into());
            let emission = Emission {
                records: (0..count).map(record).collect(),
                meta: meta.into(),
                is_final: false,
            };
            let mut whole = Vec::new();
            emission.write_json(&mut whole);
            let pieces_of = |piece_bytes: usize| {
                let mut pieces = emission.clone().into_json_pieces(piece_bytes);
                let mut made: Vec<Vec<u8>> = Vec::new();
                while !pieces.is_done() {
                    let mut piece = b"after another piece".to_vec();
                    pieces.write_next(&mut piece);
                    made.push(piece.split_off(19));
                }
                let mut after = Vec::new();
                pieces.write_next(&mut after);
                assert!(after.is_empty(), "nothing once done");
                made
            };
            for piece_bytes in [1, 200, 1000, 1 << 20] {
                let pieces = pieces_of(piece_bytes);
                assert_eq!(pieces.concat(), whole, "{count} records, pieces of {piece_bytes}");
                let most = pieces.iter().map(Vec::len).max().unwrap();
                // past the size by one record and the closing metadata at most
                assert!(most <= piece_bytes.max(1) + 200, "{count}: a piece of {most} bytes");
                if piece_bytes >= whole.len() {
                    assert_eq!(pieces.len(), 1, "{count} records, pieces of {piece_bytes}");
                }
            }
            assert!(pieces_of(200).len() >= count as usize / 2);
        }
    }

    #[test]
    fn emission_json_has_records_then_meta() {
        let mut r = Record::new();
        r.insert("a", Value::Long(1));
        let mut meta = Map::new();
        meta.insert(keys::WINDOW.into(), serde_json::json!({"Number": 3}));
        let e = Emission { records: vec![r], meta: meta.into(), is_final: false };
        assert_eq!(e.to_json_string(), r#"{"records":[{"a":1}],"meta":{"Window":{"Number":3}}}"#);
        assert_eq!(e.window_number(), 3);
        let n = Notice::new("too many groups", "add a WHERE");
        assert_eq!(n.to_json()["resolutions"][0], "add a WHERE");
    }
}
