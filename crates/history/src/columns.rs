//! Records as typed columns, and back, losslessly.
//!
//! Records are schemaless; a part's columns are decided by the records in it:
//! - a top-level field whose non-null values all have one scalar type becomes a column of that
//!   type (BOOLEAN, INT32, INT64, FLOAT, DOUBLE, UTF8), which DuckDB and others read as such and
//!   whose min/max the zone maps use;
//! - a field holding maps or lists, or values of more than one type in the part, becomes a UTF8
//!   column of JSON text (named in the metadata key [`META_JSON_COLUMNS`]), decoded back into
//!   the same values;
//! - [`TIME_COLUMN`] holds each record's time (ms), the one the store partitions, sorts and
//!   filters by;
//! - [`LAYOUT_COLUMN`] holds, per row, the index of the record's key order in the list kept in
//!   [`META_LAYOUTS`]: which fields the record had and in what order, so a field that was
//!   missing stays missing, one that was `null` comes back `null`, and keys come back in order.
//!   Records of one shape share one index, which run-length encoding stores in a few bytes.
//!
//! A record's own field named like a reserved column (`__needle_...`) is stored under
//! [`ESCAPE`] + its name and given back under its name.

use arrow_array::builder::{
    ArrayBuilder, BooleanBuilder, Float32Builder, Float64Builder, Int32Builder, Int64Builder,
    StringBuilder,
};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Float32Array, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray,
};
use arrow_schema::{ArrowError, DataType, Field, Schema};
use needle_record::{Record, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// Each record's time, ms since the epoch.
pub const TIME_COLUMN: &str = "__needle_time";
/// Each record's shape: an index into [`META_LAYOUTS`].
pub const LAYOUT_COLUMN: &str = "__needle_layout";
/// JSON: the list of key orders (each a list of field names) of the part's records.
pub const META_LAYOUTS: &str = "needle.layouts";
/// JSON: the columns that hold JSON text rather than typed values.
pub const META_JSON_COLUMNS: &str = "needle.json_columns";
/// The prefix of reserved column names, and what a record's own field of that name gets.
pub const RESERVED: &str = "__needle_";
pub const ESCAPE: &str = "__needle_field_";

/// A record and its time.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRecord {
    pub time_ms: i64,
    pub record: Record,
}

/// The type a column of a part holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Bool,
    Int,
    Long,
    Float,
    Double,
    Text,
    /// JSON text of any value.
    Json,
}

impl Kind {
    fn of(value: &Value) -> Option<Kind> {
        Some(match value {
            Value::Null => return None,
            Value::Bool(_) => Kind::Bool,
            Value::Int(_) => Kind::Int,
            Value::Long(_) => Kind::Long,
            Value::Float(_) => Kind::Float,
            Value::Double(_) => Kind::Double,
            Value::String(_) => Kind::Text,
            Value::List(_) | Value::Map(_) => Kind::Json,
        })
    }

    pub(crate) fn data_type(self) -> DataType {
        match self {
            Kind::Bool => DataType::Boolean,
            Kind::Int => DataType::Int32,
            Kind::Long => DataType::Int64,
            Kind::Float => DataType::Float32,
            Kind::Double => DataType::Float64,
            Kind::Text | Kind::Json => DataType::Utf8,
        }
    }
}

/// The kind of a part's field column of type `data_type` (`json`: named in
/// [`META_JSON_COLUMNS`]); `None` for a type needle does not write.
pub(crate) fn kind_of_column(data_type: &DataType, json: bool) -> Option<Kind> {
    Some(match data_type {
        DataType::Boolean => Kind::Bool,
        DataType::Int32 => Kind::Int,
        DataType::Int64 => Kind::Long,
        DataType::Float32 => Kind::Float,
        DataType::Float64 => Kind::Double,
        DataType::Utf8 if json => Kind::Json,
        DataType::Utf8 => Kind::Text,
        _ => return None,
    })
}

/// A column of `kind` as a JSON column holding the same values (each as its JSON text, nulls
/// as nulls): what a merge writes when its inputs stored a field with different kinds.
pub(crate) fn as_json_column(array: &dyn Array, kind: Kind) -> Result<ArrayRef, ArrowError> {
    let column = Column::of(array, kind)
        .ok_or_else(|| ArrowError::InvalidArgumentError(format!("not a {kind:?} column")))?;
    let mut builder = StringBuilder::with_capacity(array.len(), array.len() * 8);
    for row in 0..array.len() {
        match column.value(row) {
            Value::Null => builder.append_null(),
            value => builder.append_value(value.to_json()),
        }
    }
    Ok(Arc::new(builder.finish()))
}

/// The column a field is stored in.
pub(crate) fn column_name(field: &str) -> std::borrow::Cow<'_, str> {
    if field.starts_with(RESERVED) {
        format!("{ESCAPE}{field}").into()
    } else {
        field.into()
    }
}

/// The field a (non-reserved or escaped) column holds.
pub(crate) fn field_name(column: &str) -> &str {
    column.strip_prefix(ESCAPE).unwrap_or(column)
}

/// Rows as columns: the batch, and what goes in the part's metadata.
pub(crate) struct Encoded {
    pub batch: RecordBatch,
    pub layouts: Vec<Vec<String>>,
    pub json_columns: Vec<String>,
    /// Every field column with its kind, in schema order.
    pub kinds: Vec<(String, Kind)>,
}

/// Encodes `rows` (already sorted as they should be stored).
///
/// Each record's fields are walked in their own order, without a lookup by name: a record's
/// layout (its keys, in order) is recognized once — most records have the layout of the record
/// before them — and maps each of its positions to a column.
pub(crate) fn encode(rows: &[&StoredRecord]) -> Result<Encoded, ArrowError> {
    let mut layout_ids: HashMap<Vec<String>, usize> = HashMap::new();
    let mut layouts: Vec<Vec<String>> = Vec::new();
    // per layout, the column of each of its positions
    let mut layout_columns: Vec<Vec<usize>> = Vec::new();
    let mut layout_of_row: Vec<i32> = Vec::with_capacity(rows.len());
    // columns in order of first appearance, each with the kind of all its non-null values
    let mut kinds: Vec<(String, Option<Kind>)> = Vec::new();
    let mut column_of: HashMap<String, usize> = HashMap::new();
    let mut last: Option<usize> = None;
    for row in rows {
        let same_as_last = last.is_some_and(|l| {
            let keys = &layouts[l];
            keys.len() == row.record.len()
                && row.record.iter().zip(keys).all(|((k, _), key)| k == key)
        });
        let id = match (same_as_last, last) {
            (true, Some(l)) => l,
            _ => {
                let keys: Vec<String> = row.record.iter().map(|(k, _)| k.clone()).collect();
                let id = match layout_ids.get(&keys) {
                    Some(&id) => id,
                    None => {
                        let columns = keys
                            .iter()
                            .map(|k| {
                                *column_of.entry(k.clone()).or_insert_with(|| {
                                    kinds.push((k.clone(), None));
                                    kinds.len() - 1
                                })
                            })
                            .collect();
                        layout_columns.push(columns);
                        layouts.push(keys.clone());
                        layout_ids.insert(keys, layouts.len() - 1);
                        layouts.len() - 1
                    }
                };
                last = Some(id);
                id
            }
        };
        for ((_, value), &column) in row.record.iter().zip(&layout_columns[id]) {
            if let Some(kind) = Kind::of(value) {
                let slot = &mut kinds[column].1;
                *slot = match *slot {
                    None => Some(kind),
                    Some(k) if k == kind => Some(k),
                    Some(_) => Some(Kind::Json),
                };
            }
        }
        layout_of_row.push(i32::try_from(id).unwrap_or(i32::MAX));
    }
    let kinds: Vec<(String, Kind)> =
        kinds.into_iter().map(|(name, kind)| (name, kind.unwrap_or(Kind::Text))).collect();

    let mut builders: Vec<Builder> =
        kinds.iter().map(|(_, k)| Builder::new(*k, rows.len())).collect();
    for (index, (row, &layout)) in rows.iter().zip(&layout_of_row).enumerate() {
        let columns = &layout_columns[layout as usize];
        for ((_, value), &column) in row.record.iter().zip(columns) {
            builders[column].push(value);
        }
        // the columns this record has no field for
        if columns.len() < builders.len() {
            for b in builders.iter_mut().filter(|b| b.len() <= index) {
                b.push(&Value::Null);
            }
        }
    }

    let mut fields = vec![
        Field::new(TIME_COLUMN, DataType::Int64, false),
        Field::new(LAYOUT_COLUMN, DataType::Int32, false),
    ];
    let mut arrays: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.time_ms))),
        Arc::new(Int32Array::from(layout_of_row)),
    ];
    let mut json_columns = Vec::new();
    for ((name, kind), builder) in kinds.iter().zip(builders) {
        let column = column_name(name).into_owned();
        if *kind == Kind::Json {
            json_columns.push(column.clone());
        }
        fields.push(Field::new(&column, kind.data_type(), true));
        arrays.push(builder.finish());
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?;
    Ok(Encoded { batch, layouts, json_columns, kinds })
}

/// One column being built, of its kind.
enum Builder {
    Bool(BooleanBuilder),
    Int(Int32Builder),
    Long(Int64Builder),
    Float(Float32Builder),
    Double(Float64Builder),
    Text(StringBuilder),
    Json(StringBuilder),
}

impl Builder {
    fn new(kind: Kind, rows: usize) -> Self {
        match kind {
            Kind::Bool => Builder::Bool(BooleanBuilder::with_capacity(rows)),
            Kind::Int => Builder::Int(Int32Builder::with_capacity(rows)),
            Kind::Long => Builder::Long(Int64Builder::with_capacity(rows)),
            Kind::Float => Builder::Float(Float32Builder::with_capacity(rows)),
            Kind::Double => Builder::Double(Float64Builder::with_capacity(rows)),
            Kind::Text => Builder::Text(StringBuilder::with_capacity(rows, rows * 8)),
            Kind::Json => Builder::Json(StringBuilder::with_capacity(rows, rows * 16)),
        }
    }

    fn len(&self) -> usize {
        match self {
            Builder::Bool(b) => b.len(),
            Builder::Int(b) => b.len(),
            Builder::Long(b) => b.len(),
            Builder::Float(b) => b.len(),
            Builder::Double(b) => b.len(),
            Builder::Text(b) | Builder::Json(b) => b.len(),
        }
    }

    /// Appends a value of the column's kind (a null for NULL; a column of one kind holds only
    /// values of that kind or NULL).
    fn push(&mut self, value: &Value) {
        match (self, value) {
            (Builder::Json(b), Value::Null) => b.append_null(),
            (Builder::Json(b), v) => b.append_value(v.to_json()),
            (Builder::Bool(b), Value::Bool(v)) => b.append_value(*v),
            (Builder::Int(b), Value::Int(v)) => b.append_value(*v),
            (Builder::Long(b), Value::Long(v)) => b.append_value(*v),
            (Builder::Float(b), Value::Float(v)) => b.append_value(*v),
            (Builder::Double(b), Value::Double(v)) => b.append_value(*v),
            (Builder::Text(b), Value::String(v)) => b.append_value(v),
            (Builder::Bool(b), _) => b.append_null(),
            (Builder::Int(b), _) => b.append_null(),
            (Builder::Long(b), _) => b.append_null(),
            (Builder::Float(b), _) => b.append_null(),
            (Builder::Double(b), _) => b.append_null(),
            (Builder::Text(b), _) => b.append_null(),
        }
    }

    fn finish(self) -> ArrayRef {
        match self {
            Builder::Bool(mut b) => Arc::new(b.finish()),
            Builder::Int(mut b) => Arc::new(b.finish()),
            Builder::Long(mut b) => Arc::new(b.finish()),
            Builder::Float(mut b) => Arc::new(b.finish()),
            Builder::Double(mut b) => Arc::new(b.finish()),
            Builder::Text(mut b) | Builder::Json(mut b) => Arc::new(b.finish()),
        }
    }
}

/// A column of a batch being decoded.
enum Column<'a> {
    Bool(&'a BooleanArray),
    Int(&'a Int32Array),
    Long(&'a Int64Array),
    Float(&'a Float32Array),
    Double(&'a Float64Array),
    Text(&'a StringArray),
    Json(&'a StringArray),
}

impl<'a> Column<'a> {
    fn of(array: &'a dyn Array, kind: Kind) -> Option<Self> {
        let array = array.as_any();
        match kind {
            Kind::Bool => array.downcast_ref().map(Column::Bool),
            Kind::Int => array.downcast_ref().map(Column::Int),
            Kind::Long => array.downcast_ref().map(Column::Long),
            Kind::Float => array.downcast_ref().map(Column::Float),
            Kind::Double => array.downcast_ref().map(Column::Double),
            Kind::Text => array.downcast_ref().map(Column::Text),
            Kind::Json => array.downcast_ref().map(Column::Json),
        }
    }

    /// Puts row `row`'s value in `slot`, reusing a string's buffer where it can.
    fn fill(&self, row: usize, slot: &mut Value) {
        if let (Column::Text(a), Value::String(s)) = (self, &mut *slot) {
            if !a.is_null(row) {
                s.clear();
                s.push_str(a.value(row));
                return;
            }
        }
        *slot = self.value(row);
    }

    fn value(&self, row: usize) -> Value {
        let array: &dyn Array = match self {
            Column::Bool(a) => *a,
            Column::Int(a) => *a,
            Column::Long(a) => *a,
            Column::Float(a) => *a,
            Column::Double(a) => *a,
            Column::Text(a) | Column::Json(a) => *a,
        };
        if array.is_null(row) {
            return Value::Null;
        }
        match self {
            Column::Bool(a) => Value::Bool(a.value(row)),
            Column::Int(a) => Value::Int(a.value(row)),
            Column::Long(a) => Value::Long(a.value(row)),
            Column::Float(a) => Value::Float(a.value(row)),
            Column::Double(a) => Value::Double(a.value(row)),
            Column::Text(a) => Value::String(a.value(row).to_owned()),
            Column::Json(a) => {
                needle_record::decode_value(a.value(row).as_bytes()).unwrap_or(Value::Null)
            }
        }
    }
}

/// Decodes a batch of a part back into records: the rows whose time lies in `[from, to)`, with
/// only the `wanted` fields (all when `None`).
pub(crate) fn decode(
    batch: &RecordBatch,
    layouts: &[Vec<String>],
    json_columns: &[String],
    wanted: Option<&[String]>,
    from_ms: i64,
    to_ms: i64,
    out: &mut Vec<StoredRecord>,
) -> Result<(), String> {
    visit(batch, layouts, json_columns, wanted, from_ms, to_ms, &mut |time_ms, record| {
        out.push(StoredRecord { time_ms, record: record.clone() })
    })
}

/// [`decode`], handing each record to `f` instead: one record is refilled in place from row to
/// row while the rows share a layout (no allocation per row but for new string lengths).
pub(crate) fn visit(
    batch: &RecordBatch,
    layouts: &[Vec<String>],
    json_columns: &[String],
    wanted: Option<&[String]>,
    from_ms: i64,
    to_ms: i64,
    f: &mut dyn FnMut(i64, &Record),
) -> Result<(), String> {
    let times = batch
        .column_by_name(TIME_COLUMN)
        .and_then(|a| a.as_any().downcast_ref::<Int64Array>())
        .ok_or("no time column")?;
    let layout = batch
        .column_by_name(LAYOUT_COLUMN)
        .and_then(|a| a.as_any().downcast_ref::<Int32Array>())
        .ok_or("no layout column")?;
    let schema = batch.schema();
    let mut columns: HashMap<&str, Column<'_>> = HashMap::new();
    for (i, field) in schema.fields().iter().enumerate() {
        let name = field.name().as_str();
        if name == TIME_COLUMN || name == LAYOUT_COLUMN {
            continue;
        }
        let json = json_columns.iter().any(|c| c == name);
        let column = kind_of_column(field.data_type(), json)
            .and_then(|kind| Column::of(batch.column(i).as_ref(), kind));
        if let Some(column) = column {
            columns.insert(field_name(name), column);
        }
    }
    // per layout: its fields that are wanted and stored, with their columns, in order
    let mut plans: HashMap<i32, Vec<(String, &Column<'_>)>> = HashMap::new();
    let mut record = Record::new();
    let mut current: Option<i32> = None;
    for row in 0..batch.num_rows() {
        let time_ms = times.value(row);
        if time_ms < from_ms || time_ms >= to_ms {
            continue;
        }
        let id = layout.value(row);
        let plan = match plans.entry(id) {
            std::collections::hash_map::Entry::Occupied(known) => known.into_mut(),
            std::collections::hash_map::Entry::Vacant(slot) => {
                let keys = usize::try_from(id)
                    .ok()
                    .and_then(|i| layouts.get(i))
                    .ok_or("a row's layout is not in the part's metadata")?;
                let plan = keys
                    .iter()
                    .filter(|k| wanted.is_none_or(|w| w.iter().any(|f| f == *k)))
                    // a field the part does not keep (history.fields) stays out
                    .filter_map(|k| columns.get(k.as_str()).map(|c| (k.clone(), c)))
                    .collect();
                slot.insert(plan)
            }
        };
        if current == Some(id) {
            for ((_, slot), (_, column)) in record.fields_mut().zip(plan) {
                column.fill(row, slot);
            }
        } else {
            let mut map = needle_record::map_with_capacity(plan.len());
            for (key, column) in plan {
                map.insert(key.clone(), column.value(row));
            }
            record = Record::from_map(map);
            current = Some(id);
        }
        f(time_ms, &record);
    }
    Ok(())
}
