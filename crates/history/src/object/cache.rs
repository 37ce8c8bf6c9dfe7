//! The local cache of a store on object storage, bounded in bytes (`history.cache_bytes`).
//!
//! It holds two kinds of things, in one least-recently-used order:
//! - **ranges of remote parts**, in aligned chunks of [`CHUNK_BYTES`] kept as files under the
//!   cache's directory: a cold read fetches the chunks that cover the footer, the page index
//!   and the pages it needs (runs of missing chunks in one request each), never a whole file
//!   it does not need; a warm read finds them here. The newest few chunks are also kept in
//!   memory, for the many small reads of page headers.
//! - **whole parts this process wrote** (hot, recent data), once they are uploaded: evicting
//!   one removes the local copy, and its reads go to the object store from then on.
//!
//! The chunk files are the cache's own: the directory is emptied when the cache is opened.

use crate::object::Bucket;
use crate::HistoryError;
use bytes::{Bytes, BytesMut};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The size of one cached range, aligned in the object: small, so a column chunk of a few
/// kilobytes costs a few kilobytes ([`Cache::prefetch`] fetches runs of chunks in one request).
pub const CHUNK_BYTES: u64 = 32 << 10;
/// Missing chunks this close (in chunks) are fetched in one request with the chunks between
/// them: ranges of a few kilobytes spread over a part (the time column of every block, for a
/// COUNT) cost one request per few hundred kilobytes instead of one each; a request costs
/// about a millisecond, 128 KiB about a tenth of one.
const COALESCE_GAP_CHUNKS: u64 = 4;
/// A request is cut into pieces of at most this many chunks when there are fewer requests
/// than [`crate::object::PARALLEL_REQUESTS`], so the pieces go in parallel.
const MIN_PIECE_CHUNKS: u64 = 8;
/// Chunks also kept in memory (the newest read).
const CHUNKS_IN_MEMORY: usize = 32;

/// What the cache has done, for metrics and benchmarks.
#[derive(Debug, Default)]
pub struct CacheCounters {
    /// Bytes fetched from the object store by reads.
    pub fetched_bytes: AtomicU64,
    /// Range requests made by reads.
    pub requests: AtomicU64,
    /// Chunks found in the cache.
    pub hits: AtomicU64,
    /// Chunks that had to be fetched.
    pub misses: AtomicU64,
    /// Bytes held now (chunks and whole local parts).
    pub bytes: AtomicU64,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Chunk(String, u64),
    Part(PathBuf),
}

struct Entry {
    bytes: u64,
    last_use: u64,
}

#[derive(Default)]
struct State {
    entries: HashMap<Key, Entry>,
    by_use: BTreeMap<u64, Key>,
    clock: u64,
    bytes: u64,
    memory: VecDeque<(String, u64, Bytes)>,
}

/// The cache of one store.
pub struct Cache {
    dir: PathBuf,
    budget: u64,
    state: Mutex<State>,
    counters: Arc<CacheCounters>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache").field("dir", &self.dir).field("budget", &self.budget).finish()
    }
}

impl Cache {
    /// A cache of at most `budget` bytes keeping its chunks in `dir` (emptied now).
    pub fn open(dir: &Path, budget: u64) -> Result<Cache, HistoryError> {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(|e| HistoryError::io(dir, e))?;
        }
        std::fs::create_dir_all(dir).map_err(|e| HistoryError::io(dir, e))?;
        Ok(Cache {
            dir: dir.to_owned(),
            budget,
            state: Mutex::new(State::default()),
            counters: Arc::new(CacheCounters::default()),
        })
    }

    /// The bytes the cache holds at most.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    pub fn counters(&self) -> &Arc<CacheCounters> {
        &self.counters
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn chunk_file(&self, object: &str, index: u64) -> PathBuf {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        object.hash(&mut hasher);
        self.dir.join(format!("{:016x}-{index}", hasher.finish()))
    }

    /// The bytes `[start, start + length)` of `object` (of `size` bytes), from the cache or
    /// fetched.
    pub fn read(
        &self,
        bucket: &Bucket,
        object: &str,
        size: u64,
        start: u64,
        length: usize,
    ) -> Result<Bytes, HistoryError> {
        if length == 0 {
            return Ok(Bytes::new());
        }
        let end = (start + length as u64).min(size);
        if start >= end {
            return Err(HistoryError::Object {
                location: format!("{}/{object}", bucket.url()),
                message: format!("a read at {start} past the object's end ({size} bytes)"),
            });
        }
        let first = start / CHUNK_BYTES;
        let last = (end - 1) / CHUNK_BYTES;
        let chunks = self.chunks(bucket, object, size, first, last)?;
        if chunks.len() == 1 {
            let offset = (start - first * CHUNK_BYTES) as usize;
            return Ok(chunks[0].slice(offset..offset + (end - start) as usize));
        }
        let mut out = BytesMut::with_capacity((end - start) as usize);
        for (i, chunk) in chunks.iter().enumerate() {
            let chunk_start = (first + i as u64) * CHUNK_BYTES;
            let lo = start.saturating_sub(chunk_start) as usize;
            let hi = ((end - chunk_start) as usize).min(chunk.len());
            out.extend_from_slice(&chunk[lo..hi]);
        }
        Ok(out.freeze())
    }

    /// Makes sure the byte ranges `(start, length)` of `object` are cached: the chunks missing
    /// are fetched, a run of consecutive chunks a request, the requests in parallel (a block's
    /// column chunks before its reader asks for their pages one by one).
    pub fn prefetch(
        &self,
        bucket: &Bucket,
        object: &str,
        size: u64,
        ranges: &[(u64, u64)],
    ) -> Result<(), HistoryError> {
        let mut missing: Vec<u64> = Vec::new();
        for &(start, length) in ranges {
            let end = (start + length).min(size);
            if start >= end {
                continue;
            }
            for index in start / CHUNK_BYTES..=(end - 1) / CHUNK_BYTES {
                let key = Key::Chunk(object.to_owned(), index);
                if !self.state().entries.contains_key(&key) {
                    missing.push(index);
                }
            }
        }
        missing.sort_unstable();
        missing.dedup();
        let runs = requests_for(&missing);
        if runs.is_empty() {
            return Ok(());
        }
        let requests: Vec<std::ops::Range<u64>> = runs
            .iter()
            .map(|(first, last)| first * CHUNK_BYTES..((last + 1) * CHUNK_BYTES).min(size))
            .collect();
        let fetched = bucket.get_ranges(object, requests.clone())?;
        for ((range, bytes), (first, _)) in requests.iter().zip(fetched).zip(&runs) {
            if (bytes.len() as u64) < range.end - range.start {
                return Err(HistoryError::Object {
                    location: format!("{}/{object}", bucket.url()),
                    message: format!(
                        "the object is shorter than its {size} bytes (truncated or replaced)"
                    ),
                });
            }
            self.counters.requests.fetch_add(1, Ordering::Relaxed);
            self.counters.fetched_bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            let mut index = *first;
            let mut offset = 0;
            while offset < bytes.len() {
                let chunk = bytes.slice(offset..(offset + CHUNK_BYTES as usize).min(bytes.len()));
                let key = Key::Chunk(object.to_owned(), index);
                // a gap fetched with its neighbours may hold chunks the cache has already
                if !self.state().entries.contains_key(&key) {
                    self.counters.misses.fetch_add(1, Ordering::Relaxed);
                    self.keep(object, index, &chunk);
                }
                offset += CHUNK_BYTES as usize;
                index += 1;
            }
        }
        Ok(())
    }

    /// Chunks `first..=last` of `object`: those missing fetched, a run at a time.
    pub fn chunks(
        &self,
        bucket: &Bucket,
        object: &str,
        size: u64,
        first: u64,
        last: u64,
    ) -> Result<Vec<Bytes>, HistoryError> {
        let mut found: Vec<Option<Bytes>> =
            (first..=last).map(|index| self.cached(object, index)).collect();
        let mut i = 0;
        while i < found.len() {
            if found[i].is_some() {
                i += 1;
                continue;
            }
            let run_start = i;
            while i < found.len() && found[i].is_none() {
                i += 1;
            }
            let from = (first + run_start as u64) * CHUNK_BYTES;
            let to = ((first + i as u64) * CHUNK_BYTES).min(size);
            let fetched = bucket.get_range(object, from, to - from)?;
            if (fetched.len() as u64) < to - from {
                return Err(HistoryError::Object {
                    location: format!("{}/{object}", bucket.url()),
                    message: format!(
                        "the object is shorter than its {size} bytes (truncated or replaced)"
                    ),
                });
            }
            self.counters.requests.fetch_add(1, Ordering::Relaxed);
            self.counters.fetched_bytes.fetch_add(to - from, Ordering::Relaxed);
            for (k, slot) in found[run_start..i].iter_mut().enumerate() {
                let index = first + (run_start + k) as u64;
                let lo = (index * CHUNK_BYTES - from) as usize;
                let hi = (lo + CHUNK_BYTES as usize).min(fetched.len());
                let chunk = fetched.slice(lo..hi);
                self.counters.misses.fetch_add(1, Ordering::Relaxed);
                self.keep(object, index, &chunk);
                *slot = Some(chunk);
            }
        }
        Ok(found.into_iter().map(|c| c.unwrap_or_default()).collect())
    }

    /// A chunk from memory or the cache's files.
    fn cached(&self, object: &str, index: u64) -> Option<Bytes> {
        let key = Key::Chunk(object.to_owned(), index);
        {
            let mut state = self.state();
            if !state.entries.contains_key(&key) {
                return None;
            }
            touch(&mut state, &key);
            let in_memory = state
                .memory
                .iter()
                .find(|(o, i, _)| o == object && *i == index)
                .map(|m| m.2.clone());
            if let Some(bytes) = in_memory {
                self.counters.hits.fetch_add(1, Ordering::Relaxed);
                return Some(bytes);
            }
        }
        let bytes = Bytes::from(std::fs::read(self.chunk_file(object, index)).ok()?);
        self.counters.hits.fetch_add(1, Ordering::Relaxed);
        remember(&mut self.state(), object, index, &bytes);
        Some(bytes)
    }

    /// Keeps a fetched chunk (a failure to write it only costs a later fetch).
    fn keep(&self, object: &str, index: u64, chunk: &Bytes) {
        if chunk.len() as u64 > self.budget {
            return;
        }
        if std::fs::write(self.chunk_file(object, index), chunk).is_err() {
            return;
        }
        let mut state = self.state();
        remember(&mut state, object, index, chunk);
        self.insert(&mut state, Key::Chunk(object.to_owned(), index), chunk.len() as u64);
    }

    /// A whole part this process wrote and uploaded: kept, and counted, until evicted.
    pub fn add_part(&self, path: &Path, bytes: u64) {
        let mut state = self.state();
        self.insert(&mut state, Key::Part(path.to_owned()), bytes);
    }

    /// A read of a whole local part: it becomes the most recently used.
    pub fn touch_part(&self, path: &Path) {
        let key = Key::Part(path.to_owned());
        let mut state = self.state();
        if state.entries.contains_key(&key) {
            touch(&mut state, &key);
        }
    }

    /// A part removed by the store (merged away, dropped): no longer counted.
    pub fn forget_part(&self, path: &Path) {
        let mut state = self.state();
        let key = Key::Part(path.to_owned());
        if let Some(entry) = state.entries.remove(&key) {
            state.by_use.remove(&entry.last_use);
            state.bytes -= entry.bytes;
            self.counters.bytes.store(state.bytes, Ordering::Relaxed);
        }
    }

    fn insert(&self, state: &mut State, key: Key, bytes: u64) {
        if let Some(old) = state.entries.remove(&key) {
            state.by_use.remove(&old.last_use);
            state.bytes -= old.bytes;
        }
        state.clock += 1;
        let last_use = state.clock;
        state.by_use.insert(last_use, key.clone());
        state.entries.insert(key, Entry { bytes, last_use });
        state.bytes += bytes;
        while state.bytes > self.budget {
            let Some((_, victim)) = state.by_use.pop_first() else { break };
            let Some(entry) = state.entries.remove(&victim) else { continue };
            state.bytes -= entry.bytes;
            match &victim {
                Key::Chunk(object, index) => {
                    state.memory.retain(|(o, i, _)| !(o == object && i == index));
                    let _ = std::fs::remove_file(self.chunk_file(object, *index));
                }
                // an open reader keeps its file; new reads go to the object store
                Key::Part(path) => {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
        self.counters.bytes.store(state.bytes, Ordering::Relaxed);
    }
}

fn touch(state: &mut State, key: &Key) {
    state.clock += 1;
    let now = state.clock;
    if let Some(entry) = state.entries.get_mut(key) {
        let before = std::mem::replace(&mut entry.last_use, now);
        state.by_use.remove(&before);
        state.by_use.insert(now, key.clone());
    }
}

fn remember(state: &mut State, object: &str, index: u64, bytes: &Bytes) {
    if state.memory.iter().any(|(o, i, _)| o == object && *i == index) {
        return;
    }
    if state.memory.len() >= CHUNKS_IN_MEMORY {
        state.memory.pop_front();
    }
    state.memory.push_back((object.to_owned(), index, bytes.clone()));
}

/// The requests that fetch the `missing` chunks (sorted, distinct), as runs of chunk indexes
/// `(first, last)`: runs closer than [`COALESCE_GAP_CHUNKS`] joined, then long runs cut so that
/// up to [`crate::object::PARALLEL_REQUESTS`] go at once.
fn requests_for(missing: &[u64]) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &index in missing {
        match runs.last_mut() {
            Some((_, last)) if index <= *last + 1 + COALESCE_GAP_CHUNKS => *last = index,
            _ => runs.push((index, index)),
        }
    }
    let chunks: u64 = runs.iter().map(|(a, b)| b - a + 1).sum();
    let piece = chunks.div_ceil(crate::object::PARALLEL_REQUESTS as u64).max(MIN_PIECE_CHUNKS);
    runs.into_iter()
        .flat_map(|(first, last)| {
            (first..=last).step_by(piece as usize).map(move |a| (a, (a + piece - 1).min(last)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn nearby_missing_chunks_are_fetched_together_and_long_runs_in_parallel_pieces() {
        use super::requests_for;
        assert_eq!(requests_for(&[]), vec![]);
        // close enough: one request with the gaps; far: two
        assert_eq!(requests_for(&[1, 3, 8]), vec![(1, 8)]);
        assert_eq!(requests_for(&[1, 3, 9]), vec![(1, 3), (9, 9)]);
        // the time column of 110 blocks, one chunk every third: 20 pieces of ~16 chunks
        let spread: Vec<u64> = (0..110).map(|b| b * 3).collect();
        let requests = requests_for(&spread);
        assert_eq!(requests.first(), Some(&(0, 20)));
        assert_eq!(requests.last().map(|r| r.1), Some(327));
        assert!(requests.windows(2).all(|w| w[0].1 + 1 == w[1].0), "{requests:?}");
        assert!(requests.len() <= 16, "{requests:?}");
        // a short run is not cut below eight chunks
        assert_eq!(requests_for(&(0..12).collect::<Vec<_>>()), vec![(0, 7), (8, 11)]);
    }

    use super::*;
    use crate::object::ObjectStoreOptions;

    fn bucket_with(object: &str, bytes: &[u8]) -> (tempfile::TempDir, Bucket) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().join("bucket").display());
        let bucket = Bucket::open(&url, &ObjectStoreOptions::default()).unwrap();
        bucket.put(object, Bytes::copy_from_slice(bytes)).unwrap();
        (dir, bucket)
    }

    #[test]
    fn reads_across_chunks_equal_the_object_and_a_second_read_fetches_nothing() {
        let data: Vec<u8> = (0..(CHUNK_BYTES * 3 + 100)).map(|i| (i % 251) as u8).collect();
        let (dir, bucket) = bucket_with("p/x", &data);
        let cache = Cache::open(&dir.path().join("cache"), 1 << 30).unwrap();
        let size = data.len() as u64;
        for (start, length) in [(0, 10), (CHUNK_BYTES - 5, 10), (100, 2 * CHUNK_BYTES as usize)] {
            let got = cache.read(&bucket, "p/x", size, start, length).unwrap();
            assert_eq!(&got[..], &data[start as usize..start as usize + length]);
        }
        let tail = cache.read(&bucket, "p/x", size, size - 50, 50).unwrap();
        assert_eq!(&tail[..], &data[data.len() - 50..]);
        let fetched = cache.counters().fetched_bytes.load(Ordering::Relaxed);
        assert_eq!(fetched, size, "each chunk fetched once");
        cache.read(&bucket, "p/x", size, 0, data.len()).unwrap();
        assert_eq!(cache.counters().fetched_bytes.load(Ordering::Relaxed), fetched);
        assert!(cache.read(&bucket, "p/x", size, size, 1).is_err());
    }

    #[test]
    fn a_small_read_fetches_one_chunk_not_the_file() {
        let data = vec![7u8; (CHUNK_BYTES * 8) as usize];
        let (dir, bucket) = bucket_with("p/y", &data);
        let cache = Cache::open(&dir.path().join("cache"), 1 << 30).unwrap();
        cache.read(&bucket, "p/y", data.len() as u64, data.len() as u64 - 8, 8).unwrap();
        assert_eq!(cache.counters().fetched_bytes.load(Ordering::Relaxed), CHUNK_BYTES);
        assert_eq!(cache.counters().requests.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_prefetch_fetches_each_run_of_missing_chunks_once_and_reads_then_hit() {
        let data: Vec<u8> = (0..(CHUNK_BYTES * 10)).map(|i| (i % 253) as u8).collect();
        let (dir, bucket) = bucket_with("p/w", &data);
        let cache = Cache::open(&dir.path().join("cache"), 1 << 30).unwrap();
        let size = data.len() as u64;
        cache.read(&bucket, "p/w", size, CHUNK_BYTES * 2, 1).unwrap();
        // chunks 0-1 (2 is cached) and 7-8: two requests, after the first read's one
        let ranges = [(10, CHUNK_BYTES * 2), (CHUNK_BYTES * 7 + 5, CHUNK_BYTES + 3)];
        cache.prefetch(&bucket, "p/w", size, &ranges).unwrap();
        assert_eq!(cache.counters().requests.load(Ordering::Relaxed), 1 + 2);
        let fetched = cache.counters().fetched_bytes.load(Ordering::Relaxed);
        assert_eq!(fetched, CHUNK_BYTES * 5);
        let got = cache.read(&bucket, "p/w", size, CHUNK_BYTES * 7 + 5, 100).unwrap();
        assert_eq!(&got[..], &data[(CHUNK_BYTES * 7 + 5) as usize..][..100]);
        assert_eq!(cache.counters().fetched_bytes.load(Ordering::Relaxed), fetched);
    }

    #[test]
    fn the_budget_evicts_the_least_recently_used_chunk_and_local_part() {
        let data = vec![1u8; (CHUNK_BYTES * 4) as usize];
        let (dir, bucket) = bucket_with("p/z", &data);
        let cache = Cache::open(&dir.path().join("cache"), CHUNK_BYTES * 2).unwrap();
        let local = dir.path().join("part.parquet");
        std::fs::write(&local, b"0123456789").unwrap();
        cache.add_part(&local, 10);
        let size = data.len() as u64;
        cache.read(&bucket, "p/z", size, 0, 1).unwrap();
        cache.read(&bucket, "p/z", size, CHUNK_BYTES, 1).unwrap();
        // the oldest, the local part, went first
        assert!(!local.exists());
        assert!(cache.counters().bytes.load(Ordering::Relaxed) <= CHUNK_BYTES * 2);
        cache.read(&bucket, "p/z", size, 2 * CHUNK_BYTES, 1).unwrap();
        let files = std::fs::read_dir(dir.path().join("cache")).unwrap().count();
        assert_eq!(files, 2);
    }
}
