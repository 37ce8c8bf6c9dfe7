//! Records as typed columns, and back, losslessly.
//!
//! How a field is named and typed as a column is the engine's
//! ([`needle_engine::columnar::layout`], which its column-at-a-time reader shares), and so is
//! how a column is built ([`ColumnBuilder`]) and read back a row at a time
//! ([`ColumnView`]); this module gathers records into such columns and adds what a part needs to
//! give them back exactly.
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
//! [`needle_engine::columnar::layout::ESCAPE`] + its name and given back under its name.

use crate::interned::{
    as_interned, dictionary_of_ids, text_of_interned, text_values, InternedText,
};
use arrow_array::builder::StringBuilder;
use arrow_array::types::Int32Type;
use arrow_array::{
    Array, ArrayRef, BooleanArray, DictionaryArray, Float32Array, Float64Array, Int32Array,
    Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use arrow_buffer::ScalarBuffer;
use arrow_schema::{ArrowError, DataType, Field, Schema};
use needle_engine::columnar::layout::{
    column_name, field_name, kind_of_column, time_type, time_values, Kind, TIME_COLUMN,
};
use needle_engine::columnar::{ColumnBuilder, ColumnView};
use needle_record::{Record, Value};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

/// Each record's shape: an index into [`META_LAYOUTS`].
pub const LAYOUT_COLUMN: &str = "__needle_layout";
/// JSON: the list of key orders (each a list of field names) of the part's records.
pub const META_LAYOUTS: &str = "needle.layouts";
/// JSON: the columns that hold JSON text rather than typed values.
pub const META_JSON_COLUMNS: &str = "needle.json_columns";

/// A record and its time.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRecord {
    pub time_ms: i64,
    pub record: Record,
}

/// Rows given as columns, each with its time: a batch whose columns are named by their fields
/// and typed as [`Kind::data_type`] says (no JSON columns; text may also come as an
/// `Int32`-keyed dictionary, as a metrics source gathers a series' name and tags), a row's
/// fields being the columns where it is not NULL, in the columns' order — events as the
/// sources and pushers gather them.
#[derive(Debug, Clone)]
pub struct ColumnChunk {
    pub batch: RecordBatch,
    /// Each row's time, ms (the time field's column itself when it holds them all).
    pub times: ScalarBuffer<i64>,
}

impl ColumnChunk {
    /// Rows in the chunk.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// Row `row` as a stored record.
    pub fn record(&self, row: usize) -> StoredRecord {
        let mut record = Record::new();
        for (field, array) in self.batch.schema_ref().fields().iter().zip(self.batch.columns()) {
            match value_at(array.as_ref(), row) {
                Value::Null => {}
                value => record.insert(field.name().as_str(), value),
            }
        }
        StoredRecord { time_ms: self.times[row], record }
    }
}

/// Row `row` of a chunk's column (typed as [`Kind::data_type`] says, or text as a dictionary;
/// NULL for another type).
pub(crate) fn value_at(array: &dyn Array, row: usize) -> Value {
    ColumnView::of(array, false).value(row)
}

/// A chunk's text column given as keys into its distinct values (`Int32` keys, as a source
/// gathers a series' text), as its keys and values.
fn keyed_text(array: &dyn Array) -> Option<(&Int32Array, &StringArray)> {
    let dictionary = array.as_any().downcast_ref::<DictionaryArray<Int32Type>>()?;
    let values = dictionary.values().as_any().downcast_ref::<StringArray>()?;
    Some((dictionary.keys(), values))
}

/// A column of `kind` as a JSON column holding the same values (each as its JSON text, nulls
/// as nulls): what a merge writes when its inputs stored a field with different kinds.
pub(crate) fn as_json_column(array: &dyn Array, kind: Kind) -> Result<ArrayRef, ArrowError> {
    let column = ColumnView::of_kind(array, kind)
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

/// Whether a read of the top-level fields `wanted` (`None`: whole records) reads the column
/// `name`: its fields' columns, and the time and layout, which every record needs.
pub(crate) fn reads_column(name: &str, wanted: Option<&[String]>) -> bool {
    match wanted {
        None => true,
        Some(fields) => {
            name == TIME_COLUMN
                || name == LAYOUT_COLUMN
                || fields.iter().any(|f| column_name(f) == name)
        }
    }
}

/// Rows as columns: the batch, the order its rows are stored in, and what goes in the part's
/// metadata.
///
/// A sorted batch is not copied in its order at once: [`Encoded::rows`] gathers a block's rows
/// when the block is written, into memory that the next block's gathering takes again (a
/// flush's columns are not held twice, and the writer reads rows just gathered).
pub(crate) struct Encoded {
    /// The rows as gathered; in order when `order` is `None`. A text column gathered as ids
    /// ([`InternedText`]) is a dictionary here, and text in [`Encoded::rows`].
    batch: RecordBatch,
    /// The schema of [`Encoded::rows`]: the batch's, with every text column as text.
    schema: arrow_schema::SchemaRef,
    /// The rows' order, and which of its rows these are (a partition's).
    order: Option<(Arc<SortOrder>, std::ops::Range<usize>)>,
    pub layouts: Vec<Vec<String>>,
    pub json_columns: Vec<String>,
    /// Every field column with its kind, in schema order.
    pub kinds: Vec<(String, Kind)>,
}

/// Records gathered as columns, in arrival order, before they are sorted and written as parts.
///
/// Each record's fields are walked in their own order, without a lookup by name: a record's
/// layout (its keys, in order) is recognized once — most records have the layout of the record
/// before them — and maps each of its positions to a column. A column takes the kind of its
/// first non-null value; a value of another kind turns it into a JSON column (what it held so
/// far rewritten as JSON text).
#[derive(Default)]
pub struct ColumnBuffer {
    times: Vec<i64>,
    layout_of_row: Vec<i32>,
    layouts: Vec<Vec<String>>,
    layout_ids: HashMap<Vec<String>, usize>,
    /// Per layout, the column of each of its positions.
    layout_columns: Vec<Vec<usize>>,
    last_layout: Option<usize>,
    /// Field columns (by field name) in order of first appearance.
    names: Vec<String>,
    columns: Vec<Gathered>,
    column_of: HashMap<String, usize>,
    /// The rows expected in all ([`ColumnBuffer::with_capacity`]): a column is made with room
    /// for them, not grown (and copied) doubling after doubling.
    expected_rows: usize,
}

/// One field's values so far: nulls only (how many), text as ids (while its distinct values are
/// few), or a builder of its kind.
enum Gathered {
    Nulls(usize),
    Interned(InternedText),
    Built(Kind, ColumnBuilder),
}

impl ColumnBuffer {
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty buffer that expects about `rows` rows: the times and each column are made
    /// with room for them (a text column with as many bytes a row as the first values it
    /// takes whole have), so a flush's millions of rows are copied in once.
    pub fn with_capacity(rows: usize) -> Self {
        Self {
            times: Vec::with_capacity(rows),
            layout_of_row: Vec::with_capacity(rows),
            expected_rows: rows,
            ..Self::default()
        }
    }

    /// Records gathered.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// The time of each record, in arrival order.
    pub fn times(&self) -> &[i64] {
        &self.times
    }

    /// Adds a record with its time.
    pub fn push(&mut self, time_ms: i64, record: &Record) {
        let row = self.times.len();
        let id = self.layout_id(record);
        for ((_, value), &column) in record.iter().zip(&self.layout_columns[id]) {
            push_value(&mut self.columns[column], value, row, self.expected_rows);
        }
        // the columns this record has no field for
        if self.layout_columns[id].len() < self.columns.len() {
            for column in self.columns.iter_mut() {
                if column.len() <= row {
                    push_value(column, &Value::Null, row, 0);
                }
            }
        }
        self.times.push(time_ms);
        self.layout_of_row.push(i32::try_from(id).unwrap_or(i32::MAX));
    }

    /// Adds a chunk's rows (see [`ColumnChunk`]): each column appended whole to the column of
    /// its field when that has its kind (a value at a time, as [`ColumnBuffer::push`] does,
    /// when not); rows with no NULL share one layout, found once.
    pub fn push_chunk(&mut self, chunk: &ColumnChunk) {
        let rows = chunk.len();
        if rows == 0 {
            return;
        }
        let start = self.times.len();
        let schema = chunk.batch.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        let arrays = chunk.batch.columns();
        if arrays.iter().all(|a| a.null_count() == 0) {
            let id = self.layout_of_names(&names);
            self.layout_of_row
                .extend(std::iter::repeat_n(i32::try_from(id).unwrap_or(i32::MAX), rows));
        } else {
            // a row's layout: the columns it has a value in, as a bit set (at most 64 columns
            // a chunk: past them, the layout of every row is looked up by its names)
            let mut seen: HashMap<u64, usize> = HashMap::new();
            for row in 0..rows {
                let present: Vec<&str> = names
                    .iter()
                    .zip(arrays)
                    .filter(|(_, a)| a.is_valid(row))
                    .map(|(n, _)| *n)
                    .collect();
                let id = if names.len() <= 64 {
                    let mask = arrays
                        .iter()
                        .enumerate()
                        .filter(|(_, a)| a.is_valid(row))
                        .fold(0u64, |m, (i, _)| m | 1 << i);
                    match seen.get(&mask) {
                        Some(&id) => id,
                        None => {
                            let id = self.layout_of_names(&present);
                            seen.insert(mask, id);
                            id
                        }
                    }
                } else {
                    self.layout_of_names(&present)
                };
                self.layout_of_row.push(i32::try_from(id).unwrap_or(i32::MAX));
            }
        }
        for (name, array) in names.iter().zip(arrays) {
            let column = self.column_for(name, start);
            extend_gathered(&mut self.columns[column], array.as_ref(), start, self.expected_rows);
        }
        self.times.extend_from_slice(&chunk.times);
        // the columns the chunk has no field for
        let end = start + rows;
        for column in self.columns.iter_mut() {
            while column.len() < end {
                push_value(column, &Value::Null, column.len(), 0);
            }
        }
    }

    /// The column of field `name`, added (NULL in the `rows` rows before) when new.
    fn column_for(&mut self, name: &str, rows: usize) -> usize {
        if let Some(&column) = self.column_of.get(name) {
            return column;
        }
        self.names.push(name.to_owned());
        self.columns.push(Gathered::Nulls(rows));
        self.column_of.insert(name.to_owned(), self.columns.len() - 1);
        self.columns.len() - 1
    }

    /// The index of the layout of the keys `names` (in order), added when new.
    fn layout_of_names(&mut self, names: &[&str]) -> usize {
        if let Some(last) = self.last_layout {
            let keys = &self.layouts[last];
            if keys.len() == names.len() && keys.iter().zip(names).all(|(k, n)| k == n) {
                return last;
            }
        }
        let keys: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let id = match self.layout_ids.get(&keys) {
            Some(&id) => id,
            None => {
                let rows = self.times.len();
                let columns = names.iter().map(|n| self.column_for(n, rows)).collect();
                self.layout_columns.push(columns);
                self.layouts.push(keys.clone());
                self.layout_ids.insert(keys, self.layouts.len() - 1);
                self.layouts.len() - 1
            }
        };
        self.last_layout = Some(id);
        id
    }

    /// The index of `record`'s layout, added when new (with columns for its new fields).
    fn layout_id(&mut self, record: &Record) -> usize {
        if let Some(last) = self.last_layout {
            let keys = &self.layouts[last];
            if keys.len() == record.len() && record.iter().zip(keys).all(|((k, _), key)| k == key) {
                return last;
            }
        }
        let keys: Vec<String> = record.iter().map(|(k, _)| k.clone()).collect();
        let id = match self.layout_ids.get(&keys) {
            Some(&id) => id,
            None => {
                let rows = self.times.len();
                let columns = keys
                    .iter()
                    .map(|k| match self.column_of.get(k) {
                        Some(&c) => c,
                        None => {
                            self.names.push(k.clone());
                            self.columns.push(Gathered::Nulls(rows));
                            self.column_of.insert(k.clone(), self.columns.len() - 1);
                            self.columns.len() - 1
                        }
                    })
                    .collect();
                self.layout_columns.push(columns);
                self.layouts.push(keys.clone());
                self.layout_ids.insert(keys, self.layouts.len() - 1);
                self.layouts.len() - 1
            }
        };
        self.last_layout = Some(id);
        id
    }

    /// The gathered records as columns, in arrival order.
    fn into_batch(self) -> Result<Encoded, ArrowError> {
        let rows = self.times.len();
        let mut fields = vec![
            Field::new(TIME_COLUMN, time_type(), false),
            Field::new(LAYOUT_COLUMN, DataType::Int32, false),
        ];
        let mut arrays: Vec<ArrayRef> = vec![
            Arc::new(TimestampMillisecondArray::from(self.times).with_timezone("UTC")),
            Arc::new(Int32Array::from(self.layout_of_row)),
        ];
        let mut json_columns = Vec::new();
        let mut kinds = Vec::with_capacity(self.names.len());
        // the batch's own fields: a text column gathered as ids is a dictionary until written
        let mut held_fields = fields.clone();
        for (name, gathered) in self.names.into_iter().zip(self.columns) {
            let column = column_name(&name).into_owned();
            let (kind, array) = match gathered {
                Gathered::Nulls(n) => (Kind::Text, arrow_array::new_null_array(&DataType::Utf8, n)),
                Gathered::Interned(text) => (Kind::Text, text.finish()),
                Gathered::Built(kind, mut builder) => (kind, builder.finish()),
            };
            debug_assert_eq!(array.len(), rows);
            if kind == Kind::Json {
                json_columns.push(column.clone());
            }
            fields.push(Field::new(&column, kind.data_type(), true));
            held_fields.push(Field::new(&column, array.data_type().clone(), true));
            arrays.push(array);
            kinds.push((name, kind));
        }
        let batch = RecordBatch::try_new(Arc::new(Schema::new(held_fields)), arrays)?;
        let schema = Arc::new(Schema::new(fields));
        Ok(Encoded { batch, schema, order: None, layouts: self.layouts, json_columns, kinds })
    }

    /// The gathered records as columns, sorted as a part stores them: by the `sort_by` fields
    /// (as [`compare_values`] orders values), then time; records that tie keep
    /// their arrival order.
    pub(crate) fn sorted(self, sort_by: &[String]) -> Result<Encoded, ArrowError> {
        let mut parts = self.sorted_by_partition(sort_by, None)?;
        Ok(parts.pop().map_or_else(Encoded::empty, |(_, encoded)| encoded))
    }

    /// [`ColumnBuffer::sorted`], split by partition (`partition_ms`; `None`: one partition,
    /// numbered 0): each partition's start and its records, in partition order.
    pub(crate) fn sorted_by_partition(
        self,
        sort_by: &[String],
        partition_ms: Option<u64>,
    ) -> Result<Vec<(i64, Encoded)>, ArrowError> {
        let partition = |t: i64| partition_ms.map_or(0, |ms| crate::config::partition_of(t, ms));
        let encoded = self.into_batch()?;
        let no_times = || ArrowError::InvalidArgumentError("no times".into());
        let times = time_values(encoded.batch.column(0)).ok_or_else(no_times)?;
        let mut sorted = sort_order(&encoded, sort_by)?;
        let (first, last) = match (times.iter().min(), times.iter().max()) {
            (Some(&first), Some(&last)) => (partition(first), partition(last)),
            _ => return Ok(Vec::new()),
        };
        // each row's partition, once, when there are several (a record a division)
        let partitions: Option<Vec<i64>> =
            (first != last).then(|| times.iter().map(|&t| partition(t)).collect());
        if let Some(partitions) = &partitions {
            // stable: within a partition, the order above
            let size = partition_ms.unwrap_or(1).max(1) as i64;
            let span = (last - first) / size + 1;
            if span <= times.len() as i64 {
                let index: Vec<u32> =
                    partitions.iter().map(|&p| ((p - first) / size) as u32).collect();
                sorted.order = counting_sort(&sorted.order, &index, span as usize);
            } else {
                sorted.order.sort_by_key(|&row| partitions[row as usize]);
            }
        }
        let in_order = sorted.order.iter().enumerate().all(|(i, &row)| i == row as usize);
        let sorted = Arc::new(sorted);
        let order = (!in_order).then(|| sorted.clone());
        let part = |start: usize, end: usize| Encoded {
            batch: match &order {
                Some(_) => encoded.batch.clone(),
                None => encoded.batch.slice(start, end - start),
            },
            schema: encoded.schema.clone(),
            order: order.as_ref().map(|order| (order.clone(), start..end)),
            layouts: encoded.layouts.clone(),
            json_columns: encoded.json_columns.clone(),
            kinds: encoded.kinds.clone(),
        };
        let Some(partitions) = partitions else {
            return Ok(vec![(first, part(0, encoded.batch.num_rows()))]);
        };
        let mut out = Vec::new();
        let mut start = 0;
        while start < sorted.order.len() {
            let p = partitions[sorted.order[start] as usize];
            let mut end = start + 1;
            while end < sorted.order.len() && partitions[sorted.order[end] as usize] == p {
                end += 1;
            }
            out.push((p, part(start, end)));
            start = end;
        }
        Ok(out)
    }
}

impl Encoded {
    /// No rows, no fields.
    fn empty() -> Self {
        ColumnBuffer::new().into_batch().expect("the empty batch is valid")
    }

    pub(crate) fn num_rows(&self) -> usize {
        match &self.order {
            Some((_, rows)) => rows.len(),
            None => self.batch.num_rows(),
        }
    }

    pub(crate) fn schema(&self) -> arrow_schema::SchemaRef {
        self.schema.clone()
    }

    /// Rows `offset..offset + length`, in order, as [`Encoded::schema`] says.
    #[cfg(test)]
    pub(crate) fn rows(&self, offset: usize, length: usize) -> Result<RecordBatch, ArrowError> {
        let block = self.block(offset, length)?;
        let columns = block
            .columns()
            .iter()
            .map(|column| match as_interned(column.as_ref()) {
                Some(ids) => text_of_interned(ids, 0..column.len()),
                None => column.clone(),
            })
            .collect();
        RecordBatch::try_new(self.schema.clone(), columns)
    }

    /// [`Encoded::rows`] as the part writer takes them: a text column may be a dictionary of
    /// its text (its rows as ids in order, beside the distinct values) rather than the text
    /// itself. The Parquet writer encodes the values the ids stand for, as it would the text:
    /// the file is the same, and the rows' text is not written out once more in between.
    pub(crate) fn block(&self, offset: usize, length: usize) -> Result<RecordBatch, ArrowError> {
        match &self.order {
            Some((order, rows)) => {
                let start = rows.start + offset;
                order.apply(&self.batch, &order.order[start..start + length])
            }
            None => Ok(self.batch.slice(offset, length)),
        }
    }
}

/// The rows of `encoded` in the order a part stores them (see [`ColumnBuffer::sorted`]).
///
/// When every sort field is a text column (or absent) — a series' name and tags, the common
/// case — the rows are not compared pairwise: each text column's values are ranked once (a
/// column gathered as ids by a sort of its distinct values, another by a hash of its distinct
/// values, then a sort of those), and the rows are put in order by the time, then by their
/// fields' ranks with stable counting sorts: one pass when the ranks of all the fields make few
/// enough series to count, else one a field from the last to the first; a few passes over the
/// rows, whatever their number. Otherwise, a comparison sort.
fn sort_order(encoded: &Encoded, sort_by: &[String]) -> Result<SortOrder, ArrowError> {
    let rows = encoded.batch.num_rows();
    let too_many = || ArrowError::InvalidArgumentError("more than 2^32 rows in a part".into());
    let mut order: Vec<u32> = (0..u32::try_from(rows).map_err(|_| too_many())?).collect();
    let text_fields =
        encoded.kinds.iter().filter(|(_, k)| *k == Kind::Text).map(|(n, _)| n.as_str());
    let sort_by = crate::config::sort_fields(sort_by, text_fields);
    // each field's column, and whether it is text (a JSON column is not)
    let mut columns = Vec::with_capacity(sort_by.len());
    for field in &sort_by {
        let column = encoded.batch.schema().index_of(&column_name(field)).ok();
        let json = encoded.kinds.iter().any(|(n, k)| n == field && *k == Kind::Json);
        let text = column.is_some_and(|at| {
            let array = encoded.batch.column(at);
            !json && (as_interned(array.as_ref()).is_some() || array.data_type() == &DataType::Utf8)
        });
        columns.push((column, json, text));
    }
    let time = SortKey::of(encoded.batch.column(0))?;
    if let SortKey::Long(times) = &time {
        if columns.iter().all(|&(column, _, text)| column.is_none() || text) {
            let times = times.values();
            // stable: ties keep their arrival order (rows that come in time order are left be)
            if !times.windows(2).all(|w| w[0] <= w[1]) {
                order.sort_by_key(|&row| times[row as usize]);
            }
            // most significant first
            let ranked: Vec<RankedText> = columns
                .iter()
                .filter_map(|&(column, _, _)| column)
                .map(|column| RankedText::of(column, encoded.batch.column(column)))
                .collect();
            // the ranks of all the fields as one number (a series' rank) when there are few
            // enough of them to count: one counting sort rather than one a field
            let buckets = ranked.iter().try_fold(1u64, |product, r| {
                product.checked_mul(r.by_rank.len() as u64).filter(|&b| b <= u32::MAX as u64)
            });
            match buckets.filter(|&b| b <= (rows as u64).max(1 << 16)) {
                Some(buckets) if ranked.len() > 1 => {
                    let mut series = vec![0u32; rows];
                    for r in &ranked {
                        let distinct = r.by_rank.len() as u32;
                        series.iter_mut().zip(r.ranks.iter()).for_each(|(s, &rank)| {
                            *s = *s * distinct + rank;
                        });
                    }
                    order = counting_sort(&order, &series, buckets as usize);
                }
                _ => {
                    // least significant first (each pass stable)
                    for r in ranked.iter().rev() {
                        order = counting_sort(&order, &r.ranks, r.by_rank.len());
                    }
                }
            }
            return Ok(SortOrder { order, ranked });
        }
    }
    let mut keys = Vec::with_capacity(columns.len() + 1);
    for (column, json, _) in columns {
        keys.push(match column {
            None => SortKey::Absent,
            Some(at) if json => {
                let array = encoded.batch.column(at);
                let json = ColumnView::Json(array.as_any().downcast_ref().expect("utf8"));
                SortKey::Values((0..rows).map(|row| json.value(row)).collect())
            }
            Some(at) => match as_interned(encoded.batch.column(at).as_ref()) {
                Some(ids) => SortKey::of(&text_of_interned(ids, 0..rows))?,
                None => SortKey::of(encoded.batch.column(at))?,
            },
        });
    }
    keys.push(time);
    order.sort_by(|&a, &b| {
        for key in &keys {
            let order = key.cmp(a as usize, key, b as usize);
            if order != std::cmp::Ordering::Equal {
                return order;
            }
        }
        std::cmp::Ordering::Equal
    });
    Ok(SortOrder { order, ranked: Vec::new() })
}

/// Each row's rank among the column's distinct values (0 for NULL, which sorts first; then
/// 1.. in byte order, as [`compare_values`] orders strings), and the distinct values in rank
/// order (rank `r` is `values[r - 1]`).
fn text_ranks(values: &StringArray) -> (Vec<u32>, Vec<&str>) {
    let mut ids: HashMap<&str, u32, foldhash::fast::RandomState> = HashMap::default();
    let mut distinct: Vec<&str> = Vec::new();
    let mut row_ids = Vec::with_capacity(values.len());
    let mut last: Option<(&str, u32)> = None;
    for value in values.iter() {
        let id = match value {
            None => 0,
            // most rows repeat the one before them (a series' points come together)
            Some(v) => match last {
                Some((text, id)) if text == v => id,
                _ => {
                    let id = *ids.entry(v).or_insert_with(|| {
                        distinct.push(v);
                        distinct.len() as u32
                    });
                    last = Some((v, id));
                    id
                }
            },
        };
        row_ids.push(id);
    }
    let (rank_of, by_rank) = ranks_of_ids(&distinct);
    row_ids.iter_mut().for_each(|id| *id = rank_of[*id as usize]);
    (row_ids, by_rank)
}

/// Given the distinct values of a column by id (id `i` at `i - 1`, id 0 NULL), each id's rank
/// (in byte order, NULL first) and the values in rank order (rank `r` at `r - 1`).
fn ranks_of_ids<'a>(distinct: &[&'a str]) -> (Vec<u32>, Vec<&'a str>) {
    let mut by_text: Vec<u32> = (1..=distinct.len() as u32).collect();
    by_text.sort_unstable_by_key(|&id| distinct[id as usize - 1]);
    let mut rank_of = vec![0u32; distinct.len() + 1];
    for (rank, &id) in by_text.iter().enumerate() {
        rank_of[id as usize] = rank as u32 + 1;
    }
    (rank_of, by_text.into_iter().map(|id| distinct[id as usize - 1]).collect())
}

/// A text column that [`sort_order`] ranked: its rows written out in a new order from the
/// ranks, in sequence, rather than gathered row by row from the column.
struct RankedText {
    /// The column's index in the batch.
    column: usize,
    /// Each row's rank (see [`text_ranks`]).
    ranks: Vec<u32>,
    /// The distinct values in rank order, rank `r` at `r`; 0 (NULL) holds an empty placeholder.
    by_rank: StringArray,
}

impl RankedText {
    /// Column `column` of a batch, `array` (text, or gathered as ids), ranked.
    fn of(column: usize, array: &ArrayRef) -> Self {
        let (ranks, by_rank) = match as_interned(array.as_ref()) {
            Some(ids) => {
                let distinct: Vec<&str> =
                    text_values(ids).iter().skip(1).map(Option::unwrap_or_default).collect();
                let (rank_of, by_rank) = ranks_of_ids(&distinct);
                let ranks = ids.keys().values().iter().map(|&id| rank_of[id as usize]).collect();
                (ranks, by_rank)
            }
            None => text_ranks(array.as_any().downcast_ref::<StringArray>().expect("text")),
        };
        let by_rank = StringArray::from_iter_values(std::iter::once("").chain(by_rank));
        RankedText { column, ranks, by_rank }
    }

    /// The column's `rows`, in that order, as ids into its values in rank order.
    fn in_order(&self, rows: &[u32]) -> ArrayRef {
        dictionary_of_ids(&self.ranks, &self.by_rank, rows)
    }
}

/// The rows of a batch in the order a part stores them, and the text columns ranked to find it.
struct SortOrder {
    order: Vec<u32>,
    ranked: Vec<RankedText>,
}

impl SortOrder {
    /// `batch`'s `rows` (some of [`SortOrder::order`]), in that order: the ranked text columns
    /// as their ranks into their values in rank order, the other text columns gathered as ids
    /// as their ids, the others gathered; the batch's schema, each text column a dictionary
    /// (see [`Encoded::block`]).
    fn apply(&self, batch: &RecordBatch, rows: &[u32]) -> Result<RecordBatch, ArrowError> {
        let indices = arrow_array::UInt32Array::from(rows.to_vec());
        let columns = batch
            .columns()
            .iter()
            .enumerate()
            .map(|(i, column)| match self.ranked.iter().find(|r| r.column == i) {
                Some(ranked) => Ok(ranked.in_order(rows)),
                None => match as_interned(column.as_ref()) {
                    Some(ids) => Ok(dictionary_of_ids(ids.keys().values(), text_values(ids), rows)),
                    None => arrow_select::take::take(column.as_ref(), &indices, None),
                },
            })
            .collect::<Result<Vec<_>, _>>()?;
        let fields: Vec<Field> = batch
            .schema()
            .fields()
            .iter()
            .zip(&columns)
            .map(|(field, column)| {
                field.as_ref().clone().with_data_type(column.data_type().clone())
            })
            .collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
    }
}

/// `order` stably sorted by `ranks` (each below `buckets`, indexed by row).
fn counting_sort(order: &[u32], ranks: &[u32], buckets: usize) -> Vec<u32> {
    let mut starts = vec![0usize; buckets + 1];
    for &row in order {
        starts[ranks[row as usize] as usize + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut sorted = vec![0u32; order.len()];
    for &row in order {
        let slot = &mut starts[ranks[row as usize] as usize];
        sorted[*slot] = row;
        *slot += 1;
    }
    sorted
}

/// Appends `value` to `column` (row `row` of the buffer), changing the column's kind to JSON
/// when the value's kind is not the column's.
fn push_value(column: &mut Gathered, value: &Value, row: usize, expected_rows: usize) {
    let Some(kind) = Kind::of(value) else {
        match column {
            Gathered::Nulls(n) => *n += 1,
            Gathered::Interned(text) => text.push_null(),
            Gathered::Built(_, builder) => builder.push(&Value::Null),
        }
        return;
    };
    if let (Gathered::Interned(text), Value::String(value)) = (&mut *column, value) {
        if text.push(value).is_ok() {
            return;
        }
    }
    if let Gathered::Interned(text) = column {
        // a value of another kind, or one distinct value too many: gathered as text from now on
        let text = std::mem::take(text).into_builder(expected_rows.max(row + 1));
        *column = Gathered::Built(Kind::Text, text);
    }
    match column {
        Gathered::Built(k, builder) if *k == kind || *k == Kind::Json => builder.push(value),
        Gathered::Nulls(n) if kind == Kind::Text => {
            let mut text = InternedText::with_nulls(*n, expected_rows.max(row + 1));
            let Value::String(value) = value else { unreachable!("a text value") };
            text.push(value).expect("the first distinct value");
            *column = Gathered::Interned(text);
        }
        Gathered::Nulls(n) => {
            let mut builder = new_builder(kind, expected_rows.max(row + 1));
            for _ in 0..*n {
                builder.push(&Value::Null);
            }
            builder.push(value);
            *column = Gathered::Built(kind, builder);
        }
        Gathered::Built(k, builder) => {
            // a second kind: what the column held becomes JSON text
            let old = std::mem::replace(builder, new_builder(Kind::Json, row + 1)).finish();
            let as_json = ColumnView::of_kind(old.as_ref(), *k).expect("a builder of its kind");
            for i in 0..old.len() {
                builder.push(&as_json.value(i));
            }
            builder.push(value);
            *k = Kind::Json;
        }
        Gathered::Interned(_) => unreachable!("made text above"),
    }
}

/// Appends the values of `array` (a chunk's column, rows `row..` of the buffer) to `column`:
/// text as ids while the column is gathered so, others whole when the column has the array's
/// kind (or holds only NULLs so far), else a value at a time through [`push_value`].
fn extend_gathered(column: &mut Gathered, array: &dyn Array, row: usize, expected_rows: usize) {
    let rows = array.len();
    if array.null_count() == rows {
        for i in 0..rows {
            push_value(column, &Value::Null, row + i, 0);
        }
        return;
    }
    let keyed = keyed_text(array);
    let kind = match keyed {
        Some(_) => Kind::Text,
        None => match kind_of_column(array.data_type(), false) {
            Some(kind) => kind,
            None => return,
        },
    };
    let text = array.as_any().downcast_ref::<StringArray>().filter(|_| kind == Kind::Text);
    let mut from = 0;
    if text.is_some() || keyed.is_some() {
        if let Gathered::Nulls(n) = column {
            *column =
                Gathered::Interned(InternedText::with_nulls(*n, expected_rows.max(row + rows)));
        }
        if let Gathered::Interned(interned) = column {
            from = match (text, keyed) {
                (Some(text), _) => interned.extend(text, 0),
                (None, Some((keys, values))) => interned.extend_keyed(keys, values, 0),
                (None, None) => unreachable!("text, or text keyed"),
            };
            if from == rows {
                return;
            }
            // one distinct value too many: the column is text from here on
            let room = expected_rows.max(row + rows);
            let builder = std::mem::take(interned).into_builder(room);
            *column = Gathered::Built(Kind::Text, builder);
        }
    }
    if let Gathered::Nulls(n) = column {
        let mut builder = new_builder(kind, expected_rows.max(row + rows));
        for _ in 0..*n {
            builder.append_null();
        }
        *column = Gathered::Built(kind, builder);
    }
    let rest = array.slice(from, rows - from);
    if let Gathered::Built(k, builder) = column {
        if *k == kind && builder.extend_from(rest.as_ref()) {
            return;
        }
    }
    let values = ColumnView::of(rest.as_ref(), false);
    for i in 0..rest.len() {
        push_value(column, &values.value(i), row + from + i, expected_rows);
    }
}

impl Gathered {
    fn len(&self) -> usize {
        match self {
            Gathered::Nulls(n) => *n,
            Gathered::Interned(text) => text.len(),
            Gathered::Built(_, builder) => builder.len(),
        }
    }
}

/// A column of a batch to sort by, typed.
pub(crate) enum SortKey {
    /// No such column: every row null.
    Absent,
    Bool(BooleanArray),
    Int(Int32Array),
    Long(Int64Array),
    Float(Float32Array),
    Double(Float64Array),
    Text(StringArray),
    /// A JSON column's values, decoded.
    Values(Vec<Value>),
}

impl SortKey {
    pub(crate) fn of(array: &ArrayRef) -> Result<Self, ArrowError> {
        let any = array.as_any();
        let key = if let Some(a) = any.downcast_ref::<BooleanArray>() {
            SortKey::Bool(a.clone())
        } else if let Some(a) = any.downcast_ref::<Int32Array>() {
            SortKey::Int(a.clone())
        } else if let Some(a) = any.downcast_ref::<Int64Array>() {
            SortKey::Long(a.clone())
        } else if let Some(a) = any.downcast_ref::<TimestampMillisecondArray>() {
            SortKey::Long(Int64Array::new(a.values().clone(), a.nulls().cloned()))
        } else if let Some(a) = any.downcast_ref::<Float32Array>() {
            SortKey::Float(a.clone())
        } else if let Some(a) = any.downcast_ref::<Float64Array>() {
            SortKey::Double(a.clone())
        } else if let Some(a) = any.downcast_ref::<StringArray>() {
            SortKey::Text(a.clone())
        } else {
            return Err(ArrowError::InvalidArgumentError(format!(
                "cannot sort by a column of {}",
                array.data_type()
            )));
        };
        Ok(key)
    }

    fn is_null(&self, row: usize) -> bool {
        match self {
            SortKey::Absent => true,
            SortKey::Bool(a) => a.is_null(row),
            SortKey::Int(a) => a.is_null(row),
            SortKey::Long(a) => a.is_null(row),
            SortKey::Float(a) => a.is_null(row),
            SortKey::Double(a) => a.is_null(row),
            SortKey::Text(a) => a.is_null(row),
            SortKey::Values(v) => matches!(v.get(row), None | Some(Value::Null)),
        }
    }

    /// Row `a` of this column against row `b` of `other` (a column of the same field, so of
    /// the same kind or absent), as [`compare_values`] orders their values.
    pub(crate) fn cmp(&self, a: usize, other: &SortKey, b: usize) -> Ordering {
        match (self.is_null(a), other.is_null(b)) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            (false, false) => {}
        }
        match (self, other) {
            (SortKey::Bool(x), SortKey::Bool(y)) => x.value(a).cmp(&y.value(b)),
            (SortKey::Int(x), SortKey::Int(y)) => x.value(a).cmp(&y.value(b)),
            (SortKey::Long(x), SortKey::Long(y)) => x.value(a).cmp(&y.value(b)),
            (SortKey::Float(x), SortKey::Float(y)) => {
                f64::from(x.value(a)).total_cmp(&f64::from(y.value(b)))
            }
            (SortKey::Double(x), SortKey::Double(y)) => x.value(a).total_cmp(&y.value(b)),
            (SortKey::Text(x), SortKey::Text(y)) => x.value(a).cmp(y.value(b)),
            (SortKey::Values(x), SortKey::Values(y)) => compare_values(x.get(a), y.get(b)),
            // one field has one kind in a part
            _ => Ordering::Equal,
        }
    }
}

/// A total order on values for sorting parts: nulls first, then booleans, numbers (by value),
/// strings, and lists and maps by their JSON text.
pub(crate) fn compare_values(a: Option<&Value>, b: Option<&Value>) -> Ordering {
    fn rank(v: Option<&Value>) -> u8 {
        match v {
            None | Some(Value::Null) => 0,
            Some(Value::Bool(_)) => 1,
            Some(v) if v.is_numeric() => 2,
            Some(Value::String(_)) => 3,
            Some(_) => 4,
        }
    }
    match (a, b) {
        (Some(Value::Bool(x)), Some(Value::Bool(y))) => x.cmp(y),
        (Some(Value::String(x)), Some(Value::String(y))) => x.cmp(y),
        (Some(x), Some(y)) if x.is_numeric() && y.is_numeric() => match (x, y) {
            (Value::Long(x), Value::Long(y)) => x.cmp(y),
            _ => x.as_f64().unwrap_or(0.0).total_cmp(&y.as_f64().unwrap_or(0.0)),
        },
        (Some(x), Some(y)) if rank(a) == 4 && rank(b) == 4 => x.to_json().cmp(&y.to_json()),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Encodes `rows` sorted as a part stores them.
#[cfg(test)]
pub(crate) fn encode<'a>(
    rows: impl IntoIterator<Item = &'a StoredRecord>,
    sort_by: &[String],
) -> Result<Encoded, ArrowError> {
    let mut buffer = ColumnBuffer::new();
    for row in rows {
        buffer.push(row.time_ms, &row.record);
    }
    buffer.sorted(sort_by)
}

/// An empty column of `kind` for `rows` values.
fn new_builder(kind: Kind, rows: usize) -> ColumnBuilder {
    let text_bytes = if kind == Kind::Json { rows * 16 } else { rows * 8 };
    ColumnBuilder::with_capacity(kind, rows, text_bytes)
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
    visit(batch, layouts, json_columns, wanted, (from_ms, to_ms), &mut |time_ms, record| {
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
    (from_ms, to_ms): (i64, i64),
    f: &mut dyn FnMut(i64, &Record),
) -> Result<(), String> {
    let times = batch
        .column_by_name(TIME_COLUMN)
        .and_then(|a| time_values(a.as_ref()))
        .ok_or("no time column")?;
    let layout = batch
        .column_by_name(LAYOUT_COLUMN)
        .and_then(|a| a.as_any().downcast_ref::<Int32Array>())
        .ok_or("no layout column")?;
    let schema = batch.schema();
    let mut columns: HashMap<&str, ColumnView<'_>> = HashMap::new();
    for (i, field) in schema.fields().iter().enumerate() {
        let name = field.name().as_str();
        if name == TIME_COLUMN || name == LAYOUT_COLUMN {
            continue;
        }
        let json = json_columns.iter().any(|c| c == name);
        let column = kind_of_column(field.data_type(), json)
            .and_then(|kind| ColumnView::of_kind(batch.column(i).as_ref(), kind));
        if let Some(column) = column {
            columns.insert(field_name(name), column);
        }
    }
    // per layout: its fields that are wanted and stored, with their columns, in order
    let mut plans: HashMap<i32, Vec<(String, &ColumnView<'_>)>> = HashMap::new();
    let mut record = Record::new();
    let mut current: Option<i32> = None;
    for (row, &time_ms) in times.iter().enumerate() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-3i64..3).prop_map(Value::Long),
            // not -0.0: JSON text of it reads back as 0.0 (as a record's own "-0.0" does)
            prop_oneof![Just(1.0), Just(0.0), Just(-2.5)].prop_map(Value::Double),
            "[ab]{0,2}".prop_map(Value::String),
            prop::collection::vec((-2i64..2).prop_map(Value::Long), 0..2).prop_map(Value::List),
        ]
    }

    /// Records whose fields `k` and `m` have one kind per case (or any kind, mixed) and may be
    /// missing or null, so that sorting meets typed, JSON and absent columns.
    fn rows() -> impl Strategy<Value = Vec<StoredRecord>> {
        let field = || prop_oneof![value().prop_map(|v| vec![v]).boxed(), Just(vec![]).boxed(),];
        prop::collection::vec(
            (0i64..6, field(), field(), prop::sample::select(vec![0u8, 1, 2])),
            0..60,
        )
        .prop_map(|rows| {
            rows.into_iter()
                .map(|(time_ms, k, m, order)| {
                    let mut record = Record::new();
                    let (first, second) =
                        if order == 0 { (("k", k), ("m", m)) } else { (("m", m), ("k", k)) };
                    for (name, values) in [first, second] {
                        for v in values {
                            record.insert(name, v);
                        }
                    }
                    StoredRecord { time_ms, record }
                })
                .collect()
        })
    }

    fn read_back(encoded: &Encoded) -> Vec<StoredRecord> {
        let mut out = Vec::new();
        decode(
            &encoded.rows(0, encoded.num_rows()).unwrap(),
            &encoded.layouts,
            &encoded.json_columns,
            None,
            i64::MIN,
            i64::MAX,
            &mut out,
        )
        .unwrap();
        out
    }

    /// The columns of `rows` sorted by `sort_by` read back as the record-by-record sort orders
    /// them (ties in arrival order).
    fn sorts_as_records_do(rows: &[StoredRecord], sort_by: &[&str]) -> Result<(), TestCaseError> {
        let sort_by: Vec<String> = sort_by.iter().map(|s| s.to_string()).collect();
        let mut want: Vec<&StoredRecord> = rows.iter().collect();
        crate::part::sort(&mut want, &sort_by);
        let got = read_back(&encode(rows, &sort_by).unwrap());
        prop_assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            prop_assert_eq!(g, *w);
        }
        Ok(())
    }

    /// Text fields with too many series to count at once (401 × 402 ranks) are counted one
    /// field at a time, in the same order.
    #[test]
    fn many_series_sort_field_by_field_as_records_do() {
        let rows: Vec<StoredRecord> = (0..1_000u64)
            .map(|i| {
                let mut record = Record::new();
                record.insert("k", Value::String(format!("k{}", (i * 37) % 400)));
                record.insert("m", Value::String(format!("m{}", (i * 91) % 401)));
                StoredRecord { time_ms: (i % 7) as i64, record }
            })
            .collect();
        sorts_as_records_do(&rows, &["m", "k"]).unwrap();
        sorts_as_records_do(&rows, &["*"]).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Sorting the columns gives the records the record-by-record sort gives, in its order
        /// (ties in arrival order), whatever the kinds of the sort fields.
        #[test]
        fn columns_sort_as_records_do(
            rows in rows(),
            sort_by in prop::sample::select(vec![
                vec![], vec!["k"], vec!["m", "k"], vec!["none", "k"], vec!["*"], vec!["m", "*"],
            ]),
        ) {
            sorts_as_records_do(&rows, &sort_by)?;
        }

        /// Rows given as a chunk of columns are gathered as the same rows given as records
        /// are, whatever came before them: new columns, NULLs, missing fields, a field of
        /// another kind before (which makes a JSON column), text with more distinct values than
        /// are gathered as ids, text given as keys into its values (as a source gathers a
        /// series'); and whatever room the buffer was made with, and however sorted.
        #[test]
        fn a_chunk_of_columns_is_gathered_as_its_rows_as_records(
            before in rows(),
            chunk_rows in prop::collection::vec(
                (0i64..6, prop::option::of(-3i64..3), prop::option::of("[abc]{0,2}"),
                 prop::option::of(any::<bool>())),
                1..40,
            ),
            after in rows(),
            room in 0usize..120,
            sort_by in prop::sample::select(vec![vec!["k"], vec!["z", "k"], vec!["*"]]),
            keyed in any::<bool>(),
        ) {
            let names = ["k", "z", "m"];
            let k: Int64Array = chunk_rows.iter().map(|r| r.1).collect();
            let z: ArrayRef = match keyed {
                true => Arc::new(
                    chunk_rows.iter().map(|r| r.2.as_deref()).collect::<DictionaryArray<Int32Type>>(),
                ),
                false => Arc::new(chunk_rows.iter().map(|r| r.2.clone()).collect::<StringArray>()),
            };
            let m: BooleanArray = chunk_rows.iter().map(|r| r.3).collect();
            let arrays: Vec<ArrayRef> = vec![Arc::new(k), z, Arc::new(m)];
            let batch = RecordBatch::try_from_iter(names.iter().zip(arrays)).unwrap();
            let times: Vec<i64> = chunk_rows.iter().map(|r| r.0).collect();
            let chunk = ColumnChunk { batch, times: times.into() };
            let as_records: Vec<StoredRecord> = (0..chunk.len()).map(|i| chunk.record(i)).collect();
            // the chunk's buffer expecting fewer rows than come, or more
            let (mut by_chunk, mut by_records) =
                (ColumnBuffer::with_capacity(room), ColumnBuffer::new());
            for r in &before {
                by_chunk.push(r.time_ms, &r.record);
                by_records.push(r.time_ms, &r.record);
            }
            by_chunk.push_chunk(&chunk);
            for r in &as_records {
                by_records.push(r.time_ms, &r.record);
            }
            for r in &after {
                by_chunk.push(r.time_ms, &r.record);
                by_records.push(r.time_ms, &r.record);
            }
            let sort_by: Vec<String> = sort_by.iter().map(|f| f.to_string()).collect();
            let got = read_back(&by_chunk.sorted(&sort_by).unwrap());
            let want = read_back(&by_records.sorted(&sort_by).unwrap());
            prop_assert_eq!(got.len(), before.len() + chunk_rows.len() + after.len());
            prop_assert_eq!(got, want);
            // and a chunk's row reads back as its non-NULL columns, in order
            for (r, row) in as_records.iter().zip(&chunk_rows) {
                let keys: Vec<&str> = r.record.iter().map(|(k, _)| k.as_str()).collect();
                let mut want_keys = Vec::new();
                if row.1.is_some() { want_keys.push("k"); }
                if row.2.is_some() { want_keys.push("z"); }
                if row.3.is_some() { want_keys.push("m"); }
                prop_assert_eq!(keys, want_keys);
            }
        }

        /// Sorting by text fields alone (ranks and counting sorts) gives the order the
        /// record-by-record sort gives, ties in arrival order, NULLs and missing fields first.
        #[test]
        fn text_fields_sort_as_records_do(
            rows in prop::collection::vec(
                (0i64..6, prop::option::of(prop::option::of("[abc]{0,2}")),
                 prop::option::of("[ab]{1,2}"), 0u8..3),
                0..80,
            ),
            sort_by in prop::sample::select(vec![
                vec!["k"], vec!["m", "k"], vec!["none", "k"], vec!["*"], vec!["m", "*"],
            ]),
        ) {
            let rows: Vec<StoredRecord> = rows
                .into_iter()
                .map(|(time_ms, k, m, n)| {
                    let mut record = Record::new();
                    match k {
                        Some(Some(k)) => record.insert("k", Value::String(k)),
                        Some(None) => record.insert("k", Value::Null),
                        None => {}
                    }
                    if let Some(m) = m {
                        record.insert("m", Value::String(m));
                    }
                    record.insert("n", Value::Long(i64::from(n)));
                    StoredRecord { time_ms, record }
                })
                .collect();
            sorts_as_records_do(&rows, &sort_by)?;
        }

        /// Split by partition, every record is in the partition of its time, sorted within it.
        #[test]
        fn partitions_hold_their_records_sorted(rows in rows(), partition_ms in 1u64..4) {
            let mut buffer = ColumnBuffer::new();
            for r in &rows {
                buffer.push(r.time_ms, &r.record);
            }
            let parts = buffer.sorted_by_partition(&["k".to_string()], Some(partition_ms)).unwrap();
            let mut seen = 0;
            let mut last = None;
            for (start, encoded) in &parts {
                prop_assert!(last < Some(*start));
                last = Some(*start);
                let got = read_back(encoded);
                let mut want: Vec<&StoredRecord> = rows
                    .iter()
                    .filter(|r| crate::config::partition_of(r.time_ms, partition_ms) == *start)
                    .collect();
                crate::part::sort(&mut want, &["k".to_string()]);
                prop_assert_eq!(got.len(), want.len());
                for (g, w) in got.iter().zip(&want) {
                    prop_assert_eq!(g, *w);
                }
                seen += got.len();
            }
            prop_assert_eq!(seen, rows.len());
        }
    }
}
