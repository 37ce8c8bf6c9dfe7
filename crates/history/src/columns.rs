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
    BooleanBuilder, Float32Builder, Float64Builder, Int32Builder, Int64Builder, StringBuilder,
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

    fn data_type(self) -> DataType {
        match self {
            Kind::Bool => DataType::Boolean,
            Kind::Int => DataType::Int32,
            Kind::Long => DataType::Int64,
            Kind::Float => DataType::Float32,
            Kind::Double => DataType::Float64,
            Kind::Text | Kind::Json => DataType::Utf8,
        }
    }

    /// True for the kinds whose blocks keep a count and sum.
    pub(crate) fn is_numeric(self) -> bool {
        matches!(self, Kind::Int | Kind::Long | Kind::Float | Kind::Double)
    }
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
fn field_name(column: &str) -> &str {
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
pub(crate) fn encode(rows: &[&StoredRecord]) -> Result<Encoded, ArrowError> {
    let mut layout_ids: HashMap<String, i32> = HashMap::new();
    let mut layouts: Vec<Vec<String>> = Vec::new();
    let mut layout_of_row: Vec<i32> = Vec::with_capacity(rows.len());
    // fields in order of first appearance, each with the kind of all its non-null values
    let mut kinds: Vec<(String, Option<Kind>)> = Vec::new();
    let mut position: HashMap<String, usize> = HashMap::new();
    let mut key = String::new();
    for row in rows {
        key.clear();
        for (name, value) in row.record.iter() {
            key.push_str(name);
            key.push('\u{0}');
            let at = match position.get(name.as_str()) {
                Some(&at) => at,
                None => {
                    position.insert(name.clone(), kinds.len());
                    kinds.push((name.clone(), None));
                    kinds.len() - 1
                }
            };
            if let Some(kind) = Kind::of(value) {
                let slot = &mut kinds[at].1;
                *slot = match *slot {
                    None => Some(kind),
                    Some(k) if k == kind => Some(k),
                    Some(_) => Some(Kind::Json),
                };
            }
        }
        let id = match layout_ids.get(&key) {
            Some(&id) => id,
            None => {
                let id = i32::try_from(layouts.len()).unwrap_or(i32::MAX);
                layouts.push(row.record.iter().map(|(k, _)| k.clone()).collect());
                layout_ids.insert(key.clone(), id);
                id
            }
        };
        layout_of_row.push(id);
    }
    let kinds: Vec<(String, Kind)> =
        kinds.into_iter().map(|(name, kind)| (name, kind.unwrap_or(Kind::Text))).collect();

    let mut fields = vec![
        Field::new(TIME_COLUMN, DataType::Int64, false),
        Field::new(LAYOUT_COLUMN, DataType::Int32, false),
    ];
    let mut arrays: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.time_ms))),
        Arc::new(Int32Array::from(layout_of_row)),
    ];
    let mut json_columns = Vec::new();
    for (name, kind) in &kinds {
        let column = column_name(name).into_owned();
        if *kind == Kind::Json {
            json_columns.push(column.clone());
        }
        fields.push(Field::new(&column, kind.data_type(), true));
        arrays.push(build(rows, name, *kind));
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?;
    Ok(Encoded { batch, layouts, json_columns, kinds })
}

/// One field's column.
fn build(rows: &[&StoredRecord], name: &str, kind: Kind) -> ArrayRef {
    let values = rows.iter().map(|r| r.record.get(name).filter(|v| !v.is_null()));
    match kind {
        Kind::Bool => {
            let mut b = BooleanBuilder::with_capacity(rows.len());
            values.for_each(|v| b.append_option(v.and_then(Value::as_bool)));
            Arc::new(b.finish())
        }
        Kind::Int => {
            let mut b = Int32Builder::with_capacity(rows.len());
            values.for_each(|v| {
                b.append_option(v.and_then(|v| match v {
                    Value::Int(i) => Some(*i),
                    _ => None,
                }))
            });
            Arc::new(b.finish())
        }
        Kind::Long => {
            let mut b = Int64Builder::with_capacity(rows.len());
            values.for_each(|v| b.append_option(v.and_then(Value::as_i64)));
            Arc::new(b.finish())
        }
        Kind::Float => {
            let mut b = Float32Builder::with_capacity(rows.len());
            values.for_each(|v| {
                b.append_option(v.and_then(|v| match v {
                    Value::Float(f) => Some(*f),
                    _ => None,
                }))
            });
            Arc::new(b.finish())
        }
        Kind::Double => {
            let mut b = Float64Builder::with_capacity(rows.len());
            values.for_each(|v| b.append_option(v.and_then(Value::as_f64)));
            Arc::new(b.finish())
        }
        Kind::Text => {
            let mut b = StringBuilder::with_capacity(rows.len(), rows.len() * 8);
            values.for_each(|v| b.append_option(v.and_then(Value::as_str)));
            Arc::new(b.finish())
        }
        Kind::Json => {
            let mut b = StringBuilder::with_capacity(rows.len(), rows.len() * 16);
            values.for_each(|v| b.append_option(v.map(Value::to_json)));
            Arc::new(b.finish())
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

impl Column<'_> {
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
        let array = batch.column(i).as_any();
        let json = json_columns.iter().any(|c| c == name);
        let column = match field.data_type() {
            DataType::Boolean => array.downcast_ref().map(Column::Bool),
            DataType::Int32 => array.downcast_ref().map(Column::Int),
            DataType::Int64 => array.downcast_ref().map(Column::Long),
            DataType::Float32 => array.downcast_ref().map(Column::Float),
            DataType::Float64 => array.downcast_ref().map(Column::Double),
            DataType::Utf8 if json => array.downcast_ref().map(Column::Json),
            DataType::Utf8 => array.downcast_ref().map(Column::Text),
            _ => None,
        };
        if let Some(column) = column {
            columns.insert(field_name(name), column);
        }
    }
    for row in 0..batch.num_rows() {
        let time_ms = times.value(row);
        if time_ms < from_ms || time_ms >= to_ms {
            continue;
        }
        let keys = usize::try_from(layout.value(row))
            .ok()
            .and_then(|i| layouts.get(i))
            .ok_or("a row's layout is not in the part's metadata")?;
        let mut map = needle_record::map_with_capacity(keys.len());
        for key in keys {
            if wanted.is_some_and(|w| !w.iter().any(|f| f == key)) {
                continue;
            }
            // a field the part does not keep (history.fields) stays out
            if let Some(column) = columns.get(key.as_str()) {
                map.insert(key.clone(), column.value(row));
            }
        }
        out.push(StoredRecord { time_ms, record: Record::from_map(map) });
    }
    Ok(())
}
