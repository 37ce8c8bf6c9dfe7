//! A real Apache Kafka broker for tests and benchmarks, and a bare consumer to compare needle
//! with.
//!
//! [`Broker`] runs `scripts/kafka/broker.sh` (Kafka's jars from Maven Central, a single-node KRaft
//! broker on free loopback ports) with this process as the owner, so the broker's watchdog stops
//! it if this process dies without cleaning up. A [`Broker`] value stops its broker when dropped
//! (also on a panic); [`Broker::shared`] is one broker for a whole test binary, stopped when the
//! process exits. Tests share it and use topics of their own.

use crate::client::{Connection, Start, CONNECT_TIMEOUT};
use crate::produce::{Patience, Riders, Writer};
use crate::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::BaseRecord;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A broker started by `broker.sh`, stopped when dropped.
#[derive(Debug)]
pub struct Broker {
    dir: PathBuf,
    /// `127.0.0.1:PORT`.
    pub bootstrap: String,
    _temp: Option<tempfile::TempDir>,
}

impl Broker {
    /// The broker script: `$KAFKA_BROKER_SCRIPT`, else the repository's. (Not a `NEEDLE_*`
    /// name: the needle processes a test starts would read it as a setting and refuse it.)
    pub fn script() -> PathBuf {
        std::env::var_os("KAFKA_BROKER_SCRIPT").map(PathBuf::from).unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kafka/broker.sh")
        })
    }

    /// Starts a broker whose files live in a new temporary directory.
    pub fn start() -> Result<Self, String> {
        Self::start_with(&[])
    }

    /// [`Broker::start`] with `KEY=VALUE` settings added to its server.properties.
    pub fn start_with(settings: &[&str]) -> Result<Self, String> {
        sweep_stale();
        let temp = tempfile::Builder::new()
            .prefix("needle-kafka-")
            .tempdir()
            .map_err(|e| format!("cannot make a directory for the broker: {e}"))?;
        let dir = temp.path().to_owned();
        let owner = std::process::id().to_string();
        let mut args = vec!["start", path_str(&dir)?, "--owner", &owner];
        for setting in settings {
            args.extend(["--set", setting]);
        }
        let bootstrap = run_script(&args)?;
        Ok(Self { dir, bootstrap, _temp: Some(temp) })
    }

    /// One broker for the whole process, started on first use and stopped at exit.
    pub fn shared() -> &'static Broker {
        static SHARED: OnceLock<Broker> = OnceLock::new();
        SHARED.get_or_init(|| {
            let broker =
                Broker::start().unwrap_or_else(|e| panic!("cannot start a Kafka broker: {e}"));
            extern "C" fn stop_shared() {
                if let Some(broker) = SHARED.get() {
                    broker.stop();
                    let _ = std::fs::remove_dir_all(&broker.dir);
                }
            }
            // SAFETY: registering a plain `extern "C" fn` with no arguments is what atexit takes.
            unsafe {
                libc::atexit(stop_shared);
            }
            broker
        })
    }

    /// Stops the broker and waits for it to exit (its data stays, see [`Broker::restart`]).
    pub fn stop(&self) {
        if let Ok(dir) = path_str(&self.dir) {
            let _ = run_script(&["stop", dir]);
        }
    }

    /// Starts the stopped broker again on the same port with the same data (or stops and starts
    /// a running one): a broker outage.
    pub fn restart(&self) -> Result<(), String> {
        run_script(&["restart", path_str(&self.dir)?]).map(|_| ())
    }

    /// A connection to this broker, with `properties`.
    pub fn connection(&self, properties: &[(&str, &str)]) -> Connection {
        let properties: BTreeMap<String, String> =
            properties.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Connection::new(&self.bootstrap, &properties).expect("a broker address")
    }

    /// Creates a topic of `partitions` partitions.
    pub fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), KafkaError> {
        self.connection(&[]).ensure_topic(topic, partitions, &[])
    }

    /// Produces `values` to `topic`: to `partition`, or round-robin over partitions 0..n with
    /// `Spread(n)`; waits until all are acknowledged.
    pub fn produce(&self, topic: &str, to: Partitions, values: &[&[u8]]) -> Result<(), KafkaError> {
        let keyed: Vec<(Option<&str>, &[u8])> = values.iter().map(|v| (None, *v)).collect();
        self.produce_keyed(topic, to, &keyed)
    }

    /// [`Broker::produce`] of (key, value) pairs.
    pub fn produce_keyed(
        &self,
        topic: &str,
        to: Partitions,
        messages: &[(Option<&str>, &[u8])],
    ) -> Result<(), KafkaError> {
        let writer = Writer::new(&self.connection(&[]), "test producer", &[])?;
        for (i, (key, value)) in messages.iter().enumerate() {
            let partition = match to {
                Partitions::One(p) => p,
                Partitions::Spread(n) => (i as i32) % n.max(1),
            };
            let mut record = BaseRecord::with_opaque_to(topic, Riders::default())
                .partition(partition)
                .payload(*value);
            if let Some(key) = key {
                record = record.key(*key);
            }
            writer.send(record, Patience::forever)?;
        }
        writer.flush(CONNECT_TIMEOUT * 3)?;
        match writer.failures() {
            (0, _) => Ok(()),
            (n, first) => Err(KafkaError::Config(format!(
                "{n} test message(s) not delivered: {}",
                first.unwrap_or_default()
            ))),
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Removes the directories of brokers whose owner and broker processes are both gone (a test
/// process killed before it could clean up; its broker's watchdog stopped the broker).
fn sweep_stale() {
    let alive = |file: &Path| {
        std::fs::read_to_string(file)
            .ok()
            .and_then(|pid| pid.trim().parse::<i32>().ok())
            // SAFETY: signal 0 only asks whether the process exists.
            .is_some_and(|pid| unsafe { libc::kill(pid, 0) } == 0)
    };
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let dir = entry.path();
        let ours = dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("needle-kafka-"));
        if ours
            && dir.join("owner").is_file()
            && !alive(&dir.join("owner"))
            && !alive(&dir.join("pid"))
        {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// Where [`Broker::produce`] writes.
#[derive(Debug, Clone, Copy)]
pub enum Partitions {
    One(i32),
    Spread(i32),
}

fn path_str(path: &Path) -> Result<&str, String> {
    path.to_str().ok_or_else(|| format!("{} is not UTF-8", path.display()))
}

/// Runs the broker script; its last line of output on success.
fn run_script(args: &[&str]) -> Result<String, String> {
    let script = Broker::script();
    let output = Command::new("bash")
        .arg(&script)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} {} failed: {}",
            script.display(),
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).lines().last().unwrap_or_default().trim().to_owned())
}

/// What [`drain`] read.
#[derive(Debug, Clone, Copy)]
pub struct Drained {
    pub messages: u64,
    pub bytes: u64,
    /// From the first message to the last.
    pub elapsed: Duration,
}

/// The bare rdkafka baseline: one consumer (no group) reads every partition of `topic` from the
/// beginning to the end offsets it finds at the start, touching each message's bytes and doing
/// nothing else.
pub fn drain(
    connection: &Connection,
    topic: &str,
    timeout: Duration,
) -> Result<Drained, KafkaError> {
    let consumer = connection.probe("baseline")?;
    let mut ends = connection.assign_whole(&consumer, topic, Start::Beginning)?;
    let deadline = Instant::now() + timeout;
    let (mut messages, mut bytes, mut first, mut last) = (0u64, 0u64, None, Instant::now());
    let mut checksum = 0u8;
    while !ends.is_empty() {
        if Instant::now() > deadline {
            return Err(KafkaError::Config(format!("the baseline did not read {topic} in time")));
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                let now = Instant::now();
                first.get_or_insert(now);
                last = now;
                messages += 1;
                let payload = message.payload().unwrap_or_default();
                bytes += payload.len() as u64;
                checksum ^= payload.first().copied().unwrap_or(0);
                if ends.get(&message.partition()).is_some_and(|&end| message.offset() + 1 >= end) {
                    ends.remove(&message.partition());
                }
            }
            Some(Err(e)) => return Err(KafkaError::client("the baseline consumer", e)),
            None => {}
        }
    }
    std::hint::black_box(checksum);
    let elapsed = first.map_or(Duration::ZERO, |f| last.duration_since(f));
    Ok(Drained { messages, bytes, elapsed })
}
