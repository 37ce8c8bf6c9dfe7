//! [`StoreConfig`]: where a store lives and how it keeps records; [`RemoteConfig`]: the object
//! store it is kept in, when it is not a local directory; [`RestCatalogConfig`]: the Iceberg
//! REST catalog its table is registered in, when one is set.

use crate::object::ObjectStoreOptions;
use std::path::PathBuf;

/// How a store keeps records. `StoreConfig::new(dir)` gives the defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreConfig {
    pub dir: PathBuf,
    /// The field holding a record's time: a LONG or INTEGER of ms since the epoch, a DOUBLE
    /// (truncated), or an RFC 3339 string. `None`, or a record without a usable value: the
    /// arrival time the caller gives (counted in [`crate::Counters::missing_time`]).
    pub time_field: Option<String>,
    /// Fields a part is sorted by before time. [`SORT_BY_TEXT_FIELDS`] (`"*"`) stands for every
    /// text field not named before it, by name: a metric's series (its name, then its tags).
    pub sort_by: Vec<String>,
    /// The time span of a partition (a directory), in ms.
    pub partition_ms: u64,
    /// How often [`crate::Store::spawn_background`] flushes the write buffer, in ms.
    pub flush_ms: u64,
    /// Partitions whose whole `compact_span_ms` ended longer ago than this are merged into one
    /// partition of that span (hours into a day): fewer, larger parts of a series compress to
    /// less and read faster, while recent data stays in small partitions. `None`: never.
    pub compact_after_ms: Option<u64>,
    /// The time span cold partitions are merged into, in ms (a day by default).
    pub compact_span_ms: u64,
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
    /// The object store the store lives in; `None`: it lives in `dir`. With one, `dir` is this
    /// process's staging area and cache: parts are written there first, then uploaded.
    pub remote: Option<RemoteConfig>,
    /// The store's Iceberg table (`dir/metadata/`, or the object store's) commits a snapshot
    /// at most this often, in ms; on object storage parts are uploaded at each flush and wait
    /// for it. `None`: a store in `dir` is no table, and object storage commits each upload.
    pub commit_ms: Option<u64>,
    /// How long a part a merge replaced stays in `dir` once the table no longer names it, in
    /// ms: an engine reading an older snapshot still finds it (removed at once when the store
    /// closes).
    pub delete_grace_ms: u64,
    /// The Iceberg REST catalog the store's table is kept registered in after each commit
    /// ([`crate::rest`]); `None`: none. A local store needs `commit_ms` for a table to keep.
    pub catalog: Option<RestCatalogConfig>,
}

/// An Iceberg REST catalog the store's table is kept in (`history.catalog_url`).
#[derive(Clone, PartialEq)]
pub struct RestCatalogConfig {
    /// The catalog's base URL, before `/v1/...` (`http://host:8181`, `https://host/api/catalog`).
    pub url: String,
    /// A bearer token sent with each request (`Authorization: Bearer ...`); `None`: none.
    pub token: Option<String>,
    /// The warehouse asked for in `GET /v1/config` (the catalog answers with its prefix).
    pub warehouse: Option<String>,
    /// The table's namespace and name in the catalog (`needle.history`).
    pub namespace: String,
    pub table: String,
    /// How long one request may take, in ms.
    pub request_timeout_ms: u64,
    /// After a failed sync, how long the catalog is left alone before the next try, in ms.
    pub retry_ms: u64,
}

impl RestCatalogConfig {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            token: None,
            warehouse: None,
            namespace: crate::catalog::NAMESPACE.into(),
            table: crate::catalog::TABLE.into(),
            request_timeout_ms: 10_000,
            retry_ms: 5_000,
        }
    }
}

impl std::fmt::Debug for RestCatalogConfig {
    /// Without the token's value.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestCatalogConfig")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("warehouse", &self.warehouse)
            .field("namespace", &self.namespace)
            .field("table", &self.table)
            .field("request_timeout_ms", &self.request_timeout_ms)
            .field("retry_ms", &self.retry_ms)
            .finish()
    }
}

/// A store kept in an object store (`history.dir = "s3://bucket/prefix"`).
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteConfig {
    /// `s3://bucket/prefix`, `gs://…`, `az://…`, `file:///…`.
    pub url: String,
    pub options: ObjectStoreOptions,
    /// Bytes the local cache holds at most: uploaded parts written here, and ranges of parts
    /// read from the object store.
    pub cache_bytes: u64,
    /// When a source's position counts as durable: `true`, once the parts holding its records
    /// are uploaded and in the manifest (a lost machine loses nothing); `false`, once they are
    /// fsynced on the local disk (a lost disk loses what was not uploaded yet).
    pub durable_on_upload: bool,
    /// Bytes of parts waiting for upload at most (the object store unreachable); past it, new
    /// parts are not written: records wait in the write buffer, and history writes stop.
    pub max_pending_bytes: u64,
    /// How long a replaced part's object stays after the manifest stops naming it, in ms: a
    /// reader that planned before the switch still finds it.
    pub delete_grace_ms: u64,
    /// This writer's name in the manifest (whose epoch fences an older writer out).
    pub writer: String,
}

impl RemoteConfig {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            options: ObjectStoreOptions { settings: Vec::new(), request_timeout_ms: 10_000 },
            cache_bytes: 1 << 30,
            durable_on_upload: true,
            max_pending_bytes: 1 << 30,
            delete_grace_ms: 600_000,
            writer: "needle".into(),
        }
    }
}

impl StoreConfig {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            time_field: None,
            sort_by: Vec::new(),
            partition_ms: 3_600_000,
            flush_ms: 1_000,
            compact_after_ms: None,
            compact_span_ms: 86_400_000,
            retention_ms: None,
            max_bytes: None,
            bloom_fields: Vec::new(),
            fields: None,
            block_rows: 131_072,
            page_rows: 32_768,
            max_buffer_records: 2_000_000,
            remote: None,
            commit_ms: Some(10_000),
            delete_grace_ms: 60_000,
            catalog: None,
        }
    }
}

/// In [`StoreConfig::sort_by`], after the fields named: every other field whose values are all
/// strings, in name order. Rows of one series (a metric's name and tags) then sit together
/// whatever its tags are called, which is what metrics compress and are read by.
pub const SORT_BY_TEXT_FIELDS: &str = "*";

/// `sort_by` with [`SORT_BY_TEXT_FIELDS`] replaced by the fields of `text_fields` (those whose
/// values are all strings) not named in `sort_by`, in name order.
pub(crate) fn sort_fields<'a>(
    sort_by: &[String],
    text_fields: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let Some(at) = sort_by.iter().position(|f| f == SORT_BY_TEXT_FIELDS) else {
        return sort_by.to_vec();
    };
    let mut rest: Vec<&str> =
        text_fields.into_iter().filter(|f| !sort_by.iter().any(|named| named == f)).collect();
    rest.sort_unstable();
    rest.dedup();
    let mut fields: Vec<String> = sort_by[..at].to_vec();
    fields.extend(rest.into_iter().map(str::to_owned));
    fields.extend(sort_by[at + 1..].iter().filter(|f| *f != SORT_BY_TEXT_FIELDS).cloned());
    fields
}

/// The start of the partition holding time `t`.
pub(crate) fn partition_of(t: i64, partition_ms: u64) -> i64 {
    let size = partition_ms.max(1) as i64;
    t.div_euclid(size).saturating_mul(size)
}
