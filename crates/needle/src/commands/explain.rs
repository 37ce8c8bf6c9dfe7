//! `needle explain QUERY`: the query's plan in words (what is filtered, exploded, grouped,
//! windowed, which sketch and its error). Same input and exit codes as `needle validate`.

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The query: BQL text, a Bullet JSON query (starting with `{`), or `-` to read stdin.
    pub query: String,
}

pub fn run(args: Args) -> ExitCode {
    match super::validate::plan_or_exit(&args.query) {
        Ok(plan) => {
            print!("{}", needle_query::explain::explain(&plan));
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}
