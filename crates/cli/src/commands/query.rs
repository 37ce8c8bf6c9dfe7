//! `needle query`: run one query over a finite NDJSON input (a file or stdin) and print its
//! results as they are emitted.
//!
//! ```text
//! needle query --source file:events.ndjson "SELECT COUNT(*) FROM STREAM(10000, TIME)"
//! needle query --history /data/needle "SELECT MAX(temp0) FROM HISTORY('-1d') GROUP BY sensor"
//! cat events.ndjson | needle query --source stdin --format json "SELECT * FROM STREAM() LIMIT 5"
//! echo "SELECT * FROM STREAM()" | needle query --source file:events.ndjson -
//! ```
//! The query runs until the input ends, its duration is over, or a RAW LIMIT is reached,
//! whichever comes first; time (the duration, time windows, `NOW`) is the wall clock. Each
//! emission prints as it is made: `--format json` one line `{"records": [...], "meta": {...}}`,
//! `--format table` (the default) a table and a one-line summary. Lines that are not JSON
//! objects are skipped and counted, never stopping the query; empty lines are ignored; a report
//! with the first few (and their line numbers) goes to stderr at the end. Exit codes: 0 done,
//! 1 the input could not be read, 2 the query (or the arguments) is wrong.

use super::output::{read_query, Format, Printer};
use needle_engine::exec::LocalQuery;
use needle_query::QueryConfig;
use std::io::{BufRead, BufReader, Read};
use std::process::ExitCode;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How many malformed lines are quoted in the report.
const MALFORMED_SAMPLES: usize = 5;
/// Longest wait for input before the clock is checked again (time windows, the duration).
const IDLE_TICK: Duration = Duration::from_millis(100);

#[derive(clap::Args)]
pub struct Args {
    /// Run locally over these records: `file:PATH` (NDJSON) or `stdin`.
    #[arg(long, conflicts_with_all = ["server", "history"], required_unless_present_any = ["server", "history"])]
    source: Option<String>,
    /// Run locally over the history kept in this directory (`needle ingest`, `needle serve
    /// --history`): the query reads it with FROM HISTORY(from[, to]).
    #[arg(long, value_name = "DIR", conflicts_with = "server")]
    history: Option<String>,
    /// Run on a needle server instead (`needle serve`), e.g. http://127.0.0.1:9900; shows
    /// progress while it runs, and Ctrl-C kills the query there.
    #[arg(long)]
    server: Option<String>,
    /// How results print.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// The query (BQL or a Bullet JSON query); `-` reads it from stdin (with a file source).
    query: String,
}

enum Source {
    File(String),
    Stdin,
}

fn parse_source(s: &str) -> Option<Source> {
    match s {
        "stdin" | "-" => Some(Source::Stdin),
        _ => s.strip_prefix("file:").filter(|p| !p.is_empty()).map(|p| Source::File(p.into())),
    }
}

/// The wall clock in ms since the epoch, kept monotonic from the start.
struct Clock {
    start_ms: i64,
    start: Instant,
}

impl Clock {
    fn new() -> Self {
        let start_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        Self { start_ms, start: Instant::now() }
    }

    fn now_ms(&self) -> i64 {
        self.start_ms + i64::try_from(self.start.elapsed().as_millis()).unwrap_or(i64::MAX)
    }
}

/// Malformed input lines: how many, and the first few.
#[derive(Default)]
struct Malformed {
    count: u64,
    samples: Vec<(u64, String)>,
}

impl Malformed {
    fn add(&mut self, line: u64, why: String) {
        self.count += 1;
        if self.samples.len() < MALFORMED_SAMPLES {
            self.samples.push((line, why));
        }
    }

    fn report(&self) {
        if self.count == 0 {
            return;
        }
        eprintln!("warning: skipped {} malformed input line(s):", self.count);
        for (line, why) in &self.samples {
            eprintln!("  line {line}: {why}");
        }
        if self.count > self.samples.len() as u64 {
            eprintln!("  ... and {} more", self.count - self.samples.len() as u64);
        }
    }
}

pub fn run(args: Args) -> ExitCode {
    if let Some(server) = args.server {
        return super::query_remote::run(&server, &args.query, args.format);
    }
    if let Some(dir) = &args.history {
        return run_history(dir, &args.query, args.format);
    }
    let spec = args.source.unwrap_or_default();
    let Some(source) = parse_source(&spec) else {
        eprintln!("error: --source must be file:PATH or stdin, not {spec:?}");
        return ExitCode::from(2);
    };
    if args.query == "-" && matches!(source, Source::Stdin) {
        eprintln!("error: the query cannot come from stdin when the records do (--source stdin)");
        return ExitCode::from(2);
    }
    let plan = match read_plan(&args.query) {
        Ok(plan) => plan,
        Err(code) => return code,
    };
    let reader: Box<dyn BufRead + Send> = match &source {
        Source::Stdin => Box::new(BufReader::new(std::io::stdin())),
        Source::File(path) => match std::fs::File::open(path) {
            Ok(f) => Box::new(BufReader::with_capacity(1 << 16, f)),
            Err(e) => {
                eprintln!("error: cannot open {path}: {e}");
                return ExitCode::from(1);
            }
        },
    };
    let clock = Clock::new();
    let mut query = match LocalQuery::new(&plan, "cli-1", clock.now_ms()) {
        Ok(q) => q,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let max_line_bytes = match super::config::load(None) {
        Ok(config) => config.runtime.max_line_bytes,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let lines = spawn_reader(reader, max_line_bytes);
    let mut out = Printer { format: args.format, stdout: std::io::stdout().lock() };
    let mut malformed = Malformed::default();
    let mut read_error = None;
    while !query.is_done() {
        let wait = query
            .next_deadline_ms()
            .map(|t| Duration::from_millis(u64::try_from(t - clock.now_ms()).unwrap_or(0)))
            .unwrap_or(IDLE_TICK)
            .min(IDLE_TICK);
        let emissions = match lines.recv_timeout(wait) {
            Ok(Line::Text(number, bytes)) => {
                if bytes.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match needle_record::decode_record(&bytes) {
                    Ok(record) => query.push(&record, clock.now_ms()),
                    Err(e) => {
                        malformed.add(number, e.to_string());
                        continue;
                    }
                }
            }
            Ok(Line::Oversized(number)) => {
                let why = format!(
                    "longer than runtime.max_line_bytes ({max_line_bytes} bytes); not read"
                );
                malformed.add(number, why);
                continue;
            }
            Ok(Line::Failed(e)) => {
                read_error = Some(e);
                query.finish(clock.now_ms())
            }
            Err(RecvTimeoutError::Timeout) => query.advance(clock.now_ms()),
            Err(RecvTimeoutError::Disconnected) => query.finish(clock.now_ms()),
        };
        match emissions {
            Ok(emissions) => {
                for e in &emissions {
                    if out.print(e).is_err() {
                        // stdout closed (a pipe into `head`): stop quietly
                        malformed.report();
                        return ExitCode::SUCCESS;
                    }
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(1);
            }
        }
    }
    malformed.report();
    if let Some(e) = read_error {
        eprintln!("error: reading the input failed: {e}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// `needle query --history DIR`: the query over the stored records, read on every core,
/// printed as `--source` prints a live run's emissions.
fn run_history(dir: &str, query: &str, format: Format) -> ExitCode {
    let plan = match read_plan(query) {
        Ok(plan) => plan,
        Err(code) => return code,
    };
    let Some(past) = plan.history else {
        eprintln!(
            "error: with --history the query reads the store: write FROM HISTORY(from[, to]), \
             e.g. SELECT COUNT(*) FROM HISTORY('-1h')"
        );
        return ExitCode::from(2);
    };
    if past.live {
        eprintln!(
            "error: SINCE reads the past and then live records; here there is no live stream: \
             use FROM HISTORY(from[, to]), or run the query on needle serve --history DIR"
        );
        return ExitCode::from(2);
    }
    let opened = match super::history::open_read_only(dir) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let store = &opened.store;
    let compiled = match needle_engine::CompiledQuery::compile(&plan) {
        Ok(q) => std::sync::Arc::new(q),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(replay) = needle_runtime::history::Replay::of_plan(store, &plan, &compiled) else {
        return ExitCode::from(2); // (a plan without history was refused above)
    };
    let replay = match replay {
        Ok(replay) => replay,
        Err(e) => {
            eprintln!("error: {dir}: {e}");
            return ExitCode::from(1);
        }
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let now = Clock::new().now_ms();
    let emissions =
        match needle_runtime::history::replay::run_local(replay, compiled, "cli-1", now, threads) {
            Ok((emissions, _)) => emissions,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(1);
            }
        };
    let mut out = Printer { format, stdout: std::io::stdout().lock() };
    for e in &emissions {
        if out.print(e).is_err() {
            break;
        }
    }
    ExitCode::SUCCESS
}

/// The query argument (or stdin's, for `-`) compiled with the default limits; on an error, the
/// error rendered on stderr and exit code 2.
fn read_plan(arg: &str) -> Result<needle_query::Plan, ExitCode> {
    let text = read_query(arg)?;
    needle_query::compile(&text, &QueryConfig::default()).map_err(|e| {
        eprint!("{}", e.render(&text));
        ExitCode::from(2)
    })
}

enum Line {
    Text(u64, Vec<u8>),
    /// A line longer than `runtime.max_line_bytes`, skipped without being held whole.
    Oversized(u64),
    Failed(String),
}

/// Reads lines on their own thread so that time windows and the duration fire while the input
/// is idle (a quiet stdin). The channel is bounded: a slow query slows the reading. A line
/// longer than `max_line_bytes` is read past, never held whole (a file without newlines would
/// otherwise be read into memory at once).
fn spawn_reader(
    mut reader: Box<dyn BufRead + Send>,
    max_line_bytes: usize,
) -> mpsc::Receiver<Line> {
    let (tx, rx) = mpsc::sync_channel(1024);
    std::thread::spawn(move || {
        let mut number = 0u64;
        loop {
            let mut buf = Vec::new();
            let limit = max_line_bytes as u64 + 1;
            let read = (&mut reader).take(limit).read_until(b'\n', &mut buf);
            let line = match read {
                Ok(0) => return,
                Ok(_) => {
                    number += 1;
                    let text_len = buf.len() - usize::from(buf.ends_with(b"\n"));
                    if text_len <= max_line_bytes {
                        Line::Text(number, buf)
                    } else {
                        match skip_line(&mut reader) {
                            Ok(()) => Line::Oversized(number),
                            Err(e) => Line::Failed(e.to_string()),
                        }
                    }
                }
                Err(e) => Line::Failed(e.to_string()),
            };
            let failed = matches!(line, Line::Failed(_));
            if tx.send(line).is_err() || failed {
                return;
            }
        }
    });
    rx
}

/// Reads past the rest of the current line (through its newline, or to the end).
fn skip_line(reader: &mut dyn BufRead) -> std::io::Result<()> {
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            return Ok(());
        }
        match memchr::memchr(b'\n', available) {
            Some(end) => {
                reader.consume(end + 1);
                return Ok(());
            }
            None => {
                let n = available.len();
                reader.consume(n);
            }
        }
    }
}
