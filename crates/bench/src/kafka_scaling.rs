//! `needle bench data-scaling --source kafka`: records/s per worker process when needle reads a
//! Kafka topic in the distributed mode, for 1, 2, ... worker processes (`--workers`), against a
//! bare rdkafka consumer reading the same topic in the same run. Its result file is
//! `data-scaling-kafka.json`.
//!
//! The topic (`--partitions`, 4 by default) is filled first with `--topic-records` generated records
//! (bullet by default; 10 needle records with `id = 'c39ba8cfe8'` in the middle), as
//! `needle gen --to kafka://` does. Then:
//! - **baseline**: one consumer (no group) reads every partition from the beginning to the end,
//!   touching each message, nothing else (`needle_kafka::testing::drain`);
//! - **needle, from a file** (the in-memory reference), before and after the Kafka runs: the
//!   same api node and one worker process reading the same records from a file (`--source
//!   file:...`, written while filling the topic; the page cache holds it) instead of Kafka: the
//!   same worker code path, query and results topic, only the source differs;
//! - **needle, n workers**: an api node (`needle serve --role api`) and n worker processes
//!   (`needle serve --role worker`, `--threads` worker threads each, a fresh consumer group
//!   starting at the earliest offset) run Bullet's test 2 query (`SELECT * ... WHERE id =
//!   'c39ba8cfe8'`), submitted before the workers start so they read every record with it. The
//!   workers' `needle_records_read_total` is sampled every 50 ms; a worker's records/s is what it
//!   read divided by the time from its first record to its last. The run also checks the query
//!   found the 10 needles.
//!
//! Records per CPU-second (user + system time of the reading processes, all their threads, from
//! /proc) are reported beside records/s: on a shared machine they move less with what else runs.
//! For needle they count the records read and the CPU time spent between the last sample that
//! saw no record (or, when there is none, the first sample) and the last one (start-up, joining
//! the group and idling after the last record are left out; `records_per_cpu_sec_with_startup`
//! keeps the whole process's figure, which is also used when a tiny topic was read whole
//! before the first sample). The
//! Kafka rows' `ratio_to_in_memory_per_cpu_sec` divides their records per CPU-second by the
//! mean of the two file rows': what reading Kafka costs over reading memory, for the same
//! records and query.
//!
//! The broker is `--brokers` or, by default, one started for the run with
//! `scripts/kafka/broker.sh` (Kafka's jars from Maven Central). It runs on the same machine, so
//! it competes with the workers for the cores: on a small machine the figures say what needle
//! costs beside Kafka, not how far it scales with more machines.

use super::{Outcome, Output};
use comfy_table::Table;
use needle_kafka::client::Connection;
use needle_kafka::produce::TopicWriter;
use needle_kafka::testing::{drain, Broker};
use needle_workload::{parse_needle_field, Generator, NeedleSpec, WorkloadSpec};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NEEDLE_ID: &str = "c39ba8cfe8";
/// How often the workers' `/metrics` are read. Each read costs a worker process ~0.8 ms of CPU
/// (encoding every metric): every 20 ms, that was 4–7% of what a worker process spent, more
/// the longer it took, so it weighed on the slower Kafka rows more than on the file's.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);
const NEEDLES: u64 = 10;

/// The options of `needle bench data-scaling` that only `--source kafka` reads.
#[derive(clap::Args, Debug)]
pub struct KafkaOptions {
    /// kafka: a running Kafka (HOST:PORT); default: start one for the run with
    /// scripts/kafka/broker.sh.
    #[arg(long)]
    pub brokers: Option<String>,
    /// kafka: worker threads in each worker process.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// kafka: records in the topic.
    #[arg(long, default_value_t = 200_000)]
    pub topic_records: u64,
    /// kafka: the workload, bullet (1.9 KB records) or small (~100 bytes).
    #[arg(long, default_value = "bullet", value_parser = ["bullet", "small"])]
    pub workload: String,
    /// kafka: partitions of the topic.
    #[arg(long, default_value_t = 4)]
    pub partitions: i32,
    /// kafka: seed of the generated records.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// What one run measures: the Kafka options, and the worker process counts.
pub struct Args<'a> {
    pub kafka: &'a KafkaOptions,
    pub workers: &'a [usize],
}

/// Runs the scenario and reports it.
pub fn run(args: Args<'_>, output: &Output) -> std::process::ExitCode {
    if args.workers.is_empty() || args.workers.contains(&0) || args.kafka.threads == 0 {
        return super::usage_error("--workers needs counts > 0, --threads must be > 0");
    }
    if args.kafka.topic_records < 2 * NEEDLES || args.kafka.partitions < 1 {
        return super::usage_error(
            "--topic-records must be at least 20 and --partitions at least 1",
        );
    }
    super::report("data-scaling-kafka", output, measure(&args))
}

/// One line of the result: the baseline, or needle with some worker processes.
#[derive(Debug, Clone, Serialize)]
pub struct ScalingRow {
    pub scenario: &'static str,
    /// `rdkafka consumer` or `needle`.
    pub reader: String,
    pub worker_processes: usize,
    pub threads_per_process: usize,
    pub records: u64,
    /// Mean over the processes of each one's records / its reading time.
    pub records_per_sec_per_process: f64,
    /// Records / the time from the first record read to the last, over all processes.
    pub records_per_sec_total: f64,
    /// needle's per-process figure ÷ the baseline's.
    pub ratio_to_baseline: f64,
    /// Records per CPU-second of the reading processes (user + system, all their threads),
    /// from their first record read to their last: steadier than records/s on a shared machine.
    pub records_per_cpu_sec: f64,
    /// The same over the processes' whole lives (start-up and idling included).
    pub records_per_cpu_sec_with_startup: f64,
    /// needle reading Kafka: its records per CPU-second ÷ the file row's (the same records and
    /// query read from memory by the same worker code); none for the other rows.
    pub ratio_to_in_memory_per_cpu_sec: Option<f64>,
    /// Needle records the query found (10 expected); none for the baseline.
    pub needles_found: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScalingResult {
    pub rows: Vec<ScalingRow>,
    pub workload: String,
    pub record_bytes: f64,
    pub partitions: i32,
    /// Records/s of the producer filling the topic (`needle gen --to kafka://` path).
    pub fill_records_per_sec: f64,
    /// Records per CPU-second of one worker process reading the same records from a file: the
    /// mean of the runs before and after the Kafka ones.
    pub in_memory_records_per_cpu_sec: f64,
    /// /proc/loadavg (1 minute) at the start and the end.
    pub load_before: f64,
    pub load_after: f64,
}

impl Outcome for ScalingResult {
    fn scenario(&self) -> &str {
        "data-scaling-kafka"
    }

    fn json_lines(&self) -> Vec<serde_json::Value> {
        crate::json_lines_of(&self.rows)
    }

    fn print_table(&self) {
        let mut table = Table::new();
        table.set_header([
            "reader",
            "processes",
            "threads each",
            "records/s per process",
            "records/s in all",
            "ratio to baseline",
            "records per CPU-second",
            "vs in-memory per CPU-second",
            "needles found",
        ]);
        for r in &self.rows {
            table.add_row([
                r.reader.clone(),
                r.worker_processes.to_string(),
                r.threads_per_process.to_string(),
                format!("{:.0}", r.records_per_sec_per_process),
                format!("{:.0}", r.records_per_sec_total),
                format!("{:.2}", r.ratio_to_baseline),
                format!("{:.0}", r.records_per_cpu_sec),
                r.ratio_to_in_memory_per_cpu_sec.map_or("-".into(), |x| format!("{x:.2}")),
                r.needles_found.map_or("-".into(), |n| n.to_string()),
            ]);
        }
        println!(
            "data-scaling-kafka: {} records of {:.0} bytes ({}) in {} partitions, filled at {:.0} \
             records/s; load {:.1} → {:.1}",
            self.rows.first().map_or(0, |r| r.records),
            self.record_bytes,
            self.workload,
            self.partitions,
            self.fill_records_per_sec,
            self.load_before,
            self.load_after
        );
        println!("{table}");
        println!(
            "in memory (the same records and query from a file, mean of the runs before and after \
             Kafka's): {:.0} records per CPU-second",
            self.in_memory_records_per_cpu_sec
        );
    }
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

fn measure(args: &Args<'_>) -> Result<ScalingResult, String> {
    let load_before = load_average();
    let own_broker = match &args.kafka.brokers {
        Some(_) => None,
        None => {
            eprintln!("starting a Kafka broker (scripts/kafka/broker.sh)");
            // Kafka's default: an empty group waits 3 s for more members before its first
            // assignment, so worker processes started together share the partitions from the
            // first record on (the test broker's 0 is for quick tests).
            Some(Broker::start_with(&["group.initial.rebalance.delay.ms=3000"])?)
        }
    };
    let brokers =
        args.kafka.brokers.clone().unwrap_or_else(|| {
            own_broker.as_ref().map(|b| b.bootstrap.clone()).unwrap_or_default()
        });
    let connection = Connection::new(&brokers, &BTreeMap::new()).map_err(|e| e.to_string())?;
    let run_id = format!("{:x}", std::process::id() ^ (now_ms() as u32));
    let topic = format!("needle-bench-{run_id}");

    let files = tempfile::tempdir().map_err(|e| e.to_string())?;
    let records_file = files.path().join("records.ndjson");
    eprintln!(
        "filling topic {topic} (and {}) with {} {} records",
        records_file.display(),
        args.kafka.topic_records,
        args.kafka.workload
    );
    let (fill_rate, bytes) = fill(&connection, &topic, &records_file, args)?;

    eprintln!("baseline: a bare rdkafka consumer");
    let cpu_before = cpu_seconds("self");
    let drained =
        drain(&connection, &topic, Duration::from_secs(600)).map_err(|e| e.to_string())?;
    let baseline_cpu = cpu_seconds("self") - cpu_before;
    if drained.messages != args.kafka.topic_records {
        return Err(format!(
            "the baseline read {} of {} records",
            drained.messages, args.kafka.topic_records
        ));
    }
    let baseline = drained.messages as f64 / drained.elapsed.as_secs_f64().max(1e-9);
    let baseline_per_cpu = drained.messages as f64 / baseline_cpu.max(1e-9);
    let mut rows = vec![ScalingRow {
        scenario: "data-scaling-kafka",
        reader: "rdkafka consumer".into(),
        worker_processes: 1,
        threads_per_process: 1,
        records: drained.messages,
        records_per_sec_per_process: baseline,
        records_per_sec_total: baseline,
        ratio_to_baseline: 1.0,
        records_per_cpu_sec: baseline_per_cpu,
        records_per_cpu_sec_with_startup: baseline_per_cpu,
        ratio_to_in_memory_per_cpu_sec: None,
        needles_found: None,
    }];
    let row = |reader: &str, n: usize, run: &Distributed, in_memory: Option<f64>| ScalingRow {
        scenario: "data-scaling-kafka",
        reader: reader.into(),
        worker_processes: n,
        threads_per_process: args.kafka.threads,
        records: run.records,
        records_per_sec_per_process: run.per_process,
        records_per_sec_total: run.total,
        ratio_to_baseline: run.per_process / baseline,
        records_per_cpu_sec: run.per_cpu_second(),
        records_per_cpu_sec_with_startup: run.records as f64 / run.cpu_seconds.max(1e-9),
        ratio_to_in_memory_per_cpu_sec: in_memory.map(|m| run.per_cpu_second() / m.max(1e-9)),
        needles_found: Some(run.needles),
    };

    // The reference is taken before and after the Kafka runs, and their mean is what the Kafka
    // rows are divided by: on a shared machine the speed of a core drifts within a run.
    let from_file = |when: &str| {
        eprintln!("needle: 1 worker process reading the same records from a file ({when})");
        distributed(
            &brokers,
            &topic,
            &format!("{run_id}-file-{when}"),
            1,
            Some(&records_file),
            args,
        )
    };
    let file_before = from_file("before")?;
    let mut kafka_runs = Vec::new();
    for &n in args.workers {
        eprintln!("needle: {n} worker process(es) of {} thread(s)", args.kafka.threads);
        kafka_runs
            .push((n, distributed(&brokers, &topic, &format!("{run_id}-{n}"), n, None, args)?));
    }
    let file_after = from_file("after")?;
    let in_memory = (file_before.per_cpu_second() + file_after.per_cpu_second()) / 2.0;
    rows.push(row("needle, from a file (before)", 1, &file_before, None));
    for (n, run) in &kafka_runs {
        rows.push(row("needle", *n, run, Some(in_memory)));
    }
    rows.push(row("needle, from a file (after)", 1, &file_after, None));
    drop(own_broker);
    Ok(ScalingResult {
        rows,
        workload: args.kafka.workload.clone(),
        record_bytes: bytes as f64 / args.kafka.topic_records as f64,
        partitions: args.kafka.partitions,
        fill_records_per_sec: fill_rate,
        in_memory_records_per_cpu_sec: in_memory,
        load_before,
        load_after: load_average(),
    })
}

/// Fills the topic, and writes the same records to `file`; returns the producer's records/s and
/// the bytes written.
fn fill(
    connection: &Connection,
    topic: &str,
    file: &Path,
    args: &Args<'_>,
) -> Result<(f64, u64), String> {
    let mut spec = WorkloadSpec::new(args.kafka.workload.parse().map_err(|e| format!("{e}"))?)
        .with_seed(args.kafka.seed);
    spec.count = Some(args.kafka.topic_records);
    if args.kafka.workload == "bullet" {
        let field = parse_needle_field(&format!("id={NEEDLE_ID}")).map_err(|e| e.to_string())?;
        spec.needle = Some(NeedleSpec { fields: vec![field], count: NEEDLES, at: None });
    }
    let mut generator = Generator::new(&spec).map_err(|e| e.to_string())?;
    let mut writer =
        TopicWriter::open(connection, topic, args.kafka.partitions).map_err(|e| e.to_string())?;
    let mut copy = std::io::BufWriter::new(std::fs::File::create(file).map_err(|e| e.to_string())?);
    let started = Instant::now();
    let mut line = Vec::with_capacity(4096);
    let mut bytes = 0u64;
    while !generator.is_done() {
        line.clear();
        generator.write_next(&mut line);
        bytes += line.len() as u64;
        writer.send_line(&line).map_err(|e| e.to_string())?;
        copy.write_all(&line).map_err(|e| e.to_string())?;
        if !line.ends_with(b"\n") {
            copy.write_all(b"\n").map_err(|e| e.to_string())?;
        }
    }
    writer.flush().map_err(|e| e.to_string())?;
    let rate = args.kafka.topic_records as f64 / started.elapsed().as_secs_f64();
    copy.flush().map_err(|e| e.to_string())?;
    Ok((rate, bytes))
}

struct Distributed {
    records: u64,
    /// CPU time of the worker processes, start-up included.
    cpu_seconds: f64,
    /// Records read, and CPU seconds spent, by the worker processes between the first sample
    /// that saw records and the last (summed over the processes).
    window_records: u64,
    window_cpu_seconds: f64,
    per_process: f64,
    total: f64,
    needles: u64,
}

impl Distributed {
    /// Records per CPU-second while reading (see the module doc); the whole process's when
    /// every record was read before the first sample (tiny topics).
    fn per_cpu_second(&self) -> f64 {
        if self.window_records == 0 || self.window_cpu_seconds <= 0.0 {
            return self.records as f64 / self.cpu_seconds.max(1e-9);
        }
        self.window_records as f64 / self.window_cpu_seconds
    }
}

/// One sample of a worker process: records read so far, when, and its CPU seconds then.
#[derive(Debug, Clone, Copy)]
struct Sample {
    read: u64,
    at: Instant,
    cpu: f64,
}

/// A `needle serve` process of the run, stopped when dropped; its stderr goes to a file that
/// errors quote.
struct Node {
    child: Child,
    url: String,
    stderr: PathBuf,
    /// When the process was started.
    started: Instant,
}

impl Node {
    /// `source`: a `--source` spec; none for an api node, or a worker reading the data topic.
    fn start(
        role: &str,
        config: &Path,
        threads: usize,
        index: usize,
        source: Option<&str>,
    ) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let stderr = config.with_file_name(format!("{role}-{index}.log"));
        let log = std::fs::File::create(&stderr).map_err(|e| e.to_string())?;
        let started = Instant::now();
        let mut command = Command::new(exe);
        command
            .args(["serve", "--role", role, "--listen", "127.0.0.1:0"])
            .args(["--workers", &threads.to_string()]);
        if let Some(source) = source {
            command.args(["--source", source]);
        }
        let mut child = command
            .arg("--config")
            .arg(config)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start needle serve --role {role}: {e}"))?;
        let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let _source = lines.next();
        let mut node = Self { url: String::new(), child, stderr, started };
        match first.strip_prefix("needle listening on ") {
            Some(url) => {
                node.url = url.to_owned();
                Ok(node)
            }
            None => Err(format!("needle serve --role {role} did not start: {}", node.log())),
        }
    }

    fn log(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    }

    fn get(&self, path: &str) -> Result<String, String> {
        reqwest::blocking::get(format!("{}{path}", self.url))
            .and_then(|r| r.text())
            .map_err(|e| format!("{e} (its log: {})", self.log()))
    }

    fn records_read(&self) -> Result<u64, String> {
        self.metric("needle_records_read_total ")
    }

    /// The value of the metric whose line starts with `prefix` (0 when absent).
    fn metric(&self, prefix: &str) -> Result<u64, String> {
        let metrics = self.get("/metrics")?;
        Ok(metrics
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An api node and `n` worker processes reading the topic with the needle query, or, given
/// `records_file`, reading that file (followed, so the process stays up to be measured).
fn distributed(
    brokers: &str,
    topic: &str,
    run: &str,
    n: usize,
    records_file: Option<&Path>,
    args: &Args<'_>,
) -> Result<Distributed, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let config = dir.path().join("needle.toml");
    let mut file = std::fs::File::create(&config).map_err(|e| e.to_string())?;
    write!(
        file,
        "[kafka]\nbrokers = \"{brokers}\"\ndata_topic = \"{topic}\"\n\
         query_topic = \"needle-bench-{run}-queries\"\nresults_topic = \"needle-bench-{run}-results\"\n\
         group = \"needle-bench-{run}\"\nstart = \"earliest\"\n"
    )
    .map_err(|e| e.to_string())?;
    drop(file);
    let api = Node::start("api", &config, 1, 0, None)?;
    let query = format!("SELECT * FROM STREAM(600000, TIME) WHERE id = '{NEEDLE_ID}' LIMIT 100");
    let started: serde_json::Value = reqwest::blocking::Client::new()
        .post(format!("{}/api/v1/queries", api.url))
        .body(query)
        .send()
        .and_then(|r| r.json())
        .map_err(|e| format!("submitting the query: {e}"))?;
    let id = started["id"].as_str().ok_or_else(|| format!("no query id in {started}"))?.to_owned();
    // A worker reading a file follows an empty one and is given the records once it runs the
    // query: the notice reaches it a few milliseconds after the api node answered, by which
    // time it could have read the whole file (a Kafka worker waits out the group's join delay).
    let followed = dir.path().join("records.ndjson");
    if records_file.is_some() {
        std::fs::File::create(&followed).map_err(|e| e.to_string())?;
    }
    let source = records_file.map(|_| format!("file:{}?follow=true", followed.display()));
    let workers: Vec<Node> = (0..n)
        .map(|i| Node::start("worker", &config, args.kafka.threads, i, source.as_deref()))
        .collect::<Result<_, _>>()?;
    if let Some(records) = records_file {
        let deadline = Instant::now() + Duration::from_secs(30);
        for worker in &workers {
            while worker.metric("needle_queries_active ")? < 1 {
                if Instant::now() > deadline {
                    return Err(format!(
                        "a worker did not get the query in 30 s: {}",
                        worker.log()
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let mut into =
            std::fs::OpenOptions::new().append(true).open(&followed).map_err(|e| e.to_string())?;
        let mut from = std::fs::File::open(records).map_err(|e| e.to_string())?;
        std::io::copy(&mut from, &mut into).map_err(|e| e.to_string())?;
    }

    // Sample every worker's records read (and CPU time) until they add up to the topic.
    let mut idle: Vec<Option<Sample>> = vec![None; n];
    let mut first: Vec<Option<Sample>> = vec![None; n];
    let mut last: Vec<Sample> = vec![Sample { read: 0, at: Instant::now(), cpu: 0.0 }; n];
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let now = Instant::now();
        for (i, worker) in workers.iter().enumerate() {
            let cpu = cpu_seconds(&worker.child.id().to_string());
            let read = worker.records_read()?;
            let sample = Sample { read, at: now, cpu };
            if read == 0 {
                idle[i] = Some(sample);
            }
            if read > 0 && first[i].is_none() {
                first[i] = Some(sample);
            }
            if read != last[i].read {
                last[i] = sample;
            }
        }
        if last.iter().map(|s| s.read).sum::<u64>() >= args.kafka.topic_records {
            break;
        }
        if now > deadline {
            return Err("the workers did not read the topic within 10 minutes".into());
        }
        std::thread::sleep(SAMPLE_EVERY);
    }
    let records: u64 = last.iter().map(|s| s.read).sum();
    let mut rates = Vec::new();
    let (mut window_records, mut window_cpu_seconds) = (0, 0.0);
    for (i, end) in last.iter().enumerate() {
        let Some(start) = first[i] else { continue };
        // A process that read everything between two samples: from the one before, or its
        // start (tiny topics).
        let since = match idle[i] {
            Some(before) if start.at == end.at => before.at,
            _ if start.at == end.at => workers[i].started,
            _ => start.at,
        };
        let secs = end.at.duration_since(since).as_secs_f64();
        if end.read > 0 && secs > 0.0 {
            rates.push(end.read as f64 / secs);
        }
        // CPU from the last sample that saw no record (the records between it and the next
        // sample were read with CPU after it), else from the first sample.
        let from = idle[i].unwrap_or(start);
        window_records += end.read - from.read;
        window_cpu_seconds += end.cpu - from.cpu;
    }
    let begin = first.iter().flatten().map(|s| s.at).min().unwrap_or_else(Instant::now);
    let end = last.iter().map(|s| s.at).max().unwrap_or_else(Instant::now);
    let total = records as f64 / end.duration_since(begin).as_secs_f64().max(1e-9);
    let per_process = rates.iter().sum::<f64>() / rates.len().max(1) as f64;

    // The needles reach the api node a tick or two after the last record is read.
    let mut needles = 0;
    let wait = Instant::now() + Duration::from_secs(10);
    while Instant::now() < wait {
        let status: serde_json::Value =
            serde_json::from_str(&api.get(&format!("/api/v1/queries/{id}"))?)
                .map_err(|e| e.to_string())?;
        needles = status["records_matched"].as_u64().unwrap_or(0);
        if needles >= NEEDLES || args.kafka.workload != "bullet" {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let cpu_seconds = workers.iter().map(|w| cpu_seconds(&w.child.id().to_string())).sum();
    drop(workers);
    drop(api);
    Ok(Distributed {
        records,
        cpu_seconds,
        window_records,
        window_cpu_seconds,
        per_process,
        total,
        needles,
    })
}

/// User + system CPU seconds of a process (`self` or a pid) so far, from /proc (0 elsewhere).
fn cpu_seconds(pid: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    // the fields after the command name (in parentheses, which may hold spaces); utime and
    // stime are the 14th and 15th fields of the line, in clock ticks (USER_HZ, 100 on Linux)
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
