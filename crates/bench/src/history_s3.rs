//! `needle bench history --store s3`: the bench's records kept a second time, in a history
//! store on a real S3 server (MinIO, started for the run by [`needle_history::testing::Minio`]),
//! measured beside the local store in the same run:
//!
//! - ingest per CPU-second of this process (its uploads included; MinIO's own CPU is not);
//! - bytes per point of the parts the manifest names (a store opened afresh reads them back);
//! - each query warm (one reader store whose cache its warm-up filled) and cold (every run a
//!   store opened afresh on an empty cache directory: the open, then the query), with the
//!   bytes and requests fetched from the object store for each (`RemoteInfo` deltas).
//!
//! Every answer read from the object store is checked equal to the local store's before its
//! time counts (and the local store's is checked equal to DuckDB's by the bench).

use crate::history::{median, process_cpu_seconds, Answer, PreparedQuery, QueryRun};
use needle_history::testing::Minio;
use needle_history::Store;
use needle_runtime::config::HistoryConfig;
use serde::Serialize;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The object-store side of one bench run: the server, the store's settings, the warm reader.
pub struct ObjectStoreSide {
    /// Stops the server when dropped, at the end of the run.
    minio: Minio,
    history: HistoryConfig,
    work: PathBuf,
    /// A reader whose cache the queries' warm-ups fill (opened after ingest).
    warm_reader: Option<Store>,
}

/// Ingest into the store on the object store.
#[derive(Debug, Serialize)]
pub struct ObjectStoreIngest {
    pub seconds: f64,
    pub cpu_seconds: f64,
    pub points_per_cpu_second: f64,
    pub records_per_second: f64,
}

/// A store opened afresh on an empty cache directory: what opening it costs (the manifest and
/// the parts' footers and page indexes), the median of the cold runs.
#[derive(Debug, Default, Serialize)]
pub struct ColdOpen {
    pub ms: f64,
    pub fetched_bytes: u64,
    pub fetch_requests: u64,
}

/// One query read from the object store, warm and cold.
#[derive(Debug, Serialize)]
pub struct ObjectStoreQuery {
    /// Median of the timed runs on the warm reader (after the warm-up filled its cache).
    pub warm_ms: f64,
    /// Bytes the timed warm runs fetched, per run (0 when the cache holds everything read).
    pub warm_fetched_bytes_per_run: u64,
    /// Median of the cold runs: the query alone, on a store just opened on an empty cache.
    pub cold_ms: f64,
    /// Bytes and requests a cold query fetched (after the open's), in its last run.
    pub cold_fetched_bytes: u64,
    pub cold_fetch_requests: u64,
    pub cold_open: ColdOpen,
}

/// Server settings in the figures (never its credentials).
#[derive(Debug, Serialize)]
pub struct ObjectStoreFigures {
    pub server: String,
    pub url: String,
    pub ingest: ObjectStoreIngest,
    /// The object store's points per CPU-second over the local store's (target ≥ 0.8).
    pub ingest_ratio_to_local: f64,
    /// Bytes of the live parts the manifest names.
    pub bytes: u64,
    pub bytes_per_point: f64,
    /// Over DuckDB's sorted zstd Parquet (target ≤ 1), when DuckDB ran.
    pub bytes_ratio_to_duckdb: Option<f64>,
    /// Opening a store afresh, the median over every cold run of every query.
    pub cold_open: ColdOpen,
}

impl ObjectStoreSide {
    /// Starts MinIO (built once by `scripts/s3/minio.sh`) and points a copy of `local`'s
    /// settings at a prefix of its bucket, staged and cached under `work`.
    pub fn start(work: &Path, local: &HistoryConfig) -> Result<Self, String> {
        let minio = Minio::start().map_err(|e| format!("MinIO did not start: {e}"))?;
        let mut history = local.clone();
        history.dir = minio.url("bench-history");
        history.object_store.endpoint = minio.endpoint.clone();
        history.object_store.region = "us-east-1".into();
        history.object_store.access_key_id = minio.access_key.clone();
        history.object_store.secret_access_key = minio.secret_key.clone();
        history.object_store.allow_http = true;
        let work = work.join("s3");
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
        history.cache_dir = work.join("writer").display().to_string();
        Ok(Self { minio, history, work, warm_reader: None })
    }

    /// Loads `reader` with `needle ingest`'s code into the store on the object store (every
    /// part uploaded and in the manifest when it returns), then opens the warm reader.
    pub fn ingest(
        &mut self,
        reader: Box<dyn Read + Send>,
        threads: usize,
        records: u64,
        points: u64,
    ) -> Result<ObjectStoreIngest, String> {
        let cpu_before = process_cpu_seconds();
        let summary = needle::ingest::ingest(&self.history, reader, threads, &|_| {})?;
        let cpu_seconds = process_cpu_seconds() - cpu_before;
        if summary.records != records {
            return Err(format!("ingested {} records of {records} into S3", summary.records));
        }
        let warm = self.open("warm")?;
        let remote = warm.remote_info().ok_or("a store on object storage")?;
        if remote.parts_waiting_for_upload > 0 {
            return Err(format!("{} parts were not uploaded", remote.parts_waiting_for_upload));
        }
        self.warm_reader = Some(warm);
        Ok(ObjectStoreIngest {
            seconds: summary.seconds,
            cpu_seconds,
            points_per_cpu_second: points as f64 / cpu_seconds.max(1e-9),
            records_per_second: summary.records_per_second,
        })
    }

    /// A read-only store on the object store, its cache in `work/s3/NAME` (emptied first).
    fn open(&self, name: &str) -> Result<Store, String> {
        let dir = self.work.join(name);
        let _ = std::fs::remove_dir_all(&dir);
        let mut history = self.history.clone();
        history.cache_dir = dir.display().to_string();
        Store::open_read_only(history.store_config()).map_err(|e| format!("{}: {e}", history.dir))
    }

    /// The live bytes the manifest names, as a store opened afresh reads them.
    pub fn manifest_bytes(&self) -> Result<u64, String> {
        let warm = self.warm_reader.as_ref().ok_or("ingest first")?;
        warm.info().map(|i| i.bytes).map_err(|e| e.to_string())
    }

    /// Runs `query` warm (`runs` timed after a warm-up, on the warm reader) and cold (`runs`
    /// times on a store opened afresh), each answer checked against `local`'s.
    pub fn time_query(
        &self,
        query: &PreparedQuery,
        runs: usize,
        threads: usize,
        local: &Answer,
    ) -> Result<ObjectStoreQuery, String> {
        let warm = self.warm_reader.as_ref().ok_or("ingest first")?;
        let mut warm_times = Vec::new();
        let fetched = |store: &Store| {
            store.remote_info().map_or((0, 0), |r| (r.fetched_bytes, r.fetch_requests))
        };
        let mut warm_fetched = 0;
        for run in 0..=runs {
            let before = fetched(warm);
            let QueryRun { ms, emissions, .. } = query.run(warm, threads)?;
            query.answer(&emissions).check_same(local, "the object store, warm")?;
            if run > 0 {
                warm_times.push(ms);
                warm_fetched += fetched(warm).0 - before.0;
            }
        }
        let mut cold_times = Vec::new();
        let mut open_times = Vec::new();
        let mut cold = (0, 0);
        let mut open_fetched = (0, 0);
        for run in 0..runs {
            let started = Instant::now();
            let store = self.open(&format!("cold-{run}"))?;
            open_times.push(started.elapsed().as_secs_f64() * 1000.0);
            let after_open = fetched(&store);
            let QueryRun { ms, emissions, .. } = query.run(&store, threads)?;
            let after_query = fetched(&store);
            query.answer(&emissions).check_same(local, "the object store, cold")?;
            cold_times.push(ms);
            open_fetched = after_open;
            cold = (after_query.0 - after_open.0, after_query.1 - after_open.1);
            drop(store);
            let _ = std::fs::remove_dir_all(self.work.join(format!("cold-{run}")));
        }
        Ok(ObjectStoreQuery {
            warm_ms: median(&mut warm_times),
            warm_fetched_bytes_per_run: warm_fetched / runs.max(1) as u64,
            cold_ms: median(&mut cold_times),
            cold_fetched_bytes: cold.0,
            cold_fetch_requests: cold.1,
            cold_open: ColdOpen {
                ms: median(&mut open_times),
                fetched_bytes: open_fetched.0,
                fetch_requests: open_fetched.1,
            },
        })
    }

    pub fn server(&self) -> String {
        format!("MinIO at {}", self.minio.endpoint)
    }

    pub fn url(&self) -> &str {
        &self.history.dir
    }
}
