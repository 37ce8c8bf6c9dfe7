//! `needle explain QUERY`: the query's plan in words (what is filtered, exploded, grouped,
//! windowed, which sketch and its error). Same input and exit codes as `needle validate`.
//! With `--history DIR`, a query that reads history also says how much of the store it reads:
//! partitions, parts and blocks in range, blocks its WHERE rules out by their min/max and bloom
//! filters, blocks left to read, how many of those its statistics answer without decoding, and
//! how the others are read (column at a time, records built only for the WHERE's matches, or
//! record by record).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The query: BQL text, a Bullet JSON query (starting with `{`), or `-` to read stdin.
    pub query: String,
    /// The history store the query would read (for a query with HISTORY(...) or SINCE).
    #[arg(long, value_name = "DIR")]
    pub history: Option<String>,
}

pub fn run(args: Args) -> ExitCode {
    let plan = match super::validate::plan_or_exit(&args.query) {
        Ok(plan) => plan,
        Err(code) => return code,
    };
    print!("{}", needle_query::explain::explain(&plan));
    let (Some(dir), Some(_)) = (&args.history, &plan.history) else {
        return ExitCode::SUCCESS;
    };
    let read = super::history::open_read_only(dir).and_then(|opened| {
        let store = &opened.store;
        let compiled = needle_engine::CompiledQuery::compile(&plan).map_err(|e| e.to_string())?;
        let replay = needle_runtime::history::Replay::of_plan(store, &plan, &compiled)
            .expect("a plan that reads history")
            .map_err(|e| e.to_string())?;
        let how = needle_runtime::history::replay::BlockRead::of(&compiled);
        Ok((replay.blocks_from_aggregates(&compiled), how, replay))
    });
    match read {
        Ok((from_aggregates, how, replay)) => {
            let s = replay.scan_stats();
            println!(
                "In {}: {} partition(s) and {} part(s) in range, {} block(s); {} skipped by \
                 min/max, {} by bloom filters; {} to read, of which {} answered from their \
                 statistics (count, sum, min, max) without decoding, the others read {how}; and \
                 {} buffered record(s).",
                dir,
                s.partitions,
                s.parts,
                s.blocks_in_range,
                s.blocks_skipped_minmax,
                s.blocks_skipped_bloom,
                s.blocks_to_read,
                from_aggregates,
                s.buffered_records
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {}: {e}", dir);
            ExitCode::from(1)
        }
    }
}
