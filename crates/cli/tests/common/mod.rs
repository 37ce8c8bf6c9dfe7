//! What the `needle serve` tests share: the real binary started on a free loopback port, its
//! address and source read from its first lines, its stderr kept in a file and shown when a test
//! fails, and a clean stop (SIGTERM) or a kill when dropped.
#![allow(dead_code)] // each test file uses its own part of it

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const NEEDLE: &str = env!("CARGO_BIN_EXE_needle");

/// `needle ARGS`, run to its end with no input.
pub fn needle(args: &[&str]) -> std::process::Output {
    Command::new(NEEDLE).args(args).stdin(Stdio::null()).output().unwrap()
}

/// What a command that must succeed printed (its exit, stdout and stderr shown when it failed).
pub fn stdout(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A `needle serve` process, killed when dropped; its stderr goes to a file shown on failures.
pub struct Serve {
    pub child: Child,
    pub url: String,
    pub source: String,
    stderr: PathBuf,
    _dir: tempfile::TempDir,
}

impl Serve {
    pub fn start(args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let stderr = dir.path().join("stderr");
        let mut child = Command::new(NEEDLE)
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("NEEDLE_SERVER")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("needle serve starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_else(|| {
            panic!(
                "needle serve {args:?} did not start: {}",
                std::fs::read_to_string(&stderr).unwrap()
            )
        });
        let url = first.strip_prefix("needle listening on ").expect(&first).to_owned();
        let source = lines.next().expect("a source line").unwrap();
        Self { child, url, source, stderr, _dir: dir }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// What this node answers to `GET path` (a redirect is not followed: an api node sends a
    /// client asking for another api node's query there).
    pub fn get(&self, path: &str) -> reqwest::blocking::Response {
        let client = reqwest::blocking::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        client.get(format!("{}{path}", self.url)).send().unwrap()
    }

    /// A metric's value (0 when absent).
    pub fn metric(&self, name: &str) -> f64 {
        let text = self.get("/metrics").text().unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
            .map_or(0.0, |v| v.trim().parse().unwrap())
    }

    pub fn partitions(&self) -> f64 {
        self.metric("needle_source_partitions")
    }

    /// The running query's status on this node.
    pub fn status(&self, id: &str) -> Option<Value> {
        let r = self.get(&format!("/api/v1/queries/{id}"));
        (r.status() == 200).then(|| r.json().unwrap())
    }

    /// Sends SIGTERM and waits for the exit, at most `within`.
    pub fn terminate(&mut self, within: Duration) -> std::process::ExitStatus {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "needle serve did not stop on SIGTERM: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- stderr of needle serve at {} ---\n{}", self.url, self.log());
        }
    }
}

/// Iceberg's Spark runtime, fetched by `scripts/interop/install.sh`.
pub fn spark_runtime() -> PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::var_os("ICEBERG_SPARK_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".cache/iceberg-spark"));
    std::fs::read_dir(&dir)
        .ok()
        .and_then(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .find(|p| p.to_string_lossy().contains("iceberg-spark-runtime"))
        })
        .unwrap_or_else(|| {
            panic!("no Iceberg Spark runtime in {}: run scripts/interop/install.sh", dir.display())
        })
}
