//! How the results of `needle query` (local or on a server) print: a table per emission and a
//! one-line summary, or one JSON object per line ([`Format`], [`Printer`]); and the query
//! argument itself ([`read_query`]: `-` reads it from stdin).

use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use needle_engine::exec::Emission;
use needle_record::{Record, Value};
use serde_json::Value as Json;
use std::io::{Read, Write};
use std::process::ExitCode;

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// A table per emission and a one-line summary.
    Table,
    /// One JSON object per emission per line.
    Json,
}

/// The query argument, or the query read from stdin when it is `-` (exit code 2 when stdin
/// cannot be read).
pub(crate) fn read_query(arg: &str) -> Result<String, ExitCode> {
    if arg != "-" {
        return Ok(arg.to_owned());
    }
    let mut text = String::new();
    match std::io::stdin().read_to_string(&mut text) {
        Ok(_) => Ok(text),
        Err(e) => {
            eprintln!("error: cannot read the query from stdin: {e}");
            Err(ExitCode::from(2))
        }
    }
}

pub(crate) struct Printer<W: Write> {
    pub(crate) format: Format,
    pub(crate) stdout: W,
}

impl<W: Write> Printer<W> {
    pub(crate) fn print(&mut self, e: &Emission) -> std::io::Result<()> {
        match self.format {
            Format::Json => writeln!(self.stdout, "{}", e.to_json_string())?,
            Format::Table => {
                if !e.records.is_empty() {
                    writeln!(self.stdout, "{}", table(&e.records))?;
                }
                writeln!(self.stdout, "{}", summary(e))?;
            }
        }
        self.stdout.flush()
    }
}

/// The records as a table; columns in order of first appearance.
fn table(records: &[Record]) -> Table {
    let mut columns: Vec<&str> = Vec::new();
    for r in records {
        for (k, _) in r.iter() {
            if !columns.contains(&k.as_str()) {
                columns.push(k);
            }
        }
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    t.set_header(columns.clone());
    for r in records {
        t.add_row(columns.iter().map(|c| cell(r.get(c))));
    }
    t
}

fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "NULL".into(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_json(),
    }
}

/// One line: which window, how many records, what the stats and sketch say, then any warnings.
fn summary(e: &Emission) -> String {
    let meta = &e.meta;
    let window = meta.get("Window");
    let get = |v: Option<&Json>, k: &str| v.and_then(|w| w.get(k)).cloned().unwrap_or(Json::Null);
    let name = get(window, "Name");
    let mut line = format!(
        "{} window {} ({}): {} record(s)",
        if e.is_final { "final" } else { "" },
        get(window, "Number"),
        name.as_str().unwrap_or("?"),
        e.records.len()
    )
    .trim_start()
    .to_string();
    let stats = meta.get("Stats");
    line.push_str(&format!(
        ", {} matched of {} seen",
        get(stats, "Records Matched"),
        get(stats, "Records Seen")
    ));
    if let Some(Json::Object(sketch)) = meta.get("Sketch") {
        let facts: Vec<String> = sketch
            .iter()
            .filter(|(_, v)| !v.is_object() && !v.is_array())
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if !facts.is_empty() {
            line.push_str(&format!(" [{}]", facts.join(", ")));
        }
    }
    for key in ["Errors", "Warnings"] {
        if let Some(Json::Array(items)) = meta.get(key) {
            for item in items {
                let message = item.get("error").and_then(Json::as_str).unwrap_or("?");
                let fix = item
                    .get("resolutions")
                    .and_then(Json::as_array)
                    .map(|r| r.iter().filter_map(Json::as_str).collect::<Vec<_>>().join("; "))
                    .unwrap_or_default();
                line.push_str(&format!(
                    "\n{}: {message} ({fix})",
                    key.trim_end_matches('s').to_lowercase()
                ));
            }
        }
    }
    line
}
