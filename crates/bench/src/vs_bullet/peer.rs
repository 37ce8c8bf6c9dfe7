//! The Bullet side of `needle bench vs-bullet`: finds the peer (`bench/peers/bullet`), builds it
//! with its `run.sh` (Maven, once), and runs it on a records file and a query file.

use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where the peer lives inside a needle checkout.
const PEER_DIR: &str = "bench/peers/bullet";

/// The peer's folder, with its `run.sh`.
#[derive(Debug, Clone)]
pub struct Peer {
    dir: PathBuf,
}

/// What the peer prints with `--format json` (the fields used here).
#[derive(Debug, Deserialize)]
pub struct PeerReport {
    pub queries: usize,
    pub records: usize,
    /// Records through every query, decoded beforehand: wall clock of the record loop.
    pub records_per_sec: f64,
    pub records_per_cpu_sec: f64,
    /// JSON line → Bullet record, one timed pass after a warm-up.
    pub decode_records_per_sec: f64,
    pub decode_records_per_cpu_sec: f64,
    pub warmup_passes: usize,
    pub timed_passes: usize,
    pub timed_out: usize,
    pub rate_limited: usize,
    /// Per query: its result records, in Bullet's column naming.
    pub results: Vec<Vec<serde_json::Value>>,
}

/// How to run the peer.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub warmup: Option<usize>,
    pub repeat: usize,
    /// Run the JVM under `taskset -c CPU`.
    pub cpu: Option<usize>,
    /// `setters` or `typed` (the peer's `--decode`).
    pub decode: String,
}

impl Peer {
    /// `dir` when given (it must hold `run.sh`), else `bench/peers/bullet` in the current
    /// directory or one above it, or above the needle binary.
    pub fn locate(dir: Option<&Path>) -> Result<Peer, String> {
        if let Some(dir) = dir {
            if dir.join("run.sh").is_file() {
                return Ok(Peer { dir: dir.to_path_buf() });
            }
            return Err(format!("--peer {}: no run.sh there (the Bullet peer's folder is {PEER_DIR} in a needle checkout)", dir.display()));
        }
        let cwd = std::env::current_dir().ok();
        let exe = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf));
        for start in cwd.iter().chain(exe.iter()) {
            for dir in start.ancestors() {
                let candidate = dir.join(PEER_DIR);
                if candidate.join("run.sh").is_file() {
                    return Ok(Peer { dir: candidate });
                }
            }
        }
        Err(format!(
            "cannot find the Bullet peer ({PEER_DIR}/run.sh) in or above the current directory \
             or the needle binary: run from a needle checkout, or pass --peer DIR"
        ))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Checks that Java (and Maven, if the jar must be built) are there, then builds the peer
    /// if its jar is missing or older than its sources (`run.sh --help` builds, then prints
    /// its usage).
    pub fn build(&self) -> Result<(), String> {
        if !runs("java", "-version") {
            return Err("`java` is not on PATH: the Bullet peer needs Java 17 or later (and \
                        Maven to build it once)"
                .into());
        }
        let jar = self.dir.join("target/bullet-peer-0.1.0.jar");
        if !jar.is_file() && !runs("mvn", "-v") {
            return Err(format!(
                "the Bullet peer is not built ({} is missing) and `mvn` is not on PATH: \
                 install Maven, or build it with `mvn -B -q package` in {}",
                jar.display(),
                self.dir.display()
            ));
        }
        let out = Command::new("bash")
            .arg(self.dir.join("run.sh"))
            .arg("--help")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run bash: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "building the Bullet peer failed ({}/run.sh, mvn -B -q package):\n{}",
                self.dir.display(),
                tail(&out.stderr)
            ));
        }
        Ok(())
    }

    /// Runs the peer on `records` and `queries`; its JSON report.
    pub fn run(
        &self,
        records: &Path,
        queries: &Path,
        options: &RunOptions,
    ) -> Result<PeerReport, String> {
        let mut command = match options.cpu {
            Some(cpu) => {
                let mut c = Command::new("taskset");
                c.args(["-c", &cpu.to_string(), "bash"]);
                c
            }
            None => Command::new("bash"),
        };
        command.arg(self.dir.join("run.sh"));
        command.arg("--records").arg(records).arg("--queries").arg(queries);
        command.args(["--repeat", &options.repeat.to_string(), "--decode", &options.decode]);
        if let Some(warmup) = options.warmup {
            command.args(["--warmup", &warmup.to_string()]);
        }
        command.args(["--format", "json"]).stdin(Stdio::null());
        let out = command.output().map_err(|e| format!("cannot run the Bullet peer: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "the Bullet peer failed ({}) on {} with {}:\n{}",
                out.status,
                records.display(),
                queries.display(),
                tail(&out.stderr)
            ));
        }
        serde_json::from_slice(&out.stdout).map_err(|e| {
            format!("the Bullet peer's output is not its JSON report ({e}): {}", tail(&out.stdout))
        })
    }
}

/// True when `program arg` runs and succeeds.
fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether `taskset` is there to pin the JVM.
pub fn has_taskset() -> bool {
    runs("taskset", "-V")
}

/// The last lines of a process's output, for an error message.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
