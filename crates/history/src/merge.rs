//! Merging parts block by block: a k-way merge of parts that are each already sorted, holding
//! one batch per input and one output block in memory whatever the parts' sizes, so that a
//! partition of any size can become one part.
//!
//! - **Columns**: the merged part has every field column of its inputs; a field stored with one
//!   kind in every input that has values for it keeps that kind, one stored with different kinds
//!   becomes a JSON column (typed values written as their JSON text, read back the same), and an
//!   input without the column gives nulls there.
//! - **Layouts**: the inputs' key orders, each once; every row's layout index is renumbered.
//! - **Order**: the order [`crate::part::sort`] gives the same rows: by the `sort_by` fields
//!   (nulls and missing first, numbers by value, strings by their bytes), then time; rows that
//!   tie keep the order of their inputs (as given) and, within one, their order there.
//!
//! A merge whose sort field is a JSON column (values of mixed types), whose inputs hold a type
//! needle does not write, or whose inputs cannot be read this way is not done here:
//! [`merge`] answers `Ok(None)` and the store merges those parts by reading their records.

use crate::columns::{self, SortKey, LAYOUT_COLUMN, META_LAYOUTS};
use crate::config::{StoreConfig, SORT_BY_TEXT_FIELDS};
use crate::part::{guard, Batches, Part, PartHeader, PartWriter};
use crate::HistoryError;
use arrow_array::{new_null_array, Array, ArrayRef, Int32Array, RecordBatch};
use arrow_schema::{Field, Schema, SchemaRef};
use needle_engine::columnar::layout::{self, Kind, TIME_COLUMN};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// Rows read from an input at a time: a merge holds one such batch per input (plus the rows of
/// the block it is writing), whatever the block size.
const MERGE_BATCH_ROWS: usize = 8_192;

/// Merges `inputs` (parts of one partition, each sorted by `config.sort_by` then time) into
/// the part `header` names in `dir`. `Ok(None)`: these parts need the record-by-record merge.
pub(crate) fn merge(
    dir: &Path,
    inputs: &[Part],
    config: &StoreConfig,
    header: &PartHeader,
) -> Result<Option<Part>, HistoryError> {
    let Some(plan) = Plan::of(inputs, &config.sort_by) else { return Ok(None) };
    merge_planned(dir, inputs, config, header, &plan).map(Some)
}

/// Whether [`merge`] takes these parts (then it holds one batch of each, whatever their size).
pub(crate) fn streams<P: Borrow<Part>>(inputs: &[P], sort_by: &[String]) -> bool {
    Plan::of(inputs, sort_by).is_some()
}

fn merge_planned(
    dir: &Path,
    inputs: &[Part],
    config: &StoreConfig,
    header: &PartHeader,
    plan: &Plan,
) -> Result<Part, HistoryError> {
    let mut cursors = Vec::with_capacity(inputs.len());
    for (input, part) in inputs.iter().enumerate() {
        let file = part.file()?;
        let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(file, part.meta.clone())
            // small batches: a merge of up to 64 inputs holds one of each at a time
            .with_batch_size(config.block_rows.clamp(1, MERGE_BATCH_ROWS));
        let reader = guard(&part.path, || builder.build())?
            .map_err(|e| HistoryError::parquet(&part.path, e))?;
        let reader = Batches::new(reader, &part.path);
        cursors.push(Cursor { input, reader, batch: None, keys: Vec::new(), row: 0, slot: 0 });
    }
    let mut writer = PartWriter::create(
        dir,
        config,
        header,
        plan.schema.clone(),
        &plan.kinds,
        &plan.layouts,
        &plan.json_columns,
    )?;
    let block_rows = writer.block_rows;
    // the batches the block being built takes rows from, and its rows as (batch, row)
    let mut sources: Vec<RecordBatch> = Vec::new();
    let mut picks: Vec<(usize, usize)> = Vec::with_capacity(block_rows);
    let mut heap: Vec<usize> = Vec::with_capacity(cursors.len());
    for (i, part) in inputs.iter().enumerate() {
        if cursors[i]
            .advance(plan, &mut sources)
            .map_err(|e| HistoryError::parquet(&part.path, e))?
        {
            heap.push(i);
        }
    }
    let before = |a: usize, b: usize, cursors: &[Cursor]| cursors[a].cmp(&cursors[b]).is_lt();
    for i in (0..heap.len() / 2).rev() {
        sift_down(&mut heap, i, |a, b| before(a, b, &cursors));
    }
    while let Some(&top) = heap.first() {
        let cursor = &mut cursors[top];
        picks.push((cursor.slot, cursor.row));
        cursor.row += 1;
        let more = if cursor.row < cursor.rows() {
            true
        } else {
            let path = &inputs[cursor.input].path;
            cursor.advance(plan, &mut sources).map_err(|e| HistoryError::parquet(path, e))?
        };
        if !more {
            let last = heap.len() - 1;
            heap.swap(0, last);
            heap.pop();
        }
        sift_down(&mut heap, 0, |a, b| before(a, b, &cursors));
        if picks.len() == block_rows || heap.is_empty() {
            let block = interleave(&plan.schema, &sources, &picks)
                .map_err(|e| HistoryError::parquet(writer_path(dir, header), e))?;
            writer.write_block(&block)?;
            picks.clear();
            // the next block takes rows only from each cursor's current batch onwards
            sources.clear();
            for cursor in &mut cursors {
                if let Some(batch) = &cursor.batch {
                    cursor.slot = sources.len();
                    sources.push(batch.clone());
                }
            }
        }
    }
    writer.finish()
}

fn writer_path(dir: &Path, header: &PartHeader) -> std::path::PathBuf {
    dir.join(crate::part::file_name(header.sequence, header.level, header.writer.as_deref()))
}

/// Takes the rows `picks` names from `sources`, as one batch of `schema`.
fn interleave(
    schema: &SchemaRef,
    sources: &[RecordBatch],
    picks: &[(usize, usize)],
) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let mut arrays = Vec::with_capacity(schema.fields().len());
    for column in 0..schema.fields().len() {
        let inputs: Vec<&dyn Array> = sources.iter().map(|b| b.column(column).as_ref()).collect();
        arrays.push(arrow_select::interleave::interleave(&inputs, picks)?);
    }
    RecordBatch::try_new(schema.clone(), arrays)
}

/// Moves the entry at `at` down to its place in a min-heap ordered by `before`.
fn sift_down(heap: &mut [usize], mut at: usize, before: impl Fn(usize, usize) -> bool) {
    loop {
        let (left, right) = (2 * at + 1, 2 * at + 2);
        let mut least = at;
        if left < heap.len() && before(heap[left], heap[least]) {
            least = left;
        }
        if right < heap.len() && before(heap[right], heap[least]) {
            least = right;
        }
        if least == at {
            return;
        }
        heap.swap(at, least);
        at = least;
    }
}

/// The merged part's shape, and how each input's batches become it.
struct Plan {
    schema: SchemaRef,
    /// Field columns (by field name), in schema order after the time and the layout.
    kinds: Vec<(String, Kind)>,
    layouts: Vec<Vec<String>>,
    json_columns: Vec<String>,
    /// Per input, each of its layout indexes' index in `layouts`.
    layout_maps: Vec<Vec<i32>>,
    /// Per input, per field column: the input's column index and kind, if it has it.
    sources: Vec<Vec<Option<(usize, Kind)>>>,
    /// The schema indexes of the `sort_by` columns (`None`: no input has the field).
    sort_columns: Vec<Option<usize>>,
}

impl Plan {
    fn of<P: Borrow<Part>>(inputs: &[P], sort_by: &[String]) -> Option<Plan> {
        // field columns in order of first appearance; kinds voted by the inputs with values
        let mut kinds: Vec<(String, Option<Kind>)> = Vec::new();
        let mut index_of: HashMap<String, usize> = HashMap::new();
        let mut per_input: Vec<Vec<(usize, usize, Kind)>> = Vec::new();
        for part in inputs {
            let part = part.borrow();
            let json: &[String] = &part.json_columns;
            let schema = part.meta.schema();
            let mut mine = Vec::new();
            for (i, field) in schema.fields().iter().enumerate() {
                let name = field.name();
                if name == TIME_COLUMN || name == LAYOUT_COLUMN {
                    continue;
                }
                let kind = layout::kind_of_column(field.data_type(), json.contains(name))?;
                let field_name = layout::field_name(name).to_owned();
                let at = *index_of.entry(field_name.clone()).or_insert_with(|| {
                    kinds.push((field_name, None));
                    kinds.len() - 1
                });
                if has_values(part, i) {
                    let slot = &mut kinds[at].1;
                    *slot = match *slot {
                        None => Some(kind),
                        Some(k) if k == kind => Some(k),
                        Some(_) => Some(Kind::Json),
                    };
                }
                mine.push((at, i, kind));
            }
            per_input.push(mine);
        }
        let kinds: Vec<(String, Kind)> =
            kinds.into_iter().map(|(name, kind)| (name, kind.unwrap_or(Kind::Text))).collect();
        let sources = per_input
            .into_iter()
            .map(|mine| {
                let mut row = vec![None; kinds.len()];
                for (at, i, kind) in mine {
                    row[at] = Some((i, kind));
                }
                row
            })
            .collect();

        let mut layouts: Vec<Vec<String>> = Vec::new();
        let mut layout_ids: HashMap<Vec<String>, i32> = HashMap::new();
        let mut layout_maps = Vec::new();
        for part in inputs {
            let map = part
                .borrow()
                .layouts
                .iter()
                .map(|keys| {
                    *layout_ids.entry(keys.clone()).or_insert_with(|| {
                        layouts.push(keys.clone());
                        i32::try_from(layouts.len() - 1).unwrap_or(i32::MAX)
                    })
                })
                .collect();
            layout_maps.push(map);
        }

        let mut fields = vec![
            Field::new(TIME_COLUMN, layout::time_type(), false),
            Field::new(LAYOUT_COLUMN, arrow_schema::DataType::Int32, false),
        ];
        let mut json_columns = Vec::new();
        for (name, kind) in &kinds {
            let column = layout::column_name(name).into_owned();
            if *kind == Kind::Json {
                json_columns.push(column.clone());
            }
            fields.push(Field::new(column, kind.data_type(), true));
        }
        // `*`: the text fields of the merged part. A field of several kinds (JSON here) may
        // have been text, so a sort key, in some input and not in others: their orders differ.
        let text_fields = kinds.iter().filter(|(_, k)| *k == Kind::Text).map(|(n, _)| n.as_str());
        let expanded = crate::config::sort_fields(sort_by, text_fields);
        if sort_by.iter().any(|f| f == SORT_BY_TEXT_FIELDS)
            && kinds.iter().any(|(_, k)| *k == Kind::Json)
        {
            return None;
        }
        let mut sort_columns = Vec::new();
        for field in &expanded {
            match kinds.iter().position(|(name, _)| name == field) {
                Some(at) if kinds[at].1 == Kind::Json => return None,
                Some(at) => sort_columns.push(Some(at + 2)),
                None => sort_columns.push(None),
            }
        }
        Some(Plan {
            schema: Arc::new(Schema::new(fields)),
            kinds,
            layouts,
            json_columns,
            layout_maps,
            sources,
            sort_columns,
        })
    }

    /// Input `input`'s batch as a batch of the merged part.
    fn conform(
        &self,
        input: usize,
        batch: &RecordBatch,
    ) -> Result<RecordBatch, arrow_schema::ArrowError> {
        let rows = batch.num_rows();
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        let times = batch.column_by_name(TIME_COLUMN).ok_or_else(|| missing(TIME_COLUMN))?;
        arrays.push(layout::as_time_column(times)?);
        let layouts = batch
            .column_by_name(LAYOUT_COLUMN)
            .and_then(|a| a.as_any().downcast_ref::<Int32Array>())
            .ok_or_else(|| missing(LAYOUT_COLUMN))?;
        let map = &self.layout_maps[input];
        let mut renumbered = Vec::with_capacity(rows);
        for id in layouts.values() {
            let new = usize::try_from(*id).ok().and_then(|i| map.get(i)).ok_or_else(|| {
                arrow_schema::ArrowError::InvalidArgumentError(format!(
                    "a row's layout {id} is not in the part's metadata ({META_LAYOUTS})"
                ))
            })?;
            renumbered.push(*new);
        }
        arrays.push(Arc::new(Int32Array::from(renumbered)));
        for ((_, kind), source) in self.kinds.iter().zip(&self.sources[input]) {
            arrays.push(match source {
                None => new_null_array(&kind.data_type(), rows),
                Some((i, mine)) if mine == kind => batch.column(*i).clone(),
                Some((i, mine)) if *kind == Kind::Json => {
                    columns::as_json_column(batch.column(*i).as_ref(), *mine)?
                }
                // a column of another kind that did not vote: it holds only nulls
                Some(_) => new_null_array(&kind.data_type(), rows),
            });
        }
        RecordBatch::try_new(self.schema.clone(), arrays)
    }
}

fn missing(column: &str) -> arrow_schema::ArrowError {
    arrow_schema::ArrowError::InvalidArgumentError(format!("no {column} column"))
}

/// Whether column `index` of `part` holds a non-null value: its row groups' null counts say.
fn has_values(part: &Part, index: usize) -> bool {
    part.parquet().row_groups().iter().any(|rg| {
        let rows = u64::try_from(rg.num_rows()).unwrap_or(0);
        match rg.column(index).statistics().and_then(|s| s.null_count_opt()) {
            Some(nulls) => nulls < rows,
            None => rows > 0,
        }
    })
}

/// One input being read: its current batch (conformed) and the next row to take from it.
struct Cursor {
    input: usize,
    reader: Batches,
    batch: Option<RecordBatch>,
    /// The sort columns of `batch`, then its times.
    keys: Vec<SortKey>,
    row: usize,
    /// Where `batch` is in the sources of the block being built.
    slot: usize,
}

impl Cursor {
    fn rows(&self) -> usize {
        self.batch.as_ref().map_or(0, RecordBatch::num_rows)
    }

    /// Moves to the input's next non-empty batch (added to `sources`); false at its end.
    fn advance(
        &mut self,
        plan: &Plan,
        sources: &mut Vec<RecordBatch>,
    ) -> Result<bool, arrow_schema::ArrowError> {
        self.batch = None;
        self.keys.clear();
        self.row = 0;
        for batch in self.reader.by_ref() {
            let batch = batch?;
            if batch.num_rows() == 0 {
                continue;
            }
            let batch = plan.conform(self.input, &batch)?;
            for column in &plan.sort_columns {
                self.keys.push(match column {
                    Some(c) => SortKey::of(batch.column(*c))?,
                    None => SortKey::Absent,
                });
            }
            self.keys.push(SortKey::of(batch.column(0))?);
            self.slot = sources.len();
            sources.push(batch.clone());
            self.batch = Some(batch);
            return Ok(true);
        }
        Ok(false)
    }

    /// This cursor's current row against `other`'s: by the sort keys, then time, then input.
    fn cmp(&self, other: &Cursor) -> Ordering {
        for (a, b) in self.keys.iter().zip(&other.keys) {
            let order = a.cmp(self.row, b, other.row);
            if order != Ordering::Equal {
                return order;
            }
        }
        self.input.cmp(&other.input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::StoredRecord;
    use crate::part;
    use needle_record::{Map, Record, Value};
    use proptest::prelude::*;

    fn scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-3i64..3).prop_map(Value::Long),
            any::<i64>().prop_map(Value::Long),
            prop_oneof![Just(1.0), Just(-0.0), Just(0.0), Just(2.5)].prop_map(Value::Double),
            "[a-c☃]{0,3}".prop_map(Value::String),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        scalar().prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::List),
                prop::collection::vec(("[a-b]", inner), 0..3).prop_map(|entries| {
                    let mut map = Map::default();
                    for (k, v) in entries {
                        map.insert(k, v);
                    }
                    Value::Map(map)
                }),
            ]
        })
    }

    /// A record: a sort key `s` (a short string, null or missing), a number `n` of one kind
    /// per part or absent, and fields of any kind and shape (also `__needle_x`, escaped).
    fn record(n_is_double: bool) -> impl Strategy<Value = StoredRecord> {
        (
            0i64..50,
            prop::option::of(prop::option::of("[a-d]{0,2}")),
            prop::option::of(-5i64..5),
            prop::collection::vec(
                (prop::sample::select(vec!["x", "y", "z", "__needle_x"]), value()),
                0..4,
            ),
        )
            .prop_map(move |(time_ms, s, n, rest)| {
                let mut record = Record::new();
                for (k, v) in rest {
                    record.insert(k, v);
                }
                match s {
                    Some(Some(s)) => record.insert("s", Value::String(s)),
                    Some(None) => record.insert("s", Value::Null),
                    None => {}
                }
                if let Some(n) = n {
                    let v =
                        if n_is_double { Value::Double(n as f64 / 2.0) } else { Value::Long(n) };
                    record.insert("n", v);
                }
                StoredRecord { time_ms, record }
            })
    }

    fn parts() -> impl Strategy<Value = Vec<Vec<StoredRecord>>> {
        prop::collection::vec(
            any::<bool>().prop_flat_map(|d| prop::collection::vec(record(d), 0..40)),
            1..6,
        )
    }

    fn write_parts(dir: &Path, config: &StoreConfig, inputs: &[Vec<StoredRecord>]) -> Vec<Part> {
        inputs
            .iter()
            .enumerate()
            .map(|(i, records)| {
                let encoded = columns::encode(records, &config.sort_by).unwrap();
                let header = PartHeader { sequence: i as u64, ..PartHeader::default() };
                part::write(dir, &encoded, config, &header).unwrap()
            })
            .collect()
    }

    fn point(time_ms: i64, fields: &[(&str, Value)]) -> StoredRecord {
        let mut record = Record::new();
        for (k, v) in fields {
            record.insert(*k, v.clone());
        }
        StoredRecord { time_ms, record }
    }

    fn text(s: &str) -> Value {
        Value::String(s.into())
    }

    /// With `*`, series (a name, then the tags by tag name) sit together in the merged part,
    /// whichever part they came from and whatever tags each part had.
    #[test]
    fn a_merge_keeps_the_series_order_of_its_parts() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = StoreConfig::new(dir.path());
        config.sort_by = vec!["__name__".into(), "*".into()];
        let a = vec![
            point(
                3,
                &[("__name__", text("up")), ("job", text("b")), ("value", Value::Double(1.0))],
            ),
            point(
                1,
                &[("__name__", text("cpu")), ("job", text("a")), ("value", Value::Double(2.0))],
            ),
        ];
        let b = vec![
            point(2, &[("__name__", text("up")), ("job", text("a")), ("zone", text("z"))]),
            point(
                0,
                &[("__name__", text("up")), ("job", text("b")), ("value", Value::Double(3.0))],
            ),
        ];
        let parts = write_parts(dir.path(), &config, &[a, b]);
        let header = PartHeader { sequence: 100, level: 1, ..PartHeader::default() };
        let merged = merge(dir.path(), &parts, &config, &header).unwrap().expect("it streams");
        let order: Vec<(String, String, i64)> = merged
            .read_all()
            .unwrap()
            .iter()
            .map(|r| {
                let get = |f: &str| r.record.get(f).map(|v| v.to_json()).unwrap_or_default();
                (get("__name__"), get("job"), r.time_ms)
            })
            .collect();
        let want = [("cpu", "a", 1), ("up", "a", 2), ("up", "b", 0), ("up", "b", 3)];
        let want: Vec<(String, String, i64)> =
            want.iter().map(|(n, j, t)| (format!("{n:?}"), format!("{j:?}"), *t)).collect();
        assert_eq!(order, want);
    }

    /// A part as parts were written before times were timestamps: its time column INT64.
    fn with_long_times(part: &Part) -> Part {
        use parquet::arrow::ArrowWriter;
        let file = std::fs::File::open(&part.path).unwrap();
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        let metadata = builder.metadata().file_metadata().key_value_metadata().cloned();
        let batches: Vec<RecordBatch> = builder.build().unwrap().map(Result::unwrap).collect();
        let old = |batch: &RecordBatch| {
            let times = layout::time_values(batch.column(0).as_ref()).unwrap().to_vec();
            let mut fields: Vec<Field> =
                batch.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
            fields[0] = Field::new(TIME_COLUMN, arrow_schema::DataType::Int64, false);
            let mut arrays = batch.columns().to_vec();
            arrays[0] = Arc::new(arrow_array::Int64Array::from(times));
            RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).unwrap()
        };
        let batches: Vec<RecordBatch> = batches.iter().map(old).collect();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_key_value_metadata(metadata)
            .build();
        let out = std::fs::File::create(&part.path).unwrap();
        let mut writer = ArrowWriter::try_new(out, batches[0].schema(), Some(props)).unwrap();
        for batch in &batches {
            writer.write(batch).unwrap();
        }
        writer.close().unwrap();
        let reopened = Part::open(&part.path).unwrap();
        let time = reopened.meta.schema().field_with_name(TIME_COLUMN).unwrap().clone();
        assert_eq!(time.data_type(), &arrow_schema::DataType::Int64);
        reopened
    }

    /// Parts written before times were timestamps read as they did, and merge with new ones
    /// into a part whose times are timestamps.
    #[test]
    fn a_part_with_long_times_reads_and_merges_with_new_ones() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = StoreConfig::new(dir.path());
        config.sort_by = vec!["job".into()];
        let a = vec![
            point(3, &[("job", text("b")), ("value", Value::Double(1.0))]),
            point(1, &[("job", text("a")), ("value", Value::Double(2.0))]),
        ];
        let b = vec![point(2, &[("job", text("a")), ("value", Value::Long(3))])];
        let mut parts = write_parts(dir.path(), &config, &[a, b]);
        parts[0] = with_long_times(&parts[0]);
        let old: Vec<(i64, String)> = parts[0]
            .read_all()
            .unwrap()
            .iter()
            .map(|r| (r.time_ms, r.record.get("job").unwrap().to_json()))
            .collect();
        assert_eq!(old, [(1, "\"a\"".to_string()), (3, "\"b\"".to_string())]);
        let header = PartHeader { sequence: 100, level: 1, ..PartHeader::default() };
        let merged = merge(dir.path(), &parts, &config, &header).unwrap().expect("it streams");
        let time = merged.meta.schema().field_with_name(TIME_COLUMN).unwrap().clone();
        assert_eq!(time.data_type(), &layout::time_type());
        let times: Vec<i64> = merged.read_all().unwrap().iter().map(|r| r.time_ms).collect();
        assert_eq!(times, [1, 2, 3]);
    }

    /// A field that is text in one part (a sort key there, with `*`) and a number in another is
    /// not: the parts' orders disagree, so they are not merged block by block.
    #[test]
    fn with_every_text_field_a_field_of_two_kinds_stops_a_streaming_merge() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = StoreConfig::new(dir.path());
        config.sort_by = vec!["*".into()];
        let a = vec![point(0, &[("x", text("b"))]), point(1, &[("x", text("a"))])];
        let b = vec![point(0, &[("x", Value::Long(1))])];
        let parts = write_parts(dir.path(), &config, &[a, b]);
        assert!(!streams(&parts, &config.sort_by));
        config.sort_by = vec![];
        assert!(streams(&parts, &config.sort_by));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// The streaming merge gives the rows the record-by-record merge gives, in its order,
        /// with the same values (kinds that differ between parts included).
        #[test]
        fn merging_block_by_block_equals_merging_the_records(
            inputs in parts(),
            sort_by in prop::sample::select(vec![
                vec![], vec!["s"], vec!["n", "s"], vec!["s", "missing"], vec!["*"], vec!["n", "*"],
            ]),
            block_rows in 1usize..20,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut config = StoreConfig::new(dir.path());
            config.sort_by = sort_by.iter().map(|s| s.to_string()).collect();
            config.block_rows = block_rows;
            let parts = write_parts(dir.path(), &config, &inputs);
            let header = PartHeader { sequence: 100, level: 1, ..PartHeader::default() };
            let Some(merged) = merge(dir.path(), &parts, &config, &header).unwrap() else {
                // `n` is a sort field of mixed kinds (LONG in one part, DOUBLE in another), or
                // with `*` a field is (so it may have been a text sort key in one part only)
                prop_assert!(config.sort_by.iter().any(|f| f == "n" || f == "*"));
                return Ok(());
            };
            let mut records: Vec<StoredRecord> = Vec::new();
            for p in &parts {
                records.extend(p.read_all().unwrap());
            }
            let mut want: Vec<&StoredRecord> = records.iter().collect();
            part::sort(&mut want, &config.sort_by);
            let got = merged.read_all().unwrap();
            prop_assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want) {
                prop_assert_eq!(g, *w);
                let gk: Vec<&String> = g.record.iter().map(|(k, _)| k).collect();
                let wk: Vec<&String> = w.record.iter().map(|(k, _)| k).collect();
                prop_assert_eq!(gk, wk);
            }
            prop_assert_eq!(merged.rows as usize, want.len());
            prop_assert!(merged.blocks() == want.len().div_ceil(block_rows));
            // each block's count and sum are those of its rows
            for (column, blocks) in merged.sums.iter() {
                prop_assert_eq!(blocks.len(), merged.blocks(), "{}", column);
            }
        }
    }
}
