//! [`RecordWriter`]: fills a [`Record`] kept from the event before with the next event's fields,
//! for programs that build events in code. An event with the same fields in the same order as
//! the one before (a struct's fields, say) overwrites the values in place: no name is hashed or
//! allocated, and a string value reuses its buffer; any other field truncates the record there
//! and goes on by insertion. [`RecordWriter::finish`] (or dropping the writer) removes the
//! fields the event did not set, so a record holds exactly the fields written.

use crate::value::{Record, Value};

/// Writes one event's fields into a record, in order (see the module doc).
#[derive(Debug)]
pub struct RecordWriter<'a> {
    record: &'a mut Record,
    /// Fields written so far: the record's first `at` entries.
    at: usize,
}

impl<'a> RecordWriter<'a> {
    /// Starts writing `record` anew; its old fields are overwritten or removed.
    pub fn new(record: &'a mut Record) -> Self {
        Self { record, at: 0 }
    }

    /// Sets the next field to `value`.
    pub fn set(&mut self, name: &str, value: impl Into<Value>) -> &mut Self {
        let value = value.into();
        self.slot(name, |slot| *slot = value)
    }

    /// Sets the next field to a string, reusing the buffer of the string it held.
    pub fn set_str(&mut self, name: &str, value: &str) -> &mut Self {
        self.slot(name, |slot| match slot {
            Value::String(held) => {
                held.clear();
                held.push_str(value);
            }
            other => *other = Value::String(value.to_owned()),
        })
    }

    /// Sets the next field to a LONG.
    pub fn set_i64(&mut self, name: &str, value: i64) -> &mut Self {
        self.slot(name, |slot| *slot = Value::Long(value))
    }

    /// Sets the next field to a DOUBLE.
    pub fn set_f64(&mut self, name: &str, value: f64) -> &mut Self {
        self.slot(name, |slot| *slot = Value::Double(value))
    }

    /// Sets the next field to a BOOLEAN.
    pub fn set_bool(&mut self, name: &str, value: bool) -> &mut Self {
        self.slot(name, |slot| *slot = Value::Bool(value))
    }

    /// Removes the fields of the event before that this one did not set.
    pub fn finish(self) {}

    fn slot(&mut self, name: &str, fill: impl FnOnce(&mut Value)) -> &mut Self {
        let map = self.record.map_mut();
        match map.get_index_mut(self.at) {
            Some((held, slot)) if same_name(held.as_bytes(), name.as_bytes()) => fill(slot),
            _ => {
                // another shape: what followed is stale, and `name` may be among it or before
                map.truncate(self.at);
                let mut slot = Value::Null;
                fill(&mut slot);
                if let Some(earlier) = map.get_index_of(name) {
                    // the same name twice in one event: the last value wins, where it was
                    map[earlier] = slot;
                    return self;
                }
                map.insert(name.to_owned(), slot);
            }
        }
        self.at += 1;
        self
    }
}

/// `a == b` for field names, inline: a call to `memcmp` per field cost more than the rest of
/// writing it (names are a few bytes).
#[inline]
fn same_name(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

impl Drop for RecordWriter<'_> {
    fn drop(&mut self) {
        self.record.map_mut().truncate(self.at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(record: &mut Record, fields: &[(&str, Value)]) {
        let mut writer = RecordWriter::new(record);
        for (name, value) in fields {
            writer.set(name, value.clone());
        }
    }

    #[test]
    fn a_record_holds_exactly_the_fields_of_the_last_event_written() {
        let mut record = Record::new();
        let events: Vec<Vec<(&str, Value)>> = vec![
            vec![("a", 1i64.into()), ("b", "x".into()), ("c", true.into())],
            vec![("a", 2i64.into()), ("b", "yy".into()), ("c", false.into())],
            vec![("a", 3i64.into())],
            vec![("b", "z".into()), ("a", 4i64.into())],
            vec![("a", 5i64.into()), ("a", 6i64.into()), ("d", 1.5f64.into())],
            vec![],
            vec![("c", Value::Null), ("b", "w".into())],
        ];
        for fields in &events {
            write(&mut record, fields);
            let mut expected = Record::new();
            for (name, value) in fields {
                expected.insert(*name, value.clone());
            }
            assert_eq!(record, expected, "{fields:?}");
            assert_eq!(record.to_json(), expected.to_json());
        }
    }

    #[test]
    fn the_same_shape_again_reuses_the_string_buffers() {
        let mut record = Record::new();
        RecordWriter::new(&mut record).set_str("device", "a fairly long device name");
        let before = record.get("device").and_then(Value::as_str).unwrap().as_ptr();
        RecordWriter::new(&mut record).set_str("device", "short");
        let after = record.get("device").and_then(Value::as_str).unwrap();
        assert_eq!((after, after.as_ptr()), ("short", before));
    }

    #[test]
    fn typed_setters_write_the_types_they_name() {
        let mut record = Record::new();
        RecordWriter::new(&mut record)
            .set_i64("n", 7)
            .set_f64("x", 0.5)
            .set_bool("ok", true)
            .set_str("s", "v");
        assert_eq!(record.to_json(), r#"{"n":7,"x":0.5,"ok":true,"s":"v"}"#);
    }
}
