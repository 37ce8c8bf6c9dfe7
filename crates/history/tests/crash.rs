//! kill -9 during flushes and merges: a child process (this test binary, run again) appends,
//! flushes and merges in a loop, saying after each flush how many records are durable; the
//! parent kills it with SIGKILL at random moments, reopens the store, and checks that it opens,
//! that every record said to be durable is there, and that no record is there twice. The same
//! on object storage (a `file://` bucket), each round's child on a new machine (an empty local
//! directory): killed during uploads, manifest commits, merges and compactions. After each kill,
//! the store's Iceberg table's newest snapshot holds the records the store reads.

use needle_history::{ScanRequest, Store, StoreConfig};
use needle_record::{Record, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD: &str = "NEEDLE_HISTORY_CRASH_CHILD";
/// With it, the child's store lives in this `file://` bucket (its local directory is `CHILD`).
const BUCKET: &str = "HISTORY_CRASH_BUCKET";
const BATCH: i64 = 5_000;

fn config(dir: &Path) -> StoreConfig {
    config_in(dir, std::env::var(BUCKET).ok().as_deref())
}

fn config_in(dir: &Path, bucket: Option<&str>) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    if let Some(bucket) = bucket {
        let mut remote = needle_history::RemoteConfig::new(format!("file://{bucket}"));
        remote.writer = "crash".into();
        remote.delete_grace_ms = 0;
        c.remote = Some(remote);
        c.compact_after_ms = Some(1);
        c.compact_span_ms = 4_000_000;
    }
    c.time_field = Some("ts".into());
    c.sort_by = vec!["k".into()];
    c.partition_ms = 1_000_000;
    c.block_rows = 512;
    c
}

/// The child: runs only when the parent starts it.
#[test]
fn child_writes_until_killed() {
    let Ok(dir) = std::env::var(CHILD) else { return };
    let store = Store::open(config(Path::new(&dir))).unwrap();
    let mut next = {
        let scan = store
            .scan(&ScanRequest { from_ms: i64::MIN, to_ms: i64::MAX, filter: None, fields: None })
            .unwrap();
        scan.blocks.iter().map(|b| b.rows() as i64).sum::<i64>()
    };
    for round in 0.. {
        let records = (next..next + BATCH).map(|i| {
            let mut r = Record::new();
            r.insert("ts", Value::Long(i * 100));
            r.insert("k", Value::String(format!("k{}", i % 7)));
            r.insert("v", Value::Long(i));
            (r, 0)
        });
        store.append(records, Some((next + BATCH).to_string())).unwrap();
        store.flush().unwrap();
        next += BATCH;
        // (on object storage: what is uploaded and in the manifest)
        let durable = store.durable_position().unwrap_or_else(|| "0".into());
        println!("durable {durable}");
        if round % 2 == 1 {
            store.maintain().unwrap();
            println!("merged");
        }
    }
}

#[test]
fn kill_9_during_flushes_and_merges_loses_nothing_durable_and_doubles_nothing() {
    if std::env::var(CHILD).is_ok() {
        return;
    }
    kill_9_rounds(None);
}

#[test]
fn kill_9_during_uploads_and_compactions_on_object_storage_loses_nothing_durable() {
    if std::env::var(CHILD).is_ok() {
        return;
    }
    let bucket = tempfile::tempdir().unwrap();
    kill_9_rounds(Some(bucket.path()));
}

/// Eight rounds of a child killed at a random moment, and the store checked after each; with
/// `bucket`, on object storage, each round on an empty local directory.
fn kill_9_rounds(bucket: Option<&Path>) {
    let machines = tempfile::tempdir().unwrap();
    let bucket = bucket.map(|b| b.display().to_string());
    let exe = std::env::current_exe().unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut durable = 0i64;
    for round in 0..8 {
        // a local store keeps its directory; one on object storage gets a new machine a round
        let dir = match &bucket {
            Some(_) => machines.path().join(format!("machine-{round}")),
            None => machines.path().join("store"),
        };
        let mut command = Command::new(&exe);
        if let Some(bucket) = &bucket {
            command.env(BUCKET, bucket);
        }
        let mut child = command
            .args(["--exact", "child_writes_until_killed", "--nocapture", "--test-threads=1"])
            .env(CHILD, &dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // let it make a few parts (and merges), then kill it at a random moment
        let wanted = 1 + random(4);
        let mut seen = 0;
        let deadline = Instant::now() + Duration::from_secs(60);
        while seen < wanted && Instant::now() < deadline {
            let Some(Ok(line)) = lines.next() else { break };
            if let Some(n) = line.strip_prefix("durable ") {
                durable = durable.max(n.parse().unwrap());
                seen += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(random(120)));
        child.kill().unwrap(); // SIGKILL
                               // what it printed before dying is durable too
        for line in lines.map_while(Result::ok) {
            if let Some(n) = line.strip_prefix("durable ") {
                durable = durable.max(n.parse().unwrap());
            }
        }
        child.wait().unwrap();

        let elsewhere = machines.path().join(format!("reader-{round}"));
        let store = match &bucket {
            Some(b) => Store::open_read_only(config_in(&elsewhere, Some(b))),
            None => Store::open(config_in(&dir, None)),
        }
        .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let scan = store
            .scan(&ScanRequest { from_ms: i64::MIN, to_ms: i64::MAX, filter: None, fields: None })
            .unwrap();
        let mut values: Vec<i64> = scan
            .blocks
            .iter()
            .flat_map(|b| b.read().unwrap())
            .map(|r| r.record.get("v").and_then(Value::as_i64).unwrap())
            .collect();
        values.sort_unstable();
        let count = values.len() as i64;
        assert!(count >= durable, "round {round}: {count} records, {durable} were durable");
        assert_eq!(values, (0..count).collect::<Vec<_>>(), "round {round}: each record once");
        assert_eq!(store.counters().corrupt_files.load(std::sync::atomic::Ordering::Relaxed), 0);
        assert_eq!(store.durable_position(), Some(count.to_string()).filter(|_| count > 0));
        // the store's Iceberg table names the same records: what a crash left out of it is
        // committed when the store opens again, and an engine reads what needle reads
        let info = store.info().unwrap();
        let newest = info.snapshots.last().unwrap_or_else(|| panic!("round {round}: no snapshot"));
        assert_eq!(newest.records, count.to_string(), "round {round}: {:?}", info.snapshots);
    }
    assert!(durable > 0);
}
