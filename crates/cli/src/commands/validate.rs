//! `needle validate QUERY`: checks a query (BQL, or a Bullet JSON query when it starts with `{`;
//! `-` reads it from stdin). Valid: the plan as pretty JSON on stdout, exit 0. Invalid: the
//! rendered error (message, line and column, the line with a caret, a hint) on stderr, exit 2.

use needle_query::{compile, Plan, QueryConfig};
use std::io::Read;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The query: BQL text, a Bullet JSON query (starting with `{`), or `-` to read stdin.
    pub query: String,
}

/// The query text from the argument, or from stdin for `-`.
pub fn read_query(arg: &str) -> Result<String, String> {
    if arg == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read stdin: {e}"))?;
        Ok(text)
    } else {
        Ok(arg.to_string())
    }
}

/// Reads and compiles the query; on failure prints the error and gives the exit code.
pub fn plan_or_exit(arg: &str) -> Result<Plan, ExitCode> {
    let text = read_query(arg).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })?;
    let text = text.trim_end_matches(['\n', '\r']);
    compile(text, &QueryConfig::default()).map_err(|err| {
        eprint!("{}", err.render(text));
        ExitCode::from(2)
    })
}

pub fn run(args: Args) -> ExitCode {
    match plan_or_exit(&args.query) {
        Ok(plan) => {
            println!("{}", plan.to_json_pretty());
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}
