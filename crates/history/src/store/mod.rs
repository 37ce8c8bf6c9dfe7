//! [`Store`]: the write buffer, the partitions and their parts on disk, flushes, merges,
//! retention, and scans that prune blocks by their zone maps.
//!
//! ```text
//! DIR/p=<partition start ms>/part-<sequence>-L<level>.parquet
//! ```
//! - **Writes**: [`Store::append`] puts records (with their time) in the write buffer;
//!   [`Store::flush`] writes each partition's share as a sorted part and makes it durable
//!   (temporary name, fsync, rename, fsync of the directory). While a flush writes, its records
//!   stay visible to scans; they leave the buffer's view in the same step the new parts join.
//! - **Merges** ([`Store::maintain`]): when a partition holds [`MERGE_FANIN`] parts of one
//!   level, they are read, sorted together and written as one part of the next level, which
//!   names them in its metadata; then they are removed. A crash between the rename and the
//!   removals leaves both: [`Store::open`] removes the parts a present part replaces, so every
//!   record is there exactly once. Leftover temporary files are removed too.
//! - **Retention**: whole partitions go, oldest first, past `retention_ms` or `max_bytes`; on
//!   object storage, other writers' parts past `retention_ms` go too (a writer that never
//!   comes back does not keep its past forever).
//! - **Reads** ([`Store::scan`]): the parts of partitions that overlap the range, their blocks
//!   whose time range overlaps it and whose statistics do not rule out the filter, and the
//!   buffered records in range. A part that cannot be read is skipped, logged once and counted;
//!   it never stops a read.
//! - **Faults**: a flush that fails (a full disk) keeps its records in the buffer, marks the
//!   store [`Health::WritesStopped`], and is tried again on the next flush; the buffer is then
//!   bounded (`max_buffer_records`), and what does not fit is dropped and counted.

mod buffer;
mod orphans;
mod remote;
mod table;

pub use remote::{RemoteCounters, RemoteInfo};

use crate::columns::{ColumnBuffer, ColumnChunk, StoredRecord};
use crate::config::{partition_of, StoreConfig};
use crate::offsets::OffsetRanges;
use crate::part::{self, Part, PartHeader};
use crate::prune::{self, Zone};
use crate::HistoryError;
use buffer::{Incoming, WriteBuffer};
use needle_engine::columnar::layout::{column_name, TIME_COLUMN};
use needle_engine::columnar::{BucketSummary, ColumnStats, Filter, GroupRequest};
use needle_query::ast::Expr;
use needle_record::{Record, Value};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use crate::part::{BlockRows, FailedRows};

/// Parts of one level a merge combines.
pub const MERGE_FANIN: usize = 4;
/// Parts one merge of [`Store::compact`] combines (each input holds a batch in memory).
pub const COMPACT_FANIN: usize = 64;
/// A merge that cannot stream (a sort field holding values of mixed types) never reads more
/// records than this at once: it holds them in memory (larger partitions keep more parts).
pub const MERGE_MAX_RECORDS: u64 = 2_000_000;

/// What the store has done, for metrics.
#[derive(Debug, Default)]
pub struct Counters {
    /// Records written to parts by flushes.
    pub records_written: AtomicU64,
    /// Bytes of parts written (flushes and merges).
    pub bytes_written: AtomicU64,
    pub parts_flushed: AtomicU64,
    pub merges: AtomicU64,
    /// Files skipped because they could not be read as parts.
    pub corrupt_files: AtomicU64,
    /// Records kept with their arrival time: no usable time field.
    pub missing_time: AtomicU64,
    /// Records dropped: the write buffer was full while writes were stopped.
    pub dropped_records: AtomicU64,
    pub flush_errors: AtomicU64,
}

/// Whether the store is taking writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    Ok,
    /// Writes fail (a full disk, an I/O error); records wait in the buffer, reads go on.
    WritesStopped {
        reason: String,
    },
}

impl Health {
    pub fn is_ok(&self) -> bool {
        matches!(self, Health::Ok)
    }
}

/// What a flush did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FlushReport {
    pub records: u64,
    pub parts: u64,
    pub bytes: u64,
}

/// What one round of background work did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MaintainReport {
    pub merges: u64,
    pub parts_removed: u64,
    pub partitions_dropped: u64,
    /// Files of the table no version names, deleted ([`Store::sweep_orphans`]).
    pub orphans_deleted: u64,
}

/// A store of history. Cheap to clone; share it between threads.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("dir", &self.inner.config.dir).finish_non_exhaustive()
    }
}

struct Inner {
    config: StoreConfig,
    read_only: bool,
    state: Mutex<State>,
    /// Held by a flush or a merge: one writer of parts at a time.
    writing: Mutex<()>,
    counters: Counters,
    health: Mutex<Health>,
    /// Files already reported as unreadable (each is logged once).
    reported: Mutex<HashSet<PathBuf>>,
    /// Scans whose blocks may still be read (each holds a [`Lease`]).
    leases: Arc<AtomicU64>,
    /// Parts a merge replaced, and since when: removed once no scan can read them and, in a
    /// store that is an Iceberg table, `delete_grace_ms` has passed.
    doomed: Mutex<Vec<(PathBuf, Instant)>>,
    /// A local store's Iceberg table ([`table`]), when `config.commit_ms` is set.
    table: Option<table::LocalTable>,
    /// The object store the store lives in, when `config.remote` names one.
    remote: Option<remote::Remote>,
    /// When [`Store::sweep_orphans`] last ran.
    swept_at: Mutex<Option<Instant>>,
    /// The REST catalog the table is kept registered in, when `config.catalog` names one.
    rest: Option<crate::rest::RestCatalog>,
}

/// A scan's hold on the parts it saw: while any is alive, merged-away parts stay on disk.
#[derive(Debug)]
struct Lease(Arc<AtomicU64>);

impl Drop for Lease {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Default)]
struct State {
    buffer: WriteBuffer,
    /// Rows a flush is writing: visible to scans until their parts join `parts`.
    flushing: Arc<WriteBuffer>,
    /// Position after the last appended records.
    position: Option<String>,
    /// The source offsets the buffer's records came from ([`crate::offsets`]).
    offsets: OffsetRanges,
    durable_position: Option<String>,
    /// The position after the records of the last flush that wrote parts (on a store on object
    /// storage: durable once no part written here waits for upload).
    flushed_position: Option<String>,
    /// Parts by partition start.
    parts: BTreeMap<i64, Vec<Part>>,
    next_sequence: u64,
}

/// A time field's value as epoch milliseconds: a number (floored), or RFC 3339 text.
fn time_ms(value: &Value) -> Option<i64> {
    match value {
        Value::Long(ms) => Some(*ms),
        Value::Int(ms) => Some(i64::from(*ms)),
        Value::Double(ms) if ms.is_finite() => Some(*ms as i64),
        Value::Float(ms) if ms.is_finite() => Some(*ms as i64),
        Value::String(text) => {
            chrono::DateTime::parse_from_rfc3339(text).ok().map(|t| t.timestamp_millis())
        }
        _ => None,
    }
}

/// Which records a scan wants.
#[derive(Debug, Clone, Default)]
pub struct ScanRequest {
    /// `[from, to)`, record time in ms.
    pub from_ms: i64,
    pub to_ms: i64,
    /// The query's WHERE, used only to skip blocks that cannot match.
    pub filter: Option<Expr>,
    /// Top-level fields needed; `None`: whole records.
    pub fields: Option<Vec<String>>,
}

/// How much a scan reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScanStats {
    pub partitions: u64,
    pub parts: u64,
    pub blocks_in_range: u64,
    pub blocks_skipped_minmax: u64,
    pub blocks_skipped_bloom: u64,
    pub blocks_to_read: u64,
    pub buffered_records: u64,
    pub corrupt_files: u64,
    /// On a store several writers share: parts of other writers this scan read (dealt to it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub parts_of_others: u64,
    /// On a store several writers share: 1 for a scan planned from a manifest version (summed
    /// over the workers of a distributed read).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub planned: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ScanStats {
    /// Adds another scan's figures (another store's, in the distributed mode).
    pub fn add(&mut self, other: &ScanStats) {
        self.partitions += other.partitions;
        self.parts += other.parts;
        self.blocks_in_range += other.blocks_in_range;
        self.blocks_skipped_minmax += other.blocks_skipped_minmax;
        self.blocks_skipped_bloom += other.blocks_skipped_bloom;
        self.blocks_to_read += other.blocks_to_read;
        self.buffered_records += other.buffered_records;
        self.corrupt_files += other.corrupt_files;
        self.parts_of_others += other.parts_of_others;
        self.planned += other.planned;
    }
}

/// The blocks a query reads, and the buffered records in its range.
pub struct Scan {
    pub blocks: Vec<Block>,
    pub buffered: Vec<StoredRecord>,
    pub stats: ScanStats,
}

/// One block (row group) of one part, with the scan's range and fields.
#[derive(Debug, Clone)]
pub struct Block {
    part: Arc<Part>,
    _lease: Arc<Lease>,
    index: usize,
    from_ms: i64,
    to_ms: i64,
    fields: Option<Arc<Vec<String>>>,
    /// The scan's WHERE, whose page statistics skip pages inside the block.
    prune: Option<Arc<Expr>>,
}

impl Block {
    /// The block's records in the scan's range, with the scan's fields.
    pub fn read(&self) -> Result<Vec<StoredRecord>, HistoryError> {
        self.part.read_block(
            self.index,
            self.fields.as_deref().map(Vec::as_slice),
            self.from_ms,
            self.to_ms,
        )
    }

    /// [`Block::read`], handing each record to `f` as it is decoded: one record is refilled in
    /// place from row to row (copy what must outlive the call).
    pub fn for_each(&self, mut f: impl FnMut(i64, &Record)) -> Result<(), HistoryError> {
        self.for_each_matching(None, |rows| {
            if let BlockRows::Record(time_ms, record) = rows {
                f(time_ms, record)
            }
        })
    }

    /// [`Block::for_each`] with the rows that `filter` proves FALSE or NULL handed on by their
    /// times or counted (as `filter`'s [`FailedRows`] says), a batch at a time, their records
    /// not built: every row in range comes once.
    pub fn for_each_matching(
        &self,
        filter: Option<(&Filter, FailedRows)>,
        mut f: impl FnMut(BlockRows<'_>),
    ) -> Result<(), HistoryError> {
        // a block wholly in range is read with its range unbounded: no row's time need be
        // checked (nor read, for failures only counted)
        let range = match self.fully_in_range() {
            true => (i64::MIN, i64::MAX),
            false => (self.from_ms, self.to_ms),
        };
        self.part.visit_block(
            self.index,
            self.fields.as_deref().map(Vec::as_slice),
            range,
            self.prune.as_deref(),
            filter,
            &mut f,
        )
    }

    /// The block's rows in the scan's range folded column at a time into the request's time
    /// buckets and groups ([`needle_engine::columnar`]), with no record built; `None` when a column the
    /// request reads cannot be read that way (JSON text): read the records then.
    pub fn summarize(
        &self,
        request: &GroupRequest<'_>,
    ) -> Result<Option<Vec<BucketSummary>>, HistoryError> {
        let range = (self.from_ms, self.to_ms);
        // wholly in range and in one bucket: the block's times need not be read
        let whole =
            (request.bucket.is_none() && self.fully_in_range()).then(|| self.time_range().1);
        self.part.summarize_block(self.index, request, self.prune.as_deref(), range, whole)
    }

    /// Records in the block (in range or not).
    pub fn rows(&self) -> u64 {
        self.part.parquet().row_group(self.index).num_rows().max(0) as u64
    }

    /// The earliest and latest record time in the block.
    pub fn time_range(&self) -> (i64, i64) {
        let zone = BlockZone { part: &self.part, index: self.index, bloom: None };
        zone.times().unwrap_or(self.part.time_range)
    }

    /// Every row of the block lies in the scan's range.
    pub fn fully_in_range(&self) -> bool {
        let (lo, hi) = self.time_range();
        lo >= self.from_ms && hi < self.to_ms
    }

    /// A column's statistics over the block: min, max, counts, and the sum of a numeric one.
    pub fn column_stats(&self, field: &str) -> Option<ColumnStats> {
        BlockZone { part: &self.part, index: self.index, bloom: None }.stats(field).flatten()
    }
}

/// Fetches ahead, in parallel, the column chunks (of their scan's fields) of the blocks in
/// `blocks` that are read from an object store, into its cache: a cold read of many blocks then
/// waits for one round of requests, not a request per block in turn. Blocks on this machine's
/// disk are left alone, and so is a set of blocks larger than half the cache. A failure here
/// only costs the blocks their own fetches.
pub fn prefetch(blocks: &[&Block]) -> Result<(), HistoryError> {
    let mut by_object: BTreeMap<String, (crate::object::reader::RemoteObject, Vec<(u64, u64)>)> =
        BTreeMap::new();
    for block in blocks {
        let Some(object) = block.part.remote() else { continue };
        if block.part.path.exists() {
            continue;
        }
        let schema = block.part.meta.schema();
        let row_group = block.part.parquet().row_group(block.index);
        let fields = block.fields.as_deref().map(Vec::as_slice);
        let wanted = |name: &str| crate::columns::reads_column(name, fields);
        let entry =
            by_object.entry(object.key.clone()).or_insert_with(|| (object.clone(), Vec::new()));
        for (i, field) in schema.fields().iter().enumerate() {
            if wanted(field.name()) {
                entry.1.push(row_group.column(i).byte_range());
            }
        }
    }
    for (object, ranges) in by_object.into_values() {
        let bytes: u64 = ranges.iter().map(|(_, length)| length).sum();
        if bytes > object.cache.budget() / 2 {
            continue;
        }
        object.cache.prefetch(&object.bucket, &object.key, object.size, &ranges)?;
    }
    Ok(())
}

/// A block's zone map, with the part's file open for bloom filters when a filter needs them.
struct BlockZone<'a> {
    part: &'a Part,
    index: usize,
    bloom: Option<&'a crate::object::reader::PartFile>,
}

impl BlockZone<'_> {
    fn rows(&self) -> u64 {
        self.part.parquet().row_group(self.index).num_rows().max(0) as u64
    }
}

impl BlockZone<'_> {
    /// The earliest and latest record time in the block, from its time column's statistics.
    fn times(&self) -> Option<(i64, i64)> {
        // the time column by its own name (a field's name would be escaped: [`column_name`])
        match self.column(TIME_COLUMN) {
            Some(Some(ColumnStats {
                min: Some(Value::Long(lo)),
                max: Some(Value::Long(hi)),
                ..
            })) => Some((lo, hi)),
            _ => None,
        }
    }

    /// [`Zone::stats`] of a column by its name.
    fn column(&self, column: &str) -> Option<Option<ColumnStats>> {
        let schema = self.part.meta.schema();
        let position = schema.index_of(column).ok()?;
        let json = self.part.json_columns.iter().any(|c| c == column);
        let Some(kind) = prune::kind_of(schema.field(position).data_type(), json) else {
            return Some(None);
        };
        let chunk = self.part.parquet().row_group(self.index).column(position);
        let Some(statistics) = chunk.statistics() else { return Some(None) };
        let rows = self.rows();
        let null_count = statistics.null_count_opt().unwrap_or(0);
        let (min, max) = prune::stats_values(kind, statistics);
        let sum = self
            .part
            .sums
            .get(column)
            .and_then(|blocks| blocks.get(self.index))
            .map(|(_, sum)| *sum);
        Some(Some(ColumnStats {
            min,
            max,
            count: rows.saturating_sub(null_count),
            null_count,
            sum,
        }))
    }
}

impl Zone for BlockZone<'_> {
    fn stats(&self, field: &str) -> Option<Option<ColumnStats>> {
        self.column(&column_name(field))
    }

    fn might_contain(&self, field: &str, value: &Value) -> bool {
        let Some(file) = self.bloom else { return true };
        let column = column_name(field);
        let Ok(position) = self.part.meta.schema().index_of(&column) else { return true };
        let chunk = self.part.parquet().row_group(self.index).column(position);
        let Ok(Some(filter)) = parquet::bloom_filter::Sbbf::read_from_column_chunk(chunk, file)
        else {
            return true;
        };
        match value {
            Value::String(s) => filter.check(&s.as_str()),
            Value::Long(v) => filter.check(v),
            Value::Int(v) if chunk.column_type() == parquet::basic::Type::INT64 => {
                filter.check(&i64::from(*v))
            }
            Value::Int(v) => filter.check(v),
            _ => true,
        }
    }
}

impl Store {
    /// Opens (creating it when missing) the store in `config.dir` for reading and writing: cleans
    /// up temporary files and the parts a merge replaced, and skips (logs, counts) files that
    /// are not readable parts.
    pub fn open(config: StoreConfig) -> Result<Store, HistoryError> {
        std::fs::create_dir_all(&config.dir).map_err(|e| HistoryError::io(&config.dir, e))?;
        Self::open_as(config, false)
    }

    /// Opens an existing store for reading only (while another process may write it): nothing
    /// on disk is changed.
    pub fn open_read_only(config: StoreConfig) -> Result<Store, HistoryError> {
        Self::open_as(config, true)
    }

    fn open_as(config: StoreConfig, read_only: bool) -> Result<Store, HistoryError> {
        let remote = match &config.remote {
            Some(remote) => {
                std::fs::create_dir_all(&config.dir)
                    .map_err(|e| HistoryError::io(&config.dir, e))?;
                let every = Duration::from_millis(config.commit_ms.unwrap_or(0));
                Some(remote::Remote::open(remote, &config.dir, read_only, every)?)
            }
            None => None,
        };
        let table = match (&config.remote, config.commit_ms) {
            (None, Some(every)) => table::LocalTable::open(&config.dir, every, read_only)?,
            _ => None,
        };
        let rest = table::open_rest_catalog(&config, read_only)?;
        let store = Store {
            inner: Arc::new(Inner {
                read_only,
                state: Mutex::new(State::default()),
                writing: Mutex::new(()),
                counters: Counters::default(),
                health: Mutex::new(Health::Ok),
                reported: Mutex::new(HashSet::new()),
                leases: Arc::new(AtomicU64::new(0)),
                doomed: Mutex::new(Vec::new()),
                table,
                remote,
                rest,
                config,
                swept_at: Mutex::new(None),
            }),
        };
        store.load()?;
        store.load_remote()?;
        // what a crash left out of the table joins it
        store.commit_table(true)?;
        if let Err(error) = store.sweep_orphans() {
            eprintln!("needle: history: looking for orphan files failed: {error}");
        }
        Ok(store)
    }

    /// Reads every partition's parts from disk.
    fn load(&self) -> Result<(), HistoryError> {
        let dir = &self.inner.config.dir;
        let mut parts: BTreeMap<i64, Vec<Part>> = BTreeMap::new();
        let mut next_sequence = 0;
        let mut durable: Option<(u64, String)> = None;
        let mut all: Vec<(i64, Vec<Part>)> = Vec::new();
        for (start, partition) in list_partitions(dir)? {
            let mut found = Vec::new();
            for entry in read_dir(&partition)? {
                let name = entry.file_name().to_string_lossy().into_owned();
                let path = entry.path();
                if name.starts_with(".tmp-") {
                    if !self.inner.read_only {
                        let _ = std::fs::remove_file(&path);
                    }
                    continue;
                }
                if !name.ends_with(".parquet") {
                    continue;
                }
                match Part::open(&path) {
                    Ok(part) => found.push(part),
                    Err(error) => self.corrupt(&path, &error),
                }
            }
            all.push((start, found));
        }
        // a merge's inputs that outlived it (a crash before their removal); a compaction's
        // inputs are in other partitions than the part that replaces them
        let replaced: HashSet<String> = all
            .iter()
            .flat_map(|(_, f)| f.iter().flat_map(|p| p.replaces.iter().cloned()))
            .collect();
        for (start, mut found) in all {
            found.retain(|p| {
                if replaced.contains(&p.name) {
                    if !self.inner.read_only {
                        let _ = std::fs::remove_file(&p.path);
                    }
                    return false;
                }
                true
            });
            for p in &found {
                next_sequence = next_sequence.max(p.sequence + 1);
                if let Some(position) = &p.position {
                    if durable.as_ref().is_none_or(|(s, _)| p.sequence > *s) {
                        durable = Some((p.sequence, position.clone()));
                    }
                }
            }
            found.sort_by_key(|p| p.sequence);
            if !found.is_empty() {
                parts.insert(start, found);
            }
        }
        let mut state = self.state();
        state.parts = parts;
        state.next_sequence = next_sequence;
        state.durable_position = durable.map(|(_, p)| p);
        Ok(())
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A file that is not a readable part: logged once, counted, skipped.
    fn corrupt(&self, path: &Path, error: &HistoryError) {
        let first =
            self.inner.reported.lock().unwrap_or_else(|e| e.into_inner()).insert(path.to_owned());
        if first {
            self.inner.counters.corrupt_files.fetch_add(1, Ordering::Relaxed);
            eprintln!("needle: history: skipping {}: {error}", path.display());
        }
    }

    pub fn config(&self) -> &StoreConfig {
        &self.inner.config
    }

    pub fn counters(&self) -> &Counters {
        &self.inner.counters
    }

    pub fn health(&self) -> Health {
        self.health_mut().clone()
    }

    fn health_mut(&self) -> MutexGuard<'_, Health> {
        self.inner.health.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The source position after the last record made durable.
    pub fn durable_position(&self) -> Option<String> {
        self.state().durable_position.clone()
    }

    /// Per source stream, the offset after the last record the store keeps: over this
    /// writer's parts (written, if not all uploaded yet), and on object storage over the
    /// newest manifest's record of every writer's uploads, read now. A source that takes a
    /// stream over reads the records before it without keeping them again.
    pub fn kept_offsets(&self) -> Result<BTreeMap<String, i64>, HistoryError> {
        let mut kept = BTreeMap::new();
        for part in self.state().parts.values().flatten() {
            crate::offsets::raise(&mut kept, &part.offsets);
        }
        if let Some(remote) = self.remote() {
            let manifest = crate::manifest::Manifest::load(&remote.bucket)?;
            for (stream, k) in &manifest.offsets {
                let slot = kept.entry(stream.clone()).or_insert(k.next);
                *slot = (*slot).max(k.next);
            }
        }
        Ok(kept)
    }

    /// A record's time: its time field, or `arrival_ms` (counted).
    fn time_of(&self, record: &Record, arrival_ms: i64) -> i64 {
        let time = self.inner.config.time_field.as_ref().and_then(|f| record.get(f));
        time.and_then(time_ms).unwrap_or_else(|| {
            self.inner.counters.missing_time.fetch_add(1, Ordering::Relaxed);
            arrival_ms
        })
    }

    /// Appends records (each with its arrival time, ms) to the write buffer; `position` is the
    /// source position after them. A buffer past `max_buffer_records` is flushed now; while
    /// writes are stopped, what does not fit is dropped and counted.
    pub fn append(
        &self,
        records: impl IntoIterator<Item = (Record, i64)>,
        position: Option<String>,
    ) -> Result<(), HistoryError> {
        self.append_from(records, position, &OffsetRanges::new())
    }

    /// [`Store::append`], with the source offsets the records came from (per stream, their
    /// range): the parts they are flushed into say so, and [`Store::kept_offsets`] tells a
    /// source which of its records are kept already.
    pub fn append_from(
        &self,
        records: impl IntoIterator<Item = (Record, i64)>,
        position: Option<String>,
        offsets: &OffsetRanges,
    ) -> Result<(), HistoryError> {
        if self.inner.read_only {
            return Err(HistoryError::ReadOnly);
        }
        let keep = self.inner.config.fields.as_ref();
        let incoming: Vec<StoredRecord> = records
            .into_iter()
            .map(|(mut record, arrival)| {
                let time_ms = self.time_of(&record, arrival);
                if keep.is_some() {
                    let fields: needle_record::Map =
                        record.into_map().into_iter().filter(|(k, _)| self.keeps(k)).collect();
                    record = Record::from_map(fields);
                }
                StoredRecord { time_ms, record }
            })
            .collect();
        self.buffer(vec![Incoming::Records(incoming)], position, offsets)
    }

    /// Appends rows given as columns (batches of them, each row's fields its columns that are
    /// not NULL, in order: see [`ColumnChunk`]), read at `arrival_ms`: [`Store::append_from`]
    /// for events a source or pusher gathered as columns, kept as columns on their way to a part.
    /// Each row's time is its time field (as [`Store::append`] reads it), else `arrival_ms`.
    pub fn append_columns(
        &self,
        batches: &[arrow_array::RecordBatch],
        arrival_ms: i64,
        position: Option<String>,
        offsets: &OffsetRanges,
    ) -> Result<(), HistoryError> {
        if self.inner.read_only {
            return Err(HistoryError::ReadOnly);
        }
        let mut chunks = Vec::with_capacity(batches.len());
        for batch in batches {
            let batch = match self.inner.config.fields {
                None => batch.clone(),
                Some(_) => {
                    let schema = batch.schema();
                    let kept: Vec<usize> = (0..schema.fields().len())
                        .filter(|&i| self.keeps(schema.field(i).name()))
                        .collect();
                    let dir = &self.inner.config.dir;
                    batch.project(&kept).map_err(|e| HistoryError::parquet(dir, e))?
                }
            };
            let times = self.times_of_column(&batch, arrival_ms);
            chunks.push(Incoming::Columns(ColumnChunk { batch, times }));
        }
        self.buffer(chunks, position, offsets)
    }

    /// Each row's time from the time field's column (see [`Store::time_of`]).
    fn times_of_column(
        &self,
        batch: &arrow_array::RecordBatch,
        arrival_ms: i64,
    ) -> arrow_buffer::ScalarBuffer<i64> {
        use arrow_array::cast::AsArray;
        use arrow_array::types::Int64Type;
        use arrow_array::Array;
        let rows = batch.num_rows();
        let column = self.inner.config.time_field.as_ref().and_then(|f| batch.column_by_name(f));
        let mut missing = 0u64;
        let times = match column {
            // epoch milliseconds in every row (a protocol's points): the column itself, shared
            Some(array)
                if *array.data_type() == arrow_schema::DataType::Int64
                    && array.null_count() == 0 =>
            {
                return array.as_primitive::<Int64Type>().values().clone();
            }
            Some(array) => (0..rows)
                .map(|row| {
                    time_ms(&crate::columns::value_at(array.as_ref(), row)).unwrap_or_else(|| {
                        missing += 1;
                        arrival_ms
                    })
                })
                .collect(),
            None => {
                missing = rows as u64;
                vec![arrival_ms; rows]
            }
        };
        if missing > 0 {
            self.inner.counters.missing_time.fetch_add(missing, Ordering::Relaxed);
        }
        times.into()
    }

    /// Adds `incoming` to the write buffer, all at once (see [`Store::append`]).
    fn buffer(
        &self,
        incoming: Vec<Incoming>,
        position: Option<String>,
        offsets: &OffsetRanges,
    ) -> Result<(), HistoryError> {
        let full = {
            let mut state = self.state();
            let stopped = !self.health().is_ok();
            for mut incoming in incoming {
                let room = self.inner.config.max_buffer_records.saturating_sub(state.buffer.len());
                if stopped && incoming.len() > room {
                    let dropped = (incoming.len() - room) as u64;
                    incoming.truncate(room);
                    self.inner.counters.dropped_records.fetch_add(dropped, Ordering::Relaxed);
                }
                state.buffer.push(incoming);
            }
            crate::offsets::widen(&mut state.offsets, offsets);
            if position.is_some() {
                state.position = position;
            }
            !stopped && state.buffer.len() >= self.inner.config.max_buffer_records
        };
        if full {
            self.flush()?;
        }
        Ok(())
    }

    /// Makes everything appended so far durable: one sorted part per partition touched.
    pub fn flush(&self) -> Result<FlushReport, HistoryError> {
        if self.inner.read_only {
            return Err(HistoryError::ReadOnly);
        }
        let _writing = self.inner.writing.lock().unwrap_or_else(|e| e.into_inner());
        if self.inner.remote.is_some() {
            // parts waiting for upload go first; past their bound, no new part is written
            self.sync_remote(false)?;
            if let Some(reason) = self.remote_stopped() {
                self.inner.counters.flush_errors.fetch_add(1, Ordering::Relaxed);
                *self.health_mut() = Health::WritesStopped { reason: reason.clone() };
                return Err(HistoryError::Object {
                    location: self
                        .inner
                        .config
                        .remote
                        .as_ref()
                        .map(|r| r.url.clone())
                        .unwrap_or_default(),
                    message: reason,
                });
            }
        }
        let durable_on_upload =
            self.inner.config.remote.as_ref().is_some_and(|r| r.durable_on_upload);
        let (records, position, offsets) = {
            let mut state = self.state();
            if state.buffer.is_empty() {
                let all_uploaded = self.inner.remote.is_none()
                    || state.parts.values().flatten().all(|p| p.remote().is_some());
                if !durable_on_upload || all_uploaded {
                    state.durable_position =
                        state.position.clone().or(state.durable_position.take());
                }
                if state.position.is_some() {
                    state.flushed_position = state.position.clone();
                }
                return Ok(FlushReport::default());
            }
            let records = Arc::new(std::mem::take(&mut state.buffer));
            state.flushing = records.clone();
            (records, state.position.clone(), std::mem::take(&mut state.offsets))
        };
        let result = self.write_buffer(records.to_columns(), position.clone(), &offsets);
        let mut state = self.state();
        match result {
            Ok((parts, report)) => {
                for (start, part) in parts {
                    state.parts.entry(start).or_default().push(part);
                }
                state.flushing = Arc::default();
                if position.is_some() {
                    state.flushed_position = position.clone();
                    if !durable_on_upload {
                        state.durable_position = position;
                    }
                }
                drop(state);
                *self.health_mut() = Health::Ok;
                self.count_written(&report);
                self.sync_remote(false)?;
                self.commit_table(false)?;
                Ok(report)
            }
            Err(error) => {
                // back into the buffer, ahead of what came meanwhile; tried again next flush
                let mut kept = Arc::try_unwrap(std::mem::take(&mut state.flushing))
                    .unwrap_or_else(|a| (*a).clone());
                kept.append(&mut state.buffer);
                state.buffer = kept;
                crate::offsets::widen(&mut state.offsets, &offsets);
                drop(state);
                self.inner.counters.flush_errors.fetch_add(1, Ordering::Relaxed);
                *self.inner.health.lock().unwrap_or_else(|e| e.into_inner()) =
                    Health::WritesStopped { reason: error.to_string() };
                Err(error)
            }
        }
    }

    /// Writes `buffer` as one sorted part per partition its records fall in; each part says
    /// the source offsets of the whole flush (a part of it alone never reaches the manifest).
    fn write_buffer(
        &self,
        buffer: ColumnBuffer,
        position: Option<String>,
        offsets: &OffsetRanges,
    ) -> Result<(Vec<(i64, Part)>, FlushReport), HistoryError> {
        let config = &self.inner.config;
        let by_partition = buffer
            .sorted_by_partition(&config.sort_by, Some(config.partition_ms))
            .map_err(|e| HistoryError::parquet(&config.dir, e))?;
        let mut written = Vec::new();
        let mut report = FlushReport::default();
        let count = by_partition.len();
        for (i, (start, encoded)) in by_partition.into_iter().enumerate() {
            let dir = partition_dir(&config.dir, start);
            std::fs::create_dir_all(&dir).map_err(|e| HistoryError::io(&dir, e))?;
            if i == 0 {
                part::sync_dir(&config.dir)?;
            }
            let sequence = self.take_sequence();
            // the position goes with the last part written: all of it is durable then
            let header = PartHeader {
                sequence,
                level: 0,
                replaces: Vec::new(),
                position: if i + 1 == count { position.clone() } else { None },
                writer: self.writer(),
                offsets: offsets.clone(),
                compacted: false,
                field_ids: self.field_ids(),
            };
            let rows = encoded.num_rows() as u64;
            let part = part::write(&dir, &encoded, config, &header)?;
            report.records += rows;
            report.parts += 1;
            report.bytes += part.bytes;
            written.push((start, part));
        }
        Ok((written, report))
    }

    /// Writes records gathered as columns (a [`ColumnBuffer`] of records [`Store::prepare`]d) straight into parts,
    /// one per partition they fall in, durable when this returns: the way to load a lot at
    /// once (`needle ingest`), with no write buffer of records in between.
    pub fn write_columns(&self, buffer: ColumnBuffer) -> Result<FlushReport, HistoryError> {
        if self.inner.read_only {
            return Err(HistoryError::ReadOnly);
        }
        if buffer.is_empty() {
            return Ok(FlushReport::default());
        }
        let _writing = self.inner.writing.lock().unwrap_or_else(|e| e.into_inner());
        let (parts, report) = self.write_buffer(buffer, None, &OffsetRanges::new())?;
        let mut state = self.state();
        for (start, part) in parts {
            state.parts.entry(start).or_default().push(part);
        }
        drop(state);
        self.count_written(&report);
        self.sync_remote(false)?;
        Ok(report)
    }

    /// Counts new parts written by a flush or [`Store::write_columns`].
    fn count_written(&self, report: &FlushReport) {
        let c = &self.inner.counters;
        c.records_written.fetch_add(report.records, Ordering::Relaxed);
        c.bytes_written.fetch_add(report.bytes, Ordering::Relaxed);
        c.parts_flushed.fetch_add(report.parts, Ordering::Relaxed);
    }

    /// Whether the store keeps a record's field `key`: every field, or those of `fields` and
    /// the time field.
    fn keeps(&self, key: &str) -> bool {
        let config = &self.inner.config;
        config.fields.as_ref().is_none_or(|keep| keep.iter().any(|f| f == key))
            || config.time_field.as_deref() == Some(key)
    }

    /// The time [`Store::write_columns`] and [`Store::append`] give `record` (its time field,
    /// else `arrival_ms`), and the record as the store keeps it (`fields` applied).
    pub fn prepare<'r>(
        &self,
        record: &'r Record,
        arrival_ms: i64,
    ) -> (i64, std::borrow::Cow<'r, Record>) {
        let time_ms = self.time_of(record, arrival_ms);
        match self.inner.config.fields.as_ref() {
            None => (time_ms, std::borrow::Cow::Borrowed(record)),
            Some(_) => {
                let fields: needle_record::Map = record
                    .iter()
                    .filter(|(k, _)| self.keeps(k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                (time_ms, std::borrow::Cow::Owned(Record::from_map(fields)))
            }
        }
    }

    /// This process's name as a writer of a store on object storage (in its parts' names).
    fn writer(&self) -> Option<String> {
        self.inner.config.remote.as_ref().map(|r| r.writer.clone())
    }

    fn take_sequence(&self) -> u64 {
        let mut state = self.state();
        let sequence = state.next_sequence;
        state.next_sequence += 1;
        sequence
    }

    /// One round of background work: merges, then retention.
    pub fn maintain(&self) -> Result<MaintainReport, HistoryError> {
        if self.inner.read_only {
            return Err(HistoryError::ReadOnly);
        }
        let mut report = MaintainReport::default();
        self.remove_doomed(false);
        while let Some((start, inputs)) = self.merge_candidate() {
            self.merge(start, &inputs, false)?;
            report.merges += 1;
            report.parts_removed += inputs.len() as u64;
        }
        let mut unmergeable = HashSet::new();
        while let Some((start, inputs, whole)) = self.cold_candidate(&mut unmergeable) {
            self.merge(start, &inputs, whole)?;
            report.merges += 1;
            report.parts_removed += inputs.len() as u64;
        }
        report.partitions_dropped = self.retain()?;
        if self.inner.remote.is_some() {
            self.retire_expired_of_others()?;
            let _writing = self.inner.writing.lock().unwrap_or_else(|e| e.into_inner());
            self.sync_remote(false)?;
            self.delete_retired()?;
        }
        self.commit_table(false)?;
        report.orphans_deleted = self.sweep_orphans_when_due()?;
        Ok(report)
    }

    /// Merges each partition's parts into one (a loaded store reads fastest and is smallest
    /// so): up to [`COMPACT_FANIN`] parts a merge, again until one is left. Partitions whose
    /// parts cannot be merged block by block get [`Store::maintain`]'s merges instead.
    pub fn compact(&self) -> Result<MaintainReport, HistoryError> {
        if self.inner.read_only {
            return Err(HistoryError::ReadOnly);
        }
        let mut report = MaintainReport::default();
        loop {
            let candidate = {
                let state = self.state();
                state.parts.iter().find_map(|(start, parts)| {
                    let inputs: Vec<Part> = parts.iter().take(COMPACT_FANIN).cloned().collect();
                    (inputs.len() > 1 && crate::merge::streams(&inputs, &self.inner.config.sort_by))
                        .then_some((*start, inputs))
                })
            };
            let Some((start, inputs)) = candidate else { break };
            self.merge(start, &inputs, false)?;
            report.merges += 1;
            report.parts_removed += inputs.len() as u64;
        }
        let rest = self.maintain()?;
        report.merges += rest.merges;
        report.parts_removed += rest.parts_removed;
        report.partitions_dropped += rest.partitions_dropped;
        Ok(report)
    }

    /// Removes the parts merges replaced, once no scan can read them and, in a store that is
    /// an Iceberg table, `delete_grace_ms` has passed (at once when `now`: the store stops).
    fn remove_doomed(&self, now: bool) {
        let mut doomed = self.inner.doomed.lock().unwrap_or_else(|e| e.into_inner());
        if self.inner.leases.load(Ordering::SeqCst) != 0 {
            return;
        }
        let grace = match &self.inner.table {
            Some(_) if !now => Duration::from_millis(self.inner.config.delete_grace_ms),
            _ => Duration::ZERO,
        };
        doomed.retain(|(path, since)| {
            let goes = since.elapsed() >= grace;
            if goes {
                remove_part_file(path);
            }
            !goes
        });
    }

    /// Ends this process's writing: the table gets a last version (on object storage, the
    /// parts uploaded since the last commit), and the parts merges replaced go at once
    /// (`needle ingest` at its end, a stopping server).
    pub fn close(&self) -> Result<(), HistoryError> {
        if self.inner.read_only {
            return Ok(());
        }
        let committed = match self.inner.remote {
            Some(_) => {
                let _writing = self.inner.writing.lock().unwrap_or_else(|e| e.into_inner());
                self.sync_remote(true)
            }
            None => self.commit_table(true),
        };
        self.remove_doomed(true);
        committed
    }

    /// Parts to merge into one of a longer time span (`compact_span_ms`), once that whole span
    /// ended longer ago than `compact_after_ms`: the partitions of a cold day become one, sorted
    /// as they were, and compress as well as a store partitioned by day. Up to
    /// [`COMPACT_FANIN`] parts a merge (again until one is left); spans whose parts cannot
    /// be merged block by block are left as they are (`unmergeable`).
    fn cold_candidate(&self, unmergeable: &mut HashSet<i64>) -> Option<(i64, Vec<Part>, bool)> {
        let config = &self.inner.config;
        let after = config.compact_after_ms?;
        let span = config.compact_span_ms;
        if span <= config.partition_ms {
            return None;
        }
        let cutoff = now_ms().saturating_sub(after as i64);
        let state = self.state();
        let mut spans: BTreeMap<i64, Vec<(i64, &Part)>> = BTreeMap::new();
        for (start, parts) in &state.parts {
            let coarse = partition_of(*start, span);
            // a compacted part is never merged again (see `Store::scan_shared`): late records
            // of its span make parts of their own
            let mergeable = parts.iter().filter(|p| !p.compacted).map(|p| (*start, p));
            spans.entry(coarse).or_default().extend(mergeable);
        }
        for (coarse, mut parts) in spans {
            if coarse.saturating_add(span as i64) > cutoff || unmergeable.contains(&coarse) {
                continue;
            }
            if parts.is_empty() || (parts.len() == 1 && parts[0].0 == coarse) {
                continue; // already one part of the whole span
            }
            let whole = parts.len() <= COMPACT_FANIN;
            parts.sort_by_key(|(_, p)| (p.time_range.0, p.sequence));
            let inputs: Vec<Part> =
                parts.iter().take(COMPACT_FANIN).map(|(_, p)| (*p).clone()).collect();
            // (one part in an hour's partition is moved into the span's by a merge of one)
            if crate::merge::streams(&inputs, &config.sort_by) {
                return Some((coarse, inputs, whole));
            }
            unmergeable.insert(coarse);
        }
        None
    }

    /// A partition's parts to merge: the lowest level that has [`MERGE_FANIN`] parts.
    fn merge_candidate(&self) -> Option<(i64, Vec<Part>)> {
        let state = self.state();
        for (start, parts) in &state.parts {
            let mut levels: BTreeMap<u32, Vec<&Part>> = BTreeMap::new();
            for p in parts.iter().filter(|p| !p.compacted) {
                levels.entry(p.level).or_default().push(p);
            }
            for (_, same) in levels {
                if same.len() >= MERGE_FANIN {
                    let mut inputs: Vec<Part> = Vec::new();
                    let mut rows = 0;
                    // a merge that streams holds one batch per input, whatever their size
                    let bounded = !crate::merge::streams(&same, &self.inner.config.sort_by);
                    for p in same {
                        if bounded && rows + p.rows > MERGE_MAX_RECORDS {
                            break;
                        }
                        rows += p.rows;
                        inputs.push(p.clone());
                    }
                    if inputs.len() >= 2 {
                        return Some((*start, inputs));
                    }
                }
            }
        }
        None
    }

    /// Merges `inputs` (parts of the partition at `start`) into one part of the next level.
    /// `compacted`: it is the whole of a cold span (see [`part::META_COMPACTED`]).
    fn merge(&self, start: i64, inputs: &[Part], compacted: bool) -> Result<(), HistoryError> {
        let _writing = self.inner.writing.lock().unwrap_or_else(|e| e.into_inner());
        let config = &self.inner.config;
        let mut replaces: Vec<String> = inputs.iter().map(|p| p.name.clone()).collect();
        if self.inner.remote.is_some() {
            // an input never uploaded stands for the uploaded parts it replaced: the manifest
            // must retire those when this part joins it
            for p in inputs.iter().filter(|p| p.remote().is_none()) {
                replaces.extend(
                    p.replaces
                        .iter()
                        .filter(|r| !replaces.contains(r))
                        .cloned()
                        .collect::<Vec<_>>(),
                );
            }
        }
        let header = PartHeader {
            sequence: self.take_sequence(),
            level: inputs.iter().map(|p| p.level).max().unwrap_or(0) + 1,
            replaces,
            // the newest input's position is kept: the merged part has all it had
            position: inputs
                .iter()
                .filter(|p| p.position.is_some())
                .max_by_key(|p| p.sequence)
                .and_then(|p| p.position.clone()),
            writer: self.writer(),
            offsets: inputs.iter().fold(OffsetRanges::new(), |mut all, p| {
                crate::offsets::widen(&mut all, &p.offsets);
                all
            }),
            compacted,
            field_ids: self.field_ids(),
        };
        let dir = partition_dir(&config.dir, start);
        std::fs::create_dir_all(&dir).map_err(|e| HistoryError::io(&dir, e))?;
        let merged = match crate::merge::merge(&dir, inputs, config, &header)? {
            Some(merged) => merged,
            None => {
                let mut buffer = ColumnBuffer::new();
                for p in inputs {
                    for r in p.read_all()? {
                        buffer.push(r.time_ms, &r.record);
                    }
                }
                let encoded =
                    buffer.sorted(&config.sort_by).map_err(|e| HistoryError::parquet(&dir, e))?;
                part::write(&dir, &encoded, config, &header)?
            }
        };
        self.inner.counters.bytes_written.fetch_add(merged.bytes, Ordering::Relaxed);
        {
            // the inputs may be of several partitions (a compaction of cold ones into `start`)
            let mut state = self.state();
            for parts in state.parts.values_mut() {
                parts.retain(|p| !header.replaces.contains(&p.name));
            }
            state.parts.retain(|_, parts| !parts.is_empty());
            let parts = state.parts.entry(start).or_default();
            parts.push(merged);
            parts.sort_by_key(|p| p.sequence);
        }
        // the merged part is in the view before its inputs go, and they go only once no scan
        // that saw them can read them any more
        let mut doomed = self.inner.doomed.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        doomed.extend(inputs.iter().map(|p| (p.path.clone(), now)));
        for input in inputs {
            self.forget_local(&input.path);
        }
        drop(doomed);
        self.remove_doomed(false);
        part::sync_dir(&dir)?;
        self.inner.counters.merges.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Drops whole partitions past the retention age or the byte bound, oldest first.
    fn retain(&self) -> Result<u64, HistoryError> {
        let config = &self.inner.config;
        if config.retention_ms.is_none() && config.max_bytes.is_none() {
            return Ok(0);
        }
        let now = now_ms();
        let mut dropped = 0;
        loop {
            let victim = {
                let state = self.state();
                let total: u64 = state.parts.values().flatten().map(|p| p.bytes).sum();
                let oldest = state.parts.iter().next();
                oldest
                    .map(|(start, parts)| (*start, parts))
                    .filter(|(start, parts)| {
                        // a compacted partition spans more than partition_ms: its parts say how much
                        let last = parts.iter().map(|p| p.time_range.1).max().unwrap_or(*start);
                        let end = start.saturating_add(config.partition_ms as i64).max(last + 1);
                        let too_old = config
                            .retention_ms
                            .is_some_and(|r| end <= now.saturating_sub(r as i64));
                        let too_big = config.max_bytes.is_some_and(|m| total > m);
                        too_old || too_big
                    })
                    .map(|(start, _)| start)
            };
            let Some(start) = victim else { return Ok(dropped) };
            let _writing = self.inner.writing.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(parts) = self.state().parts.remove(&start) {
                self.retire_partition(&parts);
            }
            let dir = partition_dir(&config.dir, start);
            std::fs::remove_dir_all(&dir).map_err(|e| HistoryError::io(&dir, e))?;
            dropped += 1;
        }
    }

    /// A thread that flushes every `flush_ms` and does the background work; see [`Background`].
    pub fn spawn_background(&self) -> Background {
        let stop = Arc::new(AtomicBool::new(false));
        let store = self.clone();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("needle-history-flush".into())
            .spawn(move || {
                let every = Duration::from_millis(store.inner.config.flush_ms.max(1));
                let mut last_maintain = Instant::now();
                while !flag.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    while started.elapsed() < every && !flag.load(Ordering::Relaxed) {
                        std::thread::sleep(every.min(Duration::from_millis(20)));
                    }
                    // errors are counted and reported in health; the next round tries again
                    let _ = store.flush();
                    if last_maintain.elapsed() >= every * 4 {
                        if let Err(error) = store.maintain() {
                            eprintln!("needle: history: background work failed: {error}");
                        }
                        last_maintain = Instant::now();
                    }
                    if let Err(error) = store.commit_table(false) {
                        eprintln!("needle: history: the table's commit failed: {error}");
                    }
                }
                let _ = store.flush();
                if let Err(error) = store.close() {
                    eprintln!("needle: history: the table's last commit failed: {error}");
                }
            })
            .ok();
        Background { stop, thread }
    }

    /// The blocks a query reads and the buffered records in its range, after pruning.
    pub fn scan(&self, request: &ScanRequest) -> Result<Scan, HistoryError> {
        self.scan_with(request, Vec::new(), &HashSet::new())
    }

    /// [`Store::scan`] on a store on object storage that several writers share, for one of
    /// the live writers in `roster` that a query asks (this one among them), so that between
    /// them they read every record once:
    /// - **planned** (`version`: the manifest version the api node planned from): the parts of
    ///   that version that no writer will change — every part of the writers not in `roster`
    ///   (gone), and the compacted parts of the live ones (the whole of a cold span, never
    ///   merged again) — are dealt out among the live writers by a hash of their keys; each
    ///   writer reads the rest of its own view (its recent parts, what it wrote since, its write
    ///   buffer). The cold past, most of a store, is read by every live writer alike, and a
    ///   writer that joined reads its share at once.
    /// - **by writers** (no version, or one that cannot serve any more): each live writer reads
    ///   its own view, and the parts of the writers not in `roster` are dealt out, from the
    ///   newest manifest.
    ///
    /// On another store, or when this writer is not in `roster`, the same as [`Store::scan`].
    pub fn scan_shared(
        &self,
        request: &ScanRequest,
        roster: &[String],
        version: Option<u64>,
    ) -> Result<Scan, HistoryError> {
        if let Some(version) = version {
            if let Some((extra, leave_out)) = self.planned_share(roster, version)? {
                let others = extra.len() as u64;
                let mut scan = self.scan_with(request, extra, &leave_out)?;
                scan.stats.parts_of_others = others;
                scan.stats.planned = 1;
                return Ok(scan);
            }
        }
        let extra = self.share_of_gone_writers(roster)?;
        let others = extra.len() as u64;
        let mut scan = self.scan_with(request, extra, &HashSet::new())?;
        scan.stats.parts_of_others = others;
        Ok(scan)
    }

    /// A scan of this writer's view less the parts named in `leave_out`, plus `extra`.
    fn scan_with(
        &self,
        request: &ScanRequest,
        extra: Vec<(i64, Part)>,
        leave_out: &HashSet<String>,
    ) -> Result<Scan, HistoryError> {
        let config = &self.inner.config;
        let (mut partitions, mut buffered, lease) = {
            let state = self.state();
            // taken with the view: a merge that changes the view after this sees the lease
            self.inner.leases.fetch_add(1, Ordering::SeqCst);
            let lease = Arc::new(Lease(self.inner.leases.clone()));
            let lo = partition_of(request.from_ms, config.partition_ms);
            // a compacted partition starts before the span it holds ends: its parts say
            let parts: Vec<(i64, Vec<Part>)> = state
                .parts
                .range(..request.to_ms)
                .filter(|(start, parts)| {
                    **start >= lo || parts.iter().any(|p| p.time_range.1 >= request.from_ms)
                })
                .map(|(s, p)| {
                    let kept = p.iter().filter(|p| !leave_out.contains(&p.name)).cloned();
                    (*s, kept.collect::<Vec<_>>())
                })
                .filter(|(_, p)| !p.is_empty())
                .collect();
            let (from, to) = (request.from_ms, request.to_ms);
            let buffered: Vec<StoredRecord> = state
                .flushing
                .records_in(from, to)
                .chain(state.buffer.records_in(from, to))
                .collect();
            (parts, buffered, lease)
        };
        for (start, part) in extra {
            let (lo, hi) = part.time_range;
            if hi < request.from_ms || lo >= request.to_ms {
                continue;
            }
            match partitions.iter_mut().find(|(s, _)| *s == start) {
                Some((_, parts)) => parts.push(part),
                None => partitions.push((start, vec![part])),
            }
        }
        if let Some(fields) = &request.fields {
            for r in &mut buffered {
                let map: needle_record::Map = std::mem::take(&mut r.record)
                    .into_map()
                    .into_iter()
                    .filter(|(k, _)| fields.contains(k))
                    .collect();
                r.record = Record::from_map(map);
            }
        }
        let mut stats =
            ScanStats { buffered_records: buffered.len() as u64, ..ScanStats::default() };
        let fields = request.fields.clone().map(Arc::new);
        let prune = request.filter.clone().map(Arc::new);
        let mut blocks = Vec::new();
        let wants_bloom = request.filter.is_some() && !config.bloom_fields.is_empty();
        for (_, parts) in partitions {
            stats.partitions += 1;
            for part in parts {
                let (lo, hi) = part.time_range;
                if hi < request.from_ms || lo >= request.to_ms {
                    continue;
                }
                stats.parts += 1;
                let file = if wants_bloom { part.file().ok() } else { None };
                let part = Arc::new(part);
                for index in 0..part.blocks() {
                    let zone = BlockZone { part: &part, index, bloom: None };
                    let (blo, bhi) = zone.times().unwrap_or((lo, hi));
                    if bhi < request.from_ms || blo >= request.to_ms {
                        continue;
                    }
                    stats.blocks_in_range += 1;
                    if let Some(filter) = &request.filter {
                        if !prune::may_be_true(filter, &zone) {
                            stats.blocks_skipped_minmax += 1;
                            continue;
                        }
                        if file.is_some() {
                            let zone = BlockZone { part: &part, index, bloom: file.as_ref() };
                            if !prune::may_be_true(filter, &zone) {
                                stats.blocks_skipped_bloom += 1;
                                continue;
                            }
                        }
                    }
                    stats.blocks_to_read += 1;
                    blocks.push(Block {
                        part: part.clone(),
                        _lease: lease.clone(),
                        index,
                        from_ms: request.from_ms,
                        to_ms: request.to_ms,
                        fields: fields.clone(),
                        prune: prune.clone(),
                    });
                }
            }
        }
        stats.corrupt_files = self.inner.counters.corrupt_files.load(Ordering::Relaxed);
        Ok(Scan { blocks, buffered, stats })
    }

    /// The parts the store holds, their bytes and records: [`Store::info`]'s totals without
    /// reading any part's metadata (cheap enough to ask every second).
    pub fn totals(&self) -> (u64, u64, u64) {
        let state = self.state();
        let parts = state.parts.values().flatten();
        parts
            .fold((0, 0, 0), |(n, bytes, rows), part| (n + 1, bytes + part.bytes, rows + part.rows))
    }

    /// What the store holds.
    pub fn info(&self) -> Result<StoreInfo, HistoryError> {
        let (parts, buffered) = {
            let state = self.state();
            let parts: Vec<(i64, Vec<Part>)> =
                state.parts.iter().map(|(s, p)| (*s, p.clone())).collect();
            (parts, (state.buffer.len() + state.flushing.len()) as u64)
        };
        let dir = match &self.inner.config.remote {
            Some(remote) => remote.url.clone(),
            None => self.inner.config.dir.display().to_string(),
        };
        let table = self.table_info();
        let mut info = StoreInfo {
            dir,
            table: table.location,
            snapshots: table.snapshots,
            schema: table.schema,
            remote: self.remote_info(),
            buffered_records: buffered,
            corrupt_files: self.inner.counters.corrupt_files.load(Ordering::Relaxed),
            ..StoreInfo::default()
        };
        let mut columns: BTreeMap<String, ColumnInfo> = BTreeMap::new();
        let mut first = i64::MAX;
        let mut last = i64::MIN;
        for (start, parts) in &parts {
            let mut p_info = PartitionInfo {
                start: iso(*start),
                start_ms: *start,
                parts: parts.len() as u64,
                ..PartitionInfo::default()
            };
            for part in parts {
                p_info.records += part.rows;
                p_info.bytes += part.bytes;
                p_info.blocks += part.blocks() as u64;
                let key = remote::key_of(*start, &part.name);
                info.files.push(FileInfo {
                    snapshot: table.added.get(&key).copied(),
                    file: key,
                    records: part.rows,
                    bytes: part.bytes,
                    blocks: part.blocks() as u64,
                    first_time: iso(part.time_range.0),
                    last_time: iso(part.time_range.1),
                    level: part.level,
                    compacted: part.compacted,
                });
                first = first.min(part.time_range.0);
                last = last.max(part.time_range.1);
                let parquet = part.parquet();
                let schema = parquet.file_metadata().schema_descr();
                for rg in parquet.row_groups() {
                    for (i, chunk) in rg.columns().iter().enumerate() {
                        let name = schema.column(i).name().to_owned();
                        let c = columns.entry(name).or_default();
                        c.physical_type = format!("{:?}", chunk.column_type());
                        c.compressed_bytes += chunk.compressed_size().max(0) as u64;
                        c.uncompressed_bytes += chunk.uncompressed_size().max(0) as u64;
                        for encoding in chunk.encodings() {
                            let e = format!("{encoding:?}");
                            if !c.encodings.contains(&e) {
                                c.encodings.push(e);
                            }
                        }
                    }
                }
            }
            info.records += p_info.records;
            info.bytes += p_info.bytes;
            info.parts += p_info.parts;
            info.blocks += p_info.blocks;
            info.partition_list.push(p_info);
        }
        info.partitions = info.partition_list.len() as u64;
        if first <= last {
            info.first_time = Some(iso(first));
            info.last_time = Some(iso(last));
        }
        info.bytes_per_record =
            if info.records > 0 { info.bytes as f64 / info.records as f64 } else { 0.0 };
        info.columns = columns.into_iter().map(|(name, c)| ColumnInfo { name, ..c }).collect();
        Ok(info)
    }
}

/// The store's background thread (flushes, merges, retention).
pub struct Background {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    /// Stops the thread after one last flush, and waits for it.
    pub fn stop(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.finish();
    }
}

/// What a store holds (`needle history DIR`).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct StoreInfo {
    pub dir: String,
    pub partitions: u64,
    pub parts: u64,
    pub blocks: u64,
    pub records: u64,
    pub bytes: u64,
    pub bytes_per_record: f64,
    pub first_time: Option<String>,
    pub last_time: Option<String>,
    pub buffered_records: u64,
    pub corrupt_files: u64,
    /// The object store side, for a store kept in one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteInfo>,
    /// The newest metadata file of the store's Iceberg table (a local store's with
    /// `commit_ms` set, or any on object storage).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// The table's snapshots, oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub snapshots: Vec<crate::iceberg::SnapshotInfo>,
    /// The table's columns, and the schema that added each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub schema: Vec<crate::iceberg::SchemaField>,
    #[serde(rename = "partition")]
    pub partition_list: Vec<PartitionInfo>,
    /// Every data file, partition by partition.
    pub files: Vec<FileInfo>,
    pub columns: Vec<ColumnInfo>,
}

/// A data file of the store (a part), as `needle history` lists it.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FileInfo {
    /// Its path under the store: `p=<partition start>/<name>`.
    pub file: String,
    pub records: u64,
    pub bytes: u64,
    pub blocks: u64,
    pub first_time: String,
    pub last_time: String,
    /// How many merges made it (0: a flush's).
    pub level: u32,
    /// A cold span's parts merged into one (never merged again).
    pub compacted: bool,
    /// The table's snapshot that added it (`None`: not committed yet, or no table).
    pub snapshot: Option<i64>,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PartitionInfo {
    pub start: String,
    pub start_ms: i64,
    pub parts: u64,
    pub blocks: u64,
    pub records: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ColumnInfo {
    pub name: String,
    pub physical_type: String,
    pub encodings: Vec<String>,
    pub compressed_bytes: u64,
    pub uncompressed_bytes: u64,
}

/// Removes a part's file, and its partition's directory once that is empty (a partition merged
/// into a longer one).
fn remove_part_file(path: &Path) {
    let _ = std::fs::remove_file(path);
    if let Some(dir) = path.parent() {
        // fails, as it should, while the directory holds anything
        let _ = std::fs::remove_dir(dir);
    }
}

fn partition_dir(dir: &Path, start: i64) -> PathBuf {
    dir.join(format!("p={start}"))
}

/// The partition directories under `dir`, by start.
fn list_partitions(dir: &Path) -> Result<Vec<(i64, PathBuf)>, HistoryError> {
    let mut out = Vec::new();
    if !dir.is_dir() {
        return Err(HistoryError::io(
            dir,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
        ));
    }
    for entry in read_dir(dir)? {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(start) = name.strip_prefix("p=").and_then(|s| s.parse::<i64>().ok()) {
            if entry.path().is_dir() {
                out.push((start, entry.path()));
            }
        }
    }
    out.sort();
    Ok(out)
}

fn read_dir(dir: &Path) -> Result<Vec<std::fs::DirEntry>, HistoryError> {
    std::fs::read_dir(dir)
        .map_err(|e| HistoryError::io(dir, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| HistoryError::io(dir, e))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A time as an ISO-8601 UTC string.
fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map_or_else(|| ms.to_string(), |t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
}
