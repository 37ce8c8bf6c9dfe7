//! What keeping the store as an Apache Iceberg table costs, in `needle bench history`:
//!
//! - **Ingest**: the same records a second time into a store that is no table
//!   (`history.commit_ms = 0`), points per CPU-second of each in the same run (target: with
//!   commits ≥ 0.9 of without).
//! - **Queries**: each query over both stores, runs alternated (target: the table's no slower:
//!   needle plans from its own view of the parts, which the table's metadata describes).
//! - **A live stream**: the workload's records appended at their real pace (each sensor once
//!   a minute) for `--stream-seconds`, flushed every `flush_ms` and committed at the default
//!   `commit_ms`, as `needle serve` keeps them: commits and bytes of metadata written (metadata
//!   files, manifest lists, manifests), per hour of stream, and the bytes the table keeps.

use crate::history::median;
use needle_history::{Store, StoreConfig};
use needle_runtime::config::HistoryConfig;
use needle_workload::{Generator, WorkloadSpec};
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// The table's cost, beside a store that is no table.
#[derive(Debug, Serialize)]
pub(crate) struct TableFigures {
    /// Ingest into the store that is no table (`commit_ms = 0`).
    pub ingest_without_commits_points_per_cpu_second: f64,
    /// The table's ingest over that (target ≥ 0.9).
    pub ingest_ratio_with_commits: f64,
    /// Commits the table made during the bulk ingest.
    pub ingest_commits: u64,
    /// `--stream-seconds 0`: none.
    pub stream: Option<StreamFigures>,
}

impl TableFigures {
    /// The figures and their targets, as `needle bench history` prints them.
    pub(crate) fn print(&self, with_commits_points_per_cpu_second: f64) {
        println!(
            "table: ingest {:.2} M points per CPU-second with {} commits, {:.2} M as no table: {:.2} (target ≥ 0.9)",
            with_commits_points_per_cpu_second / 1e6,
            self.ingest_commits,
            self.ingest_without_commits_points_per_cpu_second / 1e6,
            self.ingest_ratio_with_commits
        );
        if let Some(s) = &self.stream {
            println!(
                "table over a live stream ({:.0} s, {} records, flush {} ms, commit {} ms): {} commits, {:.0} an hour; {} metadata bytes written, {:.1} MB an hour; {} bytes kept",
                s.seconds,
                s.records,
                s.flush_ms,
                s.commit_ms,
                s.commits,
                s.commits_per_hour,
                s.metadata_bytes_written,
                s.metadata_bytes_per_hour / 1e6,
                s.metadata_bytes_kept
            );
        }
    }
}

/// A live stream of the workload kept as a table.
#[derive(Debug, Serialize)]
pub(crate) struct StreamFigures {
    pub seconds: f64,
    pub records: u64,
    pub commit_ms: u64,
    pub flush_ms: u64,
    pub commits: u64,
    pub commits_per_hour: f64,
    /// Bytes of metadata objects written (metadata files, manifest lists, manifests).
    pub metadata_bytes_written: u64,
    pub metadata_bytes_per_hour: f64,
    /// Bytes of the table's metadata kept at the end (the last versions' files).
    pub metadata_bytes_kept: u64,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Commits of a table so far: the newest version's number in its hint.
pub(crate) fn commits(store_dir: &Path) -> u64 {
    std::fs::read_to_string(store_dir.join("metadata/version-hint.text"))
        .ok()
        .and_then(|hint| hint.trim().parse().ok())
        .unwrap_or(0)
}

/// The files of `dir/metadata` and their sizes.
fn metadata_files(dir: &Path) -> HashMap<String, u64> {
    let Ok(entries) = std::fs::read_dir(dir.join("metadata")) else { return HashMap::new() };
    entries
        .flatten()
        .filter_map(|e| {
            let size = e.metadata().ok()?.len();
            Some((e.file_name().to_string_lossy().into_owned(), size))
        })
        .collect()
}

/// Alternated runs of the same query over the table and the store that is no table: the
/// median of each (after one warm-up of each).
pub(crate) fn alternated(
    runs: usize,
    mut table: impl FnMut() -> Result<f64, String>,
    mut plain: impl FnMut() -> Result<f64, String>,
) -> Result<(f64, f64), String> {
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for run in 0..=runs {
        let (a, b) = (table()?, plain()?);
        if run > 0 {
            on.push(a);
            off.push(b);
        }
    }
    Ok((median(&mut on), median(&mut off)))
}

/// The workload's records appended at their real pace for `seconds` into a table in `dir`
/// (flushed every `flush_ms`, committed at most every `commit_ms`), closed at the end.
pub(crate) fn stream(
    history: &HistoryConfig,
    spec: &WorkloadSpec,
    dir: &Path,
    seconds: f64,
) -> Result<Option<StreamFigures>, String> {
    if seconds <= 0.0 {
        return Ok(None);
    }
    let _ = std::fs::remove_dir_all(dir);
    let config = StoreConfig { dir: dir.to_owned(), ..history.store_config() };
    let (commit_ms, flush_ms) = (config.commit_ms.unwrap_or(0), config.flush_ms);
    let store = Store::open(config).map_err(|e| e.to_string())?;
    let background = store.spawn_background();
    let mut generator = Generator::new(spec).map_err(|e| e.to_string())?;
    // each sensor once a minute
    let per_second = spec.sensors as f64 / 60.0;
    let started = Instant::now();
    let mut sent = 0u64;
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut line = Vec::with_capacity(512);
    while started.elapsed().as_secs_f64() < seconds && !generator.is_done() {
        let due = (started.elapsed().as_secs_f64() * per_second) as u64;
        let mut batch = Vec::new();
        while sent < due && !generator.is_done() {
            line.clear();
            generator.write_next(&mut line);
            let record = needle_record::decode_record(&line).map_err(|e| e.to_string())?;
            batch.push((record, now_ms()));
            sent += 1;
        }
        store.append(batch, None).map_err(|e| e.to_string())?;
        // every metadata object, seen before the table expires it (after 20 versions)
        for (name, size) in metadata_files(dir) {
            seen.insert(name, size);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let elapsed = started.elapsed().as_secs_f64();
    drop(background);
    store.close().map_err(|e| e.to_string())?;
    for (name, size) in metadata_files(dir) {
        seen.insert(name, size);
    }
    // (the version hint is rewritten in place: neither written nor kept counts it)
    let bytes = |files: &HashMap<String, u64>| -> u64 {
        files.iter().filter(|(name, _)| *name != "version-hint.text").map(|(_, size)| size).sum()
    };
    let written = bytes(&seen);
    let kept = bytes(&metadata_files(dir));
    let commits = commits(dir);
    Ok(Some(StreamFigures {
        seconds: elapsed,
        records: sent,
        commit_ms,
        flush_ms,
        commits,
        commits_per_hour: commits as f64 / elapsed * 3600.0,
        metadata_bytes_written: written,
        metadata_bytes_per_hour: written as f64 / elapsed * 3600.0,
        metadata_bytes_kept: kept,
    }))
}
