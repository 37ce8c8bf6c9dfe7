//! The store's write buffer: what was appended since the last flush, in the order it came —
//! records, and chunks of rows given as columns ([`ColumnChunk`]: what a source of a metrics
//! protocol or a pusher of typed events hands on, kept as the columns they are) — until a flush
//! gathers it into one [`ColumnBuffer`] and writes it as parts. Scans read it as records.

use crate::columns::{ColumnBuffer, ColumnChunk, StoredRecord};

/// Rows appended and not yet written (see the module doc).
#[derive(Debug, Clone, Default)]
pub(crate) struct WriteBuffer {
    segments: Vec<Segment>,
    rows: usize,
}

/// A stretch of the buffer: records one by one, or a chunk of columns.
#[derive(Debug, Clone)]
enum Segment {
    Records(Vec<StoredRecord>),
    Columns(ColumnChunk),
}

/// What one append adds.
pub(crate) enum Incoming {
    Records(Vec<StoredRecord>),
    Columns(ColumnChunk),
}

impl Incoming {
    pub(crate) fn len(&self) -> usize {
        match self {
            Incoming::Records(records) => records.len(),
            Incoming::Columns(chunk) => chunk.len(),
        }
    }

    /// Keeps the first `rows` rows.
    pub(crate) fn truncate(&mut self, rows: usize) {
        match self {
            Incoming::Records(records) => records.truncate(rows),
            Incoming::Columns(chunk) if rows < chunk.len() => {
                chunk.batch = chunk.batch.slice(0, rows);
                chunk.times = chunk.times.slice(0, rows);
            }
            Incoming::Columns(_) => {}
        }
    }
}

impl WriteBuffer {
    /// Rows held.
    pub(crate) fn len(&self) -> usize {
        self.rows
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Adds rows after those held.
    pub(crate) fn push(&mut self, incoming: Incoming) {
        self.rows += incoming.len();
        match incoming {
            Incoming::Records(records) if records.is_empty() => {}
            Incoming::Records(mut records) => match self.segments.last_mut() {
                Some(Segment::Records(held)) => held.append(&mut records),
                _ => self.segments.push(Segment::Records(records)),
            },
            Incoming::Columns(chunk) if chunk.is_empty() => {}
            Incoming::Columns(chunk) => self.segments.push(Segment::Columns(chunk)),
        }
    }

    /// Adds the rows of `other` after those held, leaving it empty.
    pub(crate) fn append(&mut self, other: &mut WriteBuffer) {
        for segment in other.segments.drain(..) {
            self.push(match segment {
                Segment::Records(records) => Incoming::Records(records),
                Segment::Columns(chunk) => Incoming::Columns(chunk),
            });
        }
        other.rows = 0;
    }

    /// The rows gathered as columns, in order, for a flush.
    pub(crate) fn to_columns(&self) -> ColumnBuffer {
        let mut buffer = ColumnBuffer::with_capacity(self.rows);
        for segment in &self.segments {
            match segment {
                Segment::Records(records) => {
                    records.iter().for_each(|r| buffer.push(r.time_ms, &r.record))
                }
                Segment::Columns(chunk) => buffer.push_chunk(chunk),
            }
        }
        buffer
    }

    /// The rows whose time lies in `[from_ms, to_ms)`, as records, in order.
    pub(crate) fn records_in(
        &self,
        from_ms: i64,
        to_ms: i64,
    ) -> impl Iterator<Item = StoredRecord> + '_ {
        let in_range = move |t: i64| t >= from_ms && t < to_ms;
        self.segments.iter().flat_map(move |segment| -> Box<dyn Iterator<Item = StoredRecord>> {
            match segment {
                Segment::Records(records) => {
                    Box::new(records.iter().filter(move |r| in_range(r.time_ms)).cloned())
                }
                Segment::Columns(chunk) => Box::new(
                    (0..chunk.len())
                        .filter(move |&row| in_range(chunk.times[row]))
                        .map(move |row| chunk.record(row)),
                ),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{ArrayRef, Float64Array, RecordBatch, StringArray};
    use needle_record::{Record, Value};
    use std::sync::Arc;

    fn chunk(names: &[&str], values: &[f64], times: &[i64]) -> ColumnChunk {
        let name: ArrayRef = Arc::new(StringArray::from(names.to_vec()));
        let value: ArrayRef = Arc::new(Float64Array::from(values.to_vec()));
        let batch = RecordBatch::try_from_iter([("name", name), ("value", value)]).unwrap();
        ColumnChunk { batch, times: times.to_vec().into() }
    }

    fn record(name: &str, value: f64, time_ms: i64) -> StoredRecord {
        let mut record = Record::new();
        record.insert("name", Value::String(name.into()));
        record.insert("value", Value::Double(value));
        StoredRecord { time_ms, record }
    }

    #[test]
    fn records_and_chunks_keep_their_order_and_read_back_as_records() {
        let mut buffer = WriteBuffer::default();
        buffer.push(Incoming::Records(vec![record("a", 1.0, 10)]));
        buffer.push(Incoming::Columns(chunk(&["b", "c"], &[2.0, 3.0], &[20, 30])));
        buffer.push(Incoming::Records(vec![record("d", 4.0, 40)]));
        let mut more = WriteBuffer::default();
        let mut cut = Incoming::Columns(chunk(&["e", "f"], &[5.0, 6.0], &[50, 60]));
        cut.truncate(1);
        more.push(cut);
        buffer.append(&mut more);
        assert!(more.is_empty());
        assert_eq!(buffer.len(), 5);
        let all: Vec<StoredRecord> = buffer.records_in(i64::MIN, i64::MAX).collect();
        let want = [
            record("a", 1.0, 10),
            record("b", 2.0, 20),
            record("c", 3.0, 30),
            record("d", 4.0, 40),
        ];
        assert_eq!(all[..4], want);
        assert_eq!(all[4], record("e", 5.0, 50));
        let some: Vec<i64> = buffer.records_in(20, 41).map(|r| r.time_ms).collect();
        assert_eq!(some, [20, 30, 40]);
        assert_eq!(buffer.to_columns().times(), [10, 20, 30, 40, 50]);
    }
}
