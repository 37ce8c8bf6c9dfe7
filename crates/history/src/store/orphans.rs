//! Orphan files: objects of the store's table that no version names any more and never will
//! — the uploads of a writer lost between an upload and its commit, the manifests of a commit
//! that failed or lost its race. [`Store::sweep_orphans`] deletes those older than the table's
//! grace (`delete_grace_ms`, plus two commit periods on object storage, where other writers'
//! uploads wait for their own commits); it runs when a writer opens the store and hourly
//! from [`Store::maintain`].

use super::Store;
use crate::manifest::Manifest;
use crate::HistoryError;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How often [`Store::maintain`] looks for orphans (a listing of the whole table).
pub(super) const SWEEP_EVERY: Duration = Duration::from_secs(3600);

impl Store {
    /// Deletes the table's orphan files (see the module doc); returns how many. Nothing for
    /// a reader or a store that is no table.
    pub fn sweep_orphans(&self) -> Result<u64, HistoryError> {
        if self.inner.read_only {
            return Ok(0);
        }
        *self.inner.swept_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        if let Some(remote) = self.remote() {
            if remote.fenced.load(Ordering::Relaxed) {
                return Ok(0);
            }
            let newest = Manifest::load(&remote.bucket)?;
            let waiting: Vec<String> = super::remote::Remote::lock(&remote.uploaded)
                .values()
                .map(|(start, part)| super::remote::key_of(*start, &part.name))
                .collect();
            let grace = remote
                .config
                .delete_grace_ms
                .saturating_add(2 * remote.commit_every.as_millis() as u64);
            let orphans = Manifest::orphans(&remote.bucket, &newest, true, grace, &|key| {
                waiting.iter().any(|w| w == key)
            })?;
            let mut deleted = 0;
            for key in &orphans {
                if remote.bucket.delete(key).is_ok() {
                    deleted += 1;
                }
            }
            remote.counters.objects_deleted.fetch_add(deleted, Ordering::Relaxed);
            return Ok(deleted);
        }
        let Some(table) = self.inner.table.as_ref() else { return Ok(0) };
        let newest = table.manifest.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let grace = self.inner.config.delete_grace_ms;
        let orphans = Manifest::orphans(&table.bucket, &newest, false, grace, &|_| false)?;
        let mut deleted = 0;
        for key in &orphans {
            if table.bucket.delete(key).is_ok() {
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    /// [`Store::sweep_orphans`] when [`SWEEP_EVERY`] has passed since the last sweep.
    pub(super) fn sweep_orphans_when_due(&self) -> Result<u64, HistoryError> {
        let due = self
            .inner
            .swept_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none_or(|at| at.elapsed() >= SWEEP_EVERY);
        if due {
            self.sweep_orphans()
        } else {
            Ok(0)
        }
    }
}
