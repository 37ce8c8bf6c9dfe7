//! Records as Arrow columns: how a field is named and typed as a column, whichever side
//! builds the columns (the history store writing parts, a pusher gathering events) and
//! whichever reads them (the filter and the summarizer here, the store's decoder).
//!
//! - A top-level field whose non-null values all have one scalar type is a column of that type
//!   ([`Kind`]: BOOLEAN, INT32, INT64, FLOAT, DOUBLE, UTF8); a field holding maps or lists, or
//!   values of more than one type, is a UTF8 column of JSON text ([`Kind::Json`]: the store
//!   names such columns in its metadata, since the Arrow type alone does not tell them apart).
//! - [`TIME_COLUMN`] holds each record's time (ms).
//! - Column names beginning with [`RESERVED`] are needle's own; a record's own field named like
//!   that is stored under [`ESCAPE`] + its name ([`column_name`]) and given back under its name
//!   ([`field_name`]).

use arrow_array::{Array, ArrayRef, Int64Array, TimestampMillisecondArray};
use arrow_schema::{ArrowError, DataType, TimeUnit};
use needle_record::Value;
use std::sync::Arc;

/// Each record's time, ms since the epoch: a UTC timestamp of ms ([`time_type`]) as columns are
/// written now, a plain INT64 in the history store's older parts; read as either.
pub const TIME_COLUMN: &str = "__needle_time";

/// The prefix of reserved column names, and what a record's own field of that name gets.
pub const RESERVED: &str = "__needle_";
pub const ESCAPE: &str = "__needle_field_";

/// The type of [`TIME_COLUMN`]: a UTC timestamp of ms (Parquet's INT64 `TIMESTAMP(MILLIS,
/// UTC)`), which DuckDB, Spark and Iceberg's `timestamptz` read as a time.
pub fn time_type() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

/// The values of a time column, ms since the epoch, whichever of its two types it has.
pub fn time_values(array: &dyn Array) -> Option<&[i64]> {
    let any = array.as_any();
    if let Some(a) = any.downcast_ref::<TimestampMillisecondArray>() {
        return Some(a.values());
    }
    any.downcast_ref::<Int64Array>().map(|a| &a.values()[..])
}

/// A time column as [`time_type`] (a part written before held INT64): the same buffer.
pub fn as_time_column(array: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    if array.data_type() == &time_type() {
        return Ok(array.clone());
    }
    let Some(longs) = array.as_any().downcast_ref::<Int64Array>() else {
        return Err(ArrowError::InvalidArgumentError(format!(
            "{TIME_COLUMN} holds {}, not times",
            array.data_type()
        )));
    };
    let times = TimestampMillisecondArray::new(longs.values().clone(), longs.nulls().cloned());
    Ok(Arc::new(times.with_timezone("UTC")))
}

/// The type a field's column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
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
    /// The kind of column a value goes in; `None` for NULL (a column of any kind holds it).
    pub fn of(value: &Value) -> Option<Kind> {
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

    /// The Arrow type of a column of this kind.
    pub fn data_type(self) -> DataType {
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

/// The kind of a field column of type `data_type` (`json`: known to hold JSON text); `None`
/// for a type needle does not write.
pub fn kind_of_column(data_type: &DataType, json: bool) -> Option<Kind> {
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

/// The column a field is stored in.
pub fn column_name(field: &str) -> std::borrow::Cow<'_, str> {
    if field.starts_with(RESERVED) {
        format!("{ESCAPE}{field}").into()
    } else {
        field.into()
    }
}

/// The field a (non-reserved or escaped) column holds.
pub fn field_name(column: &str) -> &str {
    column.strip_prefix(ESCAPE).unwrap_or(column)
}
