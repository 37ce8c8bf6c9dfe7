//! A store in a local directory as an Apache Iceberg table: its parts committed as the table's
//! snapshots (`DIR/metadata/`, the same manifest versions a store on object storage keeps, see
//! [`crate::manifest`]) at most every `commit_ms`, and when a flush, merge or retention run
//! ends with [`Store::commit_table`] forced (`needle ingest`, a stop).
//!
//! The table is named `needle.history` in the SQL catalog beside it (`DIR/catalog.db`, see
//! [`crate::catalog`]), pointed at each version; with `history.catalog_url` set, in that Iceberg
//! REST catalog too ([`crate::rest`]), for a local store's table and a store's on object storage
//! alike (see [`Store::sync_rest_catalog`]).
//!
//! The directory stays the writer's truth (one process writes a local store): a version says
//! which of its parts a reader of the table reads. A part a merge replaced stays on disk for
//! `delete_grace_ms` after it left the view, so an engine that planned from an older snapshot
//! still reads it; at open, the parts found are committed at once (a crash may have left the
//! newest flushes out of the table).

use super::Store;
use crate::catalog::SqlCatalog;
use crate::iceberg::Table;
use crate::manifest::{Committed, Manifest, ManifestPart};
use crate::object::{Bucket, ObjectStoreOptions};
use crate::rest::{RestCatalog, RestCatalogInfo};
use crate::HistoryError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The table of a local store.
pub(super) struct LocalTable {
    pub(super) bucket: Bucket,
    /// The SQL catalog beside it (`DIR/catalog.db`), pointed at each version committed
    /// (none for a reader).
    catalog: Option<SqlCatalog>,
    /// The newest version committed.
    pub(super) manifest: Mutex<Manifest>,
    /// The table's field ids: the committed ones, and those parts written since took.
    fields: Arc<Mutex<Vec<crate::iceberg::FieldId>>>,
    /// When it was.
    committed_at: Mutex<Option<Instant>>,
    every: Duration,
}

impl LocalTable {
    /// The table of the store in `dir`; a reader (`read_only`) gets it only when the store has
    /// one, and changes nothing.
    pub(super) fn open(
        dir: &std::path::Path,
        commit_ms: u64,
        read_only: bool,
    ) -> Result<Option<LocalTable>, HistoryError> {
        if read_only && !dir.join("metadata").is_dir() {
            return Ok(None);
        }
        let dir = std::fs::canonicalize(dir).map_err(|e| HistoryError::io(dir, e))?;
        let url = format!("file://{}", dir.display());
        let bucket = Bucket::open(&url, &ObjectStoreOptions::default())?;
        let manifest = Manifest::load(&bucket)?;
        let catalog = if read_only { None } else { Some(SqlCatalog::open(&dir)?) };
        Ok(Some(LocalTable {
            bucket,
            catalog,
            fields: Arc::new(Mutex::new(manifest.fields.clone())),
            manifest: Mutex::new(manifest),
            committed_at: Mutex::new(None),
            every: Duration::from_millis(commit_ms),
        }))
    }
}

impl Store {
    /// Commits the live parts as the table's next version when they changed and `commit_ms`
    /// has passed since the last commit, or at once when `force`.
    pub(super) fn commit_table(&self, force: bool) -> Result<(), HistoryError> {
        let Some(table) = self.inner.table.as_ref() else { return Ok(()) };
        if self.inner.read_only {
            return Ok(());
        }
        {
            let at = table.committed_at.lock().unwrap_or_else(|e| e.into_inner());
            if !force && at.is_some_and(|at| at.elapsed() < table.every) {
                return Ok(());
            }
        }
        let config = &self.inner.config;
        let base = table.manifest.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let known: HashMap<&str, &ManifestPart> =
            base.parts.iter().map(|p| (p.key.as_str(), p)).collect();
        let parts: Vec<ManifestPart> = {
            let state = self.state();
            state
                .parts
                .iter()
                .flat_map(|(start, parts)| parts.iter().map(move |p| (*start, p)))
                .map(|(start, part)| {
                    let key = super::remote::key_of(start, &part.name);
                    match known.get(key.as_str()) {
                        Some(entry) => (*entry).clone(),
                        None => super::remote::describe(start, part, "", config),
                    }
                })
                .collect()
        };
        let same = parts.len() == base.parts.len()
            && parts.iter().all(|p| known.contains_key(p.key.as_str()));
        if same && base.version > 0 {
            *table.committed_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
            // a REST catalog that missed the last version catches up
            self.sync_rest_catalog(&table.bucket, base.version, base.table.as_ref());
            return Ok(());
        }
        // (the columns of parts written before parts carried ids are registered now)
        let wanted: Vec<(String, crate::iceberg::Family)> =
            parts.iter().flat_map(|e| e.families.iter().map(|(c, f)| (c.clone(), *f))).collect();
        let fields = {
            let mut registry = table.fields.lock().unwrap_or_else(|e| e.into_inner());
            crate::iceberg::register(&mut registry, &wanted);
            registry.clone()
        };
        let (committed, manifest) = Manifest::commit(&table.bucket, &base, None, |m| {
            m.fields = fields.clone();
            m.snapshot_max_age_ms = Some(config.delete_grace_ms);
            m.parts = parts.clone();
            m.sort_by = config.sort_by.clone();
            m.partition_ms = config.partition_ms;
        })?;
        if let Committed::Version(version) = committed {
            if let Some(catalog) = &table.catalog {
                catalog.point(&crate::manifest::metadata_location(&table.bucket, version))?;
            }
            self.sync_rest_catalog(&table.bucket, version, manifest.table.as_ref());
            *table.manifest.lock().unwrap_or_else(|e| e.into_inner()) = manifest;
            *table.committed_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        }
        Ok(())
    }
}

/// The REST catalog a writer keeps its table in (`config.catalog`), if one is set; a local
/// store must be a table (`commit_ms`) for it.
pub(super) fn open_rest_catalog(
    config: &crate::StoreConfig,
    read_only: bool,
) -> Result<Option<RestCatalog>, HistoryError> {
    let Some(catalog) = config.catalog.as_ref().filter(|_| !read_only) else { return Ok(None) };
    if config.remote.is_none() && config.commit_ms.is_none() {
        return Err(HistoryError::Config {
            setting: "history.catalog_url".into(),
            message: "a local store is kept in a REST catalog only as an Iceberg table: set \
                      history.commit_ms above 0"
                .into(),
        });
    }
    Ok(Some(RestCatalog::open(catalog)?))
}

impl Store {
    /// Brings the REST catalog's table, when one is set, to version `version` of the table in
    /// `bucket` (`table`, its metadata): at once after a commit, and after a failed sync once
    /// its `retry_ms` passed. Never fails: see [`crate::rest`].
    pub(super) fn sync_rest_catalog(&self, bucket: &Bucket, version: u64, table: Option<&Table>) {
        let (Some(rest), Some(table)) = (self.inner.rest.as_ref(), table) else { return };
        if version == 0 {
            return;
        }
        let location = crate::manifest::metadata_location(bucket, version);
        if rest.behind(&location) {
            rest.sync(&location, &table.0);
        }
    }

    /// Where the REST catalog's table stands, when one is set.
    pub fn rest_catalog(&self) -> Option<RestCatalogInfo> {
        self.inner.rest.as_ref().map(RestCatalog::info)
    }
}

impl Store {
    /// The newest metadata file of the store's table, its snapshots and its schema.
    pub(super) fn table_info(&self) -> TableInfo {
        let (bucket, manifest) = match (&self.inner.table, self.remote()) {
            (Some(table), _) => {
                (&table.bucket, table.manifest.lock().unwrap_or_else(|e| e.into_inner()).clone())
            }
            (None, Some(remote)) => {
                (remote.bucket.as_ref(), super::remote::Remote::lock(&remote.manifest).clone())
            }
            (None, None) => return TableInfo::default(),
        };
        let Some(table) = manifest.table.as_ref() else { return TableInfo::default() };
        let location = crate::manifest::metadata_location(bucket, manifest.version);
        let (snapshots, schema) = crate::iceberg::describe(&table.0);
        let added = manifest
            .parts
            .iter()
            .filter_map(|p| Some((p.key.clone(), p.added?.snapshot)))
            .collect();
        TableInfo { location: Some(location), snapshots, schema, added }
    }
}

/// The newest version of a store's table, as `needle history` shows it.
#[derive(Default)]
pub(super) struct TableInfo {
    /// Its metadata file.
    pub location: Option<String>,
    pub snapshots: Vec<crate::iceberg::SnapshotInfo>,
    pub schema: Vec<crate::iceberg::SchemaField>,
    /// The snapshot that added each part it names, by key.
    pub added: HashMap<String, i64>,
}

impl Store {
    /// The field ids a part written now takes: a local table's registry (new columns get
    /// theirs), or on object storage the manifest's (a new column's part is read by name until
    /// its commit registers it).
    pub(super) fn field_ids(&self) -> Option<crate::iceberg::FieldIds> {
        if let Some(table) = &self.inner.table {
            return Some(crate::iceberg::FieldIds {
                registry: table.fields.clone(),
                allocate: true,
            });
        }
        let remote = self.remote()?;
        let fields = super::remote::Remote::lock(&remote.manifest).fields.clone();
        Some(crate::iceberg::FieldIds { registry: Arc::new(Mutex::new(fields)), allocate: false })
    }
}
