//! [`ColumnsBuilder`]: a pusher's batch of events as columns, filled one event at a time. An
//! event's fields are staged as they are set, then made a row ([`ColumnsBuilder::commit`]):
//! each value appended to its column, NULL to the columns the event did not set. A field is
//! found by comparing its name with the column after the last one set — an event setting the
//! fields of the event before in the same order (a struct's) costs one short compare a field —
//! then with the later columns (fields left out), else it makes a new column, NULL in the rows
//! before. What a row cannot hold is refused ([`ColumnsBuilder::stage`] answers false): the
//! caller keeps that event as a record.

use super::ColumnBatch;
use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType, Field, Schema};
use needle_engine::columnar::layout::{Kind, RESERVED};
use needle_engine::columnar::ColumnBuilder;
use needle_record::{Record, Value};
use std::sync::Arc;

/// Columns past this many in one batch are refused (a stream of ever new field names is kept
/// as records).
const MAX_COLUMNS: usize = 256;

/// A field's value as a column holds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar<'a> {
    Bool(bool),
    Int(i32),
    Long(i64),
    Float(f32),
    Double(f64),
    Text(&'a str),
}

impl<'a> Scalar<'a> {
    /// The scalar a value is; `None` for NULL, a list or a map (a row cannot hold them).
    pub fn of(value: &'a Value) -> Option<Scalar<'a>> {
        Some(match value {
            Value::Bool(b) => Scalar::Bool(*b),
            Value::Int(i) => Scalar::Int(*i),
            Value::Long(l) => Scalar::Long(*l),
            Value::Float(f) => Scalar::Float(*f),
            Value::Double(d) => Scalar::Double(*d),
            Value::String(s) => Scalar::Text(s),
            Value::Null | Value::List(_) | Value::Map(_) => return None,
        })
    }

    /// The kind of column that holds it.
    fn kind(self) -> Kind {
        match self {
            Scalar::Bool(_) => Kind::Bool,
            Scalar::Int(_) => Kind::Int,
            Scalar::Long(_) => Kind::Long,
            Scalar::Float(_) => Kind::Float,
            Scalar::Double(_) => Kind::Double,
            Scalar::Text(_) => Kind::Text,
        }
    }

    fn to_value(self) -> Value {
        match self {
            Scalar::Bool(b) => Value::Bool(b),
            Scalar::Int(i) => Value::Int(i),
            Scalar::Long(l) => Value::Long(l),
            Scalar::Float(f) => Value::Float(f),
            Scalar::Double(d) => Value::Double(d),
            Scalar::Text(s) => Value::String(s.to_owned()),
        }
    }
}

/// A value staged for the event being written: a string as its place in the staged text.
#[derive(Debug, Clone, Copy)]
enum Staged {
    Bool(bool),
    Int(i32),
    Long(i64),
    Float(f32),
    Double(f64),
    Text(u32, u32),
}

/// One column being built, of the engine's column types ([`ColumnBuilder`]; never JSON here).
#[derive(Debug)]
struct Column(ColumnBuilder);

impl Column {
    /// A column for values like `value`, NULL in its first `rows` rows.
    fn new(value: Scalar<'_>, capacity: usize, rows: usize) -> Column {
        let mut column =
            Column(ColumnBuilder::with_capacity(value.kind(), capacity, capacity * 16));
        for _ in 0..rows {
            column.append_null();
        }
        column
    }

    /// The staged form of `value`, when this column holds values of its type.
    #[inline]
    fn stage(&self, value: Scalar<'_>, text: &mut String) -> Option<Staged> {
        Some(match (&self.0, value) {
            (ColumnBuilder::Long(_), Scalar::Long(l)) => Staged::Long(l),
            (ColumnBuilder::Double(_), Scalar::Double(d)) => Staged::Double(d),
            (ColumnBuilder::Text(_), Scalar::Text(s)) => {
                let start = text.len() as u32;
                text.push_str(s);
                Staged::Text(start, text.len() as u32)
            }
            (ColumnBuilder::Bool(_), Scalar::Bool(b)) => Staged::Bool(b),
            (ColumnBuilder::Int(_), Scalar::Int(i)) => Staged::Int(i),
            (ColumnBuilder::Float(_), Scalar::Float(f)) => Staged::Float(f),
            _ => return None,
        })
    }

    #[inline]
    fn append(&mut self, value: Staged, text: &str) {
        match (&mut self.0, value) {
            (ColumnBuilder::Long(b), Staged::Long(l)) => b.append_value(l),
            (ColumnBuilder::Double(b), Staged::Double(d)) => b.append_value(d),
            (ColumnBuilder::Text(b), Staged::Text(start, end)) => {
                b.append_value(&text[start as usize..end as usize])
            }
            (ColumnBuilder::Bool(b), Staged::Bool(v)) => b.append_value(v),
            (ColumnBuilder::Int(b), Staged::Int(i)) => b.append_value(i),
            (ColumnBuilder::Float(b), Staged::Float(f)) => b.append_value(f),
            _ => unreachable!("a value is staged only for a column of its type"),
        }
    }

    fn append_null(&mut self) {
        self.0.append_null();
    }

    fn finish(&mut self) -> (DataType, ArrayRef) {
        (self.0.kind().data_type(), self.0.finish())
    }
}

/// Events gathered as columns (see the module doc).
#[derive(Debug)]
pub struct ColumnsBuilder {
    names: Vec<String>,
    columns: Vec<Column>,
    rows: usize,
    /// The event being written: its columns (strictly increasing) and values.
    staged: Vec<(u32, Staged)>,
    text: String,
    capacity: usize,
}

impl ColumnsBuilder {
    /// A builder for batches of about `capacity` events.
    pub fn new(capacity: usize) -> Self {
        Self {
            names: Vec::new(),
            columns: Vec::new(),
            rows: 0,
            staged: Vec::new(),
            text: String::new(),
            capacity: capacity.max(1),
        }
    }

    /// Events made rows so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Stages field `name` of the event being written; false (nothing staged) when a row
    /// cannot hold it: the event set it before, or set a later column already (fields out of
    /// the columns' order), its column holds another type, or it is a new column past
    /// `MAX_COLUMNS` or named like needle's own columns.
    #[inline]
    pub fn stage(&mut self, name: &str, value: Scalar<'_>) -> bool {
        let next = self.staged.last().map_or(0, |(column, _)| *column as usize + 1);
        let column = match self.names.get(next) {
            Some(held) if same_name(held, name) => next,
            _ => match self.find_or_add(next, name, value) {
                Some(column) => column,
                None => return false,
            },
        };
        match self.columns[column].stage(value, &mut self.text) {
            Some(staged) => {
                self.staged.push((column as u32, staged));
                true
            }
            None => false,
        }
    }

    /// Stages every field of `record`, a NULL left out (a NULL of its column); false when one
    /// does not fit ([`ColumnsBuilder::stage`]). For records decoded from lines with only the
    /// fields the queries read, when no query reads a record whole (where a field set to NULL
    /// and one left out are alike).
    pub fn stage_record(&mut self, record: &Record) -> bool {
        record.fields().iter().all(|(name, value)| match value {
            Value::Null => true,
            value => Scalar::of(value).is_some_and(|scalar| self.stage(name, scalar)),
        })
    }

    /// The column of `name` among those after `next`, or a new one; `None` when it is among
    /// the earlier ones or cannot be added.
    #[cold]
    fn find_or_add(&mut self, next: usize, name: &str, value: Scalar<'_>) -> Option<usize> {
        if let Some(offset) = self.names[next..].iter().position(|held| held == name) {
            return Some(next + offset);
        }
        if self.names[..next].iter().any(|held| held == name)
            || name.starts_with(RESERVED)
            || self.names.len() >= MAX_COLUMNS
        {
            return None;
        }
        self.names.push(name.to_owned());
        self.columns.push(Column::new(value, self.capacity, self.rows));
        Some(self.names.len() - 1)
    }

    /// The fields staged for the event being written, in order: for a caller that keeps the
    /// event as a record after all.
    pub fn staged(&self) -> impl Iterator<Item = (&str, Value)> + '_ {
        self.staged.iter().map(|(column, staged)| {
            let value = match *staged {
                Staged::Bool(b) => Scalar::Bool(b),
                Staged::Int(i) => Scalar::Int(i),
                Staged::Long(l) => Scalar::Long(l),
                Staged::Float(f) => Scalar::Float(f),
                Staged::Double(d) => Scalar::Double(d),
                Staged::Text(start, end) => Scalar::Text(&self.text[start as usize..end as usize]),
            };
            (self.names[*column as usize].as_str(), value.to_value())
        })
    }

    /// Makes the staged event a row.
    pub fn commit(&mut self) {
        if self.staged.len() == self.columns.len() {
            // every column, in order
            for ((_, value), column) in self.staged.iter().zip(&mut self.columns) {
                column.append(*value, &self.text);
            }
        } else {
            let mut staged = self.staged.iter().peekable();
            for (i, column) in self.columns.iter_mut().enumerate() {
                match staged.peek() {
                    Some((at, value)) if *at as usize == i => {
                        column.append(*value, &self.text);
                        staged.next();
                    }
                    _ => column.append_null(),
                }
            }
        }
        self.discard();
        self.rows += 1;
    }

    /// Forgets the staged event.
    pub fn discard(&mut self) {
        self.staged.clear();
        self.text.clear();
    }

    /// The rows made so far as a batch (`None` when there are none); the builder starts anew,
    /// with no columns.
    pub fn finish(&mut self) -> Option<ColumnBatch> {
        self.discard();
        if self.rows == 0 {
            return None;
        }
        let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = self
            .names
            .drain(..)
            .zip(self.columns.drain(..))
            .map(|(name, mut column)| {
                let (data_type, array) = column.finish();
                (Field::new(name, data_type, true), array)
            })
            .unzip();
        // (the row count given: events may have no field at all)
        let options = RecordBatchOptions::new().with_row_count(Some(self.rows));
        self.rows = 0;
        let batch =
            RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options)
                .expect("every column has a value or NULL in every row");
        Some(ColumnBatch::new(batch))
    }
}

/// `a == b` for field names, inline (names are a few bytes: a call to `memcmp` costs more).
#[inline]
fn same_name(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| x == y)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes each event (fields in order) as a row; false for one the builder refused.
    fn push(builder: &mut ColumnsBuilder, fields: &[(&str, Value)]) -> bool {
        for (name, value) in fields {
            let Some(scalar) = Scalar::of(value) else {
                builder.discard();
                return false;
            };
            if !builder.stage(name, scalar) {
                builder.discard();
                return false;
            }
        }
        builder.commit();
        true
    }

    fn record(fields: &[(&str, Value)]) -> Record {
        let mut record = Record::new();
        for (name, value) in fields {
            record.insert(*name, value.clone());
        }
        record
    }

    #[test]
    fn rows_read_back_as_the_events_written() {
        let events: Vec<Vec<(&str, Value)>> = vec![
            vec![("a", 1i64.into()), ("b", "x".into()), ("c", true.into())],
            vec![("a", 2i64.into()), ("c", false.into())],
            vec![("b", "yy".into()), ("d", 1.5f64.into())],
            vec![],
            vec![("a", 3i64.into()), ("e", Value::Int(7)), ("f", Value::Float(0.5))],
        ];
        let mut builder = ColumnsBuilder::new(2);
        for event in &events {
            assert!(push(&mut builder, event));
        }
        assert_eq!(builder.rows(), events.len());
        let batch = builder.finish().unwrap();
        assert_eq!(builder.rows(), 0);
        let reader = batch.rows_reader();
        let mut got = Record::new();
        for (row, event) in events.iter().enumerate() {
            reader.write(row, &mut got);
            assert_eq!(got, record(event), "row {row}");
        }
        let mut text = Vec::new();
        batch.write_ndjson(&mut text);
        assert!(String::from_utf8(text).unwrap().starts_with("{\"a\":1,\"b\":\"x\",\"c\":true}\n"));
    }

    #[test]
    fn events_without_fields_are_rows_of_no_column() {
        let mut builder = ColumnsBuilder::new(4);
        assert!(push(&mut builder, &[]) && push(&mut builder, &[("n", Value::Null)][..0]));
        assert!(builder.stage_record(&record(&[("n", Value::Null)])));
        builder.commit();
        let batch = builder.finish().unwrap();
        assert_eq!((batch.rows(), batch.record_batch().num_columns()), (3, 0));
    }

    #[test]
    fn what_a_row_cannot_hold_is_refused_and_nothing_of_it_kept() {
        let mut builder = ColumnsBuilder::new(4);
        assert!(push(&mut builder, &[("a", 1i64.into()), ("b", "x".into())]));
        let refused: Vec<Vec<(&str, Value)>> = vec![
            vec![("b", "y".into()), ("a", 2i64.into())], // out of order
            vec![("a", 2i64.into()), ("a", 3i64.into())], // twice
            vec![("a", "two".into())],                   // another type
            vec![("a", Value::Null)],
            vec![("l", Value::List(vec![]))],
            vec![("__needle_time", 5i64.into())],
        ];
        for event in &refused {
            assert!(!push(&mut builder, event), "{event:?}");
        }
        // staged fields are handed back in order, for the event kept as a record
        assert!(builder.stage("a", Scalar::Long(9)) && builder.stage("z", Scalar::Text("t")));
        let staged: Vec<(String, Value)> =
            builder.staged().map(|(n, v)| (n.to_owned(), v)).collect();
        assert_eq!(staged, [("a".to_owned(), Value::Long(9)), ("z".to_owned(), "t".into())]);
        builder.discard();
        let batch = builder.finish().unwrap();
        assert_eq!(batch.rows(), 1);
        let mut got = Record::new();
        batch.rows_reader().write(0, &mut got);
        assert_eq!(got, record(&[("a", 1i64.into()), ("b", "x".into())]));
    }
}
