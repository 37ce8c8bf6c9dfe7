//! A real S3-compatible server for tests and benchmarks: MinIO, run by `scripts/s3/minio.sh`
//! (built once through the Go module proxy) on a free loopback port, with this process as its
//! owner, so the script's watchdog stops it if this process dies without cleaning up.
//!
//! Its objects live in memory (`--in-memory`: a directory of `/dev/shm` when that has room):
//! MinIO refuses every write once its drive is 99% full, which a build machine's disk can be
//! while the few megabytes a test writes would fit easily.
//!
//! A [`Minio`] value stops its server when dropped; [`Minio::shared`] is one server for a whole
//! test binary, stopped when the process exits. Tests share it and use prefixes of their own.
//!
//! And a real Iceberg REST catalog: [`IcebergRestServer`], Apache Iceberg's own test server
//! (`scripts/interop/install.sh` fetches it), killed when dropped.

use crate::config::RemoteConfig;
use crate::object::ObjectStoreOptions;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A MinIO server with one bucket, stopped when dropped.
#[derive(Debug)]
pub struct Minio {
    dir: PathBuf,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    pub bucket: String,
    pub access_key: String,
    pub secret_key: String,
    _temp: Option<tempfile::TempDir>,
}

impl Minio {
    /// The server script: `$MINIO_SCRIPT`, else the repository's.
    pub fn script() -> PathBuf {
        std::env::var_os("MINIO_SCRIPT").map(PathBuf::from).unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/s3/minio.sh")
        })
    }

    /// Starts a server whose files live in a new temporary directory, its objects in memory.
    pub fn start() -> Result<Minio, String> {
        let temp = tempfile::Builder::new()
            .prefix("needle-minio-")
            .tempdir()
            .map_err(|e| format!("cannot make a directory for MinIO: {e}"))?;
        let dir = temp.path().to_owned();
        let owner = std::process::id().to_string();
        let dir_arg = dir.to_str().ok_or("a temporary directory that is not UTF-8")?;
        // --temporary: a server this process never stops (the shared one, or a test killed
        // midway) has its directory removed by the watchdog, not left in the temp dir
        let endpoint =
            run_script(&["start", dir_arg, "--owner", &owner, "--in-memory", "--temporary"])?;
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name))
                .map(|s| s.trim().to_owned())
                .map_err(|e| format!("{name}: {e}"))
        };
        Ok(Minio {
            endpoint,
            bucket: read("bucket")?,
            access_key: read("access_key")?,
            secret_key: read("secret_key")?,
            dir,
            _temp: Some(temp),
        })
    }

    /// One server for the whole process, started on first use and stopped at exit.
    pub fn shared() -> &'static Minio {
        static SHARED: OnceLock<Minio> = OnceLock::new();
        // a static is never dropped: the watchdog stops the server when this process exits
        SHARED.get_or_init(|| Minio::start().unwrap_or_else(|e| panic!("MinIO did not start: {e}")))
    }

    /// `s3://BUCKET/PREFIX`.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{}/{}", self.bucket, prefix.trim_matches('/'))
    }

    /// The settings that reach this server.
    pub fn options(&self) -> ObjectStoreOptions {
        ObjectStoreOptions {
            settings: vec![
                ("aws_endpoint".into(), self.endpoint.clone()),
                ("aws_region".into(), "us-east-1".into()),
                ("aws_access_key_id".into(), self.access_key.clone()),
                ("aws_secret_access_key".into(), self.secret_key.clone()),
                ("aws_allow_http".into(), "true".into()),
            ],
            request_timeout_ms: 5_000,
        }
    }

    /// A store's object-store settings for `prefix` on this server.
    pub fn remote(&self, prefix: &str) -> RemoteConfig {
        let mut remote = RemoteConfig::new(self.url(prefix));
        remote.options = self.options();
        remote
    }

    /// Stops the server (an outage); [`Minio::restart`] brings it back with its data.
    pub fn stop(&self) -> Result<(), String> {
        run_script(&["stop", self.dir_str()?]).map(|_| ())
    }

    /// Starts the stopped server again on the same port with the same data.
    pub fn restart(&self) -> Result<(), String> {
        run_script(&["restart", self.dir_str()?]).map(|_| ())
    }

    /// Where the server keeps its objects: a directory of `/dev/shm`, or its own directory's
    /// `data` where memory had no room.
    pub fn objects_dir(&self) -> PathBuf {
        match std::fs::read_to_string(self.dir.join("data_in_memory")) {
            Ok(path) => PathBuf::from(path.trim()),
            Err(_) => self.dir.join("data"),
        }
    }

    fn dir_str(&self) -> Result<&str, String> {
        self.dir.to_str().ok_or_else(|| "a directory that is not UTF-8".to_owned())
    }
}

impl Drop for Minio {
    fn drop(&mut self) {
        if self._temp.is_some() {
            // stopped, and its objects kept in memory removed
            let _ = self.dir_str().and_then(|dir| run_script(&["remove", dir]));
        }
    }
}

fn run_script(args: &[&str]) -> Result<String, String> {
    let output = Command::new("bash")
        .arg(Minio::script())
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", Minio::script().display()))?;
    if !output.status.success() {
        return Err(format!(
            "minio.sh {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    Ok(stdout.lines().last().unwrap_or_default().trim().to_owned())
}

/// Apache Iceberg's REST catalog test server (`org.apache.iceberg.rest.RESTCatalogServer`, its
/// jars in `.cache/iceberg-rest` or `$ICEBERG_REST_DIR`, fetched by
/// `scripts/interop/install.sh`) on a loopback port, its JDBC catalog in a SQLite file of a
/// directory (a server started again on it still holds its tables); killed when dropped.
#[derive(Debug)]
pub struct IcebergRestServer {
    child: std::process::Child,
    log: PathBuf,
    /// `http://127.0.0.1:PORT`.
    pub uri: String,
}

impl IcebergRestServer {
    /// The directory of the server's jars; panics, saying how to fetch them, when missing.
    pub fn jars() -> PathBuf {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let dir = std::env::var_os("ICEBERG_REST_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join(".cache/iceberg-rest"));
        let found = std::fs::read_dir(&dir).ok().is_some_and(|entries| {
            entries.flatten().any(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with("iceberg-open-api-") && name.ends_with("-test-fixtures.jar")
            })
        });
        assert!(
            found,
            "no Iceberg REST catalog server in {}: run scripts/interop/install.sh",
            dir.display()
        );
        dir
    }

    /// A loopback port nothing listens on now.
    pub fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
    }

    /// Starts the server on `port` with its catalog in `dir`, and waits until it listens.
    pub fn start(dir: &Path, port: u16) -> IcebergRestServer {
        let jars = Self::jars();
        let log = dir.join(format!("server-{port}-{}.log", std::process::id()));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new("java")
            .arg("-cp")
            .arg(format!("{}/*", jars.display()))
            .arg("org.apache.iceberg.rest.RESTCatalogServer")
            .env("CATALOG_REST_PORT", port.to_string())
            .env("CATALOG_URI", format!("jdbc:sqlite:{}/catalog.db", dir.display()))
            .env("CATALOG_WAREHOUSE", format!("file://{}/warehouse", dir.display()))
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("java runs (Java 17)");
        let mut server = IcebergRestServer { child, log, uri: format!("http://127.0.0.1:{port}") };
        let address: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
        let wait = std::time::Duration::from_millis(200);
        while std::net::TcpStream::connect_timeout(&address, wait).is_err() {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!("the REST catalog server exited ({status}):\n{}", server.log_text());
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the REST catalog server did not listen on {port}:\n{}",
                server.log_text()
            );
            std::thread::sleep(wait);
        }
        server
    }

    /// What the server logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for IcebergRestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
