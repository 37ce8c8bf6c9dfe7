//! What the stream looks like: the fields seen in a sample of records, with their types and how
//! often each appears (`GET /api/v1/schema`), so a user can write a query without reading raw
//! records first.
//!
//! Workers decode their first [`SAMPLE_FIRST`] lines, then one line in [`SAMPLE_EVERY`], whole
//! just for this (they otherwise decode only the fields their queries read): the schema is known
//! as soon as a stream starts, and costs nothing after. Top-level fields and the
//! keys of top-level maps (`demographics.country`) are tracked, at most [`MAX_FIELDS`] names, so
//! a stream with ever-new keys cannot grow this without bound.

use needle_record::{Record, Value};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Mutex;

pub const SAMPLE_EVERY: u64 = 1024;
/// Lines each worker samples one by one when it starts.
pub const SAMPLE_FIRST: u64 = 16;
pub const MAX_FIELDS: usize = 10_000;

#[derive(Debug, Default)]
pub struct SchemaTracker {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    sampled: u64,
    fields: BTreeMap<String, BTreeMap<String, u64>>,
    untracked: u64,
}

/// A field and what was seen of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldReport {
    pub name: String,
    /// Records of the sample that had the field.
    pub seen: u64,
    /// `seen` over the sampled records.
    pub fraction: f64,
    /// Type → records with the field of that type (`NULL` for null values).
    pub types: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchemaReport {
    pub sampled_records: u64,
    pub fields: Vec<FieldReport>,
    /// Field occurrences not tracked because [`MAX_FIELDS`] names were already known.
    pub untracked_fields: u64,
}

impl SchemaTracker {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn observe(&self, record: &Record) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.sampled += 1;
        for (name, value) in record.iter() {
            state.count(name, value);
            if let Value::Map(map) = value {
                for (key, inner) in map {
                    state.count(&format!("{name}.{key}"), inner);
                }
            }
        }
    }

    pub fn report(&self) -> SchemaReport {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let sampled = state.sampled;
        let fields = state
            .fields
            .iter()
            .map(|(name, types)| {
                let seen = types.values().sum();
                FieldReport {
                    name: name.clone(),
                    seen,
                    fraction: if sampled == 0 { 0.0 } else { seen as f64 / sampled as f64 },
                    types: types.clone(),
                }
            })
            .collect();
        SchemaReport { sampled_records: sampled, fields, untracked_fields: state.untracked }
    }
}

impl State {
    fn count(&mut self, name: &str, value: &Value) {
        let kind = value.type_of().map_or_else(|| "NULL".to_owned(), |t| t.to_string());
        if let Some(types) = self.fields.get_mut(name) {
            *types.entry(kind).or_default() += 1;
        } else if self.fields.len() < MAX_FIELDS {
            self.fields.insert(name.to_owned(), BTreeMap::from([(kind, 1)]));
        } else {
            self.untracked += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_fields_map_keys_types_and_frequency() {
        let tracker = SchemaTracker::new();
        for line in
            [r#"{"a":1,"m":{"k":"x"}}"#, r#"{"a":"s"}"#, r#"{"a":null,"b":[1]}"#, r#"{"b":[]}"#]
        {
            tracker.observe(&needle_record::decode_record(line.as_bytes()).unwrap());
        }
        let report = tracker.report();
        assert_eq!(report.sampled_records, 4);
        let a = report.fields.iter().find(|f| f.name == "a").unwrap();
        assert_eq!(a.seen, 3);
        assert_eq!(a.fraction, 0.75);
        assert_eq!(
            a.types,
            BTreeMap::from([("LONG".into(), 1), ("STRING".into(), 1), ("NULL".into(), 1)])
        );
        let mk = report.fields.iter().find(|f| f.name == "m.k").unwrap();
        assert_eq!(mk.types, BTreeMap::from([("STRING".into(), 1)]));
        let b = report.fields.iter().find(|f| f.name == "b").unwrap();
        assert_eq!(b.types, BTreeMap::from([("LIST[LONG]".into(), 1), ("LIST[STRING]".into(), 1)]));
    }

    #[test]
    fn the_number_of_names_is_bounded() {
        let tracker = SchemaTracker::new();
        let mut r = Record::new();
        for i in 0..(MAX_FIELDS + 5) {
            r.insert(format!("f{i}"), Value::Long(1));
        }
        tracker.observe(&r);
        let report = tracker.report();
        assert_eq!(report.fields.len(), MAX_FIELDS);
        assert_eq!(report.untracked_fields, 5);
    }
}
