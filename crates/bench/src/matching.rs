//! `needle bench matching`: how the cost of a record grows with the number of active queries,
//! on one worker thread, against the parse-only baseline measured in the same run.
//!
//! The records are the `bullet` workload (about 1.8 KiB of JSON each, seeded), held in memory.
//! For each query count, the queries are compiled and added one by one to a `MatchSet` (the
//! registry's incremental path; its time is reported), then one thread runs every line through
//! a `MatchWorker` — lazy decoding, the predicate index, filters, partial aggregations, a flush
//! every 10,000 lines as a tick would — for at least `--seconds` of CPU time. The baseline is
//! the fastest way sonic-rs (needle's JSON crate) reads and validates the same bytes: the best
//! of its validating tree parser (`sonic_rs::Value`) and its validating skip (`IgnoredAny`),
//! measured just before on the same thread; and beside it needle's own checker of a whole
//! line, alone (`needle_record::check::check`): the bare cost of vouching for a record before
//! anything of it is read, which the workers pay on every line when they check whole lines (the
//! default). All are records per CPU-second of that thread ([`super::thread_cpu_seconds`]), so
//! other work on a shared machine is not counted against either; on an idle machine that is
//! records per second. `ratio` = needle's ÷ sonic-rs's; `check ratio` = needle's ÷ its own
//! check's.
//!
//! Query sets:
//! - `a`, Bullet test 7's shape: `SELECT * FROM STREAM(30000, TIME) WHERE id = '<random>'
//!   LIMIT 10`, ids that no record has (each query waits for its needle);
//! - `b`, a mix over different fields, one kind per query in turn: needle hunts on `id`, narrow
//!   `timespent` ranges, GROUP BY `browser_version` for one country and device, COUNT DISTINCT
//!   `session_id` for one browser and OS, TOP 5 `page_url` for one device in two countries;
//!   parameters drawn uniformly from the workload's values.
//!
//! Memory per idle query: a real `Runtime` (workers, joiner, registry, result queues, status
//! table) with no input, the heap in use (the allocator's count of bytes allocated: jemalloc's in
//! the `needle` binary, glibc's `mallinfo2` without it) before and after submitting the
//! largest count of set `a`, divided by the count; the growth of the resident size beside it.
//! Measured first, before the throughput points free anything the allocator could reuse.

use super::{thread_cpu_seconds, Outcome, Output};
use comfy_table::Table;
use needle_engine::exec::CompiledQuery;
use needle_engine::matching::{MatchSet, MatchWorker, Member};
use needle_engine::EvalContext;
use needle_query::QueryConfig;
use needle_workload::{Generator, WorkloadKind, WorkloadSpec};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The options of `needle bench matching`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The query counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100,1000,10000,100000")]
    pub queries: Vec<usize>,
    /// The query sets, `a` (Bullet test 7: id needles) and/or `b` (a mix).
    #[arg(long, value_delimiter = ',', default_value = "a,b", value_parser = ["a", "b"])]
    pub set: Vec<String>,
    /// Generated bullet records held in memory and read over and over.
    #[arg(long, default_value_t = 20_000)]
    pub records: usize,
    /// Seconds to measure each point (and as long again for its baseline).
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Skip the memory-per-idle-query measurement.
    #[arg(long)]
    pub no_memory: bool,
    /// Seed of the generated records and queries.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub validate: super::ValidateOption,
    #[command(flatten)]
    pub output: Output,
}

/// Runs `needle bench matching` and reports it.
pub fn run(args: Args) -> std::process::ExitCode {
    if args.queries.is_empty() || args.records == 0 || args.seconds.is_nan() || args.seconds <= 0.0
    {
        return super::usage_error(
            "--queries needs at least one count, --records and --seconds must be > 0",
        );
    }
    let plan = MatchingPlan {
        sets: args.set.iter().filter_map(|s| s.chars().next()).collect(),
        queries: args.queries.clone(),
        records: args.records,
        seconds: args.seconds,
        seed: args.seed,
        memory: !args.no_memory,
        validation: args.validate.validation(),
    };
    super::report("matching", &args.output, measure_plan(&plan))
}

impl Outcome for MatchingResult {
    fn scenario(&self) -> &str {
        "matching"
    }

    fn json_lines(&self) -> Vec<serde_json::Value> {
        let rows = self.rows.iter().map(serde_json::to_value);
        let memory = self.memory.iter().map(serde_json::to_value);
        rows.chain(memory).map(|v| v.expect("a row serializes")).collect()
    }

    fn print_table(&self) {
        let mut table = Table::new();
        table.set_header([
            "set",
            "queries",
            "records/s",
            "parse-only records/s",
            "ratio",
            "check-only records/s",
            "÷ check",
            "candidates/record",
            "matched/record",
            "add ms",
        ]);
        for row in &self.rows {
            table.add_row([
                row.set.clone(),
                row.queries.to_string(),
                format!("{:.0}", row.records_per_sec),
                format!("{:.0}", row.parse_only_records_per_sec),
                format!("{:.2}", row.ratio),
                format!("{:.0}", row.check_only_records_per_sec),
                format!("{:.2}", row.check_ratio),
                format!("{:.2}", row.candidates_per_record),
                format!("{:.3}", row.matched_per_record),
                format!("{:.0}", row.add_ms),
            ]);
        }
        let validate = self.rows.first().map_or(needle_record::Validation::Line, |r| r.validate);
        println!(
            "matching: one worker thread, bullet records of {:.0} bytes, checking {}",
            self.record_bytes,
            match validate {
                needle_record::Validation::Line => "whole lines",
                needle_record::Validation::Fields => "the fields read",
            }
        );
        println!("{table}");
        if let Some(m) = &self.memory {
            println!(
                "memory: {:.0} bytes of heap per idle query, resident size {:.0} bytes more per \
                 query ({} idle queries submitted in {:.0} ms)",
                m.bytes_per_idle_query,
                m.resident_bytes_per_idle_query,
                m.idle_queries,
                m.submit_ms
            );
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct MatchingPlan {
    pub sets: Vec<char>,
    pub queries: Vec<usize>,
    pub records: usize,
    pub seconds: f64,
    pub seed: u64,
    /// Measure resident memory per idle query (starts a runtime).
    pub memory: bool,
    /// How much of each line needle checks.
    pub validation: needle_record::Validation,
}

/// One line of the result.
#[derive(Debug, Clone, Serialize)]
pub struct MatchingRow {
    pub scenario: &'static str,
    /// How much of each line needle checked (`line`: all of it; `fields`: the fields read).
    pub validate: needle_record::Validation,
    pub set: String,
    pub queries: usize,
    pub records_per_sec: f64,
    pub parse_only_records_per_sec: f64,
    pub ratio: f64,
    /// Records per CPU-second of needle's own whole-line check of the same bytes
    /// (`needle_record::check::check`), and needle's figure ÷ it.
    pub check_only_records_per_sec: f64,
    pub check_ratio: f64,
    /// Queries tested per record (index candidates), and matched per record.
    pub candidates_per_record: f64,
    pub matched_per_record: f64,
    /// Time to compile the queries and add them one by one to the match set.
    pub add_ms: f64,
    pub indexed_fields: Vec<String>,
    pub unindexed_queries: usize,
    pub mib_per_sec: f64,
}

/// The memory line of the result.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryRow {
    pub scenario: &'static str,
    pub idle_queries: usize,
    /// Heap in use per query.
    pub bytes_per_idle_query: f64,
    /// Growth of the resident size per query: the heap in use plus what the allocator keeps of
    /// the transient memory of submitting them (index rebuilds, tables doubling).
    pub resident_bytes_per_idle_query: f64,
    pub submit_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct MatchingResult {
    pub rows: Vec<MatchingRow>,
    pub memory: Option<MemoryRow>,
    pub record_bytes: f64,
}

pub fn measure_plan(plan: &MatchingPlan) -> Result<MatchingResult, String> {
    let steps = plan.sets.len() * plan.queries.len() + usize::from(plan.memory);
    let progress = super::progress_bar(steps as u64);
    // memory first, while the heap holds nothing freed: memory that earlier steps freed would
    // be reused without growing the resident size, and the figure would read low
    let memory = if plan.memory {
        progress.set_message("memory per idle query");
        let count = plan.queries.iter().copied().max().unwrap_or(1000).max(1000);
        let row = memory_per_idle_query(count, plan.seed)?;
        progress.inc(1);
        Some(row)
    } else {
        None
    };
    let lines = bullet_lines(plan.records, plan.seed)?;
    let bytes: usize = lines.iter().map(Vec::len).sum();
    let mut rows = Vec::new();
    for &set in &plan.sets {
        for &count in &plan.queries {
            progress.set_message(format!("set {set}, {count} queries"));
            let texts = query_texts(set, count, plan.seed);
            rows.push(measure(set, &texts, &lines, bytes, plan.seconds, plan.validation)?);
            progress.inc(1);
        }
    }
    progress.finish_and_clear();
    Ok(MatchingResult { rows, memory, record_bytes: bytes as f64 / lines.len().max(1) as f64 })
}

/// `count` generated bullet records (at least one), each one line of JSON without its newline.
pub(super) fn bullet_lines(count: usize, seed: u64) -> Result<Vec<Vec<u8>>, String> {
    let spec = WorkloadSpec::new(WorkloadKind::Bullet).with_seed(seed);
    let mut generator = Generator::new(&spec).map_err(|e| e.to_string())?;
    Ok((0..count.max(1))
        .map(|_| {
            let mut line = Vec::new();
            generator.write_next(&mut line);
            line
        })
        .collect())
}

const COUNTRIES: &[&str] = &["US", "IN", "BR", "GB", "DE", "FR", "JP", "CA", "MX", "ID", "IT"];
const DEVICES: &[&str] =
    &["iphone", "android", "desktop", "ipad", "tablet", "tv", "mac", "console", "watch", "other"];
const BROWSERS: &[&str] =
    &["chrome", "safari", "edge", "firefox", "samsung", "opera", "ucweb", "ie"];
const OS: &[&str] = &["ios", "android", "windows", "macos", "linux", "chromeos", "tizen"];

fn random_id(rng: &mut ChaCha8Rng) -> String {
    // 11 hex characters: the workload's ids have 10, so no record has one of these
    (0..11).map(|_| char::from_digit(rng.random_range(0..16), 16).unwrap_or('0')).collect()
}

/// The BQL texts of `count` queries of set `a` or `b`.
pub fn query_texts(set: char, count: usize, seed: u64) -> Vec<String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6d61_7463_6869_6e67);
    let pick =
        |rng: &mut ChaCha8Rng, from: &[&str]| from[rng.random_range(0..from.len())].to_owned();
    (0..count)
        .map(|i| {
            let kind = if set == 'a' { 0 } else { i % 5 };
            match kind {
                0 => format!(
                    "SELECT * FROM STREAM(30000, TIME) WHERE id = '{}' LIMIT 10",
                    random_id(&mut rng)
                ),
                1 => {
                    let low = rng.random_range(0..3600);
                    format!(
                        "SELECT id, timespent FROM STREAM(30000, TIME) \
                         WHERE timespent BETWEEN ({low}, {}) LIMIT 10",
                        low + 2
                    )
                }
                2 => format!(
                    "SELECT browser_version, COUNT(*), AVG(page_load_ms) FROM STREAM(30000, TIME) \
                     WHERE demographics.country = '{}' AND device = '{}' GROUP BY browser_version",
                    pick(&mut rng, COUNTRIES),
                    pick(&mut rng, DEVICES)
                ),
                3 => format!(
                    "SELECT COUNT(DISTINCT session_id) FROM STREAM(30000, TIME) \
                     WHERE browser_name = '{}' AND os_name = '{}'",
                    pick(&mut rng, BROWSERS),
                    pick(&mut rng, OS)
                ),
                _ => format!(
                    "SELECT TOP(5, page_url) FROM STREAM(30000, TIME) \
                     WHERE device = '{}' AND demographics.country IN ('{}', '{}')",
                    pick(&mut rng, DEVICES),
                    pick(&mut rng, COUNTRIES),
                    pick(&mut rng, COUNTRIES)
                ),
            }
        })
        .collect()
}

fn compile(text: &str) -> Result<Arc<CompiledQuery>, String> {
    let plan = needle_query::compile(text, &QueryConfig::default())
        .map_err(|e| format!("{text}: {}", e.render(text)))?;
    CompiledQuery::compile(&plan).map(Arc::new).map_err(|e| format!("{text}: {e}"))
}

/// Records/s of the fastest validating read of `lines` by sonic-rs.
fn parse_only(lines: &[Vec<u8>], seconds: f64) -> f64 {
    let tree = throughput(lines, seconds / 2.0, |line| {
        black_box(sonic_rs::from_slice::<sonic_rs::Value>(line).is_ok());
    });
    let skip = throughput(lines, seconds / 2.0, |line| {
        black_box(sonic_rs::from_slice::<serde::de::IgnoredAny>(line).is_ok());
    });
    tree.max(skip)
}

/// Records/s of needle's own whole-line check of `lines` (every line must pass it).
fn check_only(lines: &[Vec<u8>], seconds: f64) -> Result<f64, String> {
    if let Some(line) = lines.iter().find(|line| needle_record::check::check(line).is_err()) {
        return Err(format!(
            "a generated record fails the check: {}",
            String::from_utf8_lossy(line)
        ));
    }
    Ok(throughput(lines, seconds, |line| {
        black_box(needle_record::check::check(line).is_ok());
    }))
}

/// Records per CPU-second of `f` over `lines`, repeated for at least `seconds` of CPU time.
fn throughput(lines: &[Vec<u8>], seconds: f64, mut f: impl FnMut(&[u8])) -> f64 {
    let start = thread_cpu_seconds();
    let mut done = 0usize;
    while done == 0 || thread_cpu_seconds() - start < seconds {
        for line in lines {
            f(line);
        }
        done += lines.len();
    }
    done as f64 / (thread_cpu_seconds() - start)
}

fn measure(
    set: char,
    texts: &[String],
    lines: &[Vec<u8>],
    bytes: usize,
    seconds: f64,
    validation: needle_record::Validation,
) -> Result<MatchingRow, String> {
    let started = Instant::now();
    let mut matches = MatchSet::with_validation(validation);
    for (serial, text) in texts.iter().enumerate() {
        let member = Member::new(serial as u64 + 1, format!("q{serial}").into(), compile(text)?);
        matches = matches.update(vec![member], &[]);
    }
    let add_ms = started.elapsed().as_secs_f64() * 1000.0;
    let baseline = parse_only(lines, seconds);
    let checked = check_only(lines, seconds)?;

    let ctx = EvalContext::new(0);
    let mut worker = MatchWorker::new();
    let (mut candidates, mut matched, mut processed) = (0usize, 0usize, 0usize);
    let mut malformed = 0usize;
    let start = thread_cpu_seconds();
    while processed == 0 || thread_cpu_seconds() - start < seconds {
        for chunk in lines.chunks(10_000) {
            for line in chunk {
                match worker.process(&matches, line, &ctx) {
                    Ok(outcome) => {
                        candidates += outcome.candidates;
                        matched += outcome.matched;
                    }
                    Err(_) => malformed += 1,
                }
                worker.flush_raw(|_, partial| drop(black_box(partial)));
            }
            worker.flush(|_, partial| drop(black_box(partial)));
            processed += chunk.len();
        }
    }
    let elapsed = thread_cpu_seconds() - start;
    if malformed > 0 {
        return Err(format!("{malformed} generated records did not decode"));
    }
    let records_per_sec = processed as f64 / elapsed;
    let (indexed_fields, unindexed_queries) = matches.shape();
    Ok(MatchingRow {
        scenario: "matching",
        validate: validation,
        set: set.to_string(),
        queries: texts.len(),
        records_per_sec,
        parse_only_records_per_sec: baseline,
        ratio: records_per_sec / baseline,
        check_only_records_per_sec: checked,
        check_ratio: records_per_sec / checked,
        candidates_per_record: candidates as f64 / processed as f64,
        matched_per_record: matched as f64 / processed as f64,
        add_ms,
        indexed_fields,
        unindexed_queries,
        mib_per_sec: records_per_sec * (bytes as f64 / lines.len() as f64) / (1024.0 * 1024.0),
    })
}

/// Resident memory of this process, in bytes (Linux `/proc/self/statm`).
pub(crate) fn resident_bytes() -> Option<f64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: f64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096.0)
}

/// Heap memory in use: what the process holds, whatever the allocator has kept from earlier
/// frees — the binary's allocator's own count when it gives one (jemalloc's), else glibc's
/// `mallinfo2` (bytes in allocated chunks, mapped ones included).
fn heap_in_use() -> f64 {
    if let Some((allocated, _)) = crate::heap_bytes() {
        return allocated as f64;
    }
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    let info = unsafe { libc::mallinfo2() };
    (info.uordblks + info.hblkhd) as f64
}

/// A real runtime (workers, joiner, registry, result queues, status table) reading a source
/// nobody writes to, and `count` queries of set `a` submitted to it: the heap in use and the
/// resident size before and after the last `count - 100` of them (the first 100 warm up the
/// allocator and the runtime's tables), per query.
fn memory_per_idle_query(count: usize, seed: u64) -> Result<MemoryRow, String> {
    use needle_runtime::metrics::Metrics;
    use needle_runtime::source::{SourceOptions, TcpSource};
    use needle_runtime::{NeedleConfig, Runtime};

    let mut config = NeedleConfig::default();
    config.runtime.max_queries = config.runtime.max_queries.max(count);
    config.server.max_queries_per_client = config.server.max_queries_per_client.max(count);
    let source =
        TcpSource::bind("127.0.0.1:0", &SourceOptions::default()).map_err(|e| e.to_string())?;
    let runtime = Runtime::start(config, Box::new(source), Arc::new(Metrics::new()))
        .map_err(|e| e.to_string())?;
    let texts = query_texts('a', count, seed);
    let mut handles = Vec::with_capacity(count);
    for text in texts.iter().take(100) {
        handles.push(runtime.submit(text, "bench").map_err(|e| e.to_string())?);
    }
    std::thread::sleep(Duration::from_millis(200));
    let (heap_before, rss_before) =
        (heap_in_use(), resident_bytes().ok_or("cannot read /proc/self/statm")?);
    let started = Instant::now();
    for text in &texts[100.min(texts.len())..] {
        handles.push(runtime.submit(text, "bench").map_err(|e| e.to_string())?);
    }
    let submit_ms = started.elapsed().as_secs_f64() * 1000.0;
    // the joiner and the workers settle (ticks, the registry's last rebuild)
    std::thread::sleep(Duration::from_millis(500));
    let (heap_after, rss_after) =
        (heap_in_use(), resident_bytes().ok_or("cannot read /proc/self/statm")?);
    let added = texts.len().saturating_sub(100).max(1) as f64;
    runtime.shutdown();
    drop(handles);
    Ok(MemoryRow {
        scenario: "matching-memory",
        idle_queries: added as usize,
        bytes_per_idle_query: (heap_after - heap_before) / added,
        resident_bytes_per_idle_query: (rss_after - rss_before) / added,
        submit_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_of_both_sets_compiles_and_set_b_mixes_five_kinds() {
        for set in ['a', 'b'] {
            for text in query_texts(set, 50, 7) {
                compile(&text).unwrap();
            }
        }
        let b = query_texts('b', 5, 7);
        assert!(b[0].contains("id =") && b[1].contains("BETWEEN") && b[2].contains("GROUP BY"));
        assert!(b[3].contains("COUNT(DISTINCT") && b[4].contains("TOP(5"));
        assert_eq!(query_texts('a', 3, 7), query_texts('a', 3, 7), "seeded");
    }
}
