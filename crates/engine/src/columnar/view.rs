//! Reading columns: [`ColumnView`], one Arrow column of records as columns ([`super::layout`])
//! typed as needle reads it — the one typed view of a column that every reader shares: the
//! filter and the summarizer here, the history store decoding a part's batches back into
//! records, the runtime writing the rows of events pushed as columns into records — and
//! [`Columns`], a batch's columns by field name, which the filter and the summarizer read.

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

/// One column, typed: the Arrow array of its kind ([`Kind`]) to read a row of directly — a hot
/// loop matches on the variant once and reads the array's values — or a row at a time as a
/// [`Value`] ([`ColumnView::value`], [`ColumnView::fill`]).
#[derive(Debug, Clone, Copy)]
pub enum ColumnView<'a> {
    /// The batch has no such column: NULL in every row.
    Missing,
    /// BOOLEAN ([`Kind::Bool`]).
    Bool(&'a BooleanArray),
    /// INT32 ([`Kind::Int`]).
    Int(&'a Int32Array),
    /// INT64 ([`Kind::Long`]).
    Long(&'a Int64Array),
    /// FLOAT ([`Kind::Float`]).
    Float(&'a Float32Array),
    /// DOUBLE ([`Kind::Double`]).
    Double(&'a Float64Array),
    /// UTF8 text ([`Kind::Text`]).
    Text(&'a StringArray),
    /// Text read with its dictionary: per-row keys into the distinct values (a NULL key, or a
    /// key to a NULL value, is a NULL row).
    Dictionary(&'a Int32Array, &'a StringArray),
    /// JSON text of any value ([`Kind::Json`]): read a row at a time, decoded; the filter and
    /// the summarizer do not read it.
    Json(&'a StringArray),
    /// A column of a type needle does not write (or JSON text read with a dictionary): no
    /// reader here reads it, and [`ColumnView::value`] gives NULL.
    Unreadable,
}

impl<'a> ColumnView<'a> {
    /// `array` read by its Arrow type: a type of a [`Kind`] ([`kind_of_column`]), or UTF8 read
    /// with an INT32-keyed dictionary; `json` says a UTF8 column holds JSON text (the Arrow type
    /// alone does not tell). [`ColumnView::Unreadable`] for any other.
    pub fn of(array: &'a dyn Array, json: bool) -> Self {
        if let DataType::Dictionary(key, value) = array.data_type() {
            if **key == DataType::Int32 && **value == DataType::Utf8 && !json {
                let dict = array.as_dictionary::<Int32Type>();
                if let Some(values) = dict.values().as_any().downcast_ref::<StringArray>() {
                    return ColumnView::Dictionary(dict.keys(), values);
                }
            }
            return ColumnView::Unreadable;
        }
        kind_of_column(array.data_type(), json)
            .and_then(|kind| Self::of_kind(array, kind))
            .unwrap_or(ColumnView::Unreadable)
    }

    /// `array` read as a column of `kind` (of the Arrow type [`Kind::data_type`] gives it,
    /// not a dictionary); `None` when it is not of that type.
    pub fn of_kind(array: &'a dyn Array, kind: Kind) -> Option<Self> {
        let any = array.as_any();
        match kind {
            Kind::Bool => any.downcast_ref().map(ColumnView::Bool),
            Kind::Int => any.downcast_ref().map(ColumnView::Int),
            Kind::Long => any.downcast_ref().map(ColumnView::Long),
            Kind::Float => any.downcast_ref().map(ColumnView::Float),
            Kind::Double => any.downcast_ref().map(ColumnView::Double),
            Kind::Text => any.downcast_ref().map(ColumnView::Text),
            Kind::Json => any.downcast_ref().map(ColumnView::Json),
        }
    }

    /// Row `row` as a value: NULL where the row is NULL (and in every row of a
    /// [`ColumnView::Missing`] or [`ColumnView::Unreadable`] column); JSON text decoded (NULL
    /// when it does not decode), a dictionary's key resolved to its text.
    #[inline]
    pub fn value(&self, row: usize) -> Value {
        match *self {
            ColumnView::Bool(a) if a.is_valid(row) => Value::Bool(a.value(row)),
            ColumnView::Int(a) if a.is_valid(row) => Value::Int(a.value(row)),
            ColumnView::Long(a) if a.is_valid(row) => Value::Long(a.value(row)),
            ColumnView::Float(a) if a.is_valid(row) => Value::Float(a.value(row)),
            ColumnView::Double(a) if a.is_valid(row) => Value::Double(a.value(row)),
            ColumnView::Text(_) | ColumnView::Dictionary(..) => {
                self.text(row).map_or(Value::Null, |text| Value::String(text.to_owned()))
            }
            ColumnView::Json(a) if a.is_valid(row) => {
                needle_record::decode_value(a.value(row).as_bytes()).unwrap_or(Value::Null)
            }
            _ => Value::Null,
        }
    }

    /// Puts row `row`'s value ([`ColumnView::value`]) in `slot`, writing text into the buffer
    /// of the string `slot` holds rather than allocating another.
    #[inline]
    pub fn fill(&self, row: usize, slot: &mut Value) {
        if let Value::String(s) = slot {
            if let Some(text) = self.text(row) {
                s.clear();
                s.push_str(text);
                return;
            }
        }
        *slot = self.value(row);
    }

    /// Row `row` of a text column (plain or with a dictionary); `None` where it is NULL, and
    /// for a column of another kind (JSON text included).
    #[inline]
    pub fn text(&self, row: usize) -> Option<&'a str> {
        match *self {
            ColumnView::Text(a) if a.is_valid(row) => Some(a.value(row)),
            ColumnView::Dictionary(keys, values) if keys.is_valid(row) => {
                let key = usize::try_from(keys.value(row)).ok()?;
                values.is_valid(key).then(|| values.value(key))
            }
            _ => None,
        }
    }

    /// Row `row` of a column of booleans or numbers: its type's tag, its 64 bits, its value
    /// (`None`: NULL, or a column of another kind).
    pub(crate) fn scalar(&self, i: usize) -> Option<(u8, i64, Value)> {
        Some(match self {
            ColumnView::Bool(a) if a.is_valid(i) => {
                (0, i64::from(a.value(i)), Value::Bool(a.value(i)))
            }
            ColumnView::Int(a) if a.is_valid(i) => {
                (1, i64::from(a.value(i)), Value::Int(a.value(i)))
            }
            ColumnView::Long(a) if a.is_valid(i) => (2, a.value(i), Value::Long(a.value(i))),
            ColumnView::Float(a) if a.is_valid(i) => {
                (3, i64::from(a.value(i).to_bits()), Value::Float(a.value(i)))
            }
            ColumnView::Double(a) if a.is_valid(i) => {
                (4, a.value(i).to_bits() as i64, Value::Double(a.value(i)))
            }
            _ => return None,
        })
    }
}

/// A batch's columns by field name (see the module doc).
pub struct Columns<'a> {
    rows: usize,
    by_field: HashMap<&'a str, ColumnView<'a>>,
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
            by_field.insert(field_name(name), ColumnView::of(batch.column(i), json));
        }
        Self { rows: batch.num_rows(), by_field }
    }

    /// Rows in the batch.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// The column of `field` ([`ColumnView::Missing`] when the batch has none).
    pub(crate) fn get(&self, field: &str) -> ColumnView<'a> {
        self.by_field.get(field).copied().unwrap_or(ColumnView::Missing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{ArrayRef, DictionaryArray};
    use std::sync::Arc;

    /// A column of `kind` holding `values` (NULL for `Value::Null`), as the builders write it.
    fn column(kind: Kind, values: &[Value]) -> ArrayRef {
        let mut builder = super::super::ColumnBuilder::with_capacity(kind, values.len(), 16);
        for v in values {
            builder.push(v);
        }
        builder.finish()
    }

    #[test]
    fn every_kind_reads_back_its_values_and_nulls() {
        let map: Value = needle_record::decode_value(br#"{"a":[1,"x",null]}"#).unwrap();
        let cases = [
            (Kind::Bool, vec![Value::Bool(true), Value::Null, Value::Bool(false)]),
            (Kind::Int, vec![Value::Int(-7), Value::Null, Value::Int(i32::MAX)]),
            (Kind::Long, vec![Value::Null, Value::Long(i64::MIN), Value::Long(3)]),
            (Kind::Float, vec![Value::Float(1.5), Value::Float(-0.0), Value::Null]),
            (Kind::Double, vec![Value::Double(2.25), Value::Null, Value::Double(-1e300)]),
            (Kind::Text, vec![Value::String("é".into()), Value::Null, Value::String("".into())]),
            (Kind::Json, vec![map, Value::Null, Value::List(vec![Value::Long(1)])]),
        ];
        for (kind, values) in cases {
            let array = column(kind, &values);
            let views = [
                ColumnView::of(array.as_ref(), kind == Kind::Json),
                ColumnView::of_kind(array.as_ref(), kind).unwrap(),
            ];
            for view in views {
                let got: Vec<Value> = (0..values.len()).map(|row| view.value(row)).collect();
                assert_eq!(got, values, "{kind:?}");
                // filled over a slot of each kind, and over the value of the row before
                for (row, want) in values.iter().enumerate() {
                    for before in [Value::Null, Value::String("old".into()), Value::Long(9)] {
                        let mut slot = before;
                        view.fill(row, &mut slot);
                        assert_eq!(&slot, want, "{kind:?} row {row}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_column_of_another_type_is_not_read_as_a_kind() {
        let longs = column(Kind::Long, &[Value::Long(1)]);
        assert!(ColumnView::of_kind(longs.as_ref(), Kind::Int).is_none());
        assert!(ColumnView::of_kind(longs.as_ref(), Kind::Text).is_none());
        let times: ArrayRef =
            Arc::new(arrow_array::TimestampMillisecondArray::from(vec![1]).with_timezone("UTC"));
        let unreadable = ColumnView::of(times.as_ref(), false);
        assert!(matches!(unreadable, ColumnView::Unreadable));
        assert_eq!(unreadable.value(0), Value::Null);
        assert_eq!(ColumnView::Missing.value(0), Value::Null);
        // text is JSON only when said so; JSON text read with a dictionary is not read
        let text = column(Kind::Text, &[Value::String("[1]".into())]);
        assert_eq!(ColumnView::of(text.as_ref(), false).value(0), Value::String("[1]".into()));
        assert_eq!(ColumnView::of(text.as_ref(), true).value(0), Value::List(vec![Value::Long(1)]));
        let dict: DictionaryArray<Int32Type> = vec!["[1]"].into_iter().collect();
        assert!(matches!(ColumnView::of(&dict, true), ColumnView::Unreadable));
    }

    #[test]
    fn a_dictionary_column_resolves_its_keys_and_nulls() {
        let values = StringArray::from(vec![Some("b"), None, Some("a")]);
        let keys = Int32Array::from(vec![Some(2), None, Some(0), Some(1), Some(2)]);
        let dict = DictionaryArray::new(keys, Arc::new(values));
        let view = ColumnView::of(&dict, false);
        assert!(matches!(view, ColumnView::Dictionary(..)));
        let got: Vec<Option<&str>> = (0..5).map(|row| view.text(row)).collect();
        assert_eq!(got, [Some("a"), None, Some("b"), None, Some("a")]);
        assert_eq!(view.value(0), Value::String("a".into()));
        assert_eq!(view.value(1), Value::Null);
        assert_eq!(view.value(3), Value::Null);
    }

    #[test]
    fn filling_text_reuses_the_string_in_the_slot() {
        for array in [
            column(Kind::Text, &[Value::String("short".into())]),
            Arc::new(vec!["short"].into_iter().collect::<DictionaryArray<Int32Type>>()) as ArrayRef,
        ] {
            let view = ColumnView::of(array.as_ref(), false);
            let mut slot = Value::String(String::with_capacity(64));
            let Value::String(s) = &slot else { unreachable!() };
            let buffer = s.as_ptr();
            view.fill(0, &mut slot);
            let Value::String(s) = &slot else { panic!("not text: {slot:?}") };
            assert_eq!(s, "short");
            assert_eq!(s.as_ptr(), buffer, "the slot's buffer was replaced");
        }
    }
}
