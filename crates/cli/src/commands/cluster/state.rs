//! A cluster's state directory (`needle cluster up --dir DIR`, default `./needle-cluster`):
//! `DIR/cluster.json` lists every process `up` started (its kind, name, process id, URL and
//! log), written as each one starts, so `needle cluster status` and `needle cluster down` find
//! them, even after `up` itself died. And the process handling they share: whether a process
//! id is still one of the cluster's, and stopping by process id (SIGTERM, then SIGKILL after a
//! grace).

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The default state directory, relative to the current directory.
pub const DEFAULT_DIR: &str = "needle-cluster";
/// The state file's name inside the directory.
const STATE_FILE: &str = "cluster.json";

/// What `needle cluster up` started, as `DIR/cluster.json` keeps it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClusterState {
    /// The process id of `needle cluster up` (the owner every process is tied to).
    pub owner: u32,
    /// The state directory (absolute).
    pub dir: PathBuf,
    /// The Kafka broker's address.
    pub bootstrap: String,
    pub data_topic: String,
    /// The S3-compatible server's endpoint, with `--history s3`.
    pub s3_endpoint: Option<String>,
    /// The needle.toml every node reads.
    pub config: PathBuf,
    pub processes: Vec<Started>,
}

/// A process the cluster started.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Started {
    /// `kafka`, `s3`, `gen`, `api` or `worker`.
    pub kind: String,
    /// `kafka`, `s3`, `gen`, `api-1`, `worker-2`, ...
    pub name: String,
    pub pid: u32,
    /// A needle node's HTTP base URL (or the broker's address, the S3 endpoint).
    pub url: Option<String>,
    pub log: PathBuf,
    /// The broker's or the S3 server's watchdog (the script's process that stops it when
    /// `up` is gone), stopped first.
    #[serde(default)]
    pub watchdog: Option<u32>,
}

impl ClusterState {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(STATE_FILE)
    }

    pub fn load(dir: &Path) -> Result<Self, String> {
        let path = Self::path(dir);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "no cluster in {} ({}: {e}); start one with needle cluster up",
                dir.display(),
                path.display()
            )
        })?;
        serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a cluster's state: {e}", path.display()))
    }

    /// Writes the state (a new file renamed over the old: a reader never sees half of it).
    pub fn save(&self) -> Result<(), String> {
        let path = Self::path(&self.dir);
        let fresh = path.with_extension("json.new");
        let text = serde_json::to_string_pretty(self).expect("a cluster's state serializes");
        std::fs::write(&fresh, text)
            .and_then(|()| std::fs::rename(&fresh, &path))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// Whether `started` is still running, and still the process the cluster started (its
    /// command line names the state directory; a process id reused since is not).
    pub fn running(&self, started: &Started) -> bool {
        process_alive(started.pid)
            && command_line(started.pid).contains(&*self.dir.to_string_lossy())
    }

    /// Stops every process still running (SIGTERM, then SIGKILL after a grace), in order:
    /// the generator, the api nodes (they end their queries), the workers (they commit and
    /// leave the group), then the S3 server and the broker. Says what it does on stderr.
    pub fn stop_all(&self) {
        for (kinds, grace) in [
            (&["gen"][..], Duration::from_secs(5)),
            (&["api"][..], Duration::from_secs(15)),
            (&["worker"][..], Duration::from_secs(20)),
            (&["s3", "kafka"][..], Duration::from_secs(15)),
        ] {
            let group: Vec<&Started> = self
                .processes
                .iter()
                .filter(|p| kinds.contains(&p.kind.as_str()) && self.running(p))
                .collect();
            for p in &group {
                let watchdog = p.watchdog.filter(|&w| command_line(w).contains("watchdog"));
                if let Some(watchdog) = watchdog.filter(|&w| process_alive(w)) {
                    signal(watchdog, libc::SIGTERM);
                }
                eprintln!("needle cluster: stopping {} (pid {})", p.name, p.pid);
                signal(p.pid, libc::SIGTERM);
            }
            let deadline = Instant::now() + grace;
            while group.iter().any(|p| process_alive(p.pid)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            for p in group.iter().filter(|p| process_alive(p.pid)) {
                eprintln!(
                    "needle cluster: {} (pid {}) did not stop within {:?}: SIGKILL",
                    p.name, p.pid, grace
                );
                signal(p.pid, libc::SIGKILL);
            }
        }
    }
}

/// Sends `signal` to process `pid`.
pub fn signal(pid: u32, signal: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return };
    // SAFETY: kill only sends a signal.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// True while process `pid` exists and is not a zombie (exited, waiting for its parent).
pub fn process_alive(pid: u32) -> bool {
    let Ok(id) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(id, 0) } != 0 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // the state follows the command's name in parentheses
        Ok(stat) => {
            stat.rsplit_once(')').is_none_or(|(_, rest)| !rest.trim_start().starts_with('Z'))
        }
        Err(_) => true,
    }
}

/// Process `pid`'s command line, its arguments joined by spaces (empty when unknown).
pub fn command_line(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|bytes| String::from_utf8_lossy(&bytes).replace('\0', " "))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_an_unused_id_is_not() {
        assert!(process_alive(std::process::id()));
        assert!(!process_alive(i32::MAX as u32));
    }

    #[test]
    fn a_process_is_the_clusters_only_while_its_command_line_names_the_directory() {
        let me = std::process::id();
        let started = Started {
            kind: "api".into(),
            name: "api-1".into(),
            pid: me,
            url: None,
            log: PathBuf::new(),
            watchdog: None,
        };
        let state = |dir: &str| ClusterState { dir: dir.into(), ..ClusterState::default() };
        // the test binary's command line names itself, not this directory
        assert!(!state("/nowhere/needle-cluster").running(&started));
        let own = command_line(me);
        let word = own.split(' ').next().unwrap();
        assert!(state(word).running(&started));
    }
}
