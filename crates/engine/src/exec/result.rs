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
//! | `Stats` *needle* | `Records Seen`, `Records Matched` (after explode and WHERE), `Records Dropped` (RAW records past the LIMIT or outside a window's FIRST part), cumulative since the start |
//! | `Warnings` | a list of `{"error": ..., "resolutions": [...]}` (Bullet's `BulletError` shape): what went wrong and what the user can do. The engine warns when GROUP BY reached its group limit and when a time window was emitted late (windows merged) |
//! | `Errors` | the same shape; the engine itself never fails a running query (bad values are NULL), so this key is the runtime's, e.g. for a query it had to kill |

use needle_record::Record;
use serde_json::{Map, Value as Json};

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
    pub meta: Map<String, Json>,
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
        out.insert("meta".into(), Json::Object(self.meta.clone()));
        Json::Object(out)
    }

    /// Roughly the memory the emission holds, in bytes: its records' and its metadata's (what
    /// the bounds on results waiting for a subscriber count).
    pub fn approx_bytes(&self) -> usize {
        let meta: usize = self.meta.iter().map(|(k, v)| 40 + k.len() + json_bytes(v)).sum();
        64 + meta + self.records.iter().map(Record::approx_bytes).sum::<usize>()
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
        out.extend_from_slice(b"{\"records\":[");
        for (i, record) in self.records.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            record.write_json(out);
        }
        out.extend_from_slice(b"],\"meta\":");
        serde_json::to_writer(&mut *out, &self.meta).expect("JSON metadata always serializes");
        out.push(b'}');
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

/// Roughly the memory a JSON value holds.
fn json_bytes(value: &Json) -> usize {
    32 + match value {
        Json::String(s) => s.len(),
        Json::Array(items) => items.iter().map(json_bytes).sum(),
        Json::Object(map) => map.iter().map(|(k, v)| 40 + k.len() + json_bytes(v)).sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use needle_record::Value;

    #[test]
    fn emission_json_has_records_then_meta() {
        let mut r = Record::new();
        r.insert("a", Value::Long(1));
        let mut meta = Map::new();
        meta.insert(keys::WINDOW.into(), serde_json::json!({"Number": 3}));
        let e = Emission { records: vec![r], meta, is_final: false };
        assert_eq!(e.to_json_string(), r#"{"records":[{"a":1}],"meta":{"Window":{"Number":3}}}"#);
        assert_eq!(e.window_number(), 3);
        let n = Notice::new("too many groups", "add a WHERE");
        assert_eq!(n.to_json()["resolutions"][0], "add a WHERE");
    }
}
