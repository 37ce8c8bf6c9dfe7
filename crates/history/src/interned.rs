//! A text column gathered as ids: each row's value kept as a number that stands for one of the
//! column's distinct values, while there are few enough of them ([`MAX_DISTINCT`]).
//!
//! A flush's text columns are mostly a series' name and tags — a handful of values repeated over
//! millions of rows — so gathering a row costs a comparison with the row before (a series'
//! points often come together) or a lookup, and 4 bytes, not the text copied again; and the
//! ranks a sort by the column needs come from its distinct values, not from a second pass of
//! hashing over the rows. The rows are written out as text again a block at a time
//! ([`text_of_ids`]), in whatever order the part stores them.
//!
//! Gathered, such a column is an Arrow dictionary array (`UInt32` keys): id 0 is NULL (its key
//! is null; its slot in the values is an empty placeholder), id `i` the `i`-th distinct value,
//! in order of first appearance.

use arrow_array::builder::StringBuilder;
use arrow_array::types::UInt32Type;
use arrow_array::{Array, ArrayRef, DictionaryArray, Int32Array, StringArray, UInt32Array};
use arrow_buffer::{BooleanBuffer, NullBuffer, ScalarBuffer};
use needle_engine::columnar::layout::Kind;
use needle_engine::columnar::ColumnBuilder;
use std::collections::HashMap;
use std::sync::Arc;

/// Distinct values a column is gathered as ids for; past them it is gathered as text (a field
/// of unique values — a message, an id — gains nothing from ids). A few in the crate's unit
/// tests, so that their small cases go past it.
pub(crate) const MAX_DISTINCT: usize = if cfg!(test) { 8 } else { 1 << 16 };

/// A text column gathered as ids (see the module doc).
#[derive(Default)]
pub(crate) struct InternedText {
    /// Each row's id: 0 for NULL, `i` for `distinct[i - 1]`.
    ids: Vec<u32>,
    distinct: Vec<Arc<str>>,
    id_of: HashMap<Arc<str>, u32, foldhash::fast::RandomState>,
    /// The id of the last value added (0: none yet).
    last: u32,
    /// The bytes of the rows' values, all told (a column made text again gets room for them).
    value_bytes: usize,
}

/// A value that would have made a column's distinct values more than [`MAX_DISTINCT`].
#[derive(Debug)]
pub(crate) struct TooManyDistinct;

impl InternedText {
    /// A column of `nulls` NULLs so far, with room for `rows` rows.
    pub(crate) fn with_nulls(nulls: usize, rows: usize) -> Self {
        let mut ids = Vec::with_capacity(rows.max(nulls));
        ids.resize(nulls, 0);
        Self { ids, ..Self::default() }
    }

    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    pub(crate) fn push_null(&mut self) {
        self.ids.push(0);
    }

    /// Adds `text`; refused (nothing added) when it would be one distinct value too many.
    #[inline]
    pub(crate) fn push(&mut self, text: &str) -> Result<(), TooManyDistinct> {
        // most rows repeat the one before them, or one of the few values of a series' tags
        let id = if self.last != 0 && *self.distinct[self.last as usize - 1] == *text {
            self.last
        } else {
            match self.id_of.get(text) {
                Some(&id) => id,
                None => {
                    if self.distinct.len() >= MAX_DISTINCT {
                        return Err(TooManyDistinct);
                    }
                    let value: Arc<str> = Arc::from(text);
                    self.distinct.push(value.clone());
                    let id = self.distinct.len() as u32;
                    self.id_of.insert(value, id);
                    id
                }
            }
        };
        self.last = id;
        self.value_bytes += text.len();
        self.ids.push(id);
        Ok(())
    }

    /// Adds the rows of `array` from `from` on, up to the first that would be one distinct value
    /// too many; returns the row it stopped at (`array.len()` when all were added).
    pub(crate) fn extend(&mut self, array: &StringArray, from: usize) -> usize {
        self.ids.reserve(array.len() - from);
        for row in from..array.len() {
            if array.is_null(row) {
                self.push_null();
            } else if self.push(array.value(row)).is_err() {
                return row;
            }
        }
        array.len()
    }

    /// Adds the rows of a dictionary column (`keys` into `values`, as a source gathers a
    /// series' text) from `from` on: each value looked up once, when a row first has it, then
    /// each row the id found for its key; stops as [`InternedText::extend`] does.
    pub(crate) fn extend_keyed(
        &mut self,
        keys: &Int32Array,
        values: &StringArray,
        from: usize,
    ) -> usize {
        // each value's id and length, once a row had it (id 0: not yet)
        let mut found = vec![(0u32, 0usize); values.len()];
        self.ids.reserve(keys.len() - from);
        for row in from..keys.len() {
            let key = usize::try_from(keys.value(row)).ok().filter(|&k| k < values.len());
            let Some(key) = key.filter(|&k| keys.is_valid(row) && values.is_valid(k)) else {
                self.push_null();
                continue;
            };
            match found[key] {
                (0, _) => {
                    let value = values.value(key);
                    if self.push(value).is_err() {
                        return row;
                    }
                    found[key] = (self.last, value.len());
                }
                (id, length) => {
                    self.ids.push(id);
                    self.last = id;
                    self.value_bytes += length;
                }
            }
        }
        keys.len()
    }

    /// The column as text, with room for `rows` rows.
    pub(crate) fn into_builder(self, rows: usize) -> ColumnBuilder {
        let per_row = self.value_bytes.div_ceil(self.ids.len().max(1));
        let rows = rows.max(self.ids.len());
        let mut builder = ColumnBuilder::with_capacity(Kind::Text, rows, rows * (per_row + 1));
        let ColumnBuilder::Text(text) = &mut builder else {
            unreachable!("a text column's builder")
        };
        for &id in &self.ids {
            match id {
                0 => text.append_null(),
                id => text.append_value(&self.distinct[id as usize - 1]),
            }
        }
        builder
    }

    /// The column as a dictionary array (see the module doc).
    pub(crate) fn finish(self) -> ArrayRef {
        let values = StringArray::from_iter_values(
            std::iter::once("").chain(self.distinct.iter().map(|v| &**v)),
        );
        dictionary(self.ids, values)
    }
}

/// `array` as a column gathered by [`InternedText`], if it is one.
pub(crate) fn as_interned(array: &dyn Array) -> Option<&DictionaryArray<UInt32Type>> {
    array.as_any().downcast_ref::<DictionaryArray<UInt32Type>>()
}

/// The text of `rows` of a column given as ids into `values` (id 0: NULL, whatever its slot
/// holds), in that order.
pub(crate) fn text_of_ids(
    ids: &[u32],
    values: &StringArray,
    rows: impl Iterator<Item = usize> + Clone,
) -> ArrayRef {
    let offsets = values.value_offsets();
    let length = |id: u32| (offsets[id as usize + 1] - offsets[id as usize]) as usize;
    let (count, bytes) = rows.clone().fold((0, 0), |(n, b), row| match ids[row] {
        0 => (n + 1, b),
        id => (n + 1, b + length(id)),
    });
    let mut column = StringBuilder::with_capacity(count, bytes);
    for row in rows {
        match ids[row] {
            0 => column.append_null(),
            id => column.append_value(values.value(id as usize)),
        }
    }
    Arc::new(column.finish())
}

/// The text of rows `rows` of a gathered column (see [`as_interned`]), in that order.
pub(crate) fn text_of_interned(
    column: &DictionaryArray<UInt32Type>,
    rows: impl Iterator<Item = usize> + Clone,
) -> ArrayRef {
    text_of_ids(column.keys().values(), text_values(column), rows)
}

/// The distinct values of a gathered column (see [`as_interned`]).
pub(crate) fn text_values(column: &DictionaryArray<UInt32Type>) -> &StringArray {
    column.values().as_any().downcast_ref::<StringArray>().expect("text values")
}

/// `rows` of a column given as ids into `values` (id 0: NULL), in that order, as a dictionary
/// array: the ids gathered, the values shared.
pub(crate) fn dictionary_of_ids(ids: &[u32], values: &StringArray, rows: &[u32]) -> ArrayRef {
    dictionary(rows.iter().map(|&row| ids[row as usize]).collect(), values.clone())
}

/// Ids into `values` as a dictionary array: id 0 a null key, whatever its slot holds.
fn dictionary(ids: Vec<u32>, values: StringArray) -> ArrayRef {
    let nulls = ids
        .contains(&0)
        .then(|| NullBuffer::new(BooleanBuffer::from_iter(ids.iter().map(|&id| id != 0))));
    let keys = UInt32Array::new(ScalarBuffer::from(ids), nulls);
    let dictionary = DictionaryArray::<UInt32Type>::try_new(keys, Arc::new(values))
        .expect("every id names one of the values");
    Arc::new(dictionary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(array: &ArrayRef) -> Vec<Option<String>> {
        let array = array.as_any().downcast_ref::<StringArray>().unwrap();
        array.iter().map(|v| v.map(str::to_owned)).collect()
    }

    #[test]
    fn a_column_of_ids_gives_back_its_rows_in_any_order() {
        let mut column = InternedText::with_nulls(2, 8);
        let input = StringArray::from(vec![Some("b"), Some("a"), None, Some("b"), Some("")]);
        assert_eq!(column.extend(&input, 1), 5);
        column.push("c").unwrap();
        column.push_null();
        assert_eq!(column.len(), 8);
        let gathered = column.finish();
        let dictionary = as_interned(gathered.as_ref()).unwrap();
        assert_eq!(dictionary.keys().null_count(), 4);
        let want = [None, None, Some("a"), None, Some("b"), Some(""), Some("c"), None];
        let got = texts(&text_of_interned(dictionary, 0..8));
        assert_eq!(got, want.map(|v| v.map(str::to_owned)));
        let backwards = texts(&text_of_interned(dictionary, (0..8).rev()));
        assert_eq!(backwards, want.iter().rev().map(|v| v.map(str::to_owned)).collect::<Vec<_>>());
    }

    #[test]
    fn past_the_distinct_values_it_keeps_a_column_stops_and_becomes_text() {
        let values: Vec<String> = (0..MAX_DISTINCT + 5).map(|i| format!("v{i}")).collect();
        let mut column = InternedText::with_nulls(1, 0);
        let input = StringArray::from_iter_values(&values);
        let stopped = column.extend(&input, 0);
        assert_eq!(stopped, MAX_DISTINCT);
        // a value seen is still taken
        column.push("v7").unwrap();
        assert!(column.push("new").is_err());
        let mut builder = column.into_builder(0);
        let all = builder.finish();
        let got = texts(&all);
        assert_eq!(got.len(), MAX_DISTINCT + 2);
        assert_eq!(got[0], None);
        assert_eq!(got[1].as_deref(), Some("v0"));
        assert_eq!(got[MAX_DISTINCT].as_deref(), Some(values[MAX_DISTINCT - 1].as_str()));
        assert_eq!(got[MAX_DISTINCT + 1].as_deref(), Some("v7"));
    }
}
