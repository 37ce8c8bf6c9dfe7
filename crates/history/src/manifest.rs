//! The manifest of a store on object storage: which parts are live, switched atomically, so a
//! reader plans from one small object and never lists the bucket. Each version is the table's
//! Apache Iceberg metadata, needle's manifest in one of its properties ([`crate::iceberg`]):
//! one object is the truth for needle and for every Iceberg engine.
//!
//! ```text
//! PREFIX/metadata/v42.metadata.json     one version, written once
//! PREFIX/metadata/version-hint.text     the newest version's number (a hint)
//! ```
//! (Stores written before kept `PREFIX/_needle/manifest/v<N>.json`: read until the next commit.)
//! - **A version is written once**, with a conditional put (create only when absent): of two
//!   writers committing the same version, one wins and the other reloads and tries again. The
//!   hint is written after; a reader reads the hint, then the versions after it until one is
//!   missing, so a stale hint (a crash between the two writes) costs one more request.
//! - **What a version holds**: each live part with its partition, rows, bytes, level, time
//!   range, the store's sort key and each column's statistics (min, max, nulls: what a planner
//!   prunes by, and what an Iceberg manifest entry says of a data file) and its writer; the
//!   parts replaced (merges, retention) with the time after which their objects may be deleted
//!   (a reader that planned from an older version still finds them until then); each writer's
//!   epoch (a process that opens the store as a writer takes its name's next epoch, and an
//!   older process under that name that then finds it stops writing: it was fenced); the
//!   source position each writer's uploaded parts reach; per source stream (a Kafka
//!   partition), the offset after the last record uploaded and who uploaded it.
//! - **Old versions** are removed by the writer, keeping the last [`KEEP_VERSIONS`].

use crate::iceberg::{Added, Family, FieldId, Table};
use crate::object::Bucket;
use crate::offsets::KeptOffset;
use crate::HistoryError;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The format written; a reader refuses a newer one. 2: the version is Iceberg metadata.
pub const FORMAT: u32 = 2;
/// Versions kept in the bucket behind the newest.
pub const KEEP_VERSIONS: u64 = 20;
/// Tries of one commit against other writers before it gives up.
const COMMIT_TRIES: usize = 16;

const HINT: &str = "metadata/version-hint.text";

fn version_key(version: u64) -> String {
    format!("metadata/v{version}.metadata.json")
}

/// The URI of version `version`'s metadata file (what a catalog points at).
pub fn metadata_location(bucket: &Bucket, version: u64) -> String {
    format!("{}/{}", bucket.url().trim_end_matches('/'), version_key(version))
}

/// Where stores written before the manifest was Iceberg metadata kept it.
const OLD_HINT: &str = "_needle/manifest/latest";

fn old_version_key(version: u64) -> String {
    format!("_needle/manifest/v{version:020}.json")
}

/// How a version is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// Iceberg table metadata (`metadata/v<N>.metadata.json`).
    Iceberg,
    /// needle's JSON (`_needle/manifest/v<N>.json`), before.
    Old,
}

impl Format {
    fn hint(self) -> &'static str {
        match self {
            Format::Iceberg => HINT,
            Format::Old => OLD_HINT,
        }
    }

    fn key(self, version: u64) -> String {
        match self {
            Format::Iceberg => version_key(version),
            Format::Old => old_version_key(version),
        }
    }
}

/// One version of the manifest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub version: u64,
    /// When this version was committed, ms since the epoch.
    pub committed_ms: i64,
    /// Each writer's epoch: a process that opens the store as writer `name` takes the next
    /// epoch of `name`; an older process under that name that then finds it stops.
    pub writers: BTreeMap<String, u64>,
    /// The next part sequence number free for a writer.
    pub next_sequence: u64,
    /// The store's sort key: the fields parts are sorted by, then time.
    pub sort_by: Vec<String>,
    pub partition_ms: u64,
    /// The live parts.
    pub parts: Vec<ManifestPart>,
    /// Parts replaced or dropped, whose objects go once `delete_after_ms` has passed.
    pub retired: Vec<RetiredPart>,
    /// Per writer, the source position its uploaded parts reach.
    pub positions: BTreeMap<String, String>,
    /// Per source stream (`topic/partition`), the offset after the last record uploaded and
    /// the writer that uploaded it ([`crate::offsets`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub offsets: BTreeMap<String, KeptOffset>,
    /// The table's columns and their Iceberg field ids.
    #[serde(default)]
    pub fields: Vec<FieldId>,
    /// The data sequence number of the newest Iceberg snapshot.
    #[serde(default)]
    pub iceberg_sequence: i64,
    /// Per kept snapshot, the manifests and manifest list written for it.
    #[serde(default)]
    pub iceberg_objects: Vec<(i64, Vec<String>)>,
    /// Snapshots older than this (in ms) expire besides those past the last
    /// [`KEEP_VERSIONS`]: the writer's `delete_grace_ms`, after which the files an older
    /// snapshot alone names may be gone. `None`: by count alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_max_age_ms: Option<u64>,
    /// This version's Iceberg metadata (what it was read from or written as).
    #[serde(skip)]
    pub table: Option<Table>,
}

/// A live part, as a planner sees it without opening it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestPart {
    /// Its key under the prefix: `p=<partition start>/<name>`.
    pub key: String,
    pub name: String,
    /// The writer that wrote it (and alone merges or drops it).
    #[serde(default)]
    pub writer: String,
    pub partition_start: i64,
    pub sequence: u64,
    pub level: u32,
    pub rows: u64,
    pub bytes: u64,
    pub time_min: i64,
    pub time_max: i64,
    /// The names of the parts this one replaces (a merge's inputs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaces: Vec<String>,
    /// The whole of a cold span, compacted: never merged again, so any reader may read it for
    /// any writer (see [`crate::Store::scan_shared`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compacted: bool,
    /// Per column: min, max and null count over the part.
    #[serde(default)]
    pub columns: BTreeMap<String, ColumnSummary>,
    /// Per column, its Iceberg family (which field id it has).
    #[serde(default)]
    pub families: BTreeMap<String, Family>,
    /// The time span of its partition, in ms.
    #[serde(default)]
    pub partition_span_ms: i64,
    /// The Iceberg snapshot that added it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added: Option<Added>,
    /// The Iceberg manifest listing it in the newest snapshot (its key under the prefix):
    /// a commit rewrites only the manifests whose parts changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
}

/// A column's statistics over a part (JSON values: numbers, strings, booleans).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ColumnSummary {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<serde_json::Value>,
    pub nulls: u64,
}

/// A part no longer live, kept until readers that planned before cannot need it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetiredPart {
    pub key: String,
    pub delete_after_ms: i64,
}

/// How a commit went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// This version is now the newest.
    Version(u64),
    /// Another process took this writer's name (a newer epoch): nothing was written.
    Fenced { writer: String, epoch: u64 },
}

impl Manifest {
    /// The newest version in `bucket`; an empty manifest (version 0) when there is none.
    /// The newest version in `bucket`; an empty manifest (version 0) when there is none.
    pub fn load(bucket: &Bucket) -> Result<Manifest, HistoryError> {
        match Self::load_format(bucket, Format::Iceberg)? {
            Some(newest) => Ok(newest),
            None => Ok(Self::load_format(bucket, Format::Old)?.unwrap_or_else(Manifest::empty)),
        }
    }

    /// The newest version kept in `format`, if the store has one: from the hint, the versions
    /// after it until one is missing (a stale hint costs a request more).
    fn load_format(bucket: &Bucket, format: Format) -> Result<Option<Manifest>, HistoryError> {
        let hint = match bucket.get(format.hint())? {
            Some(bytes) => std::str::from_utf8(&bytes)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .unwrap_or(0),
            None => 0,
        };
        let mut newest: Option<Manifest> = None;
        let mut version = hint.max(1);
        while let Some(bytes) = bucket.get(&format.key(version))? {
            newest = Some(Self::parse(bucket, format, version, &bytes)?);
            version += 1;
        }
        if newest.is_none() && hint > 1 {
            for v in (hint.saturating_sub(KEEP_VERSIONS * 2).max(1)..hint).rev() {
                if let Some(bytes) = bucket.get(&format.key(v))? {
                    let found = Self::parse(bucket, format, v, &bytes)?;
                    return Self::load_from(bucket, found).map(Some);
                }
            }
        }
        Ok(newest)
    }

    /// From a found version, the versions after it.
    fn load_from(bucket: &Bucket, mut newest: Manifest) -> Result<Manifest, HistoryError> {
        while let Some(bytes) = bucket.get(&version_key(newest.version + 1))? {
            newest = Self::parse(bucket, Format::Iceberg, newest.version + 1, &bytes)?;
        }
        Ok(newest)
    }

    fn parse(
        bucket: &Bucket,
        format: Format,
        version: u64,
        bytes: &[u8],
    ) -> Result<Manifest, HistoryError> {
        let location = format!("{}/{}", bucket.url(), format.key(version));
        let mut manifest: Manifest = match format {
            Format::Iceberg => crate::iceberg::read_version(bytes, &location)?,
            Format::Old => serde_json::from_slice(bytes).map_err(|e| HistoryError::Object {
                location: location.clone(),
                message: e.to_string(),
            })?,
        };
        if manifest.format > FORMAT {
            return Err(HistoryError::Object {
                location,
                message: format!(
                    "manifest format {} is newer than this needle reads ({FORMAT})",
                    manifest.format
                ),
            });
        }
        // entries written before spans were kept: the store's partition span
        let span = i64::try_from(manifest.partition_ms).unwrap_or(i64::MAX);
        for part in manifest.parts.iter_mut().filter(|p| p.partition_span_ms == 0) {
            part.partition_span_ms = span;
        }
        Ok(manifest)
    }

    pub fn empty() -> Manifest {
        Manifest { format: FORMAT, ..Manifest::default() }
    }

    /// Applies `change` to the newest version and commits the result as the next one, again
    /// on the newest when another writer committed first. `owner`: the writer and epoch
    /// that must still own the store (`None`: a change any writer may make). Returns the
    /// committed manifest.
    pub fn commit(
        bucket: &Bucket,
        base: &Manifest,
        owner: Option<(&str, u64)>,
        change: impl Fn(&mut Manifest),
    ) -> Result<(Committed, Manifest), HistoryError> {
        let mut current = base.clone();
        for _ in 0..COMMIT_TRIES {
            if let Some((writer, epoch)) = owner {
                let now = current.writers.get(writer).copied().unwrap_or(0);
                if now != epoch {
                    let fenced = Committed::Fenced { writer: writer.to_owned(), epoch: now };
                    return Ok((fenced, current));
                }
            }
            let mut next = current.clone();
            change(&mut next);
            next.format = FORMAT;
            next.version = current.version + 1;
            next.committed_ms = now_ms();
            let written = crate::iceberg::write_version(bucket, &current, &mut next)?;
            if bucket.put_if_absent(&version_key(next.version), Bytes::from(written.json))? {
                // the hint is only a shortcut: a failure to write it is read past
                let _ = bucket.put(HINT, Bytes::from(next.version.to_string()));
                if next.version > KEEP_VERSIONS {
                    let _ = bucket.delete(&version_key(next.version - KEEP_VERSIONS));
                }
                for key in &written.expired_objects {
                    let _ = bucket.delete(key);
                }
                return Ok((Committed::Version(next.version), next));
            }
            // another writer took this version: what was written for it goes
            for key in &written.objects {
                let _ = bucket.delete(key);
            }
            current = Self::load_from(bucket, current)?;
        }
        Err(HistoryError::Object {
            location: bucket.url().to_owned(),
            message: format!("the manifest changed under {COMMIT_TRIES} commits in a row"),
        })
    }

    /// The live part named `name`.
    pub fn part(&self, name: &str) -> Option<&ManifestPart> {
        self.parts.iter().find(|p| p.name == name)
    }

    /// The objects this version, or a snapshot it keeps, names: its parts, the parts it
    /// retired and not deleted yet, and its snapshots' manifests and manifest lists.
    pub fn named_objects(&self) -> std::collections::HashSet<String> {
        self.parts
            .iter()
            .map(|p| p.key.clone())
            .chain(self.retired.iter().map(|r| r.key.clone()))
            .chain(self.iceberg_objects.iter().flat_map(|(_, keys)| keys.iter().cloned()))
            .collect()
    }

    /// The objects under the table's data folders (`p=…/`) and its manifests
    /// (`metadata/*.avro`) that neither the newest version nor a snapshot it keeps names and
    /// that were last written more than `older_than_ms` ago, but for `keep`: uploads and
    /// manifests of commits that failed or lost their race, or of a writer lost between an
    /// upload and its commit. Metadata files and the version hint are never among them.
    pub fn orphans(
        bucket: &Bucket,
        newest: &Manifest,
        data: bool,
        older_than_ms: u64,
        keep: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<String>, HistoryError> {
        let named = newest.named_objects();
        let cutoff = now_ms().saturating_sub(older_than_ms.min(i64::MAX as u64) as i64);
        let found = bucket.list(if data { "" } else { "metadata" })?;
        let mut orphans: Vec<String> = found
            .into_iter()
            .filter(|(key, written)| {
                let kind = key.starts_with("p=")
                    || (key.starts_with("metadata/") && key.ends_with(".avro"));
                kind && *written < cutoff && !named.contains(key) && !keep(key)
            })
            .map(|(key, _)| key)
            .collect();
        orphans.sort();
        orphans.dedup();
        Ok(orphans)
    }

    /// Version `version` of the manifest in `bucket`, while it is kept (the newest
    /// [`KEEP_VERSIONS`] are).
    pub fn load_version(bucket: &Bucket, version: u64) -> Result<Option<Manifest>, HistoryError> {
        for format in [Format::Iceberg, Format::Old] {
            if let Some(bytes) = bucket.get(&format.key(version))? {
                return Self::parse(bucket, format, version, &bytes).map(Some);
            }
        }
        Ok(None)
    }
}

/// What an api node needs of a store on object storage to plan a query over it: the newest
/// manifest version, which the worker nodes then all read by (see
/// [`crate::Store::scan_shared`]).
pub struct Planner {
    bucket: Bucket,
}

impl Planner {
    /// Reaches the store at `remote.url` (nothing is written).
    pub fn open(remote: &crate::RemoteConfig) -> Result<Planner, HistoryError> {
        let bucket = Bucket::open(&remote.url, &remote.options)?;
        bucket.check()?;
        Ok(Planner { bucket })
    }

    /// The newest committed version (0: none yet).
    pub fn latest_version(&self) -> Result<u64, HistoryError> {
        Manifest::load(&self.bucket).map(|m| m.version)
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::ObjectStoreOptions;

    fn bucket() -> (tempfile::TempDir, Bucket) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        let bucket = Bucket::open(&url, &ObjectStoreOptions::default()).unwrap();
        (dir, bucket)
    }

    fn part(name: &str) -> ManifestPart {
        ManifestPart {
            key: format!("p=0/{name}"),
            name: name.into(),
            writer: "w".into(),
            partition_start: 0,
            sequence: 0,
            level: 0,
            rows: 1,
            bytes: 1,
            time_min: 0,
            time_max: 0,
            replaces: Vec::new(),
            compacted: false,
            columns: BTreeMap::new(),
            families: BTreeMap::new(),
            partition_span_ms: 3_600_000,
            added: None,
            manifest: None,
        }
    }

    #[test]
    fn commits_are_read_back_in_order_and_a_stale_base_is_rebased() {
        let (_dir, bucket) = bucket();
        let empty = Manifest::load(&bucket).unwrap();
        assert_eq!(empty.version, 0);
        let (c, one) =
            Manifest::commit(&bucket, &empty, None, |m| m.parts.push(part("a"))).unwrap();
        assert_eq!(c, Committed::Version(1));
        // a second writer still holding version 0 commits: it lands as version 2, keeping a
        let (c, two) =
            Manifest::commit(&bucket, &empty, None, |m| m.parts.push(part("b"))).unwrap();
        assert_eq!(c, Committed::Version(2));
        let names: Vec<&str> = two.parts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let loaded = Manifest::load(&bucket).unwrap();
        assert_eq!(loaded, two);
        assert_eq!(one.version, 1);
    }

    #[test]
    fn a_stale_hint_is_read_past() {
        let (_dir, bucket) = bucket();
        let mut m = Manifest::empty();
        for i in 0..3 {
            m = Manifest::commit(&bucket, &m, None, |m| m.next_sequence = i).unwrap().1;
        }
        bucket.put(HINT, Bytes::from_static(b"1")).unwrap();
        assert_eq!(Manifest::load(&bucket).unwrap().version, 3);
        bucket.delete(HINT).unwrap();
        assert_eq!(Manifest::load(&bucket).unwrap().version, 3);
    }

    #[test]
    fn a_writer_of_an_older_epoch_is_fenced_and_other_writers_are_not() {
        let (_dir, bucket) = bucket();
        let take = |m: &mut Manifest, name: &str| *m.writers.entry(name.into()).or_default() += 1;
        let (_, a) = Manifest::commit(&bucket, &Manifest::empty(), None, |m| take(m, "a")).unwrap();
        // another writer's commits do not fence a
        let (_, b) = Manifest::commit(&bucket, &a, None, |m| take(m, "b")).unwrap();
        let (c, _) =
            Manifest::commit(&bucket, &a, Some(("a", 1)), |m| m.parts.push(part("x"))).unwrap();
        assert_eq!(c, Committed::Version(3));
        // a second process under a's name: the first is fenced
        let (_, _) = Manifest::commit(&bucket, &b, None, |m| take(m, "a")).unwrap();
        let (c, _) =
            Manifest::commit(&bucket, &a, Some(("a", 1)), |m| m.parts.push(part("y"))).unwrap();
        assert!(matches!(c, Committed::Fenced { ref writer, epoch: 2 } if writer == "a"), "{c:?}");
        let names: Vec<String> =
            Manifest::load(&bucket).unwrap().parts.into_iter().map(|p| p.name).collect();
        assert_eq!(names, ["x"]);
    }

    #[test]
    fn old_versions_are_removed_and_the_newest_still_loads() {
        let (dir, bucket) = bucket();
        let mut m = Manifest::empty();
        for i in 0..(KEEP_VERSIONS + 5) {
            // a part a version: a snapshot each, of a manifest and a manifest list
            let name = format!("p{i}");
            m = Manifest::commit(&bucket, &m, None, |m| m.parts.push(part(&name))).unwrap().1;
        }
        let files: Vec<String> = std::fs::read_dir(dir.path().join("metadata"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        let count = |suffix: &str| files.iter().filter(|f| f.ends_with(suffix)).count() as u64;
        assert_eq!(count(".metadata.json"), KEEP_VERSIONS, "{files:?}");
        assert_eq!(count("version-hint.text"), 1);
        let newest = Manifest::load(&bucket).unwrap();
        assert_eq!(newest.version, KEEP_VERSIONS + 5);
        assert_eq!(newest.parts.len() as u64, KEEP_VERSIONS + 5);
        let table = newest.table.clone().unwrap().0;
        assert_eq!(table.snapshots().count() as u64, KEEP_VERSIONS);
        // every avro file is a kept snapshot's list or a manifest one lists, and each of those
        // is there
        let mut referenced = std::collections::HashSet::new();
        for snapshot in table.snapshots() {
            let (list_key, manifests) = listed(&bucket, snapshot.manifest_list());
            referenced.insert(list_key);
            referenced.extend(manifests);
        }
        let avro: std::collections::HashSet<String> = files
            .iter()
            .filter(|f| f.ends_with(".avro"))
            .map(|f| format!("metadata/{f}"))
            .collect();
        assert_eq!(avro, referenced);
    }

    /// The key of a manifest list and the keys of the manifests it lists.
    fn listed(bucket: &Bucket, list: &str) -> (String, Vec<String>) {
        let key = |path: &str| path.strip_prefix(&format!("{}/", bucket.url())).unwrap().to_owned();
        let bytes = bucket.get(&key(list)).unwrap().unwrap();
        let parsed = iceberg::spec::ManifestList::parse_with_version(
            &bytes,
            iceberg::spec::FormatVersion::V2,
        )
        .unwrap();
        (key(list), parsed.entries().iter().map(|m| key(&m.manifest_path)).collect())
    }

    #[test]
    fn an_append_lists_the_manifests_before_it_again_and_a_removal_rewrites_its_own() {
        let (_dir, bucket) = bucket();
        let mut m = Manifest::empty();
        for name in ["a", "b", "c"] {
            m = Manifest::commit(&bucket, &m, None, |m| m.parts.push(part(name))).unwrap().1;
        }
        let current = |m: &Manifest| {
            let table = m.table.clone().unwrap().0;
            listed(&bucket, table.current_snapshot().unwrap().manifest_list()).1
        };
        // three appends: three manifests of one part each, the first two listed again
        let three = current(&m);
        assert_eq!(three.len(), 3, "{three:?}");
        let manifest_of = |m: &Manifest, name: &str| {
            m.parts.iter().find(|p| p.name == name).unwrap().manifest.clone().unwrap()
        };
        assert!(three.contains(&manifest_of(&m, "a")) && three.contains(&manifest_of(&m, "c")));
        // b goes: its manifest is rewritten (b deleted), a's and c's are listed again
        let (a, b, c) = (manifest_of(&m, "a"), manifest_of(&m, "b"), manifest_of(&m, "c"));
        m = Manifest::commit(&bucket, &m, None, |m| m.parts.retain(|p| p.name != "b")).unwrap().1;
        let after = current(&m);
        assert!(after.contains(&a) && after.contains(&c), "{after:?}");
        assert!(!after.contains(&b), "{after:?}");
        assert_eq!(after.len(), 3, "a, c and the one recording b's removal: {after:?}");
        // past the bound a spec's manifests are folded into one
        for i in 0..super::super::iceberg::MAX_REUSED_MANIFESTS + 1 {
            let name = format!("x{i}");
            m = Manifest::commit(&bucket, &m, None, |m| m.parts.push(part(&name))).unwrap().1;
        }
        assert!(current(&m).len() <= super::super::iceberg::MAX_REUSED_MANIFESTS + 1);
        assert_eq!(m.parts.len(), 2 + super::super::iceberg::MAX_REUSED_MANIFESTS + 1);
    }
}
