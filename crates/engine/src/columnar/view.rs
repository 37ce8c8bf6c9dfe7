//! Column views: a batch of records-as-Arrow-columns ([`super::layout`]) seen by field name,
//! each column typed as the column path reads it. The filter and the summarizer read
//! batches through these.

use super::layout::{field_name, kind_of_column, Kind};
use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{
    Array, BooleanArray, Float32Array, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray,
};
use arrow_schema::DataType;
use needle_record::Value;
use std::collections::HashMap;

/// One column of a batch, as the column path reads it.
#[derive(Clone, Copy)]
pub(crate) enum Col<'a> {
    /// The block has no such column: NULL in every row.
    Missing,
    Bool(&'a BooleanArray),
    Int(&'a Int32Array),
    Long(&'a Int64Array),
    Float(&'a Float32Array),
    Double(&'a Float64Array),
    Text(&'a StringArray),
    /// A text column read with its dictionary: per-row keys into the distinct values.
    Dict(&'a Int32Array, &'a StringArray),
    /// JSON text (lists, maps, or a field stored with several types): not read here.
    Json,
}

impl<'a> Col<'a> {
    fn of(array: &'a dyn Array, json: bool) -> Col<'a> {
        if let DataType::Dictionary(key, value) = array.data_type() {
            if **key == DataType::Int32 && **value == DataType::Utf8 && !json {
                let dict = array.as_dictionary::<Int32Type>();
                if let Some(values) = dict.values().as_any().downcast_ref::<StringArray>() {
                    return Col::Dict(dict.keys(), values);
                }
            }
            return Col::Json;
        }
        let any = array.as_any();
        let col = match kind_of_column(array.data_type(), json) {
            Some(Kind::Bool) => any.downcast_ref().map(Col::Bool),
            Some(Kind::Int) => any.downcast_ref().map(Col::Int),
            Some(Kind::Long) => any.downcast_ref().map(Col::Long),
            Some(Kind::Float) => any.downcast_ref().map(Col::Float),
            Some(Kind::Double) => any.downcast_ref().map(Col::Double),
            Some(Kind::Text) => any.downcast_ref().map(Col::Text),
            Some(Kind::Json) | None => None,
        };
        col.unwrap_or(Col::Json)
    }
}

impl Col<'_> {
    /// Row `i` of a column of booleans or numbers: its type's tag, its 64 bits, its value
    /// (`None`: NULL, or a column of another kind).
    pub(crate) fn scalar(&self, i: usize) -> Option<(u8, i64, Value)> {
        Some(match self {
            Col::Bool(a) if a.is_valid(i) => (0, i64::from(a.value(i)), Value::Bool(a.value(i))),
            Col::Int(a) if a.is_valid(i) => (1, i64::from(a.value(i)), Value::Int(a.value(i))),
            Col::Long(a) if a.is_valid(i) => (2, a.value(i), Value::Long(a.value(i))),
            Col::Float(a) if a.is_valid(i) => {
                (3, i64::from(a.value(i).to_bits()), Value::Float(a.value(i)))
            }
            Col::Double(a) if a.is_valid(i) => {
                (4, a.value(i).to_bits() as i64, Value::Double(a.value(i)))
            }
            _ => return None,
        })
    }
}

/// A batch's columns by field name (see the module doc).
pub struct Columns<'a> {
    rows: usize,
    by_field: HashMap<&'a str, Col<'a>>,
}

impl<'a> Columns<'a> {
    /// The columns of `batch`, by the fields they hold (`json_columns`: those of its columns
    /// that hold JSON text).
    pub fn of(batch: &'a RecordBatch, json_columns: &[String]) -> Self {
        let schema = batch.schema_ref();
        let mut by_field = HashMap::new();
        for (i, f) in schema.fields().iter().enumerate() {
            let name = f.name().as_str();
            let json = json_columns.iter().any(|c| c == name);
            by_field.insert(field_name(name), Col::of(batch.column(i), json));
        }
        Self { rows: batch.num_rows(), by_field }
    }

    /// Rows in the batch.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// The column of `field` ([`Col::Missing`] when the batch has none).
    pub(crate) fn get(&self, field: &str) -> Col<'a> {
        self.by_field.get(field).copied().unwrap_or(Col::Missing)
    }
}
