//! A real S3-compatible server for tests and benchmarks: MinIO, run by `scripts/s3/minio.sh`
//! (built once through the Go module proxy) on a free loopback port, with this process as its
//! owner, so the script's watchdog stops it if this process dies without cleaning up.
//!
//! A [`Minio`] value stops its server when dropped; [`Minio::shared`] is one server for a whole
//! test binary, stopped when the process exits. Tests share it and use prefixes of their own.

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

    /// Starts a server whose files live in a new temporary directory.
    pub fn start() -> Result<Minio, String> {
        let temp = tempfile::Builder::new()
            .prefix("needle-minio-")
            .tempdir()
            .map_err(|e| format!("cannot make a directory for MinIO: {e}"))?;
        let dir = temp.path().to_owned();
        let owner = std::process::id().to_string();
        let dir_arg = dir.to_str().ok_or("a temporary directory that is not UTF-8")?;
        let endpoint = run_script(&["start", dir_arg, "--owner", &owner])?;
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

    fn dir_str(&self) -> Result<&str, String> {
        self.dir.to_str().ok_or_else(|| "a directory that is not UTF-8".to_owned())
    }
}

impl Drop for Minio {
    fn drop(&mut self) {
        if self._temp.is_some() {
            let _ = self.stop();
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
