//! [`StoreConfig`]: where a store lives and how it keeps records.

use std::path::PathBuf;

/// How a store keeps records. `StoreConfig::new(dir)` gives the defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreConfig {
    pub dir: PathBuf,
    /// The field holding a record's time: a LONG or INTEGER of ms since the epoch, a DOUBLE
    /// (truncated), or an RFC 3339 string. `None`, or a record without a usable value: the
    /// arrival time the caller gives (counted in [`crate::Counters::missing_time`]).
    pub time_field: Option<String>,
    /// Fields a part is sorted by before time.
    pub sort_by: Vec<String>,
    /// The time span of a partition (a directory), in ms.
    pub partition_ms: u64,
    /// How often [`crate::Store::spawn_background`] flushes the write buffer, in ms.
    pub flush_ms: u64,
    /// Partitions that ended longer ago than this are dropped; `None`: kept forever.
    pub retention_ms: Option<u64>,
    /// Past this many bytes on disk the oldest partitions are dropped; `None`: no bound.
    pub max_bytes: Option<u64>,
    /// Fields given a Parquet bloom filter (ids looked up with `=` and `IN`).
    pub bloom_fields: Vec<String>,
    /// Keep only these top-level fields (the time is kept anyway); `None`: whole records.
    pub fields: Option<Vec<String>>,
    /// Rows in a block (a Parquet row group): what one set of min/max/count/sum describes.
    pub block_rows: usize,
    /// Rows in a page of a block's column at most: what one entry of the page index
    /// describes, and what a query's WHERE can skip inside a block (`crate::pages`).
    pub page_rows: usize,
    /// Records the write buffer holds at most while writes fail; past it, appends are dropped
    /// and counted ([`crate::Counters::dropped_records`]). While writes succeed, an append that
    /// fills the buffer flushes it.
    pub max_buffer_records: usize,
}

impl StoreConfig {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            time_field: None,
            sort_by: Vec::new(),
            partition_ms: 3_600_000,
            flush_ms: 1_000,
            retention_ms: None,
            max_bytes: None,
            bloom_fields: Vec::new(),
            fields: None,
            block_rows: 131_072,
            page_rows: 32_768,
            max_buffer_records: 2_000_000,
        }
    }
}

/// The start of the partition holding time `t`.
pub(crate) fn partition_of(t: i64, partition_ms: u64) -> i64 {
    let size = partition_ms.max(1) as i64;
    t.div_euclid(size).saturating_mul(size)
}
