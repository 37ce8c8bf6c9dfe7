//! `needle history DIR|URL`: what a history store holds — partitions, parts, records, bytes,
//! the time range, each column's encodings and sizes, its Iceberg table (metadata file,
//! snapshots, schema) and each data file with the snapshot that added it, and for a store on
//! object storage its manifest, uploads and cache — and the history flags that `serve`, `ingest` and `query` share
//! (`--history DIR|URL --time-field F --sort-by F,...`), and [`open_read_only`], how `query`,
//! `explain` and this command open a store.
//!
//! ```text
//! needle history /data/needle
//! needle history s3://bucket/needle --format json
//! ```

use super::output::Format;
use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use needle_runtime::config::HistoryConfig;
use serde_json::Value as Json;
use std::process::ExitCode;

/// Where history is kept, and how (flags override `[history]` of needle.toml and `NEEDLE_HISTORY__*`).
#[derive(clap::Args, Debug, Default, Clone)]
pub struct HistoryFlags {
    /// Keep history in this directory or object store (s3://bucket/prefix, gs://, az://,
    /// file://; its settings in [history.object_store]): Parquet files, partitioned by time;
    /// queries can then look back (FROM HISTORY(...), ... SINCE ...).
    #[arg(long = "history", value_name = "DIR|URL")]
    pub dir: Option<String>,
    /// The field holding each record's time (ms since the epoch, or an RFC 3339 string);
    /// without it, the time needle read the record.
    #[arg(long, value_name = "FIELD")]
    pub time_field: Option<String>,
    /// Fields a partition is sorted by before time, e.g. sensor (comma-separated).
    #[arg(long, value_name = "FIELD,...", value_delimiter = ',')]
    pub sort_by: Option<Vec<String>>,
}

impl HistoryFlags {
    /// Puts the flags given over `config`.
    pub fn apply(&self, config: &mut HistoryConfig) {
        if let Some(dir) = &self.dir {
            config.dir = dir.clone();
        }
        if let Some(field) = &self.time_field {
            config.time_field = field.clone();
        }
        if let Some(fields) = &self.sort_by {
            config.sort_by = fields.clone();
        }
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// The history directory, or object store URL (s3://bucket/prefix, gs://, az://, file://;
    /// reached with [history.object_store] of needle.toml and NEEDLE_HISTORY__OBJECT_STORE__*).
    dir: String,
    /// How it prints.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// A store held open for reading, with the temporary cache directory of a store on object
/// storage (removed when this is dropped).
pub struct ReadOnlyStore {
    pub store: needle_history::Store,
    _cache: Option<tempfile::TempDir>,
}

/// Opens the store in directory or at URL `dir` for reading, nothing in it changed: a URL is
/// reached with the `[history.object_store]` settings of needle.toml and the environment, its
/// ranges cached in a temporary directory. The error is ready to print.
pub fn open_read_only(dir: &str) -> Result<ReadOnlyStore, String> {
    if !needle_history::object::is_url(dir) {
        if !std::path::Path::new(dir).is_dir() {
            return Err(format!("{dir}: no such directory"));
        }
        let store = needle_history::Store::open_read_only(needle_history::StoreConfig::new(dir))
            .map_err(|e| format!("{dir}: {e}"))?;
        return Ok(ReadOnlyStore { store, _cache: None });
    }
    let mut history = super::config::load(None)?.history;
    history.dir = dir.to_owned();
    let cache = tempfile::Builder::new()
        .prefix("needle-history-read-")
        .tempdir()
        .map_err(|e| format!("cannot make a cache directory: {e}"))?;
    history.cache_dir = cache.path().display().to_string();
    let store = needle_history::Store::open_read_only(history.store_config())
        .map_err(|e| format!("{dir}: {e}"))?;
    Ok(ReadOnlyStore { store, _cache: Some(cache) })
}

pub fn run(args: Args) -> ExitCode {
    let store = match open_read_only(&args.dir) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let info = match store.store.info() {
        Ok(info) => info,
        Err(e) => {
            eprintln!("error: {}: {e}", args.dir);
            return ExitCode::from(1);
        }
    };
    let json = match serde_json::to_value(&info) {
        Ok(json) => json,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    match args.format {
        Format::Json => println!("{json}"),
        Format::Table => print_tables(&json),
    }
    ExitCode::SUCCESS
}

/// The store's figures as tables: the scalars first, then each list of objects as its own table.
fn print_tables(info: &Json) {
    let Json::Object(fields) = info else {
        println!("{info}");
        return;
    };
    for (key, value) in fields {
        if !value.is_array() && !value.is_object() {
            println!("{key}: {}", scalar(value));
        }
    }
    for (key, value) in fields {
        match value {
            Json::Array(rows) if rows.iter().all(Json::is_object) && !rows.is_empty() => {
                println!("\n{key}:");
                println!("{}", table(rows));
            }
            Json::Object(_) | Json::Array(_) => println!("{key}: {value}"),
            _ => {}
        }
    }
}

fn table(rows: &[Json]) -> Table {
    let mut columns: Vec<String> = Vec::new();
    for row in rows {
        if let Json::Object(map) = row {
            for k in map.keys() {
                if !columns.contains(k) {
                    columns.push(k.clone());
                }
            }
        }
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    t.set_header(columns.clone());
    for row in rows {
        t.add_row(columns.iter().map(|c| row.get(c).map_or(String::new(), scalar)));
    }
    t
}

fn scalar(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        Json::Null => String::new(),
        other => other.to_string(),
    }
}
