//! [`ColumnBuilder`]: one column of records as Arrow columns ([`super::layout`]) being built,
//! typed by its [`Kind`]. The one list of column types that whoever gathers records or events
//! into columns shares: the history store filling a part, a pusher filling a batch.

use super::layout::Kind;
use arrow_array::builder::{
    ArrayBuilder, BooleanBuilder, Float32Builder, Float64Builder, Int32Builder, Int64Builder,
    PrimitiveBuilder, StringBuilder,
};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, BooleanArray, PrimitiveArray, StringArray};
use needle_record::Value;
use std::sync::Arc;

/// One column being built, of its kind.
#[derive(Debug)]
pub enum ColumnBuilder {
    Bool(BooleanBuilder),
    Int(Int32Builder),
    Long(Int64Builder),
    Float(Float32Builder),
    Double(Float64Builder),
    Text(StringBuilder),
    /// JSON text of any value.
    Json(StringBuilder),
}

impl ColumnBuilder {
    /// An empty column of `kind`, with room for `rows` values (and `text_bytes` bytes of them,
    /// for text or JSON).
    pub fn with_capacity(kind: Kind, rows: usize, text_bytes: usize) -> Self {
        match kind {
            Kind::Bool => ColumnBuilder::Bool(BooleanBuilder::with_capacity(rows)),
            Kind::Int => ColumnBuilder::Int(Int32Builder::with_capacity(rows)),
            Kind::Long => ColumnBuilder::Long(Int64Builder::with_capacity(rows)),
            Kind::Float => ColumnBuilder::Float(Float32Builder::with_capacity(rows)),
            Kind::Double => ColumnBuilder::Double(Float64Builder::with_capacity(rows)),
            Kind::Text => ColumnBuilder::Text(StringBuilder::with_capacity(rows, text_bytes)),
            Kind::Json => ColumnBuilder::Json(StringBuilder::with_capacity(rows, text_bytes)),
        }
    }

    /// The kind of values the column holds.
    pub fn kind(&self) -> Kind {
        match self {
            ColumnBuilder::Bool(_) => Kind::Bool,
            ColumnBuilder::Int(_) => Kind::Int,
            ColumnBuilder::Long(_) => Kind::Long,
            ColumnBuilder::Float(_) => Kind::Float,
            ColumnBuilder::Double(_) => Kind::Double,
            ColumnBuilder::Text(_) => Kind::Text,
            ColumnBuilder::Json(_) => Kind::Json,
        }
    }

    /// Values (NULL included) appended so far.
    pub fn len(&self) -> usize {
        match self {
            ColumnBuilder::Bool(b) => b.len(),
            ColumnBuilder::Int(b) => b.len(),
            ColumnBuilder::Long(b) => b.len(),
            ColumnBuilder::Float(b) => b.len(),
            ColumnBuilder::Double(b) => b.len(),
            ColumnBuilder::Text(b) | ColumnBuilder::Json(b) => b.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends a NULL.
    #[inline]
    pub fn append_null(&mut self) {
        match self {
            ColumnBuilder::Bool(b) => b.append_null(),
            ColumnBuilder::Int(b) => b.append_null(),
            ColumnBuilder::Long(b) => b.append_null(),
            ColumnBuilder::Float(b) => b.append_null(),
            ColumnBuilder::Double(b) => b.append_null(),
            ColumnBuilder::Text(b) | ColumnBuilder::Json(b) => b.append_null(),
        }
    }

    /// Appends a value of the column's kind (a null for NULL; a column of one kind holds only
    /// values of that kind or NULL, a JSON column any value as its JSON text).
    pub fn push(&mut self, value: &Value) {
        match (self, value) {
            (ColumnBuilder::Json(b), Value::Null) => b.append_null(),
            (ColumnBuilder::Json(b), v) => b.append_value(v.to_json()),
            (ColumnBuilder::Bool(b), Value::Bool(v)) => b.append_value(*v),
            (ColumnBuilder::Int(b), Value::Int(v)) => b.append_value(*v),
            (ColumnBuilder::Long(b), Value::Long(v)) => b.append_value(*v),
            (ColumnBuilder::Float(b), Value::Float(v)) => b.append_value(*v),
            (ColumnBuilder::Double(b), Value::Double(v)) => b.append_value(*v),
            (ColumnBuilder::Text(b), Value::String(v)) => b.append_value(v),
            (ColumnBuilder::Bool(b), _) => b.append_null(),
            (ColumnBuilder::Int(b), _) => b.append_null(),
            (ColumnBuilder::Long(b), _) => b.append_null(),
            (ColumnBuilder::Float(b), _) => b.append_null(),
            (ColumnBuilder::Double(b), _) => b.append_null(),
            (ColumnBuilder::Text(b), _) => b.append_null(),
        }
    }

    /// Appends every value of `array` (NULLs as NULLs) when it is a column of the builder's
    /// own kind ([`Kind::data_type`]; a JSON column takes text columns of JSON): a batch's
    /// column added whole, without a [`Value`] per row. False, nothing appended, for an array
    /// of another type.
    pub fn extend_from(&mut self, array: &dyn Array) -> bool {
        fn primitive<T: ArrowPrimitiveType>(
            builder: &mut PrimitiveBuilder<T>,
            array: &dyn Array,
        ) -> bool {
            let Some(array) = array.as_any().downcast_ref::<PrimitiveArray<T>>() else {
                return false;
            };
            if array.data_type() != &T::DATA_TYPE {
                return false;
            }
            builder.append_array(array);
            true
        }
        match self {
            ColumnBuilder::Int(b) => primitive(b, array),
            ColumnBuilder::Long(b) => primitive(b, array),
            ColumnBuilder::Float(b) => primitive(b, array),
            ColumnBuilder::Double(b) => primitive(b, array),
            ColumnBuilder::Bool(b) => {
                let Some(array) = array.as_any().downcast_ref::<BooleanArray>() else {
                    return false;
                };
                b.append_array(array);
                true
            }
            ColumnBuilder::Text(b) | ColumnBuilder::Json(b) => {
                let Some(array) = array.as_any().downcast_ref::<StringArray>() else {
                    return false;
                };
                // the values' bytes and offsets copied whole; past i32 offsets (2 GiB of text
                // in one column) value by value, which reports the overflow as before
                if b.append_array(array).is_err() {
                    array.iter().for_each(|v| b.append_option(v));
                }
                true
            }
        }
    }

    /// The values appended as an array of the kind's type ([`Kind::data_type`]); the builder
    /// is left empty.
    pub fn finish(&mut self) -> ArrayRef {
        match self {
            ColumnBuilder::Bool(b) => Arc::new(b.finish()),
            ColumnBuilder::Int(b) => Arc::new(b.finish()),
            ColumnBuilder::Long(b) => Arc::new(b.finish()),
            ColumnBuilder::Float(b) => Arc::new(b.finish()),
            ColumnBuilder::Double(b) => Arc::new(b.finish()),
            ColumnBuilder::Text(b) | ColumnBuilder::Json(b) => Arc::new(b.finish()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_holds_its_kind_and_nulls_and_a_json_column_any_value() {
        let values = [Value::Long(1), Value::Null, Value::String("x".into())];
        for kind in [Kind::Long, Kind::Text, Kind::Json] {
            let mut builder = ColumnBuilder::with_capacity(kind, 2, 8);
            values.iter().for_each(|v| builder.push(v));
            builder.append_null();
            assert_eq!((builder.kind(), builder.len()), (kind, 4));
            let array = builder.finish();
            assert!(builder.is_empty());
            assert_eq!(array.data_type(), &kind.data_type());
            let nulls: Vec<bool> = (0..4).map(|i| array.is_null(i)).collect();
            let want = match kind {
                Kind::Long => [false, true, true, true],
                Kind::Text => [true, true, false, true],
                _ => [false, true, false, true],
            };
            assert_eq!(nulls, want, "{kind:?}");
        }
    }

    #[test]
    fn a_column_of_its_own_kind_is_added_whole_and_another_is_refused() {
        let mut builder = ColumnBuilder::with_capacity(Kind::Long, 4, 0);
        builder.push(&Value::Long(1));
        let plain = arrow_array::Int64Array::from(vec![2, 3]);
        let holed = arrow_array::Int64Array::from(vec![Some(4), None]);
        assert!(builder.extend_from(&plain) && builder.extend_from(&holed));
        assert!(!builder.extend_from(&arrow_array::Float64Array::from(vec![1.0])));
        let array = builder.finish();
        let longs = array.as_any().downcast_ref::<arrow_array::Int64Array>().unwrap();
        assert_eq!(longs.iter().collect::<Vec<_>>(), [Some(1), Some(2), Some(3), Some(4), None]);
        let mut text = ColumnBuilder::with_capacity(Kind::Text, 2, 8);
        assert!(text.extend_from(&StringArray::from(vec![Some("a"), None, Some("b")])));
        assert_eq!(text.len(), 3);
    }

    #[test]
    fn sliced_columns_with_nulls_are_added_as_their_values() {
        // a slice starts mid-buffer: its offsets, values and null bits all begin past zero
        let text = StringArray::from(vec![Some("skip"), Some("cpu"), None, Some("mem"), None]);
        let mut builder = ColumnBuilder::with_capacity(Kind::Text, 4, 16);
        builder.push(&Value::String("first".into()));
        assert!(builder.extend_from(&text.slice(1, 3)));
        let array = builder.finish();
        let strings = array.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(
            strings.iter().collect::<Vec<_>>(),
            [Some("first"), Some("cpu"), None, Some("mem")]
        );
        let doubles = arrow_array::Float64Array::from(vec![Some(1.5), None, Some(2.5), Some(3.5)]);
        let mut builder = ColumnBuilder::with_capacity(Kind::Double, 4, 0);
        assert!(builder.extend_from(&doubles.slice(1, 3)));
        let flags = BooleanArray::from(vec![Some(true), None, Some(false)]);
        let mut bools = ColumnBuilder::with_capacity(Kind::Bool, 2, 0);
        assert!(bools.extend_from(&flags.slice(1, 2)));
        let array = builder.finish();
        let doubles = array.as_any().downcast_ref::<arrow_array::Float64Array>().unwrap();
        assert_eq!(doubles.iter().collect::<Vec<_>>(), [None, Some(2.5), Some(3.5)]);
        let array = bools.finish();
        let flags = array.as_any().downcast_ref::<BooleanArray>().unwrap();
        assert_eq!(flags.iter().collect::<Vec<_>>(), [None, Some(false)]);
    }
}
