//! History on object storage: where a store's parts and manifest live when `history.dir` is a
//! URL (`s3://bucket/prefix`, `gs://`, `az://`, `file://`), through Apache Arrow's
//! `object_store` crate.
//!
//! - [`Bucket`]: the store's objects under its prefix, with blocking calls (the history store
//!   is written and read from plain threads); each call runs on the bucket's own small tokio
//!   runtime and is waited for on the caller's thread, so it works from any thread, an async
//!   one included.
//! - [`cache`]: the local byte-bounded cache of the ranges read from parts that are not on
//!   this machine's disk.
//! - [`reader`]: a part's object read as Parquet reads a file, by ranges (footer, page index,
//!   the pages a query needs), through the cache.
//!
//! The store keeps the same layout in the bucket as on a disk (`PREFIX/p=<start>/part-….parquet`),
//! so `read_parquet('s3://bucket/prefix/**/*.parquet')` reads it; which parts are live is said by
//! the manifest ([`crate::manifest`]) under `PREFIX/_needle/`.

pub mod cache;
pub mod reader;

use crate::HistoryError;
use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{
    ClientOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig,
};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Range requests [`Bucket::get_ranges`] has in flight at once.
pub const PARALLEL_REQUESTS: usize = 16;
/// Parts at least this large are uploaded in pieces (a multipart upload).
const MULTIPART_BYTES: u64 = 32 << 20;

/// Settings for reaching an object store, besides its URL: `(key, value)` pairs as
/// `object_store` names them (`aws_endpoint`, `aws_region`, `aws_access_key_id`,
/// `aws_secret_access_key`, `aws_session_token`, `allow_http`, `google_service_account`,
/// `azure_storage_account_name`, …). Settings not given come from the usual environment
/// variables (`AWS_*`, `GOOGLE_*`, `AZURE_*`).
#[derive(Clone, Default, PartialEq)]
pub struct ObjectStoreOptions {
    pub settings: Vec<(String, String)>,
    /// How long one request may take before it is retried or fails, in ms.
    pub request_timeout_ms: u64,
}

impl std::fmt::Debug for ObjectStoreOptions {
    /// The settings' names only: their values may be credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<&str> = self.settings.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("ObjectStoreOptions")
            .field("settings", &keys)
            .field("request_timeout_ms", &self.request_timeout_ms)
            .finish()
    }
}

/// True when `dir` names an object store (`scheme://…`) rather than a local directory.
pub fn is_url(dir: &str) -> bool {
    dir.split_once("://").is_some_and(|(scheme, _)| {
        !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || c == '+')
    })
}

/// A store's objects under one prefix of an object store, reached with blocking calls.
pub struct Bucket {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    url: String,
    /// Taken only by `Drop`: a runtime dropped inside an async context must not block there.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Bucket {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl std::fmt::Debug for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bucket").field("url", &self.url).finish_non_exhaustive()
    }
}

impl Bucket {
    /// Reaches the object store `url` names with `options`. Nothing is fetched yet: a wrong
    /// bucket or credentials are found by the first request ([`Bucket::check`]).
    pub fn open(url: &str, options: &ObjectStoreOptions) -> Result<Bucket, HistoryError> {
        // reqwest is built without a TLS provider of its own: needle's is rustls with ring
        let _ = rustls::crypto::ring::default_provider().install_default();
        let parsed = url::Url::parse(url).map_err(|e| HistoryError::Config {
            setting: "history.dir".into(),
            message: format!("{url:?} is not a URL: {e}"),
        })?;
        let timeout = Duration::from_millis(options.request_timeout_ms.max(100));
        let client = ClientOptions::new()
            .with_timeout(timeout)
            .with_connect_timeout(timeout.min(Duration::from_secs(5)));
        // a few quick retries: an unreachable store is reported (and its uploads wait) in
        // seconds, not after object_store's default three minutes
        let retry = RetryConfig {
            max_retries: 3,
            retry_timeout: timeout.saturating_mul(2),
            ..RetryConfig::default()
        };
        let bad = |e: object_store::Error| HistoryError::Config {
            setting: "history.object_store".into(),
            message: format!("{url}: {e}"),
        };
        // one cloud back end's builder: the URL, the client options first (settings such as
        // `allow_http` go into them), then each setting by its name, the retries
        macro_rules! cloud {
            ($builder:ty) => {{
                let mut b = <$builder>::from_env().with_url(url).with_client_options(client);
                for (key, value) in &options.settings {
                    b = b.with_config(key.parse().map_err(bad)?, value);
                }
                Arc::new(b.with_retry(retry).build().map_err(bad)?)
            }};
        }
        let store: Arc<dyn ObjectStore> = match parsed.scheme() {
            "s3" | "s3a" => cloud!(object_store::aws::AmazonS3Builder),
            "gs" => cloud!(object_store::gcp::GoogleCloudStorageBuilder),
            "az" | "azure" | "abfs" | "abfss" => cloud!(object_store::azure::MicrosoftAzureBuilder),
            "file" => {
                let path = parsed.to_file_path().map_err(|()| HistoryError::Config {
                    setting: "history.dir".into(),
                    message: format!("{url:?} is not a local path"),
                })?;
                std::fs::create_dir_all(&path).map_err(|e| HistoryError::io(&path, e))?;
                let local = object_store::local::LocalFileSystem::new_with_prefix(&path)
                    .map_err(bad)?
                    .with_fsync(true);
                Arc::new(local)
            }
            other => {
                return Err(HistoryError::Config {
                    setting: "history.dir".into(),
                    message: format!(
                        "{url:?}: the scheme {other}:// is not one needle reads (s3://, gs://, \
                         az://, file://, or a local directory)"
                    ),
                })
            }
        };
        let prefix = match parsed.scheme() {
            "file" => ObjectPath::default(),
            _ => ObjectPath::from_url_path(parsed.path()).map_err(|e| HistoryError::Config {
                setting: "history.dir".into(),
                message: format!("{url}: {e}"),
            })?,
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("needle-object-store")
            .enable_all()
            .build()
            .map_err(|e| HistoryError::io(url, e))?;
        Ok(Bucket {
            store,
            prefix,
            url: url.trim_end_matches('/').to_owned(),
            runtime: Some(runtime),
        })
    }

    /// The store's URL, as configured (without a trailing `/`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The object `key` (a `/`-separated path under the prefix) names.
    pub fn path(&self, key: &str) -> ObjectPath {
        let mut path = self.prefix.clone();
        for part in key.split('/').filter(|p| !p.is_empty()) {
            path = path.clone().join(part);
        }
        path
    }

    /// Runs `future` on the bucket's runtime and waits for it on this thread.
    fn run<T: Send + 'static>(&self, future: impl Future<Output = T> + Send + 'static) -> T {
        let (send, receive) = std::sync::mpsc::sync_channel(1);
        let runtime = self.runtime.as_ref().expect("the bucket's runtime is there until drop");
        runtime.spawn(async move {
            let _ = send.send(future.await);
        });
        receive.recv().expect("the object store's runtime dropped a request")
    }

    fn error(&self, key: &str, e: object_store::Error) -> HistoryError {
        HistoryError::Object { location: format!("{}/{key}", self.url), message: e.to_string() }
    }

    /// Fails with a clear error when the store cannot be reached, the bucket does not exist
    /// or the credentials are refused: one listing of the store's own folder (`_needle/`),
    /// made when the store opens, never to plan a read.
    pub fn check(&self) -> Result<(), HistoryError> {
        let (store, path) = (self.store.clone(), self.path("_needle"));
        let listed = self.run(async move { store.list_with_delimiter(Some(&path)).await });
        listed.map(|_| ()).map_err(|e| HistoryError::Config {
            setting: "history.dir / history.object_store".into(),
            message: format!("cannot read {}: {e}", self.url),
        })
    }

    /// The bytes `[start, start + length)` of object `key`.
    pub fn get_range(&self, key: &str, start: u64, length: u64) -> Result<Bytes, HistoryError> {
        let (store, path) = (self.store.clone(), self.path(key));
        self.run(async move { store.get_range(&path, start..start + length).await })
            .map_err(|e| self.error(key, e))
    }

    /// The byte ranges `[start, end)` of object `key`, in order: one request each,
    /// [`PARALLEL_REQUESTS`] at a time.
    pub fn get_ranges(
        &self,
        key: &str,
        ranges: Vec<std::ops::Range<u64>>,
    ) -> Result<Vec<Bytes>, HistoryError> {
        use futures_util::{StreamExt, TryStreamExt};
        let (store, path) = (self.store.clone(), self.path(key));
        let fetched = self.run(async move {
            futures_util::stream::iter(ranges)
                .map(|range| {
                    let (store, path) = (store.clone(), path.clone());
                    async move { store.get_range(&path, range).await }
                })
                .buffered(PARALLEL_REQUESTS)
                .try_collect::<Vec<Bytes>>()
                .await
        });
        fetched.map_err(|e| self.error(key, e))
    }

    /// The whole object `key`, or `None` when there is none.
    pub fn get(&self, key: &str) -> Result<Option<Bytes>, HistoryError> {
        let (store, path) = (self.store.clone(), self.path(key));
        let got = self.run(async move {
            match store.get(&path).await {
                Ok(result) => result.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        });
        got.map_err(|e| self.error(key, e))
    }

    /// The size of object `key`, or `None` when there is none.
    pub fn size(&self, key: &str) -> Result<Option<u64>, HistoryError> {
        let (store, path) = (self.store.clone(), self.path(key));
        let head = self.run(async move {
            match store.head(&path).await {
                Ok(meta) => Ok(Some(meta.size)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        });
        head.map_err(|e| self.error(key, e))
    }

    /// Writes object `key` whole, replacing any.
    pub fn put(&self, key: &str, bytes: Bytes) -> Result<(), HistoryError> {
        let (store, path) = (self.store.clone(), self.path(key));
        self.run(async move { store.put(&path, PutPayload::from(bytes)).await.map(|_| ()) })
            .map_err(|e| self.error(key, e))
    }

    /// Writes object `key` only when there is none (a conditional put): `false` when another
    /// writer made it first.
    pub fn put_if_absent(&self, key: &str, bytes: Bytes) -> Result<bool, HistoryError> {
        let (store, path) = (self.store.clone(), self.path(key));
        let put = self.run(async move {
            let options = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
            match store.put_opts(&path, PutPayload::from(bytes), options).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
                Err(object_store::Error::Precondition { .. }) => Ok(false),
                Err(e) => Err(e),
            }
        });
        put.map_err(|e| self.error(key, e))
    }

    /// Uploads the local file `local` as object `key` (in pieces when it is large); returns
    /// its size.
    pub fn upload(&self, key: &str, local: &std::path::Path) -> Result<u64, HistoryError> {
        let size = std::fs::metadata(local).map_err(|e| HistoryError::io(local, e))?.len();
        if size < MULTIPART_BYTES {
            let bytes = std::fs::read(local).map_err(|e| HistoryError::io(local, e))?;
            self.put(key, Bytes::from(bytes))?;
            return Ok(size);
        }
        let (store, path, file) = (self.store.clone(), self.path(key), local.to_owned());
        let uploaded = self.run(async move {
            use std::io::Read;
            let mut upload = object_store::WriteMultipart::new_with_chunk_size(
                store.put_multipart(&path).await?,
                16 << 20,
            );
            let mut input = std::fs::File::open(&file).map_err(|e| {
                object_store::Error::Generic { store: "local", source: Box::new(e) }
            })?;
            let mut piece = vec![0u8; 8 << 20];
            loop {
                let n = input.read(&mut piece).map_err(|e| object_store::Error::Generic {
                    store: "local",
                    source: Box::new(e),
                })?;
                if n == 0 {
                    break;
                }
                upload.wait_for_capacity(4).await?;
                upload.write(&piece[..n]);
            }
            upload.finish().await.map(|_| ())
        });
        uploaded.map_err(|e| self.error(key, e))?;
        Ok(size)
    }

    /// Every object under `prefix` (a key's leading folders): its key and when it was last
    /// written, in ms since the epoch.
    pub fn list(&self, prefix: &str) -> Result<Vec<(String, i64)>, HistoryError> {
        use futures_util::TryStreamExt;
        let (store, path) = (self.store.clone(), self.path(prefix));
        let root = self.prefix.clone();
        let listed = self.run(async move {
            let objects: Vec<object_store::ObjectMeta> =
                store.list(Some(&path)).try_collect().await?;
            Ok::<_, object_store::Error>(objects)
        });
        let objects = listed.map_err(|e| self.error(prefix, e))?;
        Ok(objects
            .into_iter()
            .filter_map(|meta| {
                let key: Vec<String> =
                    meta.location.prefix_match(&root)?.map(|p| p.as_ref().to_owned()).collect();
                Some((key.join("/"), meta.last_modified.timestamp_millis()))
            })
            .collect())
    }

    /// Removes object `key`; one already gone is no error.
    pub fn delete(&self, key: &str) -> Result<(), HistoryError> {
        let (store, path) = (self.store.clone(), self.path(key));
        let deleted = self.run(async move {
            match store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(e),
            }
        });
        deleted.map_err(|e| self.error(key, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_directories() {
        assert!(is_url("s3://bucket/prefix"));
        assert!(is_url("file:///tmp/x"));
        assert!(is_url("gs://b"));
        assert!(!is_url("/data/needle"));
        assert!(!is_url("relative/dir"));
        assert!(!is_url("C:\\data"));
        assert!(!is_url("://x"));
    }

    #[test]
    fn a_file_url_bucket_writes_reads_and_refuses_a_second_create() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        let bucket = Bucket::open(&url, &ObjectStoreOptions::default()).unwrap();
        bucket.check().unwrap();
        assert_eq!(bucket.get("a/b").unwrap(), None);
        assert!(bucket.put_if_absent("a/b", Bytes::from_static(b"one")).unwrap());
        assert!(!bucket.put_if_absent("a/b", Bytes::from_static(b"two")).unwrap());
        assert_eq!(bucket.get("a/b").unwrap().unwrap(), Bytes::from_static(b"one"));
        assert_eq!(bucket.get_range("a/b", 1, 2).unwrap(), Bytes::from_static(b"ne"));
        assert_eq!(bucket.size("a/b").unwrap(), Some(3));
        bucket.delete("a/b").unwrap();
        bucket.delete("a/b").unwrap();
        assert_eq!(bucket.size("a/b").unwrap(), None);
        assert!(dir.path().join("a").is_dir());
    }

    #[test]
    fn an_unknown_scheme_or_setting_names_what_is_wrong() {
        let e = Bucket::open("ftp://x/y", &ObjectStoreOptions::default()).unwrap_err();
        assert!(e.to_string().contains("ftp://"), "{e}");
        let options = ObjectStoreOptions {
            settings: vec![("no_such_setting".into(), "1".into())],
            request_timeout_ms: 1000,
        };
        let e = Bucket::open("s3://b/p", &options).unwrap_err();
        assert!(e.to_string().contains("history.object_store"), "{e}");
    }

    #[test]
    fn calls_work_from_inside_another_async_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        let bucket = Arc::new(Bucket::open(&url, &ObjectStoreOptions::default()).unwrap());
        let outer = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let b = bucket.clone();
        outer.block_on(async move {
            b.put("x", Bytes::from_static(b"1")).unwrap();
        });
        assert_eq!(bucket.size("x").unwrap(), Some(1));
    }
}
