//! `needle bench history`: Akumuli's workload (`needle gen iot`) kept in needle's history store
//! and queried back, beside DuckDB (`bench/peers/duckdb/iot.py`, PyPI `duckdb`) on the same
//! records in the same run.
//!
//! 1. The records: S sensors × M minutes of the iot workload (10 readings, the points, each),
//!    written once as NDJSON.
//! 2. Ingest: `needle ingest`'s own code loads the file (`--threads` decoding threads) and makes
//!    it durable; points per CPU-second of the process is the per-core figure.
//! 3. Size: the store's bytes on disk per point, against the Parquet file DuckDB writes for the
//!    same records sorted by (sensor, ts) with zstd.
//! 4. Four queries, each timed (median of `--runs` after a warm-up) in needle (reading its
//!    store on every core) and in DuckDB over its own table, over its own Parquet file and over
//!    needle's files: per-series `MAX(temp0)`, the needle filter `temp0 > 95` (with the share of
//!    blocks it read), an hourly downsample of one sensor, and a one-hour `COUNT(*)`. Each
//!    query's answers are checked equal between needle and DuckDB before timing counts.
//!
//! 5. `--store s3` (the default is `local`, the above alone): the same records a second time in
//!    a store on a real S3 server started for the run, its figures beside the local store's
//!    (ingest, bytes per point, each query warm and cold, bytes fetched; the `history_s3` module).
//!
//! 6. The table: the store is an Apache Iceberg table; the same records go a second time into
//!    a store that is no table, and ingest and each query are set side by side; a live stream
//!    of `--stream-seconds` counts commits and metadata bytes per hour (the `history_table`
//!    module).
//!
//! `--peer none` skips DuckDB and streams the records straight from the generator into the
//! store (no NDJSON file): the way to take the billion-point run on a small disk.

use crate::history_s3::{ColdOpen, ObjectStoreFigures, ObjectStoreQuery, ObjectStoreSide};
use crate::history_table::TableFigures;
use crate::{Outcome, Output};
use needle::ingest;
use needle_engine::exec::{CompiledQuery, Emission};
use needle_query::ast::Expr;
use needle_query::QueryConfig;
use needle_runtime::config::HistoryConfig;
use needle_runtime::history::replay::{run_local, Replay, ReplayReport};
use needle_workload::{Generator, WorkloadKind, WorkloadSpec};
use serde::Serialize;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// The iot workload's first `ts`: 2020-01-01T00:00:00Z.
const T0: i64 = 1_577_836_800_000;
const READINGS: u64 = 10;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Sensors (Akumuli: 100,000).
    #[arg(long, default_value_t = 10_000)]
    sensors: u64,
    /// Minutes of readings per sensor (one record a minute).
    #[arg(long, default_value_t = 1_440)]
    minutes: u64,
    /// Timed runs of each query (after one warm-up); the median is reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Threads decoding records during ingest (the per-core figure divides by CPU time).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Rows per block of the store (default: `history.block_rows`' default): larger blocks
    /// are smaller on disk and coarser to prune.
    #[arg(long)]
    block_rows: Option<usize>,
    /// Rows per page of a block's column (default: `history.page_rows`' default).
    #[arg(long)]
    page_rows: Option<usize>,
    /// duckdb: the same records and queries in DuckDB (python3 with the duckdb package);
    /// none: needle alone, the records streamed from the generator (no NDJSON file).
    #[arg(long, default_value = "duckdb", value_parser = ["duckdb", "none"])]
    peer: String,
    /// local: the store on the local disk alone; s3: also the same records in a store on a
    /// MinIO server started for the run, read warm and cold, beside the local store's figures.
    #[arg(long, default_value = "local", value_parser = ["local", "s3"])]
    store: String,
    /// Seconds of a live stream of the workload (each sensor once a minute) kept as a table,
    /// counting its commits and metadata bytes; 0 skips it.
    #[arg(long, default_value_t = 60.0)]
    stream_seconds: f64,
    /// Where the records, the store and DuckDB's files go (default: a temporary directory,
    /// removed afterwards).
    #[arg(long)]
    work: Option<PathBuf>,
    #[command(flatten)]
    output: Output,
}

#[derive(Debug, Serialize)]
pub struct HistoryBench {
    scenario: &'static str,
    machine: String,
    sensors: u64,
    minutes: u64,
    records: u64,
    points: u64,
    ingest: IngestFigures,
    bytes_per_point: f64,
    duckdb_bytes_per_point: Option<f64>,
    queries: Vec<QueryFigures>,
    duckdb_version: Option<String>,
    /// `--store s3`: the store on the object store, beside the local one.
    #[serde(skip_serializing_if = "Option::is_none")]
    s3: Option<ObjectStoreFigures>,
    /// The Iceberg table's cost, beside a store that is no table.
    table: TableFigures,
}

#[derive(Debug, Serialize)]
struct IngestFigures {
    seconds: f64,
    cpu_seconds: f64,
    points_per_cpu_second: f64,
    records_per_second: f64,
    bytes: u64,
    duckdb_load_seconds: Option<f64>,
}

#[derive(Debug, Serialize)]
struct QueryFigures {
    name: String,
    query: String,
    needle_ms: f64,
    duckdb_table_ms: Option<f64>,
    duckdb_own_parquet_ms: Option<f64>,
    duckdb_needle_files_ms: Option<f64>,
    /// needle's time over DuckDB's time on its own table.
    ratio_to_duckdb_table: Option<f64>,
    rows: u64,
    blocks_read: u64,
    blocks_total: u64,
    /// Stored records the query read (pages its WHERE ruled out are not read).
    records_read: u64,
    /// Share of the store's records read.
    records_read_share: f64,
    /// The same query over the store that is no table (`commit_ms = 0`), runs alternated.
    no_table_ms: f64,
    /// `needle_ms / no_table_ms` (target ≤ 1).
    ratio_to_no_table: f64,
    /// `--store s3`: this query read from the object store, warm and cold.
    #[serde(skip_serializing_if = "Option::is_none")]
    s3: Option<ObjectStoreQuery>,
    /// The object store's warm time over the local store's (target ≤ 1.2).
    #[serde(skip_serializing_if = "Option::is_none")]
    s3_warm_ratio_to_local: Option<f64>,
    /// The object store's cold time over the local store's warm one (target ≤ 3).
    #[serde(skip_serializing_if = "Option::is_none")]
    s3_cold_ratio_to_local: Option<f64>,
}

impl Outcome for HistoryBench {
    fn scenario(&self) -> &str {
        self.scenario
    }

    fn print_table(&self) {
        println!(
            "history: {} ({} sensors × {} minutes, {} points)",
            self.machine, self.sensors, self.minutes, self.points
        );
        let i = &self.ingest;
        println!(
            "ingest: {:.2} M points per CPU-second ({:.2} CPU-s, {:.2} s wall, {:.0} records/s){}",
            i.points_per_cpu_second / 1e6,
            i.cpu_seconds,
            i.seconds,
            i.records_per_second,
            i.duckdb_load_seconds
                .map_or(String::new(), |s| format!("; DuckDB loads the NDJSON in {s:.2} s"))
        );
        println!(
            "size: {:.4} bytes per point ({} bytes){}",
            self.bytes_per_point,
            i.bytes,
            self.duckdb_bytes_per_point.map_or(String::new(), |d| format!(
                "; DuckDB's sorted zstd Parquet: {d:.4} bytes per point"
            ))
        );
        self.table.print(i.points_per_cpu_second);
        let mut table = comfy_table::Table::new();
        table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
        table.set_header(vec![
            "query",
            "needle ms",
            "no table ms",
            "DuckDB table ms",
            "DuckDB own Parquet ms",
            "DuckDB on needle's files ms",
            "needle / DuckDB table",
            "rows",
            "blocks read",
            "records read",
        ]);
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        for q in &self.queries {
            table.add_row(vec![
                q.name.clone(),
                format!("{:.2}", q.needle_ms),
                format!("{:.2}", q.no_table_ms),
                ms(q.duckdb_table_ms),
                ms(q.duckdb_own_parquet_ms),
                ms(q.duckdb_needle_files_ms),
                q.ratio_to_duckdb_table.map_or("-".into(), |r| format!("{r:.2}")),
                q.rows.to_string(),
                format!("{} / {}", q.blocks_read, q.blocks_total),
                format!("{:.2}%", q.records_read_share * 100.0),
            ]);
        }
        println!("{table}");
        if let Some(s3) = &self.s3 {
            self.print_object_store(s3);
        }
    }
}

impl HistoryBench {
    /// The store on the object store beside the local one: the ratios and their targets.
    fn print_object_store(&self, s3: &ObjectStoreFigures) {
        println!("s3: {} ({}), beside the local store in this run", s3.server, s3.url);
        let i = &s3.ingest;
        println!(
            "s3 ingest: {:.2} M points per CPU-second ({:.2} CPU-s, {:.2} s wall), {:.2} of local (target ≥ 0.8)",
            i.points_per_cpu_second / 1e6,
            i.cpu_seconds,
            i.seconds,
            s3.ingest_ratio_to_local
        );
        println!(
            "s3 size: {:.4} bytes per point ({} bytes the manifest names){}",
            s3.bytes_per_point,
            s3.bytes,
            s3.bytes_ratio_to_duckdb.map_or(String::new(), |r| format!(
                ", {r:.2} of DuckDB's sorted zstd Parquet (target ≤ 1)"
            ))
        );
        println!(
            "s3 cold open: {:.2} ms, {} bytes fetched in {} requests (the manifest, footers and page indexes)",
            s3.cold_open.ms, s3.cold_open.fetched_bytes, s3.cold_open.fetch_requests
        );
        let mut table = comfy_table::Table::new();
        table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
        table.set_header(vec![
            "query",
            "local ms",
            "s3 warm ms",
            "warm / local (≤ 1.2)",
            "s3 cold ms",
            "cold / local (≤ 3)",
            "cold bytes fetched",
            "cold requests",
            "warm bytes fetched a run",
        ]);
        let ratio = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{r:.2}"));
        for q in &self.queries {
            let Some(o) = &q.s3 else { continue };
            table.add_row(vec![
                q.name.clone(),
                format!("{:.2}", q.needle_ms),
                format!("{:.2}", o.warm_ms),
                ratio(q.s3_warm_ratio_to_local),
                format!("{:.2}", o.cold_ms),
                ratio(q.s3_cold_ratio_to_local),
                o.cold_fetched_bytes.to_string(),
                o.cold_fetch_requests.to_string(),
                o.warm_fetched_bytes_per_run.to_string(),
            ]);
        }
        println!("{table}");
    }
}

pub fn run(args: Args) -> ExitCode {
    let zero = |n: Option<usize>| n == Some(0);
    if args.sensors == 0 || args.minutes == 0 || args.runs == 0 || args.threads == 0 {
        return crate::usage_error("--sensors, --minutes, --runs and --threads must be at least 1");
    }
    if zero(args.block_rows) || zero(args.page_rows) {
        return crate::usage_error("--block-rows and --page-rows must be at least 1");
    }
    crate::report("history", &args.output.clone(), measure(&args))
}

/// The work directory: the one given, or a temporary one (removed when this is dropped).
enum Work {
    Given(PathBuf),
    Temporary(tempfile::TempDir),
}

impl Work {
    fn path(&self) -> &Path {
        match self {
            Work::Given(p) => p,
            Work::Temporary(t) => t.path(),
        }
    }
}

fn measure(args: &Args) -> Result<HistoryBench, String> {
    let work = match &args.work {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            Work::Given(dir.clone())
        }
        None => Work::Temporary(tempfile::tempdir().map_err(|e| e.to_string())?),
    };
    let records = args.sensors * args.minutes;
    let points = records * READINGS;
    let input = work.path().join("iot.ndjson");
    let store_dir = work.path().join("store");
    let _ = std::fs::remove_dir_all(&store_dir);
    let with_duckdb = args.peer == "duckdb";
    let spec = {
        let mut s = WorkloadSpec::new(WorkloadKind::Iot).with_count(records);
        s.sensors = args.sensors;
        s
    };
    if with_duckdb {
        write_input(&spec, &input)?;
    }
    let history = HistoryConfig {
        dir: store_dir.display().to_string(),
        time_field: "ts".into(),
        sort_by: vec!["sensor".into()],
        // a day a partition, as the workload's queries read days and hours
        partition_ms: 86_400_000,
        ..HistoryConfig::default()
    };
    let history = HistoryConfig {
        block_rows: args.block_rows.unwrap_or(history.block_rows),
        page_rows: args.page_rows.unwrap_or(history.page_rows),
        ..history
    };
    let open_input = || -> Result<Box<dyn Read + Send>, String> {
        Ok(if with_duckdb {
            Box::new(std::fs::File::open(&input).map_err(|e| e.to_string())?)
        } else {
            Box::new(GeneratorReader::new(&spec)?)
        })
    };
    let cpu_before = process_cpu_seconds();
    let summary = ingest::ingest(&history, open_input()?, args.threads, &|_| {})?;
    let cpu_seconds = process_cpu_seconds() - cpu_before;
    if summary.records != records {
        return Err(format!("ingested {} records of {records}", summary.records));
    }
    let ingest_commits = crate::history_table::commits(&store_dir);
    // the same records into a store that is no table
    let plain_history = HistoryConfig {
        dir: work.path().join("store-no-table").display().to_string(),
        commit_ms: 0,
        ..history.clone()
    };
    let _ = std::fs::remove_dir_all(&plain_history.dir);
    let cpu_before = process_cpu_seconds();
    let plain = ingest::ingest(&plain_history, open_input()?, args.threads, &|_| {})?;
    let plain_cpu_seconds = process_cpu_seconds() - cpu_before;
    if plain.records != records {
        return Err(format!("ingested {} records of {records} (no table)", plain.records));
    }
    let plain_points_per_cpu_second = points as f64 / plain_cpu_seconds.max(1e-9);
    let ingest_figures = IngestFigures {
        seconds: summary.seconds,
        cpu_seconds,
        points_per_cpu_second: points as f64 / cpu_seconds.max(1e-9),
        records_per_second: summary.records_per_second,
        bytes: summary.bytes,
        duckdb_load_seconds: None,
    };
    // the same records into the store on the object store, right after the local ingest
    let mut object_store = match args.store.as_str() {
        "s3" => {
            let mut side = ObjectStoreSide::start(work.path(), &history)?;
            let ingest = side.ingest(open_input()?, args.threads, records, points)?;
            Some((side, ingest))
        }
        _ => None,
    };
    let store =
        needle_history::Store::open_read_only(history.store_config()).map_err(|e| e.to_string())?;
    let plain_store = needle_history::Store::open_read_only(plain_history.store_config())
        .map_err(|e| e.to_string())?;
    let day_to = T0 + args.minutes as i64 * 60_000;
    let sensor = format!("sensor_{}", 3.min(args.sensors - 1));
    let queries = [
        ("per-series MAX(temp0)", format!("SELECT sensor, MAX(temp0) AS m FROM HISTORY({T0}, {day_to}) GROUP BY sensor")),
        ("temp0 > 95", format!("SELECT sensor, ts, temp0 FROM HISTORY({T0}, {day_to}) WHERE temp0 > 95")),
        (
            "hourly downsample of one sensor",
            format!(
                "SELECT MAX(temp0), MIN(temp0), AVG(temp0) FROM HISTORY({T0}, {}) WHERE sensor = '{sensor}' \
                 WINDOWING TUMBLING(3600000, TIME)",
                T0 + 86_400_000
            ),
        ),
        ("one-hour COUNT(*)", format!("SELECT COUNT(*) AS n FROM HISTORY({T0}, {})", T0 + 3_600_000)),
    ];
    let config = QueryConfig {
        max_groups: args.sensors.max(10_000),
        max_raw_size: points,
        default_raw_size: points,
        ..QueryConfig::default()
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut figures = Vec::new();
    let mut answers = Vec::new();
    for (name, text) in &queries {
        let query = PreparedQuery::compile(name, text, &config)?;
        let mut last = None;
        let mut plain_answer = None;
        let (needle_ms, no_table_ms) = crate::history_table::alternated(
            args.runs,
            || {
                let QueryRun { ms, emissions, report } = query.run(&store, threads)?;
                last = Some((emissions, report));
                Ok(ms)
            },
            || {
                let run = query.run(&plain_store, threads)?;
                plain_answer = Some(query.answer(&run.emissions));
                Ok(run.ms)
            },
        )?;
        let (emissions, report) = last.ok_or("no run")?;
        let rows: u64 = emissions.iter().map(|e| e.records.len() as u64).sum();
        let answer = query.answer(&emissions);
        plain_answer.ok_or("no run")?.check_same(&answer, "the store that is no table")?;
        let s3 = match &object_store {
            Some((side, _)) => Some(side.time_query(&query, args.runs, threads, &answer)?),
            None => None,
        };
        answers.push(answer);
        figures.push(QueryFigures {
            name: name.to_string(),
            query: text.clone(),
            needle_ms,
            duckdb_table_ms: None,
            duckdb_own_parquet_ms: None,
            duckdb_needle_files_ms: None,
            ratio_to_duckdb_table: None,
            rows,
            blocks_read: report.scan.blocks_to_read,
            blocks_total: report.scan.blocks_in_range,
            records_read: report.records_read,
            records_read_share: report.records_read as f64 / records.max(1) as f64,
            no_table_ms,
            ratio_to_no_table: needle_ms / no_table_ms,
            s3_warm_ratio_to_local: s3.as_ref().map(|o| o.warm_ms / needle_ms),
            s3_cold_ratio_to_local: s3.as_ref().map(|o| o.cold_ms / needle_ms),
            s3,
        });
    }
    let s3 = match object_store.take() {
        Some((side, ingest)) => {
            let bytes = side.manifest_bytes()?;
            let mut open_ms: Vec<f64> =
                figures.iter().filter_map(|q| q.s3.as_ref().map(|o| o.cold_open.ms)).collect();
            let first_open = figures.iter().find_map(|q| q.s3.as_ref().map(|o| &o.cold_open));
            Some(ObjectStoreFigures {
                server: side.server(),
                url: side.url().to_owned(),
                ingest_ratio_to_local: ingest.points_per_cpu_second
                    / ingest_figures.points_per_cpu_second,
                ingest,
                bytes,
                bytes_per_point: bytes as f64 / points as f64,
                bytes_ratio_to_duckdb: None,
                cold_open: ColdOpen {
                    ms: median(&mut open_ms),
                    fetched_bytes: first_open.map_or(0, |o| o.fetched_bytes),
                    fetch_requests: first_open.map_or(0, |o| o.fetch_requests),
                },
            })
        }
        None => None,
    };
    let stream = crate::history_table::stream(
        &history,
        &spec,
        &work.path().join("store-stream"),
        args.stream_seconds,
    )?;
    let table = TableFigures {
        ingest_without_commits_points_per_cpu_second: plain_points_per_cpu_second,
        ingest_ratio_with_commits: ingest_figures.points_per_cpu_second
            / plain_points_per_cpu_second,
        ingest_commits,
        stream,
    };
    let mut bench = HistoryBench {
        scenario: "history",
        machine: machine(),
        sensors: args.sensors,
        minutes: args.minutes,
        records,
        points,
        bytes_per_point: summary.bytes as f64 / points as f64,
        duckdb_bytes_per_point: None,
        ingest: ingest_figures,
        queries: figures,
        duckdb_version: None,
        s3,
        table,
    };
    if with_duckdb {
        duckdb(args, work.path(), &input, &store_dir, &sensor, &answers, &mut bench)?;
        if let (Some(s3), Some(duckdb)) = (bench.s3.as_mut(), bench.duckdb_bytes_per_point) {
            s3.bytes_ratio_to_duckdb = Some(s3.bytes_per_point / duckdb);
        }
    }
    Ok(bench)
}

/// A bench query compiled once, run over any store (local or on the object store).
pub(crate) struct PreparedQuery {
    name: String,
    from_ms: i64,
    to_ms: Option<i64>,
    filter: Option<Expr>,
    query: Arc<CompiledQuery>,
}

/// One run of a [`PreparedQuery`]: its time, what it emitted and what it read.
pub(crate) struct QueryRun {
    pub ms: f64,
    pub emissions: Vec<Emission>,
    pub report: ReplayReport,
}

impl PreparedQuery {
    pub(crate) fn compile(name: &str, text: &str, config: &QueryConfig) -> Result<Self, String> {
        let plan = needle_query::compile(text, config).map_err(|e| e.render(text))?;
        let past = plan.history.as_ref().ok_or("a history query")?;
        let query = Arc::new(CompiledQuery::compile(&plan).map_err(|e| e.to_string())?);
        Ok(Self {
            name: name.to_owned(),
            from_ms: past.from_ms,
            to_ms: past.to_ms,
            filter: plan.stage.filter.clone(),
            query,
        })
    }

    /// Plans the read over `store` and runs it on `threads` readers, timed whole.
    pub(crate) fn run(
        &self,
        store: &needle_history::Store,
        threads: usize,
    ) -> Result<QueryRun, String> {
        let started = Instant::now();
        let replay =
            Replay::plan(store, &self.query, self.filter.as_ref(), false, self.from_ms, self.to_ms)
                .map_err(|e| e.to_string())?;
        let (emissions, report) = run_local(replay, self.query.clone(), "bench", 0, threads)
            .map_err(|e| e.to_string())?;
        Ok(QueryRun { ms: started.elapsed().as_secs_f64() * 1000.0, emissions, report })
    }

    /// What a run answered, to check against another store's or DuckDB's.
    pub(crate) fn answer(&self, emissions: &[Emission]) -> Answer {
        let mut rows = 0;
        let mut checksum = 0.0;
        for r in emissions.iter().flat_map(|e| e.records.iter()) {
            rows += 1;
            for (k, v) in r.iter() {
                if k != "ts" {
                    checksum += v.as_f64().unwrap_or(0.0);
                }
            }
        }
        Answer { name: self.name.clone(), rows, checksum }
    }
}

/// What a query answered: a row count and a checksum of the numbers (in any row order).
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    name: String,
    rows: u64,
    checksum: f64,
}

impl Answer {
    /// The same rows and numbers (up to the order the sum was taken in).
    fn agrees(&self, rows: u64, checksum: f64) -> bool {
        rows == self.rows && (checksum - self.checksum).abs() <= 1e-6 * self.checksum.abs().max(1.0)
    }

    /// An error naming `what` unless `self` agrees with `expected` (the local store's).
    pub(crate) fn check_same(&self, expected: &Answer, what: &str) -> Result<(), String> {
        if expected.agrees(self.rows, self.checksum) {
            return Ok(());
        }
        Err(format!(
            "{}: the local store answered {} rows (checksum {}), {what} {} ({})",
            self.name, expected.rows, expected.checksum, self.rows, self.checksum
        ))
    }
}

/// Runs the DuckDB peer and puts its figures beside needle's (after checking the answers).
fn duckdb(
    args: &Args,
    work: &Path,
    input: &Path,
    store: &Path,
    sensor: &str,
    answers: &[Answer],
    bench: &mut HistoryBench,
) -> Result<(), String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/peers/duckdb/iot.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .args(["--input", &input.display().to_string(), "--store", &store.display().to_string()])
        .args(["--work", &work.join("duckdb").display().to_string(), "--sensor", sensor])
        .args(["--from-ms", &T0.to_string(), "--runs", &args.runs.to_string()])
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "the DuckDB peer failed (python3 -m pip install duckdb; or --peer none):\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let peer: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    let rows = peer["rows"].as_u64().unwrap_or(0);
    if rows != bench.records {
        return Err(format!("DuckDB loaded {rows} records, needle {}", bench.records));
    }
    bench.duckdb_version = peer["duckdb_version"].as_str().map(String::from);
    bench.duckdb_bytes_per_point = peer["parquet_bytes"].as_f64().map(|b| b / bench.points as f64);
    bench.ingest.duckdb_load_seconds = peer["load_seconds"].as_f64();
    for (q, answer) in bench.queries.iter_mut().zip(answers) {
        let figures = &peer["queries"][&answer.name];
        let source = |s: &str| figures[s]["ms"].as_f64();
        q.duckdb_table_ms = source("table");
        q.duckdb_own_parquet_ms = source("own parquet");
        q.duckdb_needle_files_ms = source("needle's files");
        q.ratio_to_duckdb_table = q.duckdb_table_ms.map(|d| q.needle_ms / d);
        let peer_rows = figures["table"]["rows"].as_u64().unwrap_or(u64::MAX);
        let peer_sum = figures["table"]["sum"].as_f64().unwrap_or(f64::NAN);
        if !answer.agrees(peer_rows, peer_sum) {
            return Err(format!(
                "{}: needle answered {} rows (checksum {}), DuckDB {peer_rows} ({peer_sum})",
                answer.name, answer.rows, answer.checksum
            ));
        }
    }
    Ok(())
}

/// The records as NDJSON in `path`, synced to the disk.
fn write_input(spec: &WorkloadSpec, path: &Path) -> Result<(), String> {
    let mut generator = Generator::new(spec).map_err(|e| e.to_string())?;
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut line = Vec::with_capacity(512);
    while !generator.is_done() {
        line.clear();
        generator.write_next(&mut line);
        line.push(b'\n');
        out.write_all(&line).map_err(|e| e.to_string())?;
    }
    // on the disk before anything is timed: the kernel writing gigabytes back while needle
    // ingests or queries took CPU from one side of the comparison only
    let file = out.into_inner().map_err(|e| e.to_string())?;
    file.sync_all().map_err(|e| format!("{}: {e}", path.display()))
}

/// The generator's records as NDJSON bytes, read on demand.
struct GeneratorReader {
    generator: Generator,
    buffer: Vec<u8>,
    at: usize,
}

impl GeneratorReader {
    fn new(spec: &WorkloadSpec) -> Result<Self, String> {
        Ok(Self {
            generator: Generator::new(spec).map_err(|e| e.to_string())?,
            buffer: Vec::new(),
            at: 0,
        })
    }
}

impl Read for GeneratorReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.at == self.buffer.len() {
            self.buffer.clear();
            self.at = 0;
            while self.buffer.len() < 1 << 16 && !self.generator.is_done() {
                self.generator.write_next(&mut self.buffer);
                self.buffer.push(b'\n');
            }
        }
        let n = out.len().min(self.buffer.len() - self.at);
        out[..n].copy_from_slice(&self.buffer[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

pub(crate) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// CPU seconds the whole process has used (user + system).
pub(crate) fn process_cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, writable rusage; RUSAGE_SELF is a constant the kernel knows.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return f64::NAN;
    }
    // SAFETY: getrusage succeeded, so it filled the struct.
    let usage = unsafe { usage.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// This machine, for the report: cores and load.
pub(crate) fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(String::from))
        .unwrap_or_else(|| "?".into());
    format!("{cores} cores, load {load}")
}
