//! `needle kill ID`: ends a query running on a server; its client gets a final result saying so.
//! A query that already ended is an error (exit 1), as an unknown one is.

use super::client::{authorized, client, json_or_message, server_url};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The query's id (see `needle queries`).
    pub id: String,
    /// The server (default: $NEEDLE_SERVER, else http://127.0.0.1:9900).
    #[arg(long)]
    pub server: Option<String>,
}

pub fn run(args: Args) -> ExitCode {
    let server = server_url(args.server);
    let answer = authorized(client().delete(format!("{server}/api/v1/queries/{}", args.id))).send();
    match json_or_message(answer, &server) {
        // a query that had already ended is not running: nothing was killed
        Ok(body) if body["killed"] == false => {
            eprintln!("error: no running query '{}' on {server}: it already ended", args.id);
            ExitCode::from(1)
        }
        Ok(_) => {
            println!("killed {}", args.id);
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}
