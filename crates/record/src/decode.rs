//! Decoding records from JSON text: one NDJSON line → one [`Record`].
//!
//! (Skeleton: the full decoder lands with the record issue work.)

use crate::{Record, RecordError, Value};

/// Decodes one JSON object into a record.
pub fn decode_record(bytes: &[u8]) -> Result<Record, RecordError> {
    match decode_value(bytes)? {
        Value::Map(map) => Ok(Record::from_map(map)),
        other => Err(RecordError::NotAnObject { found: kind_name(&other) }),
    }
}

/// Decodes any JSON value.
pub fn decode_value(bytes: &[u8]) -> Result<Value, RecordError> {
    let json: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| RecordError::Malformed { message: e.to_string(), offset: None })?;
    Ok(from_json(json))
}

fn from_json(json: serde_json::Value) -> Value {
    match json {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Long(i),
            None => Value::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Value::String(s),
        serde_json::Value::Array(items) => Value::List(items.into_iter().map(from_json).collect()),
        serde_json::Value::Object(map) => {
            Value::Map(map.into_iter().map(|(k, v)| (k, from_json(v))).collect())
        }
    }
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
