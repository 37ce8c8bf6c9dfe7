//! Events pushed from code as typed columns: a [`ColumnBatch`] holds a batch of events as one
//! Arrow array per field (names once per batch, values in vectors), built by a pusher
//! ([`ColumnsBuilder`], from the fields it is handed one by one) and read by a worker column
//! at a time when every running query allows it (the `run` module), row by row otherwise
//! ([`RowReader`], each column read through the engine's
//! [`needle_engine::columnar::ColumnView`]).
//!
//! A batch's rows are exactly the events pushed: a row's fields are the columns where it is not
//! NULL, in the columns' order, which is the order the event set them (an event that set its
//! fields in another order, set one twice, set a NULL, a list or a map, or gave a field another
//! type than its column's is not made a row: the pusher keeps it as a record instead).

mod build;
mod points;
pub(crate) mod run;

pub use build::{ColumnsBuilder, Scalar};
pub use points::{PointBatches, MAX_SHAPES};

use arrow_array::{Array, RecordBatch};
use needle_engine::columnar::ColumnView;
use needle_record::{Record, RecordWriter, Value};

/// A batch of events as columns (see the module doc).
#[derive(Debug, Clone)]
pub struct ColumnBatch {
    batch: RecordBatch,
}

impl ColumnBatch {
    pub(crate) fn new(batch: RecordBatch) -> Self {
        Self { batch }
    }

    /// Events in the batch.
    pub fn rows(&self) -> usize {
        self.batch.num_rows()
    }

    /// The columns, named by their fields.
    pub fn record_batch(&self) -> &RecordBatch {
        &self.batch
    }

    /// A reader of the batch's rows as records.
    pub fn rows_reader(&self) -> RowReader<'_> {
        let schema = self.batch.schema_ref();
        let columns = schema
            .fields()
            .iter()
            .zip(self.batch.columns())
            .map(|(field, array)| (field.name().as_str(), ColumnView::of(array.as_ref(), false)))
            // a column of a type no event sets holds no field of any row
            .filter(|(_, column)| !matches!(column, ColumnView::Unreadable))
            .collect();
        RowReader { columns }
    }

    /// The batch as NDJSON, one line per event (what history keeps of events pushed from code).
    pub fn write_ndjson(&self, out: &mut Vec<u8>) {
        let reader = self.rows_reader();
        let mut record = Record::new();
        for row in 0..self.rows() {
            reader.write(row, &mut record);
            record.write_json(out);
            out.push(b'\n');
        }
    }
}

/// Writes a [`ColumnBatch`]'s rows into records.
pub struct RowReader<'a> {
    columns: Vec<(&'a str, ColumnView<'a>)>,
}

impl RowReader<'_> {
    /// Overwrites `record` with row `row`'s fields (its strings' buffers reused).
    pub fn write(&self, row: usize, record: &mut Record) {
        let mut writer = RecordWriter::new(record);
        for (name, column) in &self.columns {
            match *column {
                ColumnView::Long(a) if a.is_valid(row) => writer.set_i64(name, a.value(row)),
                ColumnView::Double(a) if a.is_valid(row) => writer.set_f64(name, a.value(row)),
                ColumnView::Text(a) if a.is_valid(row) => writer.set_str(name, a.value(row)),
                ColumnView::Bool(a) if a.is_valid(row) => writer.set_bool(name, a.value(row)),
                ColumnView::Int(a) if a.is_valid(row) => writer.set(name, Value::Int(a.value(row))),
                ColumnView::Float(a) if a.is_valid(row) => {
                    writer.set(name, Value::Float(a.value(row)))
                }
                ColumnView::Dictionary(..) => match column.text(row) {
                    Some(text) => writer.set_str(name, text),
                    None => continue,
                },
                _ => continue,
            };
        }
        writer.finish();
    }
}
