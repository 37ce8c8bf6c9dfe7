//! `needle history DIR`: what a history store holds — partitions, parts, records, bytes, the
//! time range, and each column's encodings and sizes — and the history flags that `serve`,
//! `ingest` and `query` share (`--history DIR --time-field F --sort-by F,...`).
//!
//! ```text
//! needle history /data/needle
//! needle history /data/needle --format json
//! ```

use super::output::Format;
use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use needle_runtime::config::HistoryConfig;
use serde_json::Value as Json;
use std::path::PathBuf;
use std::process::ExitCode;

/// Where history is kept, and how (flags override `[history]` of needle.toml and `NEEDLE_HISTORY__*`).
#[derive(clap::Args, Debug, Default, Clone)]
pub struct HistoryFlags {
    /// Keep history in this directory (Parquet files, partitioned by time); queries can then
    /// look back (FROM HISTORY(...), ... SINCE ...).
    #[arg(long = "history", value_name = "DIR")]
    pub dir: Option<PathBuf>,
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
            config.dir = dir.display().to_string();
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
    /// The history directory.
    dir: PathBuf,
    /// How it prints.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

pub fn run(args: Args) -> ExitCode {
    if !args.dir.is_dir() {
        eprintln!("error: {}: no such directory", args.dir.display());
        return ExitCode::from(1);
    }
    let store =
        match needle_history::Store::open_read_only(needle_history::StoreConfig::new(&args.dir)) {
            Ok(store) => store,
            Err(e) => {
                eprintln!("error: {}: {e}", args.dir.display());
                return ExitCode::from(1);
            }
        };
    let info = match store.info() {
        Ok(info) => info,
        Err(e) => {
            eprintln!("error: {}: {e}", args.dir.display());
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
