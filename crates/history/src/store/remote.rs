//! A [`Store`] kept in an object store: its parts uploaded and named by the manifest.
//!
//! - **Writes**: a flush or a merge writes its part on the local disk first (fsynced, as a
//!   local store does); [`Store::sync_remote`] then uploads the parts not uploaded yet, in the
//!   order they were written, and, at most every `commit_ms` (at once when the store closes),
//!   commits one manifest version that adds the uploads waiting, retires the parts they
//!   replace and records the source position they reach (an upload merged away before any
//!   commit named it is deleted: no snapshot ever will). With
//!   `durable_on_upload`, that position is what [`Store::durable_position`] says from then on,
//!   so a Kafka source commits offsets only for records in the object store.
//! - **Faults**: an upload or a commit that fails leaves its parts waiting on the local disk
//!   (they are read from there meanwhile) and is tried again at the next flush; past
//!   `max_pending_bytes` waiting, flushes stop writing parts ([`Health::WritesStopped`]) and
//!   records wait in the write buffer, bounded as on a full disk. A process that finds a newer
//!   epoch of its writer name in the manifest stops writing for good: another process took the
//!   name over.
//! - **Several writers** (the workers of the distributed mode) share one store, each under its
//!   own name: a writer's view holds its own parts only (it alone merges and drops them), and
//!   [`Store::scan_shared`] adds a share of the parts of writers that are gone, so the live
//!   writers between them read every part once. A store opened read-only sees every part.
//! - **Opening**: the parts the manifest names, read from the local disk where this machine
//!   still has them and by range from the object store otherwise (the footer now, pages when a
//!   query needs them); local parts it does not name are uploads a crash interrupted (kept, to
//!   upload) or parts it replaced (removed).
//! - **Deletes**: a replaced part's object goes after `delete_grace_ms`, so a reader that
//!   planned from an older version never loses a file.

use super::{partition_dir, Health, Store};
use crate::config::{RemoteConfig, StoreConfig};
use crate::manifest::{ColumnSummary, Committed, Manifest, ManifestPart, RetiredPart};
use crate::object::cache::Cache;
use crate::object::reader::RemoteObject;
use crate::object::Bucket;
use crate::part::Part;
use crate::{prune, HistoryError};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A worker's share of a read planned from a manifest version: parts to add (by partition
/// start), and names of its own parts to leave out (dealt to another).
pub(super) type PlannedShare = (Vec<(i64, Part)>, HashSet<String>);

/// The object store side of a store.
pub(super) struct Remote {
    pub config: RemoteConfig,
    pub bucket: Arc<Bucket>,
    pub cache: Arc<Cache>,
    pub manifest: Mutex<Manifest>,
    /// This writer's epoch (0 when read-only).
    pub epoch: u64,
    /// Parts of other writers opened by [`Store::scan_shared`] (their footers read once), by
    /// key.
    pub others: Mutex<HashMap<String, Part>>,
    /// Held by a sync: one upload round at a time.
    pub syncing: Mutex<()>,
    /// Another writer took the store over.
    pub fenced: AtomicBool,
    /// Bytes of parts written here and not uploaded yet.
    pub pending_bytes: AtomicU64,
    /// Why the last upload or commit failed, while it does.
    pub failing: Mutex<Option<String>>,
    /// Keys of uploaded parts dropped by retention, to retire at the next commit.
    pub to_retire: Mutex<Vec<String>>,
    /// Parts uploaded and not committed yet (commits wait for `commit_every`), by name.
    pub uploaded: Mutex<HashMap<String, (i64, Part)>>,
    /// When the last commit of uploads was.
    pub committed_at: Mutex<Option<Instant>>,
    /// Commits of uploads come at most this often (`StoreConfig::commit_ms`; zero: each
    /// upload round commits).
    pub commit_every: Duration,
    pub counters: RemoteCounters,
}

/// What the object store side has done, for metrics.
#[derive(Debug, Default)]
pub struct RemoteCounters {
    pub uploads: AtomicU64,
    pub bytes_uploaded: AtomicU64,
    pub upload_errors: AtomicU64,
    pub commits: AtomicU64,
    pub objects_deleted: AtomicU64,
}

/// The object store side, as `needle history` and `/api/v1/history` show it.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RemoteInfo {
    pub url: String,
    pub manifest_version: u64,
    /// This process's writer name and epoch (0 when read-only).
    pub writer: String,
    pub epoch: u64,
    /// Writers the manifest knows.
    pub writers: u64,
    pub parts_waiting_for_upload: u64,
    pub bytes_waiting_for_upload: u64,
    pub retired_parts: u64,
    pub cache_bytes: u64,
    pub cache_budget_bytes: u64,
    pub fetched_bytes: u64,
    pub fetch_requests: u64,
    pub uploads: u64,
    pub bytes_uploaded: u64,
    pub upload_errors: u64,
    pub last_error: Option<String>,
    /// Per source stream (`topic/partition`), the offset after the last record uploaded and
    /// who uploaded it: where a Kafka consumer taking the partition over stops reading records
    /// already kept (see [`crate::offsets`]).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub kept_offsets: BTreeMap<String, crate::offsets::KeptOffset>,
}

impl Remote {
    pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reaches the bucket, reads the manifest and, for a writer, takes the next epoch.
    pub fn open(
        config: &RemoteConfig,
        local: &Path,
        read_only: bool,
        commit_every: Duration,
    ) -> Result<Remote, HistoryError> {
        let bucket = Arc::new(Bucket::open(&config.url, &config.options)?);
        bucket.check()?;
        let cache = Arc::new(Cache::open(&local.join(".cache"), config.cache_bytes)?);
        let mut manifest = Manifest::load(&bucket)?;
        let mut epoch = 0;
        if !read_only {
            let writer = config.writer.clone();
            let (_, taken) = Manifest::commit(&bucket, &manifest, None, |m| {
                *m.writers.entry(writer.clone()).or_default() += 1;
                m.snapshot_max_age_ms = Some(config.delete_grace_ms);
            })?;
            epoch = taken.writers.get(&config.writer).copied().unwrap_or_default();
            manifest = taken;
        }
        Ok(Remote {
            config: config.clone(),
            bucket,
            cache,
            manifest: Mutex::new(manifest),
            epoch,
            others: Mutex::new(HashMap::new()),
            syncing: Mutex::new(()),
            fenced: AtomicBool::new(false),
            pending_bytes: AtomicU64::new(0),
            failing: Mutex::new(None),
            to_retire: Mutex::new(Vec::new()),
            uploaded: Mutex::new(HashMap::new()),
            committed_at: Mutex::new(None),
            commit_every,
            counters: RemoteCounters::default(),
        })
    }

    pub fn object(&self, key: &str, size: u64) -> RemoteObject {
        RemoteObject {
            bucket: self.bucket.clone(),
            cache: self.cache.clone(),
            key: key.to_owned(),
            size,
        }
    }

    /// Past the bound of bytes waiting, or fenced: no new parts may be written.
    pub fn stopped(&self) -> Option<String> {
        if self.fenced.load(Ordering::Relaxed) {
            let m = Self::lock(&self.manifest);
            let epoch = m.writers.get(&self.config.writer).copied().unwrap_or_default();
            return Some(format!(
                "another process took the writer name {} (epoch {epoch}) of the store at {}; \
                 this one stopped writing",
                self.config.writer,
                self.bucket.url()
            ));
        }
        let pending = self.pending_bytes.load(Ordering::Relaxed);
        (pending > self.config.max_pending_bytes).then(|| {
            let why = Self::lock(&self.failing).clone().unwrap_or_default();
            format!(
                "{pending} bytes of parts wait for upload to {} (bound {}): {why}",
                self.bucket.url(),
                self.config.max_pending_bytes
            )
        })
    }

    pub fn info(&self, pending_parts: u64) -> RemoteInfo {
        let m = Self::lock(&self.manifest);
        let cache = self.cache.counters();
        let c = &self.counters;
        RemoteInfo {
            url: self.bucket.url().to_owned(),
            manifest_version: m.version,
            writer: self.config.writer.clone(),
            epoch: self.epoch,
            writers: m.writers.len() as u64,
            parts_waiting_for_upload: pending_parts,
            bytes_waiting_for_upload: self.pending_bytes.load(Ordering::Relaxed),
            retired_parts: m.retired.len() as u64,
            cache_bytes: cache.bytes.load(Ordering::Relaxed),
            cache_budget_bytes: self.config.cache_bytes,
            fetched_bytes: cache.fetched_bytes.load(Ordering::Relaxed),
            fetch_requests: cache.requests.load(Ordering::Relaxed),
            uploads: c.uploads.load(Ordering::Relaxed),
            bytes_uploaded: c.bytes_uploaded.load(Ordering::Relaxed),
            upload_errors: c.upload_errors.load(Ordering::Relaxed),
            last_error: Self::lock(&self.failing).clone(),
            kept_offsets: m.offsets.clone(),
        }
    }
}

/// Which of `count` readers reads the part `key`: FNV-1a of the key, the same in every
/// process of every version.
fn share_of(key: &str, count: usize) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash % count.max(1) as u64) as usize
}

/// The live writers of `roster`, sorted and each once, and `me`'s place among them (`None`
/// when `me` is not one): parts are dealt out by [`share_of`] over these places.
fn place<'r>(roster: &'r [String], me: &str) -> Option<(Vec<&'r String>, usize)> {
    let mut live: Vec<&String> = roster.iter().collect();
    live.sort();
    live.dedup();
    let index = live.iter().position(|w| *w == me)?;
    Some((live, index))
}

/// A part's key under the store's prefix.
pub(super) fn key_of(start: i64, name: &str) -> String {
    format!("p={start}/{name}")
}

/// What the manifest says of a part: its place, size, time range and column statistics.
pub(super) fn describe(
    start: i64,
    part: &Part,
    writer: &str,
    config: &StoreConfig,
) -> ManifestPart {
    let mut columns: BTreeMap<String, ColumnSummary> = BTreeMap::new();
    let mut families = BTreeMap::new();
    let schema = part.meta.schema();
    let parquet = part.parquet();
    for (position, field) in schema.fields().iter().enumerate() {
        let json = part.json_columns.iter().any(|c| c == field.name());
        let own = field.name() == needle_engine::columnar::layout::TIME_COLUMN
            || field.name() == crate::columns::LAYOUT_COLUMN;
        if let Some(kind) = needle_engine::columnar::layout::kind_of_column(field.data_type(), json)
            .filter(|_| !own)
        {
            families.insert(field.name().clone(), crate::iceberg::Family::of(kind));
        }
        let kind = prune::kind_of(field.data_type(), json);
        let mut summary = ColumnSummary::default();
        let mut known = true;
        for rg in parquet.row_groups() {
            let Some(stats) = rg.column(position).statistics() else {
                known = false;
                continue;
            };
            summary.nulls += stats.null_count_opt().unwrap_or(0);
            let Some(kind) = kind else { continue };
            let (lo, hi) = prune::stats_values(kind, stats);
            let (lo, hi) = (
                lo.and_then(|v| serde_json::to_value(v).ok()),
                hi.and_then(|v| serde_json::to_value(v).ok()),
            );
            summary.min = extreme(summary.min.take(), lo, std::cmp::Ordering::Less);
            summary.max = extreme(summary.max.take(), hi, std::cmp::Ordering::Greater);
        }
        if !known {
            summary.min = None;
            summary.max = None;
        }
        columns.insert(field.name().clone(), summary);
    }
    ManifestPart {
        key: key_of(start, &part.name),
        name: part.name.clone(),
        writer: writer.to_owned(),
        partition_start: start,
        sequence: part.sequence,
        level: part.level,
        rows: part.rows,
        bytes: part.bytes,
        time_min: part.time_range.0,
        time_max: part.time_range.1,
        replaces: part.replaces.clone(),
        compacted: part.compacted,
        columns,
        families,
        partition_span_ms: i64::try_from(if part.compacted {
            config.compact_span_ms
        } else {
            config.partition_ms
        })
        .unwrap_or(i64::MAX),
        added: None,
        manifest: None,
    }
}

/// The smaller (`Less`) or larger of two JSON scalars of one column.
fn extreme(
    a: Option<serde_json::Value>,
    b: Option<serde_json::Value>,
    keep: std::cmp::Ordering,
) -> Option<serde_json::Value> {
    use serde_json::Value as J;
    match (a, b) {
        (None, b) => b,
        (a, None) => a,
        (Some(a), Some(b)) => {
            let order = match (&a, &b) {
                (J::Number(x), J::Number(y)) => {
                    x.as_f64().partial_cmp(&y.as_f64()).unwrap_or(std::cmp::Ordering::Equal)
                }
                (J::String(x), J::String(y)) => x.cmp(y),
                (J::Bool(x), J::Bool(y)) => x.cmp(y),
                _ => std::cmp::Ordering::Equal,
            };
            Some(if order == keep { a } else { b })
        }
    }
}

impl Store {
    pub(super) fn remote(&self) -> Option<&Remote> {
        self.inner.remote.as_ref()
    }

    /// After the local parts are loaded: the view becomes the manifest's parts, each read
    /// from here when this machine has it and from the object store otherwise.
    pub(super) fn load_remote(&self) -> Result<(), HistoryError> {
        let Some(remote) = self.remote() else { return Ok(()) };
        let manifest = Remote::lock(&remote.manifest).clone();
        let dir = &self.inner.config.dir;
        let mut local: HashMap<String, (i64, Part)> = {
            let mut state = self.state();
            std::mem::take(&mut state.parts)
                .into_iter()
                .flat_map(|(start, parts)| {
                    parts.into_iter().map(move |p| (p.name.clone(), (start, p)))
                })
                .collect()
        };
        let mut view: BTreeMap<i64, Vec<Part>> = BTreeMap::new();
        let mine =
            |entry: &ManifestPart| self.inner.read_only || entry.writer == remote.config.writer;
        for entry in manifest.parts.iter().filter(|e| mine(e)) {
            let path = partition_dir(dir, entry.partition_start).join(&entry.name);
            let object = remote.object(&entry.key, entry.bytes);
            let part = match local.remove(&entry.name) {
                Some((_, part)) if part.bytes == entry.bytes => {
                    remote.cache.add_part(&part.path, part.bytes);
                    let _ = part.remote.set(object);
                    part
                }
                _ => match Part::open_remote(&path, object) {
                    Ok(part) => part,
                    Err(error) => {
                        self.corrupt(&path, &error);
                        continue;
                    }
                },
            };
            view.entry(entry.partition_start).or_default().push(part);
        }
        // what is left on the local disk: uploads a crash interrupted, or parts the manifest
        // already replaced or retired
        let gone: HashSet<&str> = manifest
            .parts
            .iter()
            .flat_map(|p| p.replaces.iter().map(String::as_str))
            .chain(manifest.retired.iter().filter_map(|r| r.key.rsplit('/').next()))
            .collect();
        let mut pending = 0;
        for (name, (start, part)) in local {
            if gone.contains(name.as_str()) || self.inner.read_only {
                if !self.inner.read_only {
                    let _ = std::fs::remove_file(&part.path);
                }
                continue;
            }
            // records whose offsets were never committed (they wait for this upload) that
            // another writer has read again from the source and kept since
            let conflict = remote
                .config
                .durable_on_upload
                .then(|| {
                    crate::offsets::conflicts(
                        &manifest.offsets,
                        &remote.config.writer,
                        &part.offsets,
                    )
                })
                .flatten();
            if let Some((stream, by)) = conflict {
                eprintln!(
                    "needle: history: not uploading {name}, left by a crash: writer {} has kept \
                     the records of {stream} since (up to offset {}), read again from the source",
                    by.writer, by.next
                );
                let _ = std::fs::remove_file(&part.path);
                continue;
            }
            pending += part.bytes;
            view.entry(start).or_default().push(part);
        }
        for parts in view.values_mut() {
            parts.sort_by_key(|p| p.sequence);
        }
        remote.pending_bytes.store(pending, Ordering::Relaxed);
        let mut state = self.state();
        state.parts = view;
        state.next_sequence = state.next_sequence.max(manifest.next_sequence);
        if remote.config.durable_on_upload {
            state.durable_position = manifest.positions.get(&remote.config.writer).cloned();
        }
        Ok(())
    }

    /// Uploads the parts written here and not uploaded yet, oldest first, and commits the
    /// uploaded ones (with the parts they replace retired, and retention's drops) in one
    /// manifest version when `commit_ms` has passed since the last commit, or at once when
    /// `force`. Failures are counted, kept in health and tried again next time; `Ok` tells
    /// nothing about them.
    pub(super) fn sync_remote(&self, force: bool) -> Result<(), HistoryError> {
        let Some(remote) = self.remote() else { return Ok(()) };
        if self.inner.read_only || remote.fenced.load(Ordering::Relaxed) {
            return Ok(());
        }
        let _syncing = Remote::lock(&remote.syncing);
        let mut pending: Vec<(i64, Part)> = {
            let state = self.state();
            state
                .parts
                .iter()
                .flat_map(|(start, parts)| parts.iter().map(move |p| (*start, p)))
                .filter(|(_, p)| p.remote().is_none())
                .map(|(s, p)| (s, p.clone()))
                .collect()
        };
        pending.sort_by_key(|(_, p)| p.sequence);
        let mut failure: Option<String> = None;
        {
            let mut uploaded = Remote::lock(&remote.uploaded);
            // an upload a merge replaced before any commit named it: no snapshot ever will
            let live: HashSet<&str> = pending.iter().map(|(_, p)| p.name.as_str()).collect();
            uploaded.retain(|name, (start, _)| {
                let keep = live.contains(name.as_str());
                if !keep {
                    let _ = remote.bucket.delete(&key_of(*start, name));
                }
                keep
            });
            for (start, part) in pending.iter() {
                if uploaded.contains_key(&part.name) {
                    continue;
                }
                let key = key_of(*start, &part.name);
                match remote.bucket.upload(&key, &part.path) {
                    Ok(bytes) => {
                        remote.counters.uploads.fetch_add(1, Ordering::Relaxed);
                        remote.counters.bytes_uploaded.fetch_add(bytes, Ordering::Relaxed);
                        uploaded.insert(part.name.clone(), (*start, part.clone()));
                    }
                    Err(error) => {
                        remote.counters.upload_errors.fetch_add(1, Ordering::Relaxed);
                        failure = Some(error.to_string());
                        break;
                    }
                }
            }
        }
        let due = force
            || Remote::lock(&remote.committed_at)
                .is_none_or(|at| at.elapsed() >= remote.commit_every);
        // a flush's parts join the manifest together, with their source offsets, or not at
        // all: after a failed upload, the uploaded ones wait for the next round
        let mut uploaded: Vec<(i64, Part)> = if failure.is_none() && due {
            Remote::lock(&remote.uploaded).values().cloned().collect()
        } else {
            Vec::new()
        };
        uploaded.sort_by_key(|(_, p)| p.sequence);
        let retire: Vec<String> =
            if due { Remote::lock(&remote.to_retire).clone() } else { Vec::new() };
        if !uploaded.is_empty() || !retire.is_empty() {
            let entries: Vec<ManifestPart> = uploaded
                .iter()
                .map(|(start, part)| {
                    describe(*start, part, &remote.config.writer, &self.inner.config)
                })
                .collect();
            // every record flushed so far is in the object store once nothing waits: the
            // last flush's position is durable then (a merged part's own position may be
            // older than one already committed)
            let (position, next_sequence) = {
                let state = self.state();
                let all = uploaded.len() == pending.len();
                (state.flushed_position.clone().filter(|_| all), state.next_sequence)
            };
            let writer = remote.config.writer.clone();
            let sort_by = self.inner.config.sort_by.clone();
            let grace = remote.config.delete_grace_ms as i64;
            let base = Remote::lock(&remote.manifest).clone();
            let committed =
                Manifest::commit(&remote.bucket, &base, Some((&writer, remote.epoch)), |m| {
                    m.snapshot_max_age_ms = Some(remote.config.delete_grace_ms);
                    m.sort_by = sort_by.clone();
                    let delete_after_ms = crate::manifest::now_ms().saturating_add(grace);
                    let replaced: HashSet<&str> = entries
                        .iter()
                        .flat_map(|e| e.replaces.iter().map(String::as_str))
                        .collect();
                    let mut retired: Vec<RetiredPart> = Vec::new();
                    m.parts.retain(|p| {
                        let goes = replaced.contains(p.name.as_str()) || retire.contains(&p.key);
                        if goes {
                            retired.push(RetiredPart { key: p.key.clone(), delete_after_ms });
                        }
                        !goes
                    });
                    m.retired.extend(retired);
                    m.parts.extend(entries.iter().cloned());
                    let wanted: Vec<(String, crate::iceberg::Family)> = entries
                        .iter()
                        .flat_map(|e| e.families.iter().map(|(c, f)| (c.clone(), *f)))
                        .collect();
                    crate::iceberg::register(&mut m.fields, &wanted);
                    m.next_sequence = m.next_sequence.max(next_sequence);
                    if let Some(position) = &position {
                        m.positions.insert(writer.clone(), position.clone());
                    }
                    for (_, part) in &uploaded {
                        crate::offsets::record_upload(&mut m.offsets, &writer, &part.offsets);
                    }
                });
            match committed {
                Ok((Committed::Version(_), manifest)) => {
                    remote.counters.commits.fetch_add(1, Ordering::Relaxed);
                    *Remote::lock(&remote.committed_at) = Some(Instant::now());
                    Remote::lock(&remote.to_retire).retain(|k| !retire.contains(k));
                    {
                        let mut waiting = Remote::lock(&remote.uploaded);
                        for (_, part) in &uploaded {
                            waiting.remove(&part.name);
                        }
                    }
                    let mut state = self.state();
                    for (start, part) in &uploaded {
                        let Some(parts) = state.parts.get_mut(start) else { continue };
                        if let Some(p) = parts.iter().find(|p| p.name == part.name) {
                            let _ = p.remote.set(remote.object(&key_of(*start, &p.name), p.bytes));
                            remote.cache.add_part(&p.path, p.bytes);
                        }
                    }
                    if remote.config.durable_on_upload {
                        if let Some(position) = manifest.positions.get(&remote.config.writer) {
                            state.durable_position = Some(position.clone());
                        }
                    }
                    drop(state);
                    *Remote::lock(&remote.manifest) = manifest;
                }
                Ok((Committed::Fenced { writer, epoch }, manifest)) => {
                    remote.fenced.store(true, Ordering::Relaxed);
                    *Remote::lock(&remote.manifest) = manifest;
                    let reason = format!(
                        "another process took the writer name {writer} (epoch {epoch}) of the \
                         store at {}; this one stopped writing",
                        remote.bucket.url()
                    );
                    eprintln!("needle: history: {reason}");
                    *self.health_mut() = Health::WritesStopped { reason };
                }
                Err(error) => {
                    remote.counters.upload_errors.fetch_add(1, Ordering::Relaxed);
                    failure = Some(error.to_string());
                }
            }
        }
        let pending_bytes: u64 = {
            let state = self.state();
            state.parts.values().flatten().filter(|p| p.remote().is_none()).map(|p| p.bytes).sum()
        };
        remote.pending_bytes.store(pending_bytes, Ordering::Relaxed);
        let mut failing = Remote::lock(&remote.failing);
        match failure {
            Some(why) => {
                if failing.is_none() {
                    eprintln!(
                        "needle: history: uploads to {} fail, parts wait on the local disk: {why}",
                        remote.bucket.url()
                    );
                }
                *failing = Some(why);
            }
            None => {
                if failing.take().is_some() {
                    eprintln!("needle: history: uploads to {} resumed", remote.bucket.url());
                }
            }
        }
        drop(failing);
        if let Some(reason) = remote.stopped() {
            *self.health_mut() = Health::WritesStopped { reason };
        }
        let (version, table) = {
            let manifest = Remote::lock(&remote.manifest);
            (manifest.version, manifest.table.clone())
        };
        self.sync_rest_catalog(&remote.bucket, version, table.as_ref());
        Ok(())
    }

    /// Whether new parts may not be written now (the uploads too far behind, or fenced), and
    /// why.
    pub(super) fn remote_stopped(&self) -> Option<String> {
        self.remote().and_then(Remote::stopped)
    }

    /// Retention dropped the partition at `start`: its uploaded parts leave the manifest at the
    /// next commit.
    pub(super) fn retire_partition(&self, parts: &[Part]) {
        let Some(remote) = self.remote() else { return };
        let mut retire = Remote::lock(&remote.to_retire);
        for part in parts {
            remote.cache.forget_part(&part.path);
            if let Some(object) = part.remote() {
                retire.push(object.key.clone());
            }
        }
    }

    /// A part merged away: no longer counted by the cache.
    pub(super) fn forget_local(&self, path: &Path) {
        if let Some(remote) = self.remote() {
            remote.cache.forget_part(path);
        }
    }

    /// Retention over the parts of other writers: those of the newest manifest whose records
    /// are all past `retention_ms` leave it at the next commit. Their writer, if it is alive,
    /// drops them itself by the same rule; one that never comes back would keep them forever.
    pub(super) fn retire_expired_of_others(&self) -> Result<u64, HistoryError> {
        let Some(remote) = self.remote() else { return Ok(0) };
        let Some(retention) = self.inner.config.retention_ms else { return Ok(0) };
        if self.inner.read_only || remote.fenced.load(Ordering::Relaxed) {
            return Ok(0);
        }
        let cutoff = crate::manifest::now_ms().saturating_sub(retention as i64);
        let manifest = Manifest::load(&remote.bucket)?;
        let me = &remote.config.writer;
        let mut retire = Remote::lock(&remote.to_retire);
        let mut others = Remote::lock(&remote.others);
        let mut count = 0;
        for entry in &manifest.parts {
            if entry.writer == *me || entry.time_max >= cutoff || retire.contains(&entry.key) {
                continue;
            }
            retire.push(entry.key.clone());
            others.remove(&entry.key);
            count += 1;
        }
        Ok(count)
    }

    /// Deletes the objects of retired parts whose grace has passed, and drops them from the
    /// manifest.
    pub(super) fn delete_retired(&self) -> Result<u64, HistoryError> {
        let Some(remote) = self.remote() else { return Ok(0) };
        if self.inner.read_only || remote.fenced.load(Ordering::Relaxed) {
            return Ok(0);
        }
        let _syncing = Remote::lock(&remote.syncing);
        let now = crate::manifest::now_ms();
        let base = Remote::lock(&remote.manifest).clone();
        let due: Vec<String> = base
            .retired
            .iter()
            .filter(|r| r.delete_after_ms <= now)
            .map(|r| r.key.clone())
            .collect();
        if due.is_empty() {
            return Ok(0);
        }
        let mut deleted = Vec::new();
        for key in &due {
            if remote.bucket.delete(key).is_ok() {
                deleted.push(key.clone());
            }
        }
        let writer = remote.config.writer.clone();
        let (committed, manifest) =
            Manifest::commit(&remote.bucket, &base, Some((&writer, remote.epoch)), |m| {
                m.snapshot_max_age_ms = Some(remote.config.delete_grace_ms);
                m.retired.retain(|r| !deleted.contains(&r.key));
            })?;
        if let Committed::Fenced { .. } = committed {
            remote.fenced.store(true, Ordering::Relaxed);
        }
        remote.counters.objects_deleted.fetch_add(deleted.len() as u64, Ordering::Relaxed);
        *Remote::lock(&remote.manifest) = manifest;
        Ok(deleted.len() as u64)
    }

    /// A read planned from manifest version `version`: of the parts that version names, the
    /// *dealt* ones — every part of a writer not in `roster` (gone), and every compacted part
    /// (the whole of a cold span, never merged again) of the live ones — whose key's hash falls
    /// on this writer's place in the sorted `roster`. Every other part is its writer's to read,
    /// from its own view (which holds what it wrote since the version too). Returns the parts to
    /// add to the scan and the names of own parts to leave out of it (dealt to another);
    /// `None` when the version cannot serve (no longer kept, a dealt part of it deleted since,
    /// or this writer not in `roster`): the caller reads by writers instead.
    pub(super) fn planned_share(
        &self,
        roster: &[String],
        version: u64,
    ) -> Result<Option<PlannedShare>, HistoryError> {
        let Some(remote) = self.remote() else { return Ok(None) };
        let me = &remote.config.writer;
        let Some((live, index)) = place(roster, me) else { return Ok(None) };
        let Some(planned) = Manifest::load_version(&remote.bucket, version)? else {
            return Ok(None);
        };
        let dealt = |e: &ManifestPart| e.compacted || !live.iter().any(|w| **w == e.writer);
        // a dealt part retired since is still there to read until its grace has passed
        let latest = Manifest::load(&remote.bucket)?;
        let there: HashSet<&str> = latest
            .parts
            .iter()
            .map(|p| p.key.as_str())
            .chain(latest.retired.iter().map(|r| r.key.as_str()))
            .collect();
        if !planned.parts.iter().filter(|e| dealt(e)).all(|e| there.contains(e.key.as_str())) {
            return Ok(None);
        }
        let own: HashSet<String> =
            self.state().parts.values().flatten().map(|p| p.name.clone()).collect();
        let mut leave_out = HashSet::new();
        let mut add = Vec::new();
        let mut opened = Remote::lock(&remote.others);
        for entry in planned.parts.iter().filter(|e| dealt(e)) {
            if share_of(&entry.key, live.len()) != index {
                if entry.writer == *me {
                    leave_out.insert(entry.name.clone());
                }
                continue;
            }
            if entry.writer == *me && own.contains(&entry.name) {
                continue; // read from the own view, as it is
            }
            if let Some(part) = self.open_for_others(remote, &mut opened, entry) {
                add.push((entry.partition_start, part));
            }
        }
        Ok(Some((add, leave_out)))
    }

    /// A part of the manifest read here for another writer: its footer fetched once and kept
    /// in `opened` (never a file here: reads go to the object store); `None` when it is not a
    /// readable part (logged once, counted).
    fn open_for_others(
        &self,
        remote: &Remote,
        opened: &mut HashMap<String, Part>,
        entry: &ManifestPart,
    ) -> Option<Part> {
        if let Some(part) = opened.get(&entry.key) {
            return Some(part.clone());
        }
        let path = self.inner.config.dir.join(".others").join(&entry.key);
        match Part::open_remote(&path, remote.object(&entry.key, entry.bytes)) {
            Ok(part) => {
                opened.insert(entry.key.clone(), part.clone());
                Some(part)
            }
            Err(error) => {
                self.corrupt(&path, &error);
                None
            }
        }
    }

    /// The parts of writers not in `roster` that are this writer's to read: those whose key's
    /// hash falls on this writer's place in the sorted roster. Read from the newest manifest;
    /// each part's footer is fetched once and kept.
    pub(super) fn share_of_gone_writers(
        &self,
        roster: &[String],
    ) -> Result<Vec<(i64, Part)>, HistoryError> {
        let Some(remote) = self.remote() else { return Ok(Vec::new()) };
        let me = &remote.config.writer;
        let Some((live, index)) = place(roster, me) else { return Ok(Vec::new()) };
        let manifest = Manifest::load(&remote.bucket)?;
        let mut shared = Vec::new();
        let mut opened = Remote::lock(&remote.others);
        let gone = |e: &&ManifestPart| e.writer != *me && !live.iter().any(|w| **w == e.writer);
        for entry in manifest.parts.iter().filter(gone) {
            if share_of(&entry.key, live.len()) != index {
                continue;
            }
            if let Some(part) = self.open_for_others(remote, &mut opened, entry) {
                shared.push((entry.partition_start, part));
            }
        }
        let live_keys: HashSet<&str> = manifest.parts.iter().map(|p| p.key.as_str()).collect();
        opened.retain(|key, _| live_keys.contains(key.as_str()));
        Ok(shared)
    }

    /// The object store side of the store, when it has one.
    pub fn remote_info(&self) -> Option<RemoteInfo> {
        let remote = self.remote()?;
        let pending_parts =
            self.state().parts.values().flatten().filter(|p| p.remote().is_none()).count() as u64;
        Some(remote.info(pending_parts))
    }
}
