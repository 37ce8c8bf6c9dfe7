//! The store's table in an Apache Iceberg REST catalog (`history.catalog_url`): after each
//! version needle commits, the catalog's table (`needle.history` by default) is brought to the
//! same snapshot, so any engine that speaks the REST catalog protocol (Spark, Trino, Flink,
//! pyiceberg's `RestCatalog`) finds the store by name, a store on object storage included.
//!
//! needle's metadata files stay the truth; the catalog is a pointer kept up to date:
//!
//! - **first**: `GET /v1/config` (the catalog's `prefix`), `POST /v1/{prefix}/namespaces` (the
//!   namespace, when missing), then the table is *registered* with the newest metadata file
//!   (`POST /v1/{prefix}/namespaces/{ns}/register`);
//! - **then**, after each commit: the catalog's table is loaded (`GET .../tables/{table}`) and a
//!   commit (`POST .../tables/{table}`) brings it to needle's newest metadata: the schemas,
//!   specs and snapshots it lacks (`add-schema`, `set-current-schema`, `add-spec`,
//!   `add-snapshot`), `set-snapshot-ref main`, the snapshots needle expired
//!   (`remove-snapshots`), the table's properties (`set-properties`; needle's own manifest, the
//!   `needle.manifest` property, is not copied: `remove-properties`), under the requirements
//!   `assert-table-uuid` and `assert-ref-snapshot-id main` (what the catalog held when loaded).
//!   What is sent is worked out from what the catalog holds, so one commit catches up any
//!   number of versions the catalog missed.
//! - **failures** never stop ingest nor touch needle's files: a catalog that cannot be reached
//!   or refuses a request is counted ([`RestCatalogCounters::errors`]), logged once per streak
//!   of failures, and tried again at the next commit (or, with nothing new committed, once
//!   `retry_ms` has passed).

use crate::config::RestCatalogConfig;
use crate::iceberg::MANIFEST_PROPERTY;
use crate::HistoryError;
use iceberg::spec::{SnapshotReference, SnapshotRetention, TableMetadata};
use iceberg::{TableRequirement, TableUpdate};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The branch the table's current snapshot is on.
const MAIN: &str = "main";

/// What a store's REST catalog has done, for metrics.
#[derive(Debug, Default)]
pub struct RestCatalogCounters {
    /// Times the table was registered (its first version, or after the catalog lost it).
    pub registrations: AtomicU64,
    /// Commits the catalog accepted.
    pub commits: AtomicU64,
    /// Syncs that failed: the catalog unreachable, or a request refused.
    pub errors: AtomicU64,
}

/// The state of the catalog as needle knows it.
#[derive(Debug, Default)]
struct SyncState {
    /// The path segments after `/v1/` the catalog's config gave (`prefix`), once read.
    prefix: Option<Vec<String>>,
    /// The metadata file the catalog's table was last brought to.
    synced: Option<String>,
    /// Why the last sync failed, while failing.
    failing: Option<String>,
    /// When a sync was last tried.
    tried: Option<Instant>,
}

/// A store's REST catalog client.
pub struct RestCatalog {
    config: RestCatalogConfig,
    client: reqwest_for_object_store::Client,
    /// Taken only by `Drop`: a runtime dropped inside an async context must not block there.
    runtime: Option<tokio::runtime::Runtime>,
    state: Mutex<SyncState>,
    pub counters: RestCatalogCounters,
}

impl Drop for RestCatalog {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl std::fmt::Debug for RestCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestCatalog").field("url", &self.config.url).finish_non_exhaustive()
    }
}

/// Where a sync stands, as `needle` reports it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RestCatalogInfo {
    pub url: String,
    pub table: String,
    /// needle's metadata file the catalog's table was last brought to.
    pub synced: Option<String>,
    /// Why the catalog is behind, while it is.
    pub last_error: Option<String>,
    pub registrations: u64,
    pub commits: u64,
    pub errors: u64,
}

impl RestCatalog {
    /// A client of the catalog `config` names; nothing is sent yet (a wrong URL shows at the
    /// first sync, as a failure that does not stop the store).
    pub fn open(config: &RestCatalogConfig) -> Result<RestCatalog, HistoryError> {
        let bad = |message: String| HistoryError::Config {
            setting: "history.catalog_url".into(),
            message,
        };
        let parsed = url::Url::parse(&config.url)
            .map_err(|e| bad(format!("{:?} is not a URL: {e}", config.url)))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.cannot_be_a_base() {
            return Err(bad(format!(
                "{:?}: a REST catalog's URL is http:// or https://",
                config.url
            )));
        }
        for (setting, name) in
            [("catalog_namespace", &config.namespace), ("catalog_table", &config.table)]
        {
            if name.is_empty() {
                return Err(HistoryError::Config {
                    setting: format!("history.{setting}"),
                    message: "is empty".into(),
                });
            }
        }
        // reqwest is built without a TLS provider of its own: needle's is rustls with ring
        let _ = rustls::crypto::ring::default_provider().install_default();
        let timeout = Duration::from_millis(config.request_timeout_ms.max(100));
        let client = reqwest_for_object_store::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            .build()
            .map_err(|e| bad(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("needle-rest-catalog")
            .enable_all()
            .build()
            .map_err(|e| HistoryError::io(&config.url, e))?;
        Ok(RestCatalog {
            config: config.clone(),
            client,
            runtime: Some(runtime),
            state: Mutex::new(SyncState::default()),
            counters: RestCatalogCounters::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SyncState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True when the catalog's table is not known to be at `location` (and a sync is due).
    pub(crate) fn behind(&self, location: &str) -> bool {
        let state = self.lock();
        state.synced.as_deref() != Some(location) && !self.backing_off(&state)
    }

    fn backing_off(&self, state: &SyncState) -> bool {
        state.failing.is_some()
            && state
                .tried
                .is_some_and(|t| t.elapsed() < Duration::from_millis(self.config.retry_ms))
    }

    /// Brings the catalog's table to needle's metadata `table`, written at `location`. Never
    /// fails: a failure is counted and logged (once per streak), and tried again by the next
    /// call past `retry_ms`.
    pub fn sync(&self, location: &str, table: &TableMetadata) {
        let mut state = self.lock();
        if state.synced.as_deref() == Some(location) || self.backing_off(&state) {
            return;
        }
        state.tried = Some(Instant::now());
        match self.try_sync(&mut state, location, table) {
            Ok(()) => {
                state.synced = Some(location.to_owned());
                if state.failing.take().is_some() {
                    eprintln!(
                        "needle: history: the REST catalog {} is up to date again ({location})",
                        self.config.url
                    );
                }
            }
            Err(error) => {
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                let why = error.to_string();
                if state.failing.is_none() {
                    eprintln!(
                        "needle: history: the REST catalog's table {}.{} is behind the store \
                         (tried again at the next commit; the store's own metadata is \
                         unaffected): {why}",
                        self.config.namespace, self.config.table
                    );
                }
                state.failing = Some(why);
                // what the catalog's config said is read again, in case it moved
                state.prefix = None;
            }
        }
    }

    /// Where the sync stands.
    pub fn info(&self) -> RestCatalogInfo {
        let state = self.lock();
        RestCatalogInfo {
            url: self.config.url.clone(),
            table: format!("{}.{}", self.config.namespace, self.config.table),
            synced: state.synced.clone(),
            last_error: state.failing.clone(),
            registrations: self.counters.registrations.load(Ordering::Relaxed),
            commits: self.counters.commits.load(Ordering::Relaxed),
            errors: self.counters.errors.load(Ordering::Relaxed),
        }
    }

    fn try_sync(
        &self,
        state: &mut SyncState,
        location: &str,
        ours: &TableMetadata,
    ) -> Result<(), HistoryError> {
        if state.prefix.is_none() {
            state.prefix = Some(self.prefix()?);
        }
        let prefix = state.prefix.clone().unwrap_or_default();
        let ns = self.config.namespace.as_str();
        let name = self.config.table.as_str();
        let table_url = self.endpoint(&prefix, &["namespaces", ns, "tables", name], &[])?;
        // a commit that loses to another writer of the catalog's table loads it and tries again
        for _ in 0..3 {
            let (status, body) = self.send(Method::Get, &table_url, None)?;
            match status {
                404 => return self.register(&prefix, location),
                200 => {}
                // the catalog cannot read the metadata file its table points at: needle's it
                // was registered with, since removed (the catalog missed more versions than
                // needle keeps); the table is pointed at needle's newest again
                _ if error_type(&body).as_deref() == Some("NotFoundException") => {
                    self.drop_table(&prefix)?;
                    return self.register(&prefix, location);
                }
                _ => return Err(self.refused("loading the table", status, &body)),
            }
            let loaded: LoadTable = serde_json::from_slice(&body)
                .map_err(|e| self.error(format!("the table it returned: {e}")))?;
            let commit = match plan(&loaded.metadata, ours) {
                Plan::UpToDate => return Ok(()),
                Plan::Commit(commit) => commit,
                Plan::Replace => {
                    // the store was made anew where the catalog's table is: the old table's
                    // entry goes (its files are not the catalog's to purge), the new registered
                    self.drop_table(&prefix)?;
                    return self.register(&prefix, location);
                }
                Plan::Foreign(why) => return Err(self.error(why)),
            };
            let request = CommitRequest {
                identifier: Identifier { namespace: vec![ns.to_owned()], name: name.to_owned() },
                requirements: commit.requirements,
                updates: commit.updates,
            };
            let body = serde_json::to_vec(&request).map_err(|e| self.error(e.to_string()))?;
            let (status, answer) = self.send(Method::Post, &table_url, Some(body))?;
            match status {
                200 => {
                    self.counters.commits.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                409 => continue,
                _ => return Err(self.refused("the commit", status, &answer)),
            }
        }
        Err(self.error("the table kept changing under the commit (409 three times)".into()))
    }

    /// The catalog's `prefix` (`GET /v1/config`, with the warehouse when one is set).
    fn prefix(&self) -> Result<Vec<String>, HistoryError> {
        let query: Vec<(&str, &str)> = match &self.config.warehouse {
            Some(w) => vec![("warehouse", w.as_str())],
            None => Vec::new(),
        };
        let url = self.endpoint(&[], &["config"], &query)?;
        let (status, body) = self.send(Method::Get, &url, None)?;
        if status != 200 {
            return Err(self.refused("its config", status, &body));
        }
        let config: CatalogConfig =
            serde_json::from_slice(&body).map_err(|e| self.error(format!("its config: {e}")))?;
        let prefix = config
            .overrides
            .get("prefix")
            .or_else(|| config.defaults.get("prefix"))
            .map(|p| p.split('/').filter(|s| !s.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default();
        Ok(prefix)
    }

    /// Registers the table with the metadata file at `location`, its namespace created first
    /// when missing.
    fn register(&self, prefix: &[String], location: &str) -> Result<(), HistoryError> {
        let ns = self.config.namespace.as_str();
        let url = self.endpoint(prefix, &["namespaces"], &[])?;
        let body = serde_json::json!({"namespace": [ns], "properties": {}});
        let (status, answer) =
            self.send(Method::Post, &url, Some(body.to_string().into_bytes()))?;
        if !matches!(status, 200 | 409) {
            return Err(self.refused("creating the namespace", status, &answer));
        }
        let url = self.endpoint(prefix, &["namespaces", ns, "register"], &[])?;
        let body = serde_json::json!({"name": self.config.table, "metadata-location": location});
        let body = body.to_string().into_bytes();
        let (mut status, mut answer) = self.send(Method::Post, &url, Some(body.clone()))?;
        if status == 409 {
            // registered meanwhile, or a table the catalog could not load: needle's it is
            self.drop_table(prefix)?;
            (status, answer) = self.send(Method::Post, &url, Some(body))?;
        }
        if status != 200 {
            return Err(self.refused("registering the table", status, &answer));
        }
        self.counters.registrations.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Drops the catalog's entry of the table, never its files (`purgeRequested=false`).
    fn drop_table(&self, prefix: &[String]) -> Result<(), HistoryError> {
        let (ns, name) = (self.config.namespace.as_str(), self.config.table.as_str());
        let url = self.endpoint(
            prefix,
            &["namespaces", ns, "tables", name],
            &[("purgeRequested", "false")],
        )?;
        let (status, body) = self.send(Method::Delete, &url, None)?;
        if !matches!(status, 200 | 204 | 404) {
            return Err(self.refused("dropping the table's entry", status, &body));
        }
        Ok(())
    }

    /// `URL/v1/PREFIX/SEGMENTS?QUERY`, each segment escaped.
    fn endpoint(
        &self,
        prefix: &[String],
        segments: &[&str],
        query: &[(&str, &str)],
    ) -> Result<url::Url, HistoryError> {
        let mut url = url::Url::parse(&self.config.url).map_err(|e| self.error(e.to_string()))?;
        {
            let mut path =
                url.path_segments_mut().map_err(|()| self.error("not a base URL".into()))?;
            path.pop_if_empty().push("v1");
            path.extend(prefix);
            path.extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok(url)
    }

    /// Sends a request and waits for its status and body, on the catalog's runtime.
    fn send(
        &self,
        method: Method,
        url: &url::Url,
        body: Option<Vec<u8>>,
    ) -> Result<(u16, Vec<u8>), HistoryError> {
        let mut request = match method {
            Method::Get => self.client.get(url.as_str()),
            Method::Post => self.client.post(url.as_str()),
            Method::Delete => self.client.delete(url.as_str()),
        };
        if let Some(token) = &self.config.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body);
        }
        let answer = self.run(async move {
            let response = request.send().await?;
            let status = response.status().as_u16();
            let body = response.bytes().await?;
            Ok::<_, reqwest_for_object_store::Error>((status, body.to_vec()))
        });
        answer.map_err(|e| {
            // the error's sources say why (connection refused, a timeout)
            let mut message = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                message = format!("{message}: {s}");
                source = s.source();
            }
            self.error(format!("{} {url}: {message}", method.as_str()))
        })
    }

    fn run<T: Send + 'static>(&self, future: impl Future<Output = T> + Send + 'static) -> T {
        let (send, receive) = std::sync::mpsc::sync_channel(1);
        let runtime = self.runtime.as_ref().expect("the catalog's runtime is there until drop");
        runtime.spawn(async move {
            let _ = send.send(future.await);
        });
        receive.recv().expect("the REST catalog's runtime dropped a request")
    }

    fn error(&self, message: String) -> HistoryError {
        HistoryError::RestCatalog { url: self.config.url.clone(), message }
    }

    fn refused(&self, what: &str, status: u16, body: &[u8]) -> HistoryError {
        // the REST spec's error: {"error": {"message", "type", "code"}}
        let message = serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|v| {
                let e = v.get("error")?;
                Some(format!(
                    "{}: {}",
                    e.get("type").and_then(|t| t.as_str()).unwrap_or_default(),
                    e.get("message").and_then(|m| m.as_str()).unwrap_or_default()
                ))
            })
            .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned());
        self.error(format!("{what}: HTTP {status}: {message}"))
    }
}

/// The type of a REST error response (`{"error": {"type": ...}}`).
fn error_type(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    Some(value.get("error")?.get("type")?.as_str()?.to_owned())
}

#[derive(Debug, Clone, Copy)]
enum Method {
    Get,
    Post,
    Delete,
}

impl Method {
    fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Delete => "DELETE",
        }
    }
}

/// `GET /v1/config`'s answer.
#[derive(Debug, Default, Deserialize)]
struct CatalogConfig {
    #[serde(default)]
    defaults: HashMap<String, String>,
    #[serde(default)]
    overrides: HashMap<String, String>,
}

/// A loaded table: what of its metadata a commit is worked out from.
#[derive(Debug, Deserialize)]
struct LoadTable {
    metadata: CatalogTable,
}

/// The catalog's table, as far as needle compares it with its own metadata.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct CatalogTable {
    pub table_uuid: String,
    #[serde(default)]
    pub location: String,
    #[serde(default)]
    pub current_schema_id: Option<i32>,
    #[serde(default)]
    pub schemas: Vec<SchemaIdOf>,
    #[serde(default)]
    pub default_spec_id: Option<i32>,
    #[serde(default)]
    pub partition_specs: Vec<SpecIdOf>,
    #[serde(default)]
    pub snapshots: Vec<SnapshotIdOf>,
    #[serde(default)]
    pub current_snapshot_id: Option<i64>,
    #[serde(default)]
    pub refs: HashMap<String, SnapshotIdOf>,
    #[serde(default)]
    pub properties: HashMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct SchemaIdOf {
    pub schema_id: i32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct SpecIdOf {
    pub spec_id: i32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct SnapshotIdOf {
    pub snapshot_id: i64,
}

impl CatalogTable {
    /// The snapshot its `main` branch is at (older metadata: the current snapshot).
    fn main(&self) -> Option<i64> {
        match self.refs.get(MAIN) {
            Some(r) => Some(r.snapshot_id),
            None => self.current_snapshot_id.filter(|id| *id >= 0),
        }
    }
}

/// The body of a commit (`CommitTableRequest`).
#[derive(Debug, Serialize)]
struct CommitRequest {
    identifier: Identifier,
    requirements: Vec<TableRequirement>,
    updates: Vec<TableUpdate>,
}

#[derive(Debug, Serialize)]
struct Identifier {
    namespace: Vec<String>,
    name: String,
}

/// A commit's requirements and updates.
#[derive(Debug)]
pub(crate) struct Commit {
    pub requirements: Vec<TableRequirement>,
    pub updates: Vec<TableUpdate>,
}

/// What bringing the catalog's table to needle's metadata takes.
#[derive(Debug)]
pub(crate) enum Plan {
    /// Nothing: it holds needle's newest snapshot, schema and properties (or a newer
    /// snapshot, another writer's).
    UpToDate,
    Commit(Commit),
    /// The catalog's table is another table at needle's location (the store was made anew):
    /// it is dropped from the catalog and needle's registered.
    Replace,
    /// The catalog's table is another table elsewhere: left alone.
    Foreign(String),
}

/// The commit that brings the catalog's table `theirs` to needle's metadata `ours`.
pub(crate) fn plan(theirs: &CatalogTable, ours: &TableMetadata) -> Plan {
    let uuid = ours.uuid();
    if theirs.table_uuid != uuid.to_string() {
        let same_place =
            theirs.location.trim_end_matches('/') == ours.location().trim_end_matches('/');
        if same_place {
            return Plan::Replace;
        }
        return Plan::Foreign(format!(
            "the catalog's table is another table (uuid {}, location {}), not the store's \
             (uuid {uuid}, location {}): it is left alone",
            theirs.table_uuid,
            theirs.location,
            ours.location()
        ));
    }
    // a snapshot's id is the version that made it: a catalog at a newer one than `ours` was
    // brought there by another writer of the store, and is never moved back
    let main = ours.snapshot_for_ref(MAIN).map(|s| s.snapshot_id());
    if theirs.main() > main {
        return Plan::UpToDate;
    }
    let mut updates = Vec::new();
    // schemas, in the order needle added them (the catalog numbers an added schema as needle did)
    let known: HashSet<i32> = theirs.schemas.iter().map(|s| s.schema_id).collect();
    let mut schemas: Vec<_> =
        ours.schemas_iter().filter(|s| !known.contains(&s.schema_id())).collect();
    schemas.sort_by_key(|s| s.schema_id());
    let last_added = schemas.last().map(|s| s.schema_id());
    for schema in &schemas {
        updates.push(TableUpdate::AddSchema { schema: schema.as_ref().clone() });
    }
    let current = ours.current_schema_id();
    if theirs.current_schema_id != Some(current) {
        let schema_id = if last_added == Some(current) { -1 } else { current };
        updates.push(TableUpdate::SetCurrentSchema { schema_id });
    }
    let known: HashSet<i32> = theirs.partition_specs.iter().map(|s| s.spec_id).collect();
    let mut specs: Vec<_> =
        ours.partition_specs_iter().filter(|s| !known.contains(&s.spec_id())).collect();
    specs.sort_by_key(|s| s.spec_id());
    for spec in specs {
        updates.push(TableUpdate::AddSpec { spec: spec.as_ref().clone().into_unbound() });
    }
    if theirs.default_spec_id != Some(ours.default_partition_spec_id()) {
        updates.push(TableUpdate::SetDefaultSpec { spec_id: ours.default_partition_spec_id() });
    }
    // the snapshots the catalog lacks, oldest first, then the branch, then those expired
    let known: HashSet<i64> = theirs.snapshots.iter().map(|s| s.snapshot_id).collect();
    let mut snapshots: Vec<_> =
        ours.snapshots().filter(|s| !known.contains(&s.snapshot_id())).collect();
    snapshots.sort_by_key(|s| s.sequence_number());
    for snapshot in snapshots {
        updates.push(TableUpdate::AddSnapshot { snapshot: snapshot.as_ref().clone() });
    }
    if let Some(id) = main.filter(|id| theirs.main() != Some(*id)) {
        updates.push(TableUpdate::SetSnapshotRef {
            ref_name: MAIN.to_owned(),
            reference: SnapshotReference::new(id, SnapshotRetention::branch(None, None, None)),
        });
    }
    let kept: HashSet<i64> = ours.snapshots().map(|s| s.snapshot_id()).collect();
    let gone: Vec<i64> =
        theirs.snapshots.iter().map(|s| s.snapshot_id).filter(|id| !kept.contains(id)).collect();
    if !gone.is_empty() {
        updates.push(TableUpdate::RemoveSnapshots { snapshot_ids: gone });
    }
    // the table's properties, but needle's own manifest (needle reads it from its own files)
    let changed: HashMap<String, String> = ours
        .properties()
        .iter()
        .filter(|(k, v)| k.as_str() != MANIFEST_PROPERTY && theirs.properties.get(*k) != Some(v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !changed.is_empty() {
        updates.push(TableUpdate::SetProperties { updates: changed });
    }
    if theirs.properties.contains_key(MANIFEST_PROPERTY) {
        updates
            .push(TableUpdate::RemoveProperties { removals: vec![MANIFEST_PROPERTY.to_owned()] });
    }
    if updates.is_empty() {
        return Plan::UpToDate;
    }
    let requirements = vec![
        TableRequirement::UuidMatch { uuid },
        TableRequirement::RefSnapshotIdMatch { r#ref: MAIN.to_owned(), snapshot_id: theirs.main() },
    ];
    Plan::Commit(Commit { requirements, updates })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iceberg::Family;
    use crate::manifest::{Manifest, ManifestPart};
    use crate::object::{Bucket, ObjectStoreOptions};

    fn part(n: i64, rows: u64) -> ManifestPart {
        let start = 1_700_000_000_000 / 3_600_000 * 3_600_000 + n * 3_600_000;
        ManifestPart {
            key: format!("p={start}/part-{n}.parquet"),
            name: format!("part-{n}.parquet"),
            writer: String::new(),
            partition_start: start,
            sequence: n as u64,
            level: 0,
            rows,
            bytes: 100,
            time_min: start,
            time_max: start + 1,
            replaces: Vec::new(),
            compacted: false,
            columns: Default::default(),
            families: [("x".to_owned(), Family::Long)].into_iter().collect(),
            partition_span_ms: 3_600_000,
            added: None,
            manifest: None,
        }
    }

    /// Three versions of a table: none of its parts, one part, then a second part of a new
    /// column (a new schema).
    fn versions(dir: &std::path::Path) -> Vec<Manifest> {
        let bucket =
            Bucket::open(&format!("file://{}", dir.display()), &ObjectStoreOptions::default())
                .unwrap();
        let mut out = Vec::new();
        let mut base = Manifest::load(&bucket).unwrap();
        type Step = (Vec<ManifestPart>, &'static [(&'static str, Family)]);
        let steps: [Step; 3] = [
            (Vec::new(), &[]),
            (vec![part(0, 10)], &[("x", Family::Long)]),
            (vec![part(0, 10), part(1, 5)], &[("x", Family::Long), ("y", Family::String)]),
        ];
        for (parts, columns) in steps {
            let wanted: Vec<(String, Family)> =
                columns.iter().map(|(c, f)| ((*c).to_owned(), *f)).collect();
            let (_, next) = Manifest::commit(&bucket, &base, None, |m| {
                m.parts = parts.clone();
                crate::iceberg::register(&mut m.fields, &wanted);
            })
            .unwrap();
            out.push(next.clone());
            base = next;
        }
        out
    }

    /// The catalog's view of a version, as a catalog that registered it returns it.
    fn held(manifest: &Manifest) -> CatalogTable {
        serde_json::from_value(serde_json::to_value(&*manifest.table.as_ref().unwrap().0).unwrap())
            .unwrap()
    }

    fn ours(manifest: &Manifest) -> &TableMetadata {
        &manifest.table.as_ref().unwrap().0
    }

    fn commit_json(plan: Plan) -> serde_json::Value {
        let Plan::Commit(commit) = plan else { panic!("a commit expected, got {plan:?}") };
        serde_json::to_value(CommitRequest {
            identifier: Identifier { namespace: vec!["needle".into()], name: "history".into() },
            requirements: commit.requirements,
            updates: commit.updates,
        })
        .unwrap()
    }

    fn actions(request: &serde_json::Value) -> Vec<String> {
        request["updates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["action"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn a_catalog_versions_behind_gets_the_schemas_and_snapshots_it_lacks_in_one_commit() {
        let dir = tempfile::tempdir().unwrap();
        let v = versions(dir.path());
        let request = commit_json(plan(&held(&v[0]), ours(&v[2])));
        assert_eq!(
            actions(&request),
            [
                "add-schema",
                "add-schema",
                "set-current-schema",
                "add-snapshot",
                "add-snapshot",
                "set-snapshot-ref",
                "set-properties",
                "remove-properties"
            ],
            "{request:#}"
        );
        let updates = &request["updates"];
        // both columns' schemas, the newest made current (the last added: ids are the catalog's)
        assert_eq!(updates[2]["schema-id"], -1);
        assert_eq!(updates[1]["schema"]["fields"].as_array().unwrap().len(), 4, "{request:#}");
        // oldest snapshot first, each with its manifest list; the branch at the newest
        let first = updates[3]["snapshot"]["snapshot-id"].as_i64().unwrap();
        let second = updates[4]["snapshot"]["snapshot-id"].as_i64().unwrap();
        assert!(first < second);
        assert!(updates[4]["snapshot"]["manifest-list"].as_str().unwrap().ends_with(".avro"));
        assert_eq!(updates[5]["ref-name"], "main");
        assert_eq!(updates[5]["snapshot-id"], second);
        assert_eq!(updates[5]["type"], "branch");
        // needle's manifest is never copied into the catalog's table
        assert!(updates[6]["updates"].get(MANIFEST_PROPERTY).is_none());
        assert!(updates[6]["updates"].get("schema.name-mapping.default").is_some());
        assert_eq!(updates[7]["removals"], serde_json::json!([MANIFEST_PROPERTY]));
        // the table must still be the one loaded, its branch where it was (none yet)
        assert_eq!(
            request["requirements"],
            serde_json::json!([
                {"type": "assert-table-uuid", "uuid": ours(&v[2]).uuid().to_string()},
                {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": null},
            ])
        );
    }

    #[test]
    fn a_catalog_at_needles_version_is_up_to_date_once_it_holds_no_manifest_property() {
        let dir = tempfile::tempdir().unwrap();
        let v = versions(dir.path());
        // just registered: it holds needle's file, the manifest property with it
        let request = commit_json(plan(&held(&v[2]), ours(&v[2])));
        assert_eq!(actions(&request), ["remove-properties"]);
        assert_eq!(
            request["requirements"][1]["snapshot-id"],
            ours(&v[2]).current_snapshot_id().unwrap()
        );
        let mut theirs = held(&v[2]);
        theirs.properties.remove(MANIFEST_PROPERTY);
        assert!(matches!(plan(&theirs, ours(&v[2])), Plan::UpToDate));
    }

    #[test]
    fn snapshots_needle_expired_go_from_the_catalog_after_the_branch_moved() {
        let dir = tempfile::tempdir().unwrap();
        let v = versions(dir.path());
        let mut theirs = held(&v[1]);
        theirs.properties.remove(MANIFEST_PROPERTY);
        theirs.snapshots.push(SnapshotIdOf { snapshot_id: 424_242 });
        let request = commit_json(plan(&theirs, ours(&v[2])));
        let acts = actions(&request);
        let set_ref = acts.iter().position(|a| a == "set-snapshot-ref").unwrap();
        let remove = acts.iter().position(|a| a == "remove-snapshots").unwrap();
        assert!(set_ref < remove, "{acts:?}");
        assert_eq!(request["updates"][remove]["snapshot-ids"], serde_json::json!([424_242]));
        assert_eq!(
            request["requirements"][1]["snapshot-id"],
            ours(&v[1]).current_snapshot_id().unwrap()
        );
    }

    #[test]
    fn a_catalog_another_writer_brought_further_is_never_moved_back() {
        let dir = tempfile::tempdir().unwrap();
        let v = versions(dir.path());
        let mut theirs = held(&v[2]);
        theirs.properties.remove(MANIFEST_PROPERTY);
        assert!(matches!(plan(&theirs, ours(&v[1])), Plan::UpToDate));
        assert!(matches!(plan(&theirs, ours(&v[0])), Plan::UpToDate));
    }

    #[test]
    fn another_table_is_replaced_at_the_stores_location_and_left_alone_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let v = versions(dir.path());
        let mut theirs = held(&v[2]);
        theirs.table_uuid = uuid::Uuid::new_v4().to_string();
        assert!(matches!(plan(&theirs, ours(&v[2])), Plan::Replace));
        theirs.location = "s3://elsewhere/table".into();
        let Plan::Foreign(why) = plan(&theirs, ours(&v[2])) else { panic!("left alone") };
        assert!(why.contains("s3://elsewhere/table"), "{why}");
    }

    #[test]
    fn endpoints_carry_the_prefix_and_escape_names() {
        let mut config = RestCatalogConfig::new("http://127.0.0.1:1/api/catalog/");
        config.namespace = "my ns".into();
        let catalog = RestCatalog::open(&config).unwrap();
        let prefix = vec!["wh".to_owned()];
        let url =
            catalog.endpoint(&prefix, &["namespaces", "my ns", "tables", "t/1"], &[]).unwrap();
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:1/api/catalog/v1/wh/namespaces/my%20ns/tables/t%2F1"
        );
        let url = catalog.endpoint(&[], &["config"], &[("warehouse", "a b")]).unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:1/api/catalog/v1/config?warehouse=a+b");
        assert!(RestCatalog::open(&RestCatalogConfig::new("ftp://x")).is_err());
    }

    #[test]
    fn an_unreachable_catalog_is_counted_and_retried_only_after_retry_ms() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut config = RestCatalogConfig::new(format!("http://127.0.0.1:{port}"));
        config.retry_ms = 60_000;
        let catalog = RestCatalog::open(&config).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let v = versions(dir.path());
        assert!(catalog.behind("file:///x/metadata/v3.metadata.json"));
        catalog.sync("file:///x/metadata/v3.metadata.json", ours(&v[2]));
        let info = catalog.info();
        assert_eq!(info.errors, 1);
        assert!(info.last_error.unwrap().contains("GET"));
        // within retry_ms the next version is not tried
        assert!(!catalog.behind("file:///x/metadata/v4.metadata.json"));
        catalog.sync("file:///x/metadata/v4.metadata.json", ours(&v[2]));
        assert_eq!(catalog.info().errors, 1);
    }
}
