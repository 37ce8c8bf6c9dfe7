//! One part: a Parquet file of sorted records in one partition, written whole to a temporary
//! name, fsynced and renamed into place (a reader never sees half a file), then read back by
//! block (row group).
//!
//! # Layout of a part
//! - Row groups of `block_rows` rows: the blocks. Parquet keeps each block's min, max and null
//!   count per column (and a page index); needle adds each block's count and sum of every
//!   numeric column in the key-value metadata ([`META_BLOCK_SUMS`]). Bloom filters on the
//!   configured fields.
//! - zstd; dictionary encoding (with run lengths) for every column but the times, which are
//!   delta-encoded: sorted by series then time, a sensor's tags repeat and compress to almost
//!   nothing, and its timestamps are a constant step. A float column past 8,192 distinct values
//!   in a block goes on as BYTE_STREAM_SPLIT.
//! - Key-value metadata: the record layouts and JSON columns ([`crate::columns`]), the block
//!   sums, the part's merge level, the parts it replaces (a merge), the source position
//!   after its last record and the source offsets its records came from.

use crate::chunks::BlockChunks;
use crate::columns::{self, Encoded, StoredRecord, LAYOUT_COLUMN, META_JSON_COLUMNS, META_LAYOUTS};
use crate::config::StoreConfig;
use crate::object::reader::{PartFile, RemoteObject};
use crate::offsets::OffsetRanges;
use crate::{pages, HistoryError};
use arrow_array::RecordBatch;
use needle_engine::columnar::layout::{self, Kind, TIME_COLUMN};
use needle_engine::columnar::{BucketSummary, Columns, Filter, GroupRequest, Summarizer};
use needle_query::ast::Expr;
use needle_record::Record;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader, RowGroups, RowSelection,
};
use parquet::arrow::{parquet_to_arrow_field_levels, ArrowWriter, ProjectionMask};
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::PageIndexPolicy;
use parquet::file::metadata::{KeyValue, ParquetMetaData};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use parquet::schema::types::ColumnPath;
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// JSON: `{column: [[count, sum], ...]}`, one pair per block, for numeric columns.
pub const META_BLOCK_SUMS: &str = "needle.block_sums";
/// The part's merge level: 0 for a flush, one more than its inputs for a merge.
pub const META_LEVEL: &str = "needle.level";
/// JSON: the file names of the parts a merged part replaces.
pub const META_REPLACES: &str = "needle.replaces";
/// The source position after the part's last record (opaque to the store).
pub const META_POSITION: &str = "needle.position";
/// JSON: per source stream, the offsets the records of the flush that wrote the part came
/// from (`{"topic/3": {"first": 10, "next": 99}}`; a merge: its inputs' union). See
/// [`crate::offsets`].
pub const META_OFFSETS: &str = "needle.offsets";
/// `true` on the part that compacted the whole of a cold span: it is never merged again.
pub const META_COMPACTED: &str = "needle.compacted";
/// The part's sequence number (its name's, kept for readers of the files alone).
pub const META_SEQUENCE: &str = "needle.sequence";
/// The writer that wrote the part, in a store on object storage that several write.
pub const META_WRITER: &str = "needle.writer";

/// Rows a column-at-a-time read decodes at once. A whole 131,072-row block at once made each
/// column's buffer a megabyte that the allocator mapped, zeroed and unmapped per block (page
/// faults were a sixth of the filter's time); 16,384 rows (128 KiB of `i64`) are reused from
/// the heap and stay in the cache while the batch is folded: the per-series MAX 49 → 43 ms and
/// the filter 3.2 → 2.3 ms at 144M points.
const COLUMN_BATCH_ROWS: usize = 16_384;

/// Runs `read`, a call into the Parquet reader about `path`, turning a panic into the error of
/// a corrupt part: the reader asserts instead of returning an error on some damaged footers and
/// pages (a fuzz find, `fuzz/regressions/history_reader/`), and a damaged part must be skipped
/// and counted, not take the process down.
pub(crate) fn guard<T>(path: &Path, read: impl FnOnce() -> T) -> Result<T, HistoryError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)).map_err(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        HistoryError::parquet(path, format!("the Parquet reader failed on a corrupt part: {why}"))
    })
}

/// A reader of record batches whose panics ([`guard`]) are errors; it ends after one.
pub(crate) struct Batches {
    reader: Option<ParquetRecordBatchReader>,
    path: PathBuf,
}

impl Batches {
    pub(crate) fn new(reader: ParquetRecordBatchReader, path: &Path) -> Self {
        Self { reader: Some(reader), path: path.to_owned() }
    }
}

impl Iterator for Batches {
    type Item = Result<RecordBatch, arrow_schema::ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let reader = self.reader.as_mut()?;
        match guard(&self.path, || reader.next()) {
            Ok(next) => next,
            Err(error) => {
                self.reader = None;
                Some(Err(arrow_schema::ArrowError::ParquetError(error.to_string())))
            }
        }
    }
}

/// What [`crate::Block::for_each_matching`] hands on.
pub enum BlockRows<'a> {
    /// A row in range, by its time, and its record.
    Record(i64, &'a Record),
    /// The times of rows in range that the column filter proved fail the WHERE
    /// ([`FailedRows::ByTime`]).
    Failed(&'a [i64]),
    /// How many rows in range the column filter proved fail the WHERE
    /// ([`FailedRows::Counted`]).
    FailedCount(usize),
}

/// How the rows a column filter proved fail the WHERE are handed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailedRows {
    /// By their times (a reader that puts each row in a time window).
    ByTime,
    /// Counted (a reader that only counts what it read).
    Counted,
}

/// What a new part says of itself besides its records.
#[derive(Debug, Clone, Default)]
pub(crate) struct PartHeader {
    pub sequence: u64,
    pub level: u32,
    pub replaces: Vec<String>,
    pub position: Option<String>,
    /// The writer's name, in a store on object storage (several writers share one).
    pub writer: Option<String>,
    /// The source offsets its records came from ([`crate::offsets`]).
    pub offsets: OffsetRanges,
    /// It compacts the whole of a cold span (see [`META_COMPACTED`]).
    pub compacted: bool,
    /// The store's Iceberg field ids, written into the part's Parquet schema (`field_id`), so
    /// engines read its columns by id whatever their names and types; `None`: by name.
    pub field_ids: Option<crate::iceberg::FieldIds>,
}

/// The file name of a part: `part-<sequence>-L<level>.parquet`, with the writer's name before
/// the level in a store that several write (`part-<sequence>-<writer>-L<level>.parquet`), so
/// two writers' parts never share a name.
pub(crate) fn file_name(sequence: u64, level: u32, writer: Option<&str>) -> String {
    match writer {
        Some(writer) => format!("part-{sequence:010}-{writer}-L{level}.parquet"),
        None => format!("part-{sequence:010}-L{level}.parquet"),
    }
}

/// Sorts rows as a part stores them: by the `sort_by` fields, then time (stable: records of
/// one series and time keep their arrival order), record by record: what the column sort of
/// [`columns::ColumnBuffer`] must agree with.
#[cfg(test)]
pub(crate) fn sort(rows: &mut Vec<&StoredRecord>, sort_by: &[String]) {
    if sort_by.is_empty() {
        rows.sort_by_key(|r| r.time_ms);
        return;
    }
    // `*`: the fields whose values are all strings (a column of text, as the writer makes it)
    let mut kinds: std::collections::BTreeMap<&str, bool> = Default::default();
    for r in rows.iter() {
        for (name, value) in r.record.iter() {
            let text =
                matches!(value, needle_record::Value::String(_) | needle_record::Value::Null);
            *kinds.entry(name.as_str()).or_insert(true) &= text;
        }
    }
    let text_fields = kinds.into_iter().filter(|(_, text)| *text).map(|(name, _)| name);
    let sort_by = &crate::config::sort_fields(sort_by, text_fields);
    let mut keyed: Vec<(Vec<Option<&needle_record::Value>>, &StoredRecord)> =
        rows.iter().map(|r| (sort_by.iter().map(|f| r.record.get(f)).collect(), *r)).collect();
    keyed.sort_by(|(ka, a), (kb, b)| {
        for (x, y) in ka.iter().zip(kb) {
            let order = crate::columns::compare_values(*x, *y);
            if order != std::cmp::Ordering::Equal {
                return order;
            }
        }
        a.time_ms.cmp(&b.time_ms)
    });
    *rows = keyed.into_iter().map(|(_, r)| r).collect();
}

/// Writes `encoded` (sorted) as the part `dir/name`: temporary file, fsync, rename, fsync of the
/// directory. Returns the part, read back from its own metadata.
pub(crate) fn write(
    dir: &Path,
    encoded: &Encoded,
    config: &StoreConfig,
    header: &PartHeader,
) -> Result<Part, HistoryError> {
    let mut writer = PartWriter::create(
        dir,
        config,
        header,
        encoded.schema(),
        &encoded.kinds,
        &encoded.layouts,
        &encoded.json_columns,
    )?;
    let block_rows = writer.block_rows;
    let mut offset = 0;
    while offset < encoded.num_rows() {
        let length = block_rows.min(encoded.num_rows() - offset);
        let block = encoded.block(offset, length).map_err(|e| HistoryError::parquet(dir, e))?;
        writer.write_block(&block)?;
        offset += length;
    }
    writer.finish()
}

/// A part being written block by block: to a temporary name, made durable and renamed into
/// place by [`PartWriter::finish`]; dropped unfinished, it removes its temporary file.
pub(crate) struct PartWriter {
    dir: PathBuf,
    path: PathBuf,
    temporary: PathBuf,
    writer: Option<ArrowWriter<File>>,
    /// Rows in a block: [`PartWriter::write_block`] takes at most this many.
    pub block_rows: usize,
    /// Per numeric field column (in schema order), each block's count and sum.
    sums: Vec<(String, Vec<(u64, f64)>)>,
    /// The schema written: the blocks', with the field ids.
    schema: arrow_schema::SchemaRef,
}

/// `schema` with each column's Iceberg field id in its metadata (`PARQUET:field_id`, which the
/// Parquet writer puts in the file's schema): the time and the layout, and each field column of
/// `kinds` the registry has (or registers) an id for.
fn with_field_ids(
    schema: &arrow_schema::SchemaRef,
    kinds: &[(String, Kind)],
    ids: &crate::iceberg::FieldIds,
) -> arrow_schema::SchemaRef {
    let kind_of: std::collections::HashMap<String, Kind> =
        kinds.iter().map(|(f, k)| (layout::column_name(f).into_owned(), *k)).collect();
    let fields: Vec<arrow_schema::Field> = schema
        .fields()
        .iter()
        .map(|field| {
            let id = match field.name().as_str() {
                TIME_COLUMN => Some(crate::iceberg::TIME_FIELD_ID),
                LAYOUT_COLUMN => Some(crate::iceberg::LAYOUT_FIELD_ID),
                name => kind_of.get(name).and_then(|kind| ids.id(name, *kind)),
            };
            let mut metadata = field.metadata().clone();
            if let Some(id) = id {
                metadata
                    .insert(parquet::arrow::PARQUET_FIELD_ID_META_KEY.to_owned(), id.to_string());
            }
            field.as_ref().clone().with_metadata(metadata)
        })
        .collect();
    std::sync::Arc::new(arrow_schema::Schema::new_with_metadata(fields, schema.metadata().clone()))
}

impl PartWriter {
    /// Starts the part `header` names in `dir`, whose columns are `schema` (the time, the
    /// layout, then the field columns of `kinds`), with the records' `layouts` and
    /// `json_columns` in its metadata.
    pub(crate) fn create(
        dir: &Path,
        config: &StoreConfig,
        header: &PartHeader,
        schema: arrow_schema::SchemaRef,
        kinds: &[(String, Kind)],
        layouts: &[Vec<String>],
        json_columns: &[String],
    ) -> Result<Self, HistoryError> {
        let name = file_name(header.sequence, header.level, header.writer.as_deref());
        let path = dir.join(&name);
        let temporary = dir.join(format!(".tmp-{name}"));
        let mut metadata = vec![
            KeyValue::new(META_LAYOUTS.into(), json(&layouts)),
            KeyValue::new(META_JSON_COLUMNS.into(), json(&json_columns)),
            KeyValue::new(META_LEVEL.into(), header.level.to_string()),
            KeyValue::new(META_SEQUENCE.into(), header.sequence.to_string()),
            KeyValue::new(META_REPLACES.into(), json(&header.replaces)),
        ];
        if let Some(position) = &header.position {
            metadata.push(KeyValue::new(META_POSITION.into(), position.clone()));
        }
        if let Some(writer) = &header.writer {
            metadata.push(KeyValue::new(META_WRITER.into(), writer.clone()));
        }
        if header.compacted {
            metadata.push(KeyValue::new(META_COMPACTED.into(), "true".to_owned()));
        }
        if !header.offsets.is_empty() {
            metadata.push(KeyValue::new(META_OFFSETS.into(), json(&header.offsets)));
        }
        let block_rows = config.block_rows.max(1);
        let mut props = WriterProperties::builder()
            .set_writer_version(WriterVersion::PARQUET_2_0)
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).unwrap_or_default()))
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_max_row_group_row_count(Some(block_rows))
            .set_data_page_row_count_limit(config.page_rows.clamp(1, block_rows))
            .set_key_value_metadata(Some(metadata));
        let delta_columns = std::iter::once(TIME_COLUMN.to_owned()).chain(
            config
                .time_field
                .iter()
                .filter(|f| kinds.iter().any(|(n, k)| n == *f && *k == Kind::Long))
                .map(|f| layout::column_name(f).into_owned()),
        );
        for column in delta_columns {
            let column = ColumnPath::from(column.as_str());
            props = props
                .set_column_dictionary_enabled(column.clone(), false)
                .set_column_encoding(column, Encoding::DELTA_BINARY_PACKED);
        }
        // a float column keeps a dictionary while its values repeat (a slowly moving gauge: a
        // few hundred values a block), up to 8,192 doubles; past them (readings of many
        // distinct values) each value's bytes are split into streams by significance, which
        // zstd packs better than the values whole, and no dictionary is looked up a row
        for (field, _) in kinds.iter().filter(|(_, k)| matches!(k, Kind::Double | Kind::Float)) {
            let column = ColumnPath::from(layout::column_name(field).as_ref());
            props = props
                .set_column_dictionary_page_size_limit(column.clone(), 64 * 1024)
                .set_column_encoding(column, Encoding::BYTE_STREAM_SPLIT);
        }
        for field in &config.bloom_fields {
            if kinds.iter().any(|(n, k)| n == field && *k != Kind::Json) {
                let column = ColumnPath::from(layout::column_name(field).as_ref());
                props = props
                    .set_column_bloom_filter_enabled(column.clone(), true)
                    .set_column_bloom_filter_fpp(column, 0.01);
            }
        }
        let schema = match &header.field_ids {
            Some(ids) => with_field_ids(&schema, kinds, ids),
            None => schema,
        };
        let file = File::create(&temporary).map_err(|e| HistoryError::io(&temporary, e))?;
        let writer = match ArrowWriter::try_new(file, schema.clone(), Some(props.build())) {
            Ok(writer) => writer,
            Err(e) => {
                let _ = std::fs::remove_file(&temporary);
                return Err(HistoryError::parquet(&path, e));
            }
        };
        let sums = schema
            .fields()
            .iter()
            .filter(|f| f.name() != TIME_COLUMN && f.name() != LAYOUT_COLUMN)
            .filter(|f| f.data_type().is_numeric())
            .map(|f| (f.name().clone(), Vec::new()))
            .collect();
        Ok(Self {
            dir: dir.to_owned(),
            path,
            temporary,
            writer: Some(writer),
            block_rows,
            sums,
            schema,
        })
    }

    /// Writes `batch` (at most `block_rows` rows, of the part's schema) as one block.
    pub(crate) fn write_block(&mut self, batch: &RecordBatch) -> Result<(), HistoryError> {
        let Some(writer) = self.writer.as_mut() else {
            return Err(HistoryError::parquet(&self.path, "the part is already finished"));
        };
        // one row group per block, exactly (of the schema with the field ids; a text column
        // may come as a dictionary of its text, which the writer encodes as the text)
        let batch = if batch.schema() == self.schema {
            batch.clone()
        } else {
            use arrow_schema::DataType::{Dictionary, Utf8};
            let fields: Vec<arrow_schema::Field> = self
                .schema
                .fields()
                .iter()
                .zip(batch.columns())
                .map(|(field, column)| match (field.data_type(), column.data_type()) {
                    (Utf8, Dictionary(_, text)) if **text == Utf8 => {
                        field.as_ref().clone().with_data_type(column.data_type().clone())
                    }
                    _ => field.as_ref().clone(),
                })
                .collect();
            let schema =
                arrow_schema::Schema::new_with_metadata(fields, self.schema.metadata().clone());
            batch
                .clone()
                .with_schema(std::sync::Arc::new(schema))
                .map_err(|e| HistoryError::parquet(&self.path, e))?
        };
        writer
            .write(&batch)
            .and_then(|()| writer.flush())
            .map_err(|e| HistoryError::parquet(&self.path, e))?;
        for (name, blocks) in &mut self.sums {
            if let Some(column) = batch.column_by_name(name) {
                blocks.push(count_and_sum(column.as_ref()));
            }
        }
        Ok(())
    }

    /// Closes the file, makes it durable and renames it into place; returns the part, read
    /// back from its own metadata.
    pub(crate) fn finish(mut self) -> Result<Part, HistoryError> {
        let Some(mut writer) = self.writer.take() else {
            return Err(HistoryError::parquet(&self.path, "the part is already finished"));
        };
        let sums: serde_json::Map<String, serde_json::Value> = std::mem::take(&mut self.sums)
            .into_iter()
            .map(|(name, blocks)| (name, serde_json::json!(blocks)))
            .collect();
        writer.append_key_value_metadata(KeyValue::new(META_BLOCK_SUMS.into(), json(&sums)));
        let mut file = writer.into_inner().map_err(|e| HistoryError::parquet(&self.path, e))?;
        file.flush()
            .and_then(|()| file.sync_all())
            .map_err(|e| HistoryError::io(&self.temporary, e))?;
        drop(file);
        std::fs::rename(&self.temporary, &self.path)
            .map_err(|e| HistoryError::io(&self.path, e))?;
        sync_dir(&self.dir)?;
        Part::open(&self.path)
    }
}

impl Drop for PartWriter {
    fn drop(&mut self) {
        if self.writer.is_some() || self.temporary.exists() {
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}

/// fsyncs a directory, so a rename or removal in it is durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), HistoryError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| HistoryError::io(dir, e))
}

fn json<T: serde::Serialize>(value: &T) -> Option<String> {
    serde_json::to_string(value).ok()
}

/// A block's count of non-null values and their sum, of a numeric column.
fn count_and_sum(column: &dyn arrow_array::Array) -> (u64, f64) {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float32Type, Float64Type, Int32Type, Int64Type};
    use arrow_schema::DataType;
    let count = (column.len() - column.null_count()) as u64;
    let sum: f64 = match column.data_type() {
        DataType::Int32 => column.as_primitive::<Int32Type>().iter().flatten().map(f64::from).sum(),
        DataType::Int64 => {
            column.as_primitive::<Int64Type>().iter().flatten().map(|v| v as f64).sum()
        }
        DataType::Float32 => {
            column.as_primitive::<Float32Type>().iter().flatten().map(f64::from).sum()
        }
        DataType::Float64 => column.as_primitive::<Float64Type>().iter().flatten().sum(),
        _ => 0.0,
    };
    (count, sum)
}

/// A part on disk or in an object store, with its footer read once.
#[derive(Debug, Clone)]
pub struct Part {
    /// Its file on this machine: where it was written, or would be kept. On a store on object
    /// storage the file may be gone (evicted from the cache, or never here): reads then go to
    /// [`Part::remote`].
    pub path: PathBuf,
    /// Its object, on a store on object storage once uploaded (or found in the manifest):
    /// shared by the part's clones, so a scan that took the part before its upload reads the
    /// object once the cache has let the local file go.
    pub(crate) remote: Arc<std::sync::OnceLock<RemoteObject>>,
    pub name: String,
    pub(crate) meta: ArrowReaderMetadata,
    pub(crate) layouts: Arc<Vec<Vec<String>>>,
    pub(crate) json_columns: Arc<Vec<String>>,
    /// Per numeric column, each block's (count, sum).
    pub(crate) sums: Arc<HashMap<String, Vec<(u64, f64)>>>,
    pub level: u32,
    pub sequence: u64,
    pub replaces: Vec<String>,
    pub position: Option<String>,
    /// Who wrote it, in a store on object storage.
    pub writer: Option<String>,
    /// The source offsets its records came from ([`crate::offsets`]).
    pub offsets: OffsetRanges,
    /// It compacts the whole of a cold span: never merged again.
    pub compacted: bool,
    pub rows: u64,
    pub bytes: u64,
    /// The earliest and latest record time in the part.
    pub time_range: (i64, i64),
    /// The footer with text columns read as dictionaries (the column path), made when first
    /// wanted.
    dictionary_meta: std::sync::OnceLock<Option<ArrowReaderMetadata>>,
}

impl Part {
    /// Reads a part's footer. A file that is not a whole part of this store is an error
    /// (the store skips it and counts it).
    pub fn open(path: &Path) -> Result<Self, HistoryError> {
        let file = File::open(path).map_err(|e| HistoryError::io(path, e))?;
        Self::open_file(path, PartFile::Local(file), None)
    }

    /// Reads a part's footer from its object (the ranges of the footer and page index only);
    /// `path` is where the store would keep it on this machine.
    pub fn open_remote(path: &Path, object: RemoteObject) -> Result<Self, HistoryError> {
        Self::open_file(path, PartFile::Remote(object.clone()), Some(object))
    }

    /// Its object, once uploaded.
    pub fn remote(&self) -> Option<&RemoteObject> {
        self.remote.get()
    }

    fn open_file(
        path: &Path,
        file: PartFile,
        remote: Option<RemoteObject>,
    ) -> Result<Self, HistoryError> {
        use parquet::file::reader::Length;
        let bytes = file.len();
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
        let meta = guard(path, || ArrowReaderMetadata::load(&file, options))?
            .map_err(|e| HistoryError::parquet(path, e))?;
        let parquet: &ParquetMetaData = meta.metadata();
        let kv: HashMap<&str, &str> = parquet
            .file_metadata()
            .key_value_metadata()
            .map(|list| {
                list.iter()
                    .filter_map(|kv| kv.value.as_deref().map(|v| (kv.key.as_str(), v)))
                    .collect()
            })
            .unwrap_or_default();
        let layouts: Vec<Vec<String>> = kv
            .get(META_LAYOUTS)
            .and_then(|v| serde_json::from_str(v).ok())
            .ok_or_else(|| HistoryError::parquet(path, "not a part of a needle history store"))?;
        let json_columns: Vec<String> = kv
            .get(META_JSON_COLUMNS)
            .and_then(|v| serde_json::from_str(v).ok())
            .unwrap_or_default();
        let sums: HashMap<String, Vec<(u64, f64)>> =
            kv.get(META_BLOCK_SUMS).and_then(|v| serde_json::from_str(v).ok()).unwrap_or_default();
        let replaces: Vec<String> =
            kv.get(META_REPLACES).and_then(|v| serde_json::from_str(v).ok()).unwrap_or_default();
        let level = kv.get(META_LEVEL).and_then(|v| v.parse().ok()).unwrap_or(0);
        let sequence = kv.get(META_SEQUENCE).and_then(|v| v.parse().ok()).unwrap_or(0);
        let position = kv.get(META_POSITION).map(|v| v.to_string());
        let writer = kv.get(META_WRITER).map(|v| v.to_string());
        let compacted = kv.get(META_COMPACTED).is_some_and(|v| *v == "true");
        let offsets: OffsetRanges =
            kv.get(META_OFFSETS).and_then(|v| serde_json::from_str(v).ok()).unwrap_or_default();
        let schema = meta.schema();
        let time_index = schema
            .index_of(TIME_COLUMN)
            .map_err(|_| HistoryError::parquet(path, "no time column"))?;
        if schema.index_of(LAYOUT_COLUMN).is_err() {
            return Err(HistoryError::parquet(path, "no layout column"));
        }
        let mut time_range = (i64::MAX, i64::MIN);
        for rg in parquet.row_groups() {
            if let Some(parquet::file::statistics::Statistics::Int64(s)) =
                rg.column(time_index).statistics()
            {
                if let (Some(lo), Some(hi)) = (s.min_opt(), s.max_opt()) {
                    time_range = (time_range.0.min(*lo), time_range.1.max(*hi));
                }
            }
        }
        let rows = parquet.file_metadata().num_rows().max(0) as u64;
        Ok(Self {
            name: path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            path: path.to_owned(),
            remote: Arc::new(match remote {
                Some(object) => std::sync::OnceLock::from(object),
                None => std::sync::OnceLock::new(),
            }),
            meta,
            layouts: Arc::new(layouts),
            json_columns: Arc::new(json_columns),
            sums: Arc::new(sums),
            level,
            sequence,
            replaces,
            position,
            writer,
            offsets,
            compacted,
            rows,
            bytes,
            time_range,
            dictionary_meta: std::sync::OnceLock::new(),
        })
    }

    /// What reads of the part open: its local file while there is one, its object otherwise.
    pub(crate) fn file(&self) -> Result<PartFile, HistoryError> {
        match File::open(&self.path) {
            Ok(file) => {
                if let Some(remote) = self.remote() {
                    remote.cache.touch_part(&self.path);
                }
                Ok(PartFile::Local(file))
            }
            Err(_) if self.remote().is_some() => {
                Ok(PartFile::Remote(self.remote().cloned().expect("checked")))
            }
            Err(e) => Err(HistoryError::io(&self.path, e)),
        }
    }

    pub(crate) fn parquet(&self) -> &ParquetMetaData {
        self.meta.metadata()
    }

    /// The number of blocks.
    pub fn blocks(&self) -> usize {
        self.parquet().num_row_groups()
    }

    /// Reads block `index`: the records with time in `[from, to)`, with only the `wanted` fields.
    pub(crate) fn read_block(
        &self,
        index: usize,
        wanted: Option<&[String]>,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<StoredRecord>, HistoryError> {
        let mut out = Vec::new();
        for batch in self.batches(index, wanted, None)? {
            let batch = batch.map_err(|e| HistoryError::parquet(&self.path, e))?;
            columns::decode(
                &batch,
                &self.layouts,
                &self.json_columns,
                wanted,
                from_ms,
                to_ms,
                &mut out,
            )
            .map_err(|e| HistoryError::parquet(&self.path, e))?;
        }
        Ok(out)
    }

    /// A reader of block `index`'s columns that `wanted` needs (with the time and the layout),
    /// of the rows `selection` keeps (all without one).
    fn batches(
        &self,
        index: usize,
        wanted: Option<&[String]>,
        selection: Option<RowSelection>,
    ) -> Result<Batches, HistoryError> {
        let keep = |name: &str| columns::reads_column(name, wanted);
        self.reader(index, &self.meta, keep, 8192, selection)
    }

    /// A reader of block `index`'s columns of `fields` (those the part has), and of its time
    /// column when `time`, [`COLUMN_BATCH_ROWS`] rows at a time; text columns as dictionaries when
    /// `dictionary` (and the file allows it).
    pub(crate) fn column_batches(
        &self,
        index: usize,
        fields: &[String],
        time: bool,
        dictionary: bool,
        selection: Option<RowSelection>,
    ) -> Result<Batches, HistoryError> {
        let meta = match dictionary {
            true => self.dictionary_meta().unwrap_or(&self.meta),
            false => &self.meta,
        };
        let keep = |name: &str| {
            (time && name == TIME_COLUMN) || fields.iter().any(|f| layout::column_name(f) == name)
        };
        self.reader(index, meta, keep, COLUMN_BATCH_ROWS, selection)
    }

    /// A reader of block `index` through the footer `meta`: the columns whose names `keep`
    /// accepts, `batch_size` rows at a time, of the rows `selection` keeps (all without one).
    fn reader(
        &self,
        index: usize,
        meta: &ArrowReaderMetadata,
        keep: impl Fn(&str) -> bool,
        batch_size: usize,
        selection: Option<RowSelection>,
    ) -> Result<Batches, HistoryError> {
        let file = self.file()?;
        let descriptor = meta.metadata().file_metadata().schema_descr_ptr();
        let indices = meta.schema().fields().iter().enumerate();
        let indices: Vec<usize> = indices.filter(|(_, f)| keep(f.name())).map(|(i, _)| i).collect();
        if let PartFile::Remote(object) = &file {
            // the block's column chunks in a few parallel requests, not page by page
            let row_group = meta.metadata().row_group(index);
            let ranges: Vec<(u64, u64)> =
                indices.iter().map(|i| row_group.column(*i).byte_range()).collect();
            object.cache.prefetch(&object.bucket, &object.key, object.size, &ranges)?;
        }
        // the block's pages decompressed by the reading thread's own context ([`chunks`])
        let build = || {
            let mask = ProjectionMask::roots(&descriptor, indices);
            let levels =
                parquet_to_arrow_field_levels(&descriptor, mask, Some(meta.schema().fields()))?;
            let chunks =
                BlockChunks { reader: Arc::new(file), metadata: meta.metadata().clone(), index };
            let rows = chunks.num_rows();
            ParquetRecordBatchReader::try_new_with_row_groups(
                &levels,
                &chunks,
                batch_size.min(rows.max(1)),
                selection,
            )
        };
        let reader = guard(&self.path, build)?.map_err(|e| HistoryError::parquet(&self.path, e))?;
        Ok(Batches::new(reader, &self.path))
    }

    /// The footer with its text columns (not JSON) typed as dictionaries of text.
    fn dictionary_meta(&self) -> Option<&ArrowReaderMetadata> {
        self.dictionary_meta
            .get_or_init(|| {
                use arrow_schema::{DataType, Field, Schema};
                let schema = self.meta.schema();
                let fields: Vec<Field> = schema
                    .fields()
                    .iter()
                    .map(|f| {
                        let json = self.json_columns.iter().any(|c| c == f.name());
                        if *f.data_type() == DataType::Utf8 && !json {
                            let dict = DataType::Dictionary(
                                Box::new(DataType::Int32),
                                Box::new(DataType::Utf8),
                            );
                            f.as_ref().clone().with_data_type(dict)
                        } else {
                            f.as_ref().clone()
                        }
                    })
                    .collect();
                let schema = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
                let options = ArrowReaderOptions::new().with_schema(schema);
                ArrowReaderMetadata::try_new(self.meta.metadata().clone(), options).ok()
            })
            .as_ref()
    }

    /// Block `index`'s rows in `[from, to)` folded into the request's buckets and groups by
    /// the engine's column evaluator ([`needle_engine::columnar`]); `None` when a column it
    /// reads cannot be read that way. `prune`: the WHERE whose page statistics skip pages
    /// ([`crate::pages`]).
    pub(crate) fn summarize_block(
        &self,
        index: usize,
        request: &GroupRequest<'_>,
        prune: Option<&Expr>,
        (from_ms, to_ms): (i64, i64),
        whole: Option<i64>,
    ) -> Result<Option<Vec<BucketSummary>>, HistoryError> {
        let mut summarizer = Summarizer::new(request, from_ms, to_ms, whole);
        let selection =
            pages::selection(&self.meta, &self.json_columns, index, prune, from_ms, to_ms);
        let columns = request.columns();
        let time = whole.is_none() || columns.is_empty();
        for batch in self.column_batches(index, &columns, time, true, selection)? {
            let batch = batch.map_err(|e| HistoryError::parquet(&self.path, e))?;
            if summarizer.add(&batch, &self.json_columns).is_none() {
                return Ok(None);
            }
        }
        Ok(Some(summarizer.finish()))
    }

    /// [`Part::read_block`], handing each record to `f` (one record refilled in place); with a
    /// filter, the rows it proves FALSE or NULL are handed on by their times (a batch at a time,
    /// before any record), their records not built. `prune`: the WHERE whose page statistics
    /// skip pages ([`crate::pages`]): rows of skipped pages are not handed on at all.
    pub(crate) fn visit_block(
        &self,
        index: usize,
        wanted: Option<&[String]>,
        (from_ms, to_ms): (i64, i64),
        prune: Option<&Expr>,
        filter: Option<(&Filter, FailedRows)>,
        f: &mut dyn FnMut(BlockRows<'_>),
    ) -> Result<(), HistoryError> {
        let mut selection =
            pages::selection(&self.meta, &self.json_columns, index, prune, from_ms, to_ms);
        // first the filter's columns: the rows that fail are handed on now, and only the
        // matches are read whole (`None`: a JSON column, every row is read whole)
        let found = match filter {
            Some((filter, failed_rows)) => {
                let range = (from_ms, to_ms);
                self.matches(index, filter, failed_rows, selection.clone(), range, f)?
            }
            None => None,
        };
        let mut known: Option<RecordBatch> = None;
        if let Some(Matches { rows, columns }) = found {
            if !rows.selects_any() {
                return Ok(());
            }
            selection = Some(match selection {
                Some(pages) => pages.and_then(&rows),
                None => rows,
            });
            known = Some(columns);
        }
        // the columns the filter's read decoded are not read again: the matches' values are
        // set beside the other columns' (the time column and the delta-packed ones are the
        // costliest to skip through)
        let known_names: Vec<&str> = match &known {
            Some(k) => k.schema_ref().fields().iter().map(|f| f.name().as_str()).collect(),
            None => Vec::new(),
        };
        let keep = |name: &str| columns::reads_column(name, wanted) && !known_names.contains(&name);
        let (layouts, json) = (&self.layouts, &self.json_columns);
        let mut offset = 0;
        for batch in self.reader(index, &self.meta, keep, 8192, selection)? {
            let mut batch = batch.map_err(|e| HistoryError::parquet(&self.path, e))?;
            if let Some(known) = &known {
                batch = beside(&batch, known, offset)
                    .map_err(|e| HistoryError::parquet(&self.path, e))?;
                offset += batch.num_rows();
            }
            columns::visit(&batch, layouts, json, wanted, (from_ms, to_ms), &mut |t, record| {
                f(BlockRows::Record(t, record))
            })
            .map_err(|e| HistoryError::parquet(&self.path, e))?;
        }
        Ok(())
    }

    /// Of the rows `selection` keeps (all without one), those in `[from, to)` that make
    /// `filter` TRUE: as a selection of those rows, with their values of the columns read here
    /// (the time and the filter's columns, but text read as dictionaries); the times of the rows
    /// in range that do not are handed to `f`, a batch at a time. `None` when the filter cannot
    /// be evaluated over these columns (before `f` is called).
    fn matches(
        &self,
        index: usize,
        filter: &Filter,
        failed_rows: FailedRows,
        selection: Option<RowSelection>,
        (from_ms, to_ms): (i64, i64),
        f: &mut dyn FnMut(BlockRows<'_>),
    ) -> Result<Option<Matches>, HistoryError> {
        let mut selected = Vec::new();
        let mut failed = Vec::new();
        let mut kept: Vec<RecordBatch> = Vec::new();
        let mut handed = false;
        // the times are read to tell the rows in range, or to hand on those that fail; not for
        // a block whose rows all lie in range (its range given as unbounded) when the failures
        // are only counted (the delta-packed times are the costliest column to decode)
        let unbounded = (from_ms, to_ms) == (i64::MIN, i64::MAX);
        let read_times = !unbounded || failed_rows == FailedRows::ByTime;
        for batch in self.column_batches(index, filter.fields(), read_times, true, selection)? {
            let batch = batch.map_err(|e| HistoryError::parquet(&self.path, e))?;
            let Some(keep) = filter.rows(&Columns::of(&batch, &self.json_columns)) else {
                if handed {
                    // (a batch's columns are the block's: the first batch said so already)
                    return Err(HistoryError::parquet(&self.path, "a column changed kind"));
                }
                return Ok(None);
            };
            let times = match read_times {
                true => Some(
                    batch
                        .column_by_name(TIME_COLUMN)
                        .and_then(|a| layout::time_values(a.as_ref()))
                        .ok_or_else(|| HistoryError::parquet(&self.path, "no time column"))?,
                ),
                false => None,
            };
            // the rows in range that pass, and how many in range fail: one pass without a
            // branch; the failed rows' times listed only for a reader that wants them
            let inside = |t: i64| (t >= from_ms) & (t < to_ms);
            let from = selected.len();
            let in_range = match &times {
                Some(times) => {
                    selected.resize(from + keep.len(), false);
                    let mut in_range = 0usize;
                    for ((s, t), k) in selected[from..].iter_mut().zip(times.iter()).zip(&keep) {
                        in_range += usize::from(inside(*t));
                        *s = *k & inside(*t);
                    }
                    in_range
                }
                None => {
                    selected.extend_from_slice(&keep);
                    keep.len()
                }
            };
            let passed = &selected[from..];
            let passes = passed.iter().filter(|s| **s).count();
            if in_range > passes {
                handed = true;
                match (failed_rows, &times) {
                    (FailedRows::ByTime, Some(times)) => {
                        failed.clear();
                        let rows = times.iter().zip(&keep);
                        failed.extend(rows.filter(|(t, k)| !**k && inside(**t)).map(|(t, _)| *t));
                        f(BlockRows::Failed(&failed));
                    }
                    _ => f(BlockRows::FailedCount(in_range - passes)),
                }
            }
            if passes == 0 {
                continue;
            }
            let passed = arrow_array::BooleanArray::new(
                arrow_buffer::BooleanBuffer::collect_bool(passed.len(), |i| passed[i]),
                None,
            );
            let plain = plain_columns(&batch).map_err(|e| HistoryError::parquet(&self.path, e))?;
            let matched = arrow_select::filter::filter_record_batch(&plain, &passed)
                .map_err(|e| HistoryError::parquet(&self.path, e))?;
            kept.push(matched);
        }
        let columns = match kept.first() {
            Some(first) => arrow_select::concat::concat_batches(first.schema_ref(), &kept)
                .map_err(|e| HistoryError::parquet(&self.path, e))?,
            None => RecordBatch::new_empty(Arc::new(arrow_schema::Schema::empty())),
        };
        Ok(Some(Matches { rows: selection_of(&selected), columns }))
    }

    /// Every record of the part (a merge's input).
    pub(crate) fn read_all(&self) -> Result<Vec<StoredRecord>, HistoryError> {
        let mut out = Vec::with_capacity(self.rows as usize);
        for block in 0..self.blocks() {
            out.extend(self.read_block(block, None, i64::MIN, i64::MAX)?);
        }
        Ok(out)
    }
}

/// What a filter's read of a block found ([`Part::matches`]).
struct Matches {
    /// Of the rows read, those that pass.
    rows: RowSelection,
    /// Their values of the columns read that a record reads as they are (not the dictionaries).
    columns: RecordBatch,
}

/// `batch` without its columns of text read as dictionaries (a record reads text).
fn plain_columns(batch: &RecordBatch) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let schema = batch.schema_ref();
    let plain: Vec<usize> = (0..schema.fields().len())
        .filter(|i| !matches!(schema.field(*i).data_type(), arrow_schema::DataType::Dictionary(..)))
        .collect();
    batch.project(&plain)
}

/// `batch` with the rows `offset..` of `known`'s columns beside its own (as many rows).
fn beside(
    batch: &RecordBatch,
    known: &RecordBatch,
    offset: usize,
) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let rows = batch.num_rows();
    if offset + rows > known.num_rows() {
        return Err(arrow_schema::ArrowError::InvalidArgumentError(
            "the matches read again are more than the filter found".into(),
        ));
    }
    let mut fields: Vec<arrow_schema::FieldRef> = batch.schema_ref().fields().to_vec();
    let mut columns = batch.columns().to_vec();
    fields.extend(known.schema_ref().fields().iter().cloned());
    columns.extend(known.columns().iter().map(|c| c.slice(offset, rows)));
    let schema = Arc::new(arrow_schema::Schema::new(fields));
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema, columns, &options)
}

/// The rows marked true as a Parquet row selection (a selector per stretch).
fn selection_of(rows: &[bool]) -> RowSelection {
    use needle_engine::columnar::filter::stretch_end;
    use parquet::arrow::arrow_reader::RowSelector;
    let mut selectors = Vec::new();
    let mut start = 0;
    while start < rows.len() {
        let end = stretch_end(rows, start, rows[start]);
        selectors.push(match rows[start] {
            true => RowSelector::select(end - start),
            false => RowSelector::skip(end - start),
        });
        start = end;
    }
    selectors.into()
}
