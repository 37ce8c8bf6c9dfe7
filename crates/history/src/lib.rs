//! needle's history store: the records needle reads, kept compressed on disk so that queries
//! can look back, and read back by time range with blocks pruned by their zone maps.
//!
//! Its place in the flow: the runtime's history tap appends every record a source reads
//! ([`Store::append`]); a background thread makes them durable ([`Store::flush`]) and merges
//! small parts ([`Store::maintain`]); a query that reads the past asks [`Store::scan`] for the
//! blocks of its range that its WHERE could match, and the runtime runs them through the engine.
//!
//! The files are plain Parquet, partitioned by time (`DIR/p=<start ms>/part-...parquet`), so
//! DuckDB, Spark or pandas read them as they are: `SELECT * FROM
//! read_parquet('DIR/**/*.parquet', union_by_name = true)`. Each record's fields are typed
//! columns (maps and lists as JSON text), and `__needle_time` holds the record's time. See
//! [`columns`] for how records become columns and come back exactly, [`part`] for a file,
//! [`store`] for the directory, flushes, merges and retention. A block read column at a time
//! (a WHERE over whole columns, groups summarized without records) is handed as Arrow batches to
//! the engine's evaluator, [`needle_engine::columnar`].

pub mod catalog;
mod chunks;
pub mod columns;
pub mod config;
pub mod error;
pub mod iceberg;
mod interned;
pub mod manifest;
mod merge;
pub mod object;
pub mod offsets;
mod pages;
pub mod part;
pub mod prune;
pub mod rest;
pub mod store;
pub mod testing;

pub use columns::{ColumnBuffer, ColumnChunk, StoredRecord};
pub use config::{RemoteConfig, RestCatalogConfig, StoreConfig, SORT_BY_TEXT_FIELDS};
pub use error::HistoryError;
pub use offsets::{OffsetRange, OffsetRanges};
pub use store::{
    Background, Block, BlockRows, ColumnInfo, Counters, FailedRows, FlushReport, Health,
    MaintainReport, PartitionInfo, Scan, ScanRequest, ScanStats, Store, StoreInfo,
};
