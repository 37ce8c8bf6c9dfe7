//! `needle queries`: the queries running on a server, with their progress.

use super::client::{authorized, client, json_or_message, server_url};
use comfy_table::Table;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The server (default: $NEEDLE_SERVER, else http://127.0.0.1:9900).
    #[arg(long)]
    pub server: Option<String>,
    /// `table` (default) or `json`.
    #[arg(long, default_value = "table", value_parser = ["table", "json"])]
    pub format: String,
}

pub fn run(args: Args) -> ExitCode {
    let server = server_url(args.server);
    let answer = authorized(client().get(format!("{server}/api/v1/queries"))).send();
    let body = match json_or_message(answer, &server) {
        Ok(body) => body,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(1);
        }
    };
    if args.format == "json" {
        println!("{body}");
        return ExitCode::SUCCESS;
    }
    let queries = body["queries"].as_array().cloned().unwrap_or_default();
    if queries.is_empty() {
        println!("no queries running on {server}");
        return ExitCode::SUCCESS;
    }
    let mut table = Table::new();
    table.set_header(["id", "time left", "seen", "matched", "emissions", "query"]);
    for q in &queries {
        let left = q["time_left_ms"].as_i64().unwrap_or(0);
        table.add_row([
            q["id"].as_str().unwrap_or("").to_owned(),
            format!("{:.1} s", left as f64 / 1000.0),
            q["records_seen"].to_string(),
            q["records_matched"].to_string(),
            q["emissions"].to_string(),
            q["query"].as_str().unwrap_or("").to_owned(),
        ]);
    }
    println!("{table}");
    ExitCode::SUCCESS
}
