//! needle's configuration: defaults, then `needle.toml`, then `NEEDLE_*` environment variables,
//! then command-line flags, each overriding the one before. Unknown keys are refused by name, so
//! a typo never silently leaves a default in force. `needle config` prints the result as TOML.
//!
//! Environment variables name a key by its section and field joined by a double underscore:
//! `NEEDLE_SERVER__LISTEN=127.0.0.1:9999`, `NEEDLE_QUERY__MAX_DURATION_MS=60000`.
//!
//! Which settings are secret, and where else a secret may come from (`KEY_file`, `KEY_env`), is
//! [`crate::secrets`]: loading reads those before the configuration is typed, and `needle config`
//! prints no secret.

use crate::secrets::{self, Secret, SecretSources, Surroundings};
use figment::providers::{Format, Serialized, Toml};
use figment::value::{Dict, Map, Tag, Value};
use figment::Figment;
use figment::{Profile, Provider};
use needle_query::QueryConfig;
use needle_record::Validation;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Everything `needle serve` can be told.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NeedleConfig {
    pub server: ServerConfig,
    pub runtime: RuntimeConfig,
    pub source: SourceConfig,
    /// Limits and defaults every query is validated against.
    pub query: QueryConfig,
    /// Kafka: the `kafka://` source's defaults and the distributed mode's topics.
    pub kafka: KafkaConfig,
    /// History: what needle keeps of the stream, for queries that look back.
    pub history: HistoryConfig,
    /// Where each secret setting was read from, and warnings about it (not a setting itself).
    #[serde(skip)]
    pub secret_sources: SecretSources,
}

/// History: the records needle keeps, compressed (Parquet files, partitioned by time), so
/// queries can read the past (`FROM HISTORY(...)`, `... SINCE ...`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HistoryConfig {
    /// Where the store lives: a local directory, or an object store's URL (`s3://bucket/prefix`,
    /// `gs://bucket/prefix`, `az://container/prefix`, `file:///path`). Empty: history is off.
    pub dir: String,
    /// With `dir` an object store: this machine's directory for parts written and not yet
    /// uploaded, and for the cache. Empty: a directory under the system's temporary directory,
    /// named after the store's URL.
    pub cache_dir: String,
    /// With `dir` an object store: bytes the local cache keeps at most (uploaded parts written
    /// here, and ranges read from the object store).
    pub cache_bytes: u64,
    /// With `dir` an object store: when a source's records count as durable (a Kafka source
    /// commits their offsets then). `upload`: once their part is in the object store and its
    /// manifest (losing this machine loses nothing); `local`: once their part is fsynced here
    /// (sooner, but a lost disk loses what was not uploaded yet).
    pub durable: Durability,
    /// With `dir` an object store: bytes of parts waiting for upload at most (the object store
    /// unreachable); past it, history writes stop (records wait in the write buffer) until the
    /// uploads catch up.
    pub max_pending_bytes: u64,
    /// How long a part replaced by a merge stays (an object, or a file of a local store), so
    /// a query or an Iceberg reader that planned before the switch still reads it, in ms.
    pub delete_grace_ms: u64,
    /// The store is an Apache Iceberg table (`DIR/metadata/`) that commits its parts as a
    /// snapshot at most this often, in ms (on object storage, parts uploaded meanwhile wait for
    /// it); 0: a local store is not a table, and object storage commits each upload.
    pub commit_ms: u64,
    /// An Apache Iceberg REST catalog (`http://host:8181`, the URL before `/v1/...`) the
    /// store's table is kept registered in, brought to each snapshot needle commits (a local
    /// store needs `commit_ms` above 0); empty: none. A catalog down or refusing never stops
    /// history: it catches up at the next commit.
    pub catalog_url: String,
    /// A bearer token sent to the REST catalog (`Authorization: Bearer ...`); empty: none.
    pub catalog_token: String,
    /// The warehouse asked of the REST catalog (`GET /v1/config?warehouse=...`); empty: none.
    pub catalog_warehouse: String,
    /// The table's namespace in the REST catalog.
    pub catalog_namespace: String,
    /// The table's name in the REST catalog.
    pub catalog_table: String,
    /// How needle reaches the object store `dir` names.
    pub object_store: ObjectStoreConfig,
    /// The field holding a record's time (ms since the epoch, or an RFC 3339 string); empty, or
    /// missing in a record: the time needle read it (counted in `needle_history_missing_time`).
    pub time_field: String,
    /// Fields a partition is sorted by before time (e.g. `["sensor"]`): a series' values sit
    /// together, compress to little, and a block's min/max describe one series.
    #[serde(deserialize_with = "list_or_commas")]
    pub sort_by: Vec<String>,
    /// The time span of one partition (one directory), in ms.
    pub partition_ms: u64,
    /// How often the write buffer is made durable (a new part), in ms.
    pub flush_ms: u64,
    /// Partitions are merged into one of `compact_span_ms` once that whole span ended longer
    /// ago than this, in ms (the hours of a cold day become one day); 0: never.
    pub compact_after_ms: u64,
    /// The span cold partitions are merged into, in ms (a day); at most a partition's span
    /// turns it off.
    pub compact_span_ms: u64,
    /// Partitions older than this are dropped, in ms; 0: kept forever.
    pub retention_ms: u64,
    /// Oldest partitions are dropped past this many bytes on disk; 0: no bound.
    pub max_bytes: u64,
    /// Fields given a bloom filter (ids that `=` and `IN` look up).
    #[serde(deserialize_with = "list_or_commas")]
    pub bloom_fields: Vec<String>,
    /// A BQL condition: only records it holds TRUE for are kept; empty: all.
    pub filter: String,
    /// Keep only these top-level fields (and the time); empty: whole records, losslessly.
    #[serde(deserialize_with = "list_or_commas")]
    pub fields: Vec<String>,
    /// Rows in a block (a Parquet row group): what one min/max describes.
    pub block_rows: usize,
    /// Rows in a page of a block's column at most: what the page index's min/max describe,
    /// and what a filter can skip inside a block.
    pub page_rows: usize,
}

/// When records kept in an object store count as durable (`history.durable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Once their part is uploaded and in the manifest.
    #[default]
    Upload,
    /// Once their part is fsynced on the local disk.
    Local,
}

/// `[history.object_store]`: how needle reaches the object store `history.dir` names. Settings
/// left empty come from the usual environment variables (`AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT`, …; `GOOGLE_*`; `AZURE_*`).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ObjectStoreConfig {
    /// An S3-compatible service's URL (MinIO, Ceph, R2, …); empty: AWS itself.
    pub endpoint: String,
    pub region: String,
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: String,
    /// Allow `http://` endpoints (a service on a trusted network or loopback).
    pub allow_http: bool,
    /// How long one request may take before it is retried or fails, in ms.
    pub request_timeout_ms: u64,
    /// Any other setting of Apache Arrow's `object_store` crate, by its name
    /// (`google_service_account`, `azure_storage_account_name`, `aws_virtual_hosted_style_request`,
    /// …).
    #[serde(deserialize_with = "scalars_as_strings")]
    pub options: BTreeMap<String, String>,
}

impl Default for ObjectStoreConfig {
    fn default() -> Self {
        Self {
            endpoint: String::new(),
            region: String::new(),
            access_key_id: String::new(),
            secret_access_key: String::new(),
            session_token: String::new(),
            allow_http: false,
            request_timeout_ms: 10_000,
            options: BTreeMap::new(),
        }
    }
}

impl std::fmt::Debug for ObjectStoreConfig {
    /// Without the credentials' values.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = |v: &String| if v.is_empty() { "" } else { "<set>" };
        f.debug_struct("ObjectStoreConfig")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &set(&self.access_key_id))
            .field("secret_access_key", &set(&self.secret_access_key))
            .field("session_token", &set(&self.session_token))
            .field("allow_http", &self.allow_http)
            .field("request_timeout_ms", &self.request_timeout_ms)
            .field("options", &self.options.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ObjectStoreConfig {
    /// The settings as the `object_store` crate names them, for a store at `url`.
    pub fn settings(&self, url: &str) -> needle_history::object::ObjectStoreOptions {
        let mut settings: Vec<(String, String)> = Vec::new();
        let s3 = url.starts_with("s3://") || url.starts_with("s3a://");
        let mut add = |key: &str, value: &str| {
            if !value.is_empty() {
                settings.push((key.to_owned(), value.to_owned()));
            }
        };
        if s3 {
            add("aws_endpoint", &self.endpoint);
            add("aws_region", &self.region);
            add("aws_access_key_id", &self.access_key_id);
            add("aws_secret_access_key", &self.secret_access_key);
            add("aws_session_token", &self.session_token);
        }
        if self.allow_http {
            add("allow_http", "true");
        }
        for (key, value) in &self.options {
            add(key, value);
        }
        needle_history::object::ObjectStoreOptions {
            settings,
            request_timeout_ms: self.request_timeout_ms.max(100),
        }
    }
}

impl Default for HistoryConfig {
    fn default() -> Self {
        let store = needle_history::StoreConfig::new("");
        let remote = needle_history::RemoteConfig::new("");
        Self {
            dir: String::new(),
            cache_dir: String::new(),
            cache_bytes: remote.cache_bytes,
            durable: Durability::Upload,
            max_pending_bytes: remote.max_pending_bytes,
            delete_grace_ms: remote.delete_grace_ms,
            commit_ms: 10_000,
            catalog_url: String::new(),
            catalog_token: String::new(),
            catalog_warehouse: String::new(),
            catalog_namespace: needle_history::catalog::NAMESPACE.into(),
            catalog_table: needle_history::catalog::TABLE.into(),
            object_store: ObjectStoreConfig::default(),
            time_field: String::new(),
            sort_by: Vec::new(),
            partition_ms: store.partition_ms,
            flush_ms: store.flush_ms,
            compact_after_ms: 3_600_000,
            compact_span_ms: store.compact_span_ms,
            retention_ms: 0,
            max_bytes: 0,
            bloom_fields: Vec::new(),
            filter: String::new(),
            fields: Vec::new(),
            block_rows: store.block_rows,
            page_rows: store.page_rows,
        }
    }
}

impl HistoryConfig {
    /// True when a store directory is set.
    pub fn is_on(&self) -> bool {
        !self.dir.is_empty()
    }

    /// True when the store lives in an object store (`dir` is a URL).
    pub fn is_remote(&self) -> bool {
        needle_history::object::is_url(&self.dir)
    }

    /// The store's settings; `writer`: this process's name in the manifest of a store on
    /// object storage.
    pub fn store_config_as(&self, writer: &str) -> needle_history::StoreConfig {
        let mut c = self.store_config();
        if let Some(remote) = c.remote.as_mut() {
            if !writer.is_empty() {
                remote.writer = writer.to_owned();
            }
        }
        c
    }

    /// The local directory of a store on object storage: `cache_dir`, or one under the
    /// system's temporary directory named after the URL.
    pub fn local_dir(&self) -> std::path::PathBuf {
        if !self.cache_dir.is_empty() {
            return self.cache_dir.clone().into();
        }
        let name: String = self
            .dir
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' })
            .collect();
        std::env::temp_dir().join(format!("needle-history-{name}"))
    }

    /// The store's settings.
    pub fn store_config(&self) -> needle_history::StoreConfig {
        let local = if self.is_remote() { self.local_dir() } else { self.dir.clone().into() };
        let mut c = needle_history::StoreConfig::new(local);
        if self.is_remote() {
            let mut remote = needle_history::RemoteConfig::new(self.dir.clone());
            remote.options = self.object_store.settings(&self.dir);
            remote.cache_bytes = self.cache_bytes;
            remote.durable_on_upload = self.durable == Durability::Upload;
            remote.max_pending_bytes = self.max_pending_bytes;
            remote.delete_grace_ms = self.delete_grace_ms;
            c.remote = Some(remote);
        }
        c.time_field = (!self.time_field.is_empty()).then(|| self.time_field.clone());
        c.sort_by = self.sort_by.clone();
        c.commit_ms = (self.commit_ms > 0).then_some(self.commit_ms);
        if !self.catalog_url.is_empty() {
            let mut catalog = needle_history::RestCatalogConfig::new(self.catalog_url.clone());
            let set = |v: &String| (!v.is_empty()).then(|| v.clone());
            catalog.token = set(&self.catalog_token);
            catalog.warehouse = set(&self.catalog_warehouse);
            catalog.namespace = self.catalog_namespace.clone();
            catalog.table = self.catalog_table.clone();
            c.catalog = Some(catalog);
        }
        c.delete_grace_ms = self.delete_grace_ms;
        c.partition_ms = self.partition_ms.max(1);
        c.flush_ms = self.flush_ms.max(1);
        c.compact_after_ms = (self.compact_after_ms > 0).then_some(self.compact_after_ms);
        c.compact_span_ms = self.compact_span_ms;
        c.retention_ms = (self.retention_ms > 0).then_some(self.retention_ms);
        c.max_bytes = (self.max_bytes > 0).then_some(self.max_bytes);
        c.bloom_fields = self.bloom_fields.clone();
        c.fields = (!self.fields.is_empty()).then(|| self.fields.clone());
        c.block_rows = self.block_rows.max(1);
        c.page_rows = self.page_rows.max(1);
        c
    }
}

/// The HTTP API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Where the API listens. Loopback by default: exposing it is a deliberate choice.
    pub listen: String,
    /// Bearer tokens accepted; empty: no authentication (fine on loopback). Each is a string
    /// (every scope) or a table `{ name, token, scopes = ["read" | "query" | "admin"],
    /// max_queries }`, the token given as `token`, `token_file`, `token_env` or `token_sha256`.
    pub tokens: Vec<TokenConfig>,
    /// Origins allowed by CORS; empty: CORS off.
    pub cors_origins: Vec<String>,
    /// Largest request body accepted, in bytes.
    pub max_request_bytes: usize,
    /// Queries one client (token, or address without tokens) may run at once.
    pub max_queries_per_client: usize,
    /// HTTPS: the server's certificate chain, a PEM file; with `tls_key`. Empty: plain HTTP.
    pub tls_cert: String,
    /// HTTPS: the certificate's private key, a PEM file (PKCS#8, PKCS#1 or SEC1).
    pub tls_key: String,
    /// The base URL clients reach this server at (`http[s]://HOST[:PORT][/PREFIX]`): in the
    /// distributed mode an api node writes it in the notices of the queries it holds, and the
    /// other api nodes redirect a client asking them for such a query there. Empty: `http://`
    /// (`https://` with TLS) and the address the server listens on, which suits a node on one
    /// machine but not one listening on `0.0.0.0`.
    pub advertised_url: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9900".into(),
            tokens: Vec::new(),
            cors_origins: Vec::new(),
            max_request_bytes: 1 << 20,
            max_queries_per_client: 1_000,
            tls_cert: String::new(),
            tls_key: String::new(),
            advertised_url: String::new(),
        }
    }
}

/// One bearer token the server accepts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum TokenConfig {
    /// A token with every scope, its owner named by a hash of it.
    Plain(Secret),
    /// A named token with its scopes and, optionally, its own cap on running queries.
    Scoped(ScopedToken),
}

/// A named token: `{ name = "dashboards", token = "...", scopes = ["read"] }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopedToken {
    /// Who holds it: the owner of the queries it starts, which its cap counts and only it (or
    /// an admin token) may kill.
    pub name: String,
    /// The secret a client presents (also given as `token_file` or `token_env`, see
    /// [`crate::secrets`]); or none, with `token_sha256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<Secret>,
    /// The SHA-256 of the secret a client presents, in hex: needle.toml then holds no secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_sha256: Option<String>,
    /// What it may do; every scope when left out.
    #[serde(default = "Scope::all")]
    pub scopes: Vec<Scope>,
    /// Queries it may run at once (default: `server.max_queries_per_client`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_queries: Option<usize>,
}

/// What a token may do. `read`, `query` and `admin` each include the ones before them; `write`
/// stands apart: it is given only by naming it (an agent's token writes and reads nothing), and
/// no other scope includes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Read: list queries and their progress, the schema, metrics, validate queries.
    Read,
    /// Start queries, and follow and kill its own (closing a query's events ends it).
    Query,
    /// Follow and kill any owner's query.
    Admin,
    /// Write records over HTTP (`needle serve --ingest` or `--source http`).
    Write,
}

impl Scope {
    fn all() -> Vec<Scope> {
        vec![Scope::Read, Scope::Query, Scope::Admin, Scope::Write]
    }

    /// The scope's name as configured.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Query => "query",
            Scope::Admin => "admin",
            Scope::Write => "write",
        }
    }
}

/// A string or a table, each read with its own errors (an untagged enum would only say that
/// neither matched).
impl<'de> Deserialize<'de> for TokenConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = TokenConfig;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a token string, or a table { name, token, scopes, max_queries }")
            }
            fn visit_str<E: serde::de::Error>(self, token: &str) -> Result<TokenConfig, E> {
                Ok(TokenConfig::Plain(token.into()))
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                map: M,
            ) -> Result<TokenConfig, M::Error> {
                let table = serde::de::value::MapAccessDeserializer::new(map);
                ScopedToken::deserialize(table).map(TokenConfig::Scoped)
            }
        }
        deserializer.deserialize_any(Either)
    }
}

impl From<&str> for TokenConfig {
    fn from(token: &str) -> Self {
        TokenConfig::Plain(token.into())
    }
}

impl ScopedToken {
    /// A named token given as itself, with `scopes` and no cap of its own.
    pub fn new(name: &str, token: &str, scopes: Vec<Scope>) -> Self {
        Self {
            name: name.to_owned(),
            token: Some(token.into()),
            token_sha256: None,
            scopes,
            max_queries: None,
        }
    }
}

/// The SHA-256 of what a client presents as its token, as [`TokenConfig::accepts`] takes it.
pub fn token_digest(presented: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(presented.as_bytes()).into()
}

/// 64 hex digits as the 32 bytes they spell.
fn parse_sha256(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim().as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let mut digest = [0u8; 32];
    for (byte, pair) in digest.iter_mut().zip(hex.chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(digest)
}

impl TokenConfig {
    /// Whether a client presenting a token whose SHA-256 is `presented` holds this one. The
    /// digests are compared in constant time, so timing tells neither the token nor its length.
    pub fn accepts(&self, presented: &[u8; 32]) -> bool {
        use subtle::ConstantTimeEq;
        let expected = match self {
            TokenConfig::Plain(token) => token_digest(token.expose()),
            TokenConfig::Scoped(ScopedToken { token: Some(token), .. }) => {
                token_digest(token.expose())
            }
            TokenConfig::Scoped(ScopedToken { token_sha256: Some(hex), .. }) => {
                match parse_sha256(hex) {
                    Some(digest) => digest,
                    None => return false,
                }
            }
            TokenConfig::Scoped(_) => return false,
        };
        expected.ct_eq(presented).into()
    }

    /// The owner of the queries it starts: its name, or for a plain token `token-` and eight
    /// hex digits of a hash of it (never the token's own characters).
    pub fn owner(&self) -> String {
        match self {
            TokenConfig::Plain(token) => {
                use std::hash::{Hash, Hasher};
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                token.expose().hash(&mut hasher);
                format!("token-{:08x}", hasher.finish() as u32)
            }
            TokenConfig::Scoped(scoped) => scoped.name.clone(),
        }
    }

    /// Whether it may do what `scope` allows (a higher scope of `read`, `query`, `admin`
    /// includes the lower ones; `write` only itself).
    pub fn allows(&self, scope: Scope) -> bool {
        match self {
            TokenConfig::Plain(_) => true,
            TokenConfig::Scoped(scoped) => scoped.scopes.iter().any(|&held| match (held, scope) {
                (Scope::Write, _) | (_, Scope::Write) => held == scope,
                _ => held >= scope,
            }),
        }
    }

    /// Its own cap on running queries, if it has one.
    pub fn max_queries(&self) -> Option<usize> {
        match self {
            TokenConfig::Plain(_) => None,
            TokenConfig::Scoped(scoped) => scoped.max_queries,
        }
    }
}

/// Threads, queues and the limits that protect the process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Worker threads; 0 means one per core.
    pub workers: usize,
    /// How often partials flush to the joiner and windows are checked, in ms.
    pub tick_ms: u64,
    /// Batches waiting between the sources and the workers (the backpressure bound).
    pub queue_batches: usize,
    /// Longest input line accepted, in bytes; longer lines are dropped and counted.
    pub max_line_bytes: usize,
    /// Queries running at once, over all clients.
    pub max_queries: usize,
    /// RAW records one query may emit per second; past it records are coalesced into the next
    /// emission or dropped, and the metadata says how many.
    pub raw_records_per_sec: u64,
    /// Emissions buffered for a slow subscriber before older ones are dropped (and reported).
    pub subscriber_buffer: usize,
    /// Bytes of one query's results buffered for a slow (or absent) subscriber before older
    /// emissions are dropped (and reported); the newest emission is always kept.
    pub max_result_bytes_per_query: usize,
    /// Bytes of results buffered for slow subscribers in all, over every query: past it, the
    /// queries whose subscribers are behind drop their oldest emissions (those keeping up lose
    /// nothing).
    pub max_result_bytes: usize,
    /// How much of each record is checked as JSON: `line` (the whole line; a line with an error
    /// anywhere is malformed, counted and skipped) or `fields` (only the fields queries read;
    /// faster on wide records, but an error elsewhere in a line goes unnoticed).
    pub validate: Validation,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            workers: 0,
            tick_ms: 100,
            queue_batches: 64,
            max_line_bytes: 1 << 20,
            max_queries: 100_000,
            raw_records_per_sec: 10_000,
            subscriber_buffer: 256,
            max_result_bytes_per_query: 32 << 20,
            max_result_bytes: 256 << 20,
            validate: Validation::Line,
        }
    }
}

/// Where records come from (see the source registry for the spec forms).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourceConfig {
    /// `file:PATH`, `stdin`, `tcp:HOST:PORT` (`?format=influx|opentsdb|graphite` for metrics
    /// agents' lines), `gen:bullet?rate=20000`, ...
    pub spec: String,
    /// Tail file sources as they grow.
    pub follow: bool,
}

impl Default for SourceConfig {
    fn default() -> Self {
        Self { spec: "gen:bullet?rate=20000".into(), follow: false }
    }
}

/// Kafka, for the `kafka://` source (spec options override `brokers`, `data_topic`, `group` and
/// `start`) and the distributed mode (`needle serve --role worker|api`).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KafkaConfig {
    /// Bootstrap brokers, `HOST:PORT[,HOST:PORT...]`.
    pub brokers: String,
    /// The records (one JSON object per message, or NDJSON lines), read by the worker nodes.
    pub data_topic: String,
    /// Queries from api nodes to worker nodes: compacted, keyed by query id, a tombstone when a
    /// query ends. Created (1 partition, compacted) when missing.
    pub query_topic: String,
    /// Partials and progress from worker nodes to api nodes. Created with `results_partitions`
    /// partitions when missing.
    pub results_topic: String,
    /// Partitions of the results topic when a node creates it. A query's partials all go to one
    /// partition (chosen by its id), so their order holds whichever api node merges them; more
    /// partitions spread the topic over more brokers. Every node uses the topic's actual count,
    /// so change it only with every node stopped.
    pub results_partitions: i32,
    /// The consumer group the worker nodes (or `--role all` processes) share on the data topic.
    pub group: String,
    /// Where a group with no committed offset starts: `latest` (queries look forward) or
    /// `earliest`.
    pub start: StartFrom,
    /// This node's name, unique among the nodes. An api node's prefixes its query ids, and
    /// worker nodes address the node's partials to it; an api node restarted under the same
    /// name takes back the queries its past life ran; a worker node's signs its reads of its
    /// history. Empty: a name made up per process.
    pub node_id: String,
    /// librdkafka properties given to every Kafka client as they are: security settings
    /// (`security.protocol`, `sasl.mechanism`, `ssl.ca.location`, ...) and tuning
    /// (`session.timeout.ms`). Quote the keys: `"security.protocol" = "SASL_SSL"`. A secret one
    /// (`sasl.password`, ...) may be given as `"sasl.password_file"` or `"sasl.password_env"`.
    #[serde(deserialize_with = "scalars_as_strings")]
    pub properties: BTreeMap<String, String>,
}

impl Default for KafkaConfig {
    fn default() -> Self {
        Self {
            brokers: "127.0.0.1:9092".into(),
            data_topic: "needle-records".into(),
            query_topic: "needle-queries".into(),
            results_topic: "needle-results".into(),
            results_partitions: 1,
            group: "needle-workers".into(),
            start: StartFrom::Latest,
            node_id: String::new(),
            properties: BTreeMap::new(),
        }
    }
}

/// Shown with its secret properties redacted.
impl std::fmt::Debug for KafkaConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.debug_struct("KafkaConfig")
            .field("brokers", &self.brokers)
            .field("data_topic", &self.data_topic)
            .field("query_topic", &self.query_topic)
            .field("results_topic", &self.results_topic)
            .field("results_partitions", &self.results_partitions)
            .field("group", &self.group)
            .field("start", &self.start)
            .field("node_id", &self.node_id)
            .field("properties", &secrets::RedactedProperties(&self.properties))
            .finish()
    }
}

/// Where a Kafka consumer group with no committed offset starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartFrom {
    /// The records that arrive from now on (queries look forward).
    #[default]
    Latest,
    /// The oldest records the topic keeps.
    Earliest,
}

impl StartFrom {
    /// The name librdkafka's `auto.offset.reset` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            StartFrom::Latest => "latest",
            StartFrom::Earliest => "earliest",
        }
    }
}

impl std::str::FromStr for StartFrom {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "latest" => Ok(StartFrom::Latest),
            "earliest" => Ok(StartFrom::Earliest),
            other => Err(format!("start must be latest or earliest, not '{other}'")),
        }
    }
}

/// Reads a list of names as a TOML array, or as one string of names separated by commas (as
/// an environment variable or a flag gives it: `NEEDLE_HISTORY__SORT_BY=sensor,region`).
fn list_or_commas<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Names {
        List(Vec<String>),
        Text(String),
    }
    Ok(match Names::deserialize(deserializer)? {
        Names::List(names) => names,
        Names::Text(text) => {
            text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
        }
    })
}

/// Reads a table of strings, numbers or booleans as strings (librdkafka takes every property as
/// a string; `"session.timeout.ms" = 6000` should work as well as `"6000"`).
fn scalars_as_strings<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Scalar {
        Text(String),
        Integer(i64),
        Float(f64),
        Bool(bool),
    }
    let table = BTreeMap::<String, Scalar>::deserialize(deserializer)?;
    Ok(table
        .into_iter()
        .map(|(k, v)| {
            let v = match v {
                Scalar::Text(s) => s,
                Scalar::Integer(i) => i.to_string(),
                Scalar::Float(f) => f.to_string(),
                Scalar::Bool(b) => b.to_string(),
            };
            (k, v)
        })
        .collect())
}

/// A configuration that cannot be used, and why (the file, key and problem). It never holds a
/// secret: every message goes through [`secrets::scrub`].
#[derive(Debug, thiserror::Error)]
#[error("bad configuration: {0}")]
pub struct ConfigError(String);

impl ConfigError {
    fn new(message: impl AsRef<str>) -> Self {
        Self(secrets::scrub(message.as_ref()).into_owned())
    }
}

/// The history settings a metrics source brings unless `[history]` sets them: the time each
/// point carries, and series kept together (the metric's name, then its tags by tag name).
pub const METRICS_TIME_FIELD: &str = "timestamp";
/// See [`METRICS_TIME_FIELD`]: the name field of each protocol's records (Prometheus,
/// InfluxDB line protocol, OpenTSDB, Graphite), then every other text field.
pub const METRICS_SORT_BY: [&str; 5] = ["__name__", "measurement", "metric", "path", "*"];

impl NeedleConfig {
    /// True when the records come from metrics agents: HTTP writes only (`--source http`), or
    /// a tcp source of a metrics protocol (`?format=influx|opentsdb|graphite`).
    pub fn source_is_metrics(&self) -> bool {
        let spec = self.source.spec.as_str();
        if spec == "http" {
            return true;
        }
        let Some((_, query)) = spec.strip_prefix("tcp:").and_then(|s| s.split_once('?')) else {
            return false;
        };
        query
            .split('&')
            .any(|p| matches!(p, "format=influx" | "format=opentsdb" | "format=graphite"))
    }

    /// The history store's settings for this process (`writer`: the name it writes an object
    /// store's manifest under): `[history]`, with a metrics source's time field and series
    /// order where it leaves them empty ([`METRICS_TIME_FIELD`], [`METRICS_SORT_BY`]).
    pub fn history_store_config(&self, writer: &str) -> needle_history::StoreConfig {
        let mut c = self.history.store_config_as(writer);
        if self.source_is_metrics() {
            if self.history.time_field.is_empty() {
                c.time_field = Some(METRICS_TIME_FIELD.to_owned());
            }
            if self.history.sort_by.is_empty() {
                c.sort_by = METRICS_SORT_BY.iter().map(|f| f.to_string()).collect();
            }
        }
        c
    }

    /// Defaults ← `file` (when given; a missing file is an error) ← `NEEDLE_*` from `env`, then
    /// the secrets given as `KEY_file` / `KEY_env` read (the variables `KEY_env` names looked up
    /// in `env` too). Flags are applied by the caller on the result.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(NeedleConfig::default()));
        if let Some(path) = file {
            if !path.is_file() {
                return Err(ConfigError::new(format!("{}: no such file", path.display())));
            }
            // (absolute: `needle config` says which file a secret was given in)
            let path = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
            figment = figment.merge(Toml::file_exact(path));
        }
        // Only the variables given (not the process's), so tests and callers decide.
        let env: Vec<(String, String)> = env.into_iter().collect();
        let vars: Vec<(String, String)> = env
            .iter()
            .filter(|(k, _)| k.starts_with(ENV_PREFIX) && !CLIENT_VARIABLES.contains(&k.as_str()))
            .cloned()
            .collect();
        check_env_names(&vars)?;
        let layered = figment.merge(EnvOverrides(vars));
        // the merged settings as a tree, each value tagged with where it was given
        let mut root = match layered.data() {
            Ok(mut profiles) => profiles.remove(&Profile::Default).unwrap_or_default(),
            // (extracting gives the same error, with where it was made)
            Err(e) => {
                let e = layered.extract::<Value>().err().unwrap_or(e);
                return Err(ConfigError::new(describe(e, &Value::from(Dict::new()), &layered)));
            }
        };
        let lookup = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let given_in = |tag: Tag| layered.get_metadata(tag).map_or_else(String::new, place_named);
        let around = Surroundings { env: &lookup, given_in: &given_in };
        let sources = secrets::resolve(&mut root, &around).map_err(ConfigError::new)?;
        let root = Value::from(root);
        let mut config = NeedleConfig::deserialize(&root)
            .map_err(|e| ConfigError::new(describe(e, &root, &layered)))?;
        config.secret_sources = sources;
        config.normalize();
        check_tokens(&config.server.tokens)?;
        if !config.server.advertised_url.is_empty() {
            config.server.advertised_url = check_advertised_url(&config.server.advertised_url)?;
        }
        Ok(config)
    }

    /// The configuration as TOML, as `needle config` prints it: a valid needle.toml with no
    /// secret in it. A secret read from a file or a variable is printed as the `KEY_file` /
    /// `KEY_env` it came from; any other as [`secrets::REDACTED`], listed in a comment at the top
    /// with where it was given.
    pub fn to_toml(&self) -> String {
        let printed = toml::Table::try_from(self).and_then(|mut table| {
            let notes = secrets::redact_for_printing(&mut table, &self.secret_sources);
            let body = toml::to_string_pretty(&table)?;
            let mut header = String::new();
            if !notes.is_empty() {
                header.push_str(&format!(
                    "# Secret settings are shown as \"{}\", never as their values:\n",
                    secrets::REDACTED
                ));
                for note in notes {
                    header.push_str(&format!("#   {note}\n"));
                }
                header.push_str(
                    "# Give them again (or as KEY_file / KEY_env) to load this as a needle.toml.\n\n",
                );
            }
            Ok(header + &body)
        });
        printed.unwrap_or_else(|e| format!("# cannot print: {e}\n"))
    }

    /// Worker threads to start: the configured number, or one per core.
    pub fn worker_threads(&self) -> usize {
        if self.runtime.workers > 0 {
            self.runtime.workers
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }

    fn normalize(&mut self) {
        self.runtime.tick_ms = self.runtime.tick_ms.max(1);
        self.runtime.queue_batches = self.runtime.queue_batches.max(1);
        self.runtime.subscriber_buffer = self.runtime.subscriber_buffer.max(1);
    }
}

/// Checks every token of `server.tokens` is given once, and not empty; names the token, never
/// shows it.
fn check_tokens(tokens: &[TokenConfig]) -> Result<(), ConfigError> {
    for (i, token) in tokens.iter().enumerate() {
        let at = format!("server.tokens[{i}]");
        let problem = match token {
            TokenConfig::Plain(token) if token.expose().trim().is_empty() => {
                Some(format!("{at} is empty"))
            }
            TokenConfig::Plain(_) => None,
            TokenConfig::Scoped(scoped) => {
                let at = format!("{at} (\"{}\")", scoped.name);
                match (&scoped.token, &scoped.token_sha256) {
                    (Some(_), Some(_)) => {
                        Some(format!("{at} has a token and a token_sha256: keep one"))
                    }
                    (None, None) => Some(format!(
                        "{at} has no token: give token, token_file, token_env or token_sha256"
                    )),
                    (Some(token), None) if token.expose().trim().is_empty() => {
                        Some(format!("{at}: its token is empty"))
                    }
                    (None, Some(hex)) if parse_sha256(hex).is_none() => Some(format!(
                        "{at}: token_sha256 must be 64 hex digits, the SHA-256 of the token \
                         (printf %s TOKEN | sha256sum)"
                    )),
                    _ => None,
                }
            }
        };
        if let Some(problem) = problem {
            return Err(ConfigError::new(problem));
        }
    }
    Ok(())
}

/// Checks a `server.advertised_url`: `http` or `https`, a host, an optional port and path
/// prefix, nothing else (no user, query or fragment: clients are sent to it followed by a
/// path). Returns it without a trailing `/`. An error shows the URL without a user or password.
pub fn check_advertised_url(text: &str) -> Result<String, ConfigError> {
    let bad = |why: &str| {
        ConfigError::new(format!(
            "server.advertised_url '{}' {why} (the form is http[s]://HOST[:PORT][/PREFIX])",
            secrets::without_userinfo(text)
        ))
    };
    let parsed = url::Url::parse(text.trim()).map_err(|e| bad(&format!("is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("is not http or https"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad("names no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad("carries a user or password"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad("has a query or fragment"));
    }
    Ok(parsed.as_str().trim_end_matches('/').to_owned())
}

/// What every environment variable read as a setting starts with.
const ENV_PREFIX: &str = "NEEDLE_";

/// `NEEDLE_*` variables that are not settings: the commands that talk to a running server read
/// them (its URL, the bearer token), and the configuration leaves them alone.
pub const CLIENT_VARIABLES: &[&str] = &["NEEDLE_SERVER", "NEEDLE_TOKEN"];

/// Refuses a `NEEDLE_*` variable that names no setting, by its own name: one exported for
/// something else (a script's `NEEDLE_KAFKA_LIB`) would otherwise stop every command with
/// figment's bare "unknown field". Suggests the setting a variable with one underscore too few
/// was surely meant for (`NEEDLE_KAFKA_BROKERS`: `NEEDLE_KAFKA__BROKERS`).
fn check_env_names(vars: &[(String, String)]) -> Result<(), ConfigError> {
    if vars.is_empty() {
        return Ok(());
    }
    let defaults = toml::Value::try_from(NeedleConfig::default())
        .expect("the defaults are representable in TOML (needle config prints them)");
    let sections: Vec<&str> = defaults
        .as_table()
        .map(|t| t.iter().filter(|(_, v)| v.is_table()).map(|(k, _)| k.as_str()).collect())
        .unwrap_or_default();
    for (name, _) in vars {
        let path = name[ENV_PREFIX.len()..].to_lowercase();
        let parts: Vec<&str> = path.split("__").collect();
        if names_a_setting(&defaults, &parts) {
            continue;
        }
        // `kafka_lib` reads as kafka.lib, `history__flushms` as history.flushms
        let (dotted, meant) = match &parts[..] {
            [single] => match sections.iter().find_map(|section| {
                Some((*section, single.strip_prefix(section)?.strip_prefix('_')?))
            }) {
                Some((section, key)) => {
                    let known = names_a_setting(&defaults, &[section, key]);
                    (format!("{section}.{key}"), known)
                }
                None => ((*single).to_owned(), false),
            },
            _ => (parts.join("."), false),
        };
        let what = if meant {
            let variable = format!("{ENV_PREFIX}{}", dotted.replace('.', "__").to_uppercase());
            format!("names no setting: {dotted} is {variable}")
        } else {
            format!("names no setting ({dotted})")
        };
        return Err(ConfigError::new(format!(
            "the environment variable {name} {what}. Settings are NEEDLE_<SECTION>__<KEY>, two \
             underscores between the section and the key (NEEDLE_KAFKA__BROKERS is \
             kafka.brokers; the sections are {}, and needle config prints every key); unset \
             any other NEEDLE_* variable ({} are the only others needle reads)",
            sections.join(", "),
            CLIENT_VARIABLES.join(" and "),
        )));
    }
    Ok(())
}

/// Whether `parts` (a variable's name past `NEEDLE_`, split at `__`) is the path of a setting
/// of `defaults`: a section and a key, or a key of a table that takes any key
/// (`kafka.properties`).
fn names_a_setting(defaults: &toml::Value, parts: &[&str]) -> bool {
    let [section, key, deeper @ ..] = parts else { return false };
    let Some(value) = defaults.get(*section).filter(|s| s.is_table()).and_then(|s| s.get(*key))
    else {
        return false;
    };
    match deeper {
        [] => true,
        // an open table's keys (librdkafka properties) are checked where they are used
        _ => value.is_table() && deeper.iter().all(|p| !p.is_empty()),
    }
}

/// `NEEDLE_SECTION__KEY=value` pairs as overrides of `section.key`. (figment's own `Env`
/// provider reads the process environment; taking the pairs explicitly lets callers and tests
/// decide what is seen.)
struct EnvOverrides(Vec<(String, String)>);

impl figment::Provider for EnvOverrides {
    fn metadata(&self) -> figment::Metadata {
        figment::Metadata::named("NEEDLE_* environment variables")
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let mut root = Dict::new();
        for (key, raw) in &self.0 {
            let path = key[ENV_PREFIX.len()..].to_lowercase();
            let mut parts: Vec<&str> = path.split("__").collect();
            let leaf = parts.pop().unwrap_or_default();
            let mut dict = &mut root;
            for part in parts {
                let entry = dict.entry(part.to_owned()).or_insert_with(|| Dict::new().into());
                if !matches!(entry, Value::Dict(..)) {
                    *entry = Dict::new().into();
                }
                let Value::Dict(_, inner) = entry else { unreachable!("made a dict just above") };
                dict = inner;
            }
            dict.insert(leaf.to_owned(), Value::serialize(parse_env_value(raw))?);
        }
        Ok(Profile::Default.collect(root))
    }
}

/// An environment value as TOML would read it (numbers, booleans, arrays), else a string.
fn parse_env_value(raw: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_owned()))
}

/// Where a value was given, for a person: the file's path, or the provider's name.
fn place_named(metadata: &figment::Metadata) -> String {
    match &metadata.source {
        Some(figment::Source::File(path)) => path.display().to_string(),
        _ => metadata.name.to_string(),
    }
}

/// The errors of reading the configuration, each with the key and where it was given: from the
/// error, or from the tag of the value at its path in `root`, the tree it was read from.
fn describe(error: figment::Error, root: &Value, layered: &Figment) -> String {
    let given_at = |path: &[String]| {
        let mut value = root;
        for key in path {
            value = match value {
                Value::Dict(_, table) => table.get(key)?,
                Value::Array(_, items) => items.get(key.parse::<usize>().ok()?)?,
                _ => break,
            };
        }
        layered.get_metadata(value.tag())
    };
    error
        .into_iter()
        .map(|e| {
            let key =
                if e.path.is_empty() { String::new() } else { format!("{}: ", e.path.join(".")) };
            let metadata = e.metadata.as_ref().or_else(|| given_at(&e.path));
            let origin = metadata.map(|m| format!(" (from {})", m.name)).unwrap_or_default();
            format!("{key}{}{origin}", e.kind)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_are_safe() {
        let c = NeedleConfig::load(None, env(&[])).unwrap();
        assert_eq!(c.server.listen, "127.0.0.1:9900");
        assert!(c.server.tokens.is_empty() && c.server.cors_origins.is_empty());
        assert_eq!(c.query, QueryConfig::default());
        assert!(c.worker_threads() >= 1);
    }

    #[test]
    fn file_then_environment_override_defaults() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "[server]\nlisten = \"127.0.0.1:1234\"\n[query]\nmax_duration_ms = 5000")
            .unwrap();
        let c = NeedleConfig::load(
            Some(f.path()),
            env(&[
                ("NEEDLE_QUERY__MAX_DURATION_MS", "7000"),
                ("NEEDLE_RUNTIME__WORKERS", "3"),
                ("HOME", "/x"),
            ]),
        )
        .unwrap();
        assert_eq!(c.server.listen, "127.0.0.1:1234");
        assert_eq!(c.query.max_duration_ms, 7000);
        assert_eq!(c.runtime.workers, 3);
        assert_eq!(c.worker_threads(), 3);
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_named() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "[server]\nlisten_on = \"x\"").unwrap();
        let e = NeedleConfig::load(Some(f.path()), env(&[])).unwrap_err().to_string();
        assert!(e.contains("listen_on"), "{e}");
        let e = NeedleConfig::load(None, env(&[("NEEDLE_RUNTIME__WORKERS", "many")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("runtime.workers") && e.contains("environment"), "{e}");
        let e = NeedleConfig::load(Some(Path::new("/no/needle.toml")), env(&[])).unwrap_err();
        assert!(e.to_string().contains("no such file"));
    }

    #[test]
    fn a_needle_variable_that_names_no_setting_is_refused_by_its_name() {
        let refused = |name: &str| {
            NeedleConfig::load(None, env(&[(name, "/opt/kafka/lib")])).unwrap_err().to_string()
        };
        let e = refused("NEEDLE_KAFKA_LIB");
        assert!(
            e.contains("the environment variable NEEDLE_KAFKA_LIB names no setting (kafka.lib)")
                && e.contains("NEEDLE_<SECTION>__<KEY>")
                && !e.contains("unknown field"),
            "{e}"
        );
        let e = refused("NEEDLE_KAFKA_BROKERS");
        assert!(e.contains("kafka.brokers is NEEDLE_KAFKA__BROKERS"), "{e}");
        let e = refused("NEEDLE_QUERY__MAX_DURATION");
        assert!(e.contains("NEEDLE_QUERY__MAX_DURATION names no setting (query.max_duration)"));
        let e = refused("NEEDLE_NOSECTION__KEY");
        assert!(
            e.contains("(nosection.key)") && e.contains("runtime") && e.contains("kafka"),
            "{e}"
        );
        assert!(refused("NEEDLE_SERVER__LISTEN__PORT").contains("server.listen.port"));
        // the client commands' variables are not settings, and are left alone
        let c = NeedleConfig::load(
            None,
            env(&[
                ("NEEDLE_SERVER", "http://10.0.0.1:9900"),
                ("NEEDLE_TOKEN", "t"),
                ("NEEDLE_KAFKA__PROPERTIES__DEBUG", "all"),
                ("KAFKA_LIB_DIR", "/opt/kafka/lib"),
            ]),
        )
        .unwrap();
        assert_eq!(c.server, ServerConfig::default());
        assert_eq!(c.kafka.properties["debug"], "all");
    }

    #[test]
    fn a_metrics_source_keeps_series_together_and_times_points_by_their_timestamp() {
        let mut c = NeedleConfig::default();
        c.history.dir = "/data/needle".into();
        let store = c.history_store_config("");
        assert_eq!((store.time_field, store.sort_by), (None, vec![]));
        for spec in
            ["http", "tcp:127.0.0.1:2003?format=graphite", "tcp::8089?precision=s&format=influx"]
        {
            c.source.spec = spec.into();
            assert!(c.source_is_metrics(), "{spec}");
            let store = c.history_store_config("");
            assert_eq!(store.time_field.as_deref(), Some("timestamp"), "{spec}");
            assert_eq!(store.sort_by, METRICS_SORT_BY, "{spec}");
        }
        for spec in ["tcp:127.0.0.1:9000", "tcp:127.0.0.1:9000?format=json", "gen:bullet?rate=5"] {
            c.source.spec = spec.into();
            assert!(!c.source_is_metrics(), "{spec}");
        }
        // what [history] says wins
        c.source.spec = "http".into();
        c.history.time_field = "ts".into();
        c.history.sort_by = vec!["host".into()];
        let store = c.history_store_config("");
        assert_eq!((store.time_field.as_deref(), store.sort_by), (Some("ts"), vec!["host".into()]));
    }

    #[test]
    fn a_rest_catalog_url_keeps_the_table_in_that_catalog_under_its_names() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        writeln!(
            file,
            "[history]\ndir = \"s3://bucket/needle\"\ncatalog_url = \"http://catalog:8181\"\n\
             catalog_warehouse = \"lake\"\ncatalog_table = \"events\""
        )
        .unwrap();
        let env = [("NEEDLE_HISTORY__CATALOG_TOKEN".to_string(), "t0k3n".to_string())];
        let c = NeedleConfig::load(Some(file.path()), env).unwrap();
        let catalog = c.history_store_config("").catalog.expect("a REST catalog");
        assert_eq!(catalog.url, "http://catalog:8181");
        assert_eq!(catalog.token.as_deref(), Some("t0k3n"));
        assert_eq!(catalog.warehouse.as_deref(), Some("lake"));
        assert_eq!((catalog.namespace.as_str(), catalog.table.as_str()), ("needle", "events"));
        assert!(!format!("{catalog:?}").contains("t0k3n"), "the token is not printed");
        // none by default
        assert_eq!(NeedleConfig::default().history.store_config().catalog, None);
    }

    #[test]
    fn the_history_section_reads_from_the_file_and_the_environment() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        writeln!(
            file,
            "[history]\ndir = \"/data/needle\"\nsort_by = [\"sensor\"]\ntime_field = \"ts\""
        )
        .unwrap();
        let env = [
            ("NEEDLE_HISTORY__FLUSH_MS".to_string(), "500".to_string()),
            ("NEEDLE_HISTORY__BLOOM_FIELDS".to_string(), "id, device".to_string()),
        ];
        let c = NeedleConfig::load(Some(file.path()), env).unwrap();
        assert!(c.history.is_on());
        assert_eq!(c.history.flush_ms, 500);
        assert_eq!(c.history.sort_by, ["sensor"]);
        assert_eq!(c.history.bloom_fields, ["id", "device"]);
        let store = c.history.store_config();
        assert_eq!(store.time_field.as_deref(), Some("ts"));
        assert_eq!(store.retention_ms, None);
        assert!(!NeedleConfig::default().history.is_on());
        let bad = [("NEEDLE_HISTORY__FLUSHMS".to_string(), "5".to_string())];
        let error = NeedleConfig::load(None, bad).unwrap_err().to_string();
        assert!(error.contains("flushms"), "{error}");
    }

    #[test]
    fn the_kafka_section_reads_properties_of_any_scalar_type_and_refuses_unknown_keys() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(
            f,
            "[kafka]\nbrokers = \"b1:9092,b2:9092\"\nstart = \"earliest\"\n\
             [kafka.properties]\n\"security.protocol\" = \"SASL_SSL\"\n\
             \"session.timeout.ms\" = 6000\n\"enable.ssl.certificate.verification\" = false"
        )
        .unwrap();
        let c = NeedleConfig::load(Some(f.path()), env(&[("NEEDLE_KAFKA__GROUP", "g7")])).unwrap();
        assert_eq!(c.kafka.brokers, "b1:9092,b2:9092");
        assert_eq!(c.kafka.start, StartFrom::Earliest);
        assert_eq!(c.kafka.group, "g7");
        assert_eq!(c.kafka.properties["security.protocol"], "SASL_SSL");
        assert_eq!(c.kafka.properties["session.timeout.ms"], "6000");
        assert_eq!(c.kafka.properties["enable.ssl.certificate.verification"], "false");
        let mut back = tempfile::NamedTempFile::new().unwrap();
        write!(back, "{}", c.to_toml()).unwrap();
        assert_eq!(NeedleConfig::load(Some(back.path()), env(&[])).unwrap(), c);

        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "[kafka]\nbroker = \"x:1\"").unwrap();
        let e = NeedleConfig::load(Some(f.path()), env(&[])).unwrap_err().to_string();
        assert!(e.contains("broker"), "{e}");
        let e = NeedleConfig::load(None, env(&[("NEEDLE_KAFKA__START", "middle")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("kafka.start"), "{e}");
    }

    #[test]
    fn tokens_are_strings_or_named_tables_with_scopes_and_a_cap() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(
            f,
            r#"[server]
tokens = ["plain", {{ name = "dash", token = "d", scopes = ["read"] }},
          {{ name = "ops", token = "o", scopes = ["admin"], max_queries = 3 }},
          {{ name = "agent", token = "a", scopes = ["write"] }}]"#
        )
        .unwrap();
        let c = NeedleConfig::load(Some(f.path()), env(&[])).unwrap();
        let [plain, dash, ops, agent] = &c.server.tokens[..] else {
            panic!("{:?}", c.server.tokens)
        };
        // write stands apart: only named, it gives nothing else and nothing else gives it
        assert!(agent.allows(Scope::Write) && !agent.allows(Scope::Read));
        assert!(!ops.allows(Scope::Write) && plain.allows(Scope::Write));
        assert!(plain.allows(Scope::Admin) && plain.owner().starts_with("token-"));
        assert!(!plain.owner().contains("plain"));
        assert!(dash.allows(Scope::Read) && !dash.allows(Scope::Query));
        assert!(ops.allows(Scope::Query) && ops.allows(Scope::Admin));
        assert_eq!((dash.owner().as_str(), ops.max_queries()), ("dash", Some(3)));
        // printed without the tokens, and refused when loaded back as it is
        let printed = c.to_toml();
        assert!(!printed.contains("\"plain\"") && !printed.contains("\"o\""), "{printed}");
        let mut g = tempfile::NamedTempFile::new().unwrap();
        write!(g, "{printed}").unwrap();
        let e = NeedleConfig::load(Some(g.path()), env(&[])).unwrap_err().to_string();
        assert!(e.contains("server.tokens[0]") && e.contains("needle config"), "{e}");

        let mut bad = tempfile::NamedTempFile::new().unwrap();
        writeln!(
            bad,
            "[server]\ntokens = [{{ name = \"x\", token = \"y\", scopes = [\"delete\"] }}]"
        )
        .unwrap();
        assert!(NeedleConfig::load(Some(bad.path()), env(&[])).is_err());
    }

    #[test]
    fn printed_toml_loads_back_the_same() {
        let c = NeedleConfig::load(
            None,
            env(&[
                ("NEEDLE_SERVER__CORS_ORIGINS", "[\"https://a.example\"]"),
                ("NEEDLE_HISTORY__SORT_BY", "sensor"),
            ]),
        )
        .unwrap();
        let mut f = tempfile::NamedTempFile::new().unwrap();
        write!(f, "{}", c.to_toml()).unwrap();
        assert_eq!(NeedleConfig::load(Some(f.path()), env(&[])).unwrap(), c);
        let printed = c.to_toml();
        let order: Vec<&str> = printed.lines().filter(|l| l.starts_with('[')).collect();
        assert_eq!(order[..3], ["[server]", "[runtime]", "[source]"], "declared order: {printed}");
    }

    fn secret_file(content: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), content).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        file
    }

    #[test]
    fn secrets_come_from_files_variables_and_digests_and_are_never_printed() {
        let token_file = secret_file("token-from-a-file-4b1\n");
        let sha = "0c4c6cf4a9b8cfbd5ae0dcc7e94cbfb7d1d6b0f8a3e3d1d3ce0a0e2a7e9a9d11";
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(
            f,
            "[server]\ntokens = [\"inline-token-9a2\",\n\
             {{ name = \"f\", token_file = \"{}\" }},\n\
             {{ name = \"e\", token_env = \"OPS_TOKEN\", scopes = [\"read\"] }},\n\
             {{ name = \"h\", token_sha256 = \"{sha}\" }}]\n\
             [kafka.properties]\n\"sasl.password\" = \"kafka-password-77c\"\n\
             \"ssl.key.password_env\" = \"KEY_PW\"\n\"security.protocol\" = \"SASL_SSL\"",
            token_file.path().display()
        )
        .unwrap();
        let vars = env(&[("OPS_TOKEN", "token-from-a-variable-31"), ("KEY_PW", "key-password-5e")]);
        let c = NeedleConfig::load(Some(f.path()), vars.clone()).unwrap();
        let accepts =
            |i: usize, presented: &str| c.server.tokens[i].accepts(&token_digest(presented));
        assert!(accepts(0, "inline-token-9a2") && !accepts(0, "inline-token-9a"));
        assert!(accepts(1, "token-from-a-file-4b1"), "the file's newline is not the token's");
        assert!(accepts(2, "token-from-a-variable-31") && !accepts(2, "token-from-a-file-4b1"));
        assert!(!accepts(3, "anything"));
        assert_eq!(c.kafka.properties["sasl.password"], "kafka-password-77c");
        assert_eq!(c.kafka.properties["ssl.key.password"], "key-password-5e");

        let printed = c.to_toml();
        for secret in [
            "inline-token-9a2",
            "token-from-a-file-4b1",
            "token-from-a-variable-31",
            "kafka-password-77c",
            "key-password-5e",
        ] {
            assert!(!printed.contains(secret), "{secret} printed:\n{printed}");
        }
        let debugged = format!("{c:?}");
        assert!(!debugged.contains("kafka-password-77c") && !debugged.contains("inline-token-9a2"));
        assert!(printed.contains(&format!("token_file = \"{}\"", token_file.path().display())));
        assert!(printed.contains("token_env = \"OPS_TOKEN\""), "{printed}");
        assert!(printed.contains(&format!("token_sha256 = \"{sha}\"")), "{printed}");
        assert!(printed.contains("\"ssl.key.password_env\" = \"KEY_PW\""), "{printed}");
        assert!(printed.contains("SASL_SSL"), "{printed}");
        let place = f.path().display().to_string();
        assert!(printed.contains(&format!("#   server.tokens[0]: given in {place}")), "{printed}");
        assert!(
            printed.contains(&format!("#   kafka.properties.\"sasl.password\": given in {place}")),
            "{printed}"
        );

        // given the redacted ones again, the printed configuration loads back the same
        let body: Vec<&str> = printed.lines().filter(|l| !l.starts_with('#')).collect();
        let again = body.join("\n").replacen(secrets::REDACTED, "inline-token-9a2", 1).replacen(
            secrets::REDACTED,
            "kafka-password-77c",
            1,
        );
        let mut g = tempfile::NamedTempFile::new().unwrap();
        write!(g, "{again}").unwrap();
        let back = NeedleConfig::load(Some(g.path()), vars).unwrap();
        assert_eq!((&back.server.tokens, &back.kafka), (&c.server.tokens, &c.kafka));
    }

    #[test]
    fn a_token_is_given_once_and_its_digest_is_checked() {
        let load = |tokens: &str| {
            let mut f = tempfile::NamedTempFile::new().unwrap();
            writeln!(f, "[server]\ntokens = [{tokens}]").unwrap();
            NeedleConfig::load(Some(f.path()), env(&[])).map_err(|e| e.to_string())
        };
        let sha = format!("{:064x}", 7);
        for (tokens, why) in [
            ("\"\"".to_owned(), "server.tokens[0] is empty"),
            ("{ name = \"a\" }".to_owned(), "has no token"),
            (
                format!("{{ name = \"a\", token = \"t-123456\", token_sha256 = \"{sha}\" }}"),
                "keep one",
            ),
            ("{ name = \"a\", token_sha256 = \"abc\" }".to_owned(), "64 hex digits"),
            ("{ name = \"a\", token = \" \" }".to_owned(), "its token is empty"),
        ] {
            let e = load(&tokens).unwrap_err();
            assert!(e.contains(why), "{tokens}: {e}");
            assert!(!e.contains("t-123456"), "{e}");
        }
        let c = load(&format!("{{ name = \"a\", token_sha256 = \"{}\" }}", sha.to_uppercase()));
        assert!(c.is_ok(), "upper-case hex is hex: {c:?}");
    }

    #[test]
    fn errors_that_would_echo_a_secret_do_not() {
        // a variable that does not parse as a list is read as one string, and refused
        let unparsed = "[{ name = \"x\", token = \"echoed-token-3f9\" ";
        let e = NeedleConfig::load(None, env(&[("NEEDLE_SERVER__TOKENS", unparsed)]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("server.tokens") && !e.contains("echoed-token-3f9"), "{e}");
        let e = NeedleConfig::load(
            None,
            env(&[("NEEDLE_SERVER__ADVERTISED_URL", "https://user:url-password-8@h:1/?q")]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("server.advertised_url") && !e.contains("url-password-8"), "{e}");
    }

    #[test]
    fn an_advertised_url_is_checked_and_loses_its_trailing_slash() {
        let c = NeedleConfig::load(
            None,
            env(&[("NEEDLE_SERVER__ADVERTISED_URL", "https://API-1.example.com:9443/needle/")]),
        )
        .unwrap();
        assert_eq!(c.server.advertised_url, "https://api-1.example.com:9443/needle");
        assert_eq!(NeedleConfig::load(None, env(&[])).unwrap().server.advertised_url, "");
        assert_eq!(check_advertised_url("http://10.0.0.7:9900").unwrap(), "http://10.0.0.7:9900");
        for (bad, why) in [
            ("10.0.0.7:9900", "not a URL"),
            ("ftp://h/x", "not http or https"),
            ("http://", "not a URL"),
            ("http://u:p@h:1", "user or password"),
            ("http://h:1/?a=b", "query or fragment"),
            ("http://h:1/#top", "query or fragment"),
            ("http://h:99999", "not a URL"),
        ] {
            let e = check_advertised_url(bad).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("server.advertised_url"), "{bad}: {e}");
        }
        let e = NeedleConfig::load(None, env(&[("NEEDLE_SERVER__ADVERTISED_URL", "nope")]));
        assert!(e.unwrap_err().to_string().contains("server.advertised_url"));
    }
}
