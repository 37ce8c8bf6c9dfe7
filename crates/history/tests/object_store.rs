//! The history store kept in an object store, against a real S3 server (MinIO, started by
//! `scripts/s3/minio.sh`) and against `file://`: what one machine writes another reads whole;
//! a cold read fetches ranges, not parts; a source position is durable only once its parts are
//! uploaded; an outage keeps everything and uploads resume; a second writer fences the first;
//! a corrupt object is skipped and counted; wrong credentials name the setting.

use needle_history::testing::Minio;
use needle_history::{Health, RemoteConfig, ScanRequest, Store, StoreConfig, StoredRecord};
use needle_record::{Map, Record, Value};
use std::path::{Path, PathBuf};

fn config(local: &Path, remote: RemoteConfig) -> StoreConfig {
    let mut c = StoreConfig::new(local);
    c.time_field = Some("ts".into());
    c.sort_by = vec!["sensor".into()];
    c.partition_ms = 60_000;
    c.block_rows = 64;
    c.page_rows = 16;
    c.remote = Some(remote);
    // each flush's uploads committed at once; the cadence has a test of its own
    c.commit_ms = Some(0);
    c
}

fn record(i: i64) -> Record {
    let mut m = Map::default();
    m.insert("ts".into(), Value::Long(1_700_000_000_000 + i * 97));
    m.insert("sensor".into(), Value::String(format!("s{}", i % 13)));
    m.insert("temp".into(), Value::Double((i % 100) as f64 + 0.5));
    m.insert("id".into(), Value::Long(i));
    // a reading that does not compress away, so blocks have a realistic size
    let noise = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11;
    m.insert("noise".into(), Value::Double(noise as f64 / (1u64 << 53) as f64));
    Record::from_map(m)
}

fn everything(store: &Store) -> Vec<StoredRecord> {
    let scan = store
        .scan(&ScanRequest { from_ms: i64::MIN, to_ms: i64::MAX, filter: None, fields: None })
        .unwrap();
    let mut out = scan.buffered;
    for block in &scan.blocks {
        out.extend(block.read().unwrap());
    }
    out.sort_by_cached_key(|r| (r.time_ms, r.record.to_json()));
    out
}

fn ids(rows: &[StoredRecord]) -> Vec<i64> {
    let mut ids: Vec<i64> =
        rows.iter().map(|r| r.record.get("id").unwrap().as_i64().unwrap()).collect();
    ids.sort();
    ids
}

fn file_remote(dir: &Path) -> RemoteConfig {
    let mut remote = RemoteConfig::new(format!("file://{}", dir.display()));
    remote.delete_grace_ms = 0;
    remote
}

fn write_and_read_back(remote: RemoteConfig) {
    let writer_dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(writer_dir.path(), remote.clone())).unwrap();
    for round in 0..6 {
        let records = (round * 400..(round + 1) * 400).map(|i| (record(i), 0));
        store.append(records, Some(format!("offset-{round}"))).unwrap();
        store.flush().unwrap();
    }
    assert_eq!(store.durable_position().as_deref(), Some("offset-5"));
    let written = everything(&store);
    assert_eq!(ids(&written), (0..2400).collect::<Vec<_>>());
    // merges: their parts uploaded, their inputs retired and (grace 0) deleted
    store.compact().unwrap();
    store.maintain().unwrap();
    let info = store.info().unwrap().remote.unwrap();
    assert_eq!(info.parts_waiting_for_upload, 0, "{info:?}");
    assert!(info.manifest_version >= 7, "{info:?}");
    assert_eq!(everything(&store), written);

    // another machine: an empty local directory, the same URL
    let reader_dir = tempfile::tempdir().unwrap();
    let reader = Store::open_read_only(config(reader_dir.path(), remote.clone())).unwrap();
    assert_eq!(everything(&reader), written);
    let parts = reader.info().unwrap().parts;
    assert_eq!(parts, store.info().unwrap().parts);
    drop(store);

    // the writer again, on a machine that lost its disk: everything, and its position
    let again_dir = tempfile::tempdir().unwrap();
    let again = Store::open(config(again_dir.path(), remote)).unwrap();
    assert_eq!(everything(&again), written);
    assert_eq!(again.durable_position().as_deref(), Some("offset-5"));
}

#[test]
fn what_one_machine_writes_to_a_file_url_another_reads_whole() {
    let bucket = tempfile::tempdir().unwrap();
    write_and_read_back(file_remote(bucket.path()));
    // merged-away parts were deleted: the bucket holds the manifest's parts only
    let objects: usize = std::fs::read_dir(bucket.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("p="))
        .map(|e| std::fs::read_dir(e.path()).unwrap().count())
        .sum();
    let reader_dir = tempfile::tempdir().unwrap();
    let reader =
        Store::open_read_only(config(reader_dir.path(), file_remote(bucket.path()))).unwrap();
    assert_eq!(objects as u64, reader.info().unwrap().parts);
}

/// The objects under the bucket's partition directories, by name.
fn objects(bucket: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(bucket)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("p="))
        .flat_map(|e| std::fs::read_dir(e.path()).unwrap().flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn uploads_are_committed_at_most_every_commit_ms_and_all_at_close() {
    let bucket = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), file_remote(bucket.path()));
    c.commit_ms = Some(3_600_000);
    let store = Store::open(c.clone()).unwrap();
    let committed = |store: &Store| store.info().unwrap().remote.unwrap().manifest_version;
    let read_elsewhere = || {
        let reader_dir = tempfile::tempdir().unwrap();
        let mut c = config(reader_dir.path(), file_remote(bucket.path()));
        c.commit_ms = None;
        ids(&everything(&Store::open_read_only(c).unwrap()))
    };
    // the first upload commits at once
    store.append((0..100).map(|i| (record(i), 0)), Some("a".into())).unwrap();
    store.flush().unwrap();
    let first = committed(&store);
    assert_eq!(read_elsewhere(), (0..100).collect::<Vec<_>>());
    assert_eq!(store.durable_position().as_deref(), Some("a"));
    // the next ones are uploaded but wait for the cadence: no new version, the position waits
    for round in 1..4 {
        let records = (round * 100..(round + 1) * 100).map(|i| (record(i), 0));
        store.append(records, Some(format!("r{round}"))).unwrap();
        store.flush().unwrap();
    }
    assert_eq!(committed(&store), first);
    assert_eq!(read_elsewhere(), (0..100).collect::<Vec<_>>());
    assert_eq!(store.durable_position().as_deref(), Some("a"));
    let uploaded = objects(bucket.path());
    assert!(uploaded.len() >= 4, "{uploaded:?}");
    // a merge of uploads no snapshot named deletes their objects (nothing will ever name them)
    store.compact().unwrap();
    assert_eq!(ids(&everything(&store)), (0..400).collect::<Vec<_>>());
    // the close commits everything, in one version
    store.close().unwrap();
    assert_eq!(committed(&store), first + 1);
    assert_eq!(store.durable_position().as_deref(), Some("r3"));
    assert_eq!(read_elsewhere(), (0..400).collect::<Vec<_>>());
    let reader_dir = tempfile::tempdir().unwrap();
    let reader =
        Store::open_read_only(config(reader_dir.path(), file_remote(bucket.path()))).unwrap();
    let named = reader.info().unwrap().parts as usize;
    // the merged-away first part waits for its grace (0 here) and the next delete round
    store.maintain().unwrap();
    assert_eq!(objects(bucket.path()).len(), named, "{:?}", objects(bucket.path()));
}

#[test]
fn the_uploads_of_a_writer_lost_before_its_commit_are_swept_as_orphans() {
    let bucket = tempfile::tempdir().unwrap();
    let mut remote = file_remote(bucket.path());
    remote.writer = "lost".into();
    let lost_dir = tempfile::tempdir().unwrap();
    let mut c = config(lost_dir.path(), remote.clone());
    c.commit_ms = Some(3_600_000);
    let lost = Store::open(c).unwrap();
    lost.append((0..100).map(|i| (record(i), 0)), None).unwrap();
    lost.flush().unwrap();
    lost.append((100..200).map(|i| (record(i), 0)), None).unwrap();
    lost.flush().unwrap();
    // the machine goes, its disk with it: the second upload was never committed
    drop(lost);
    drop(lost_dir);
    assert_eq!(objects(bucket.path()).len(), 2);
    std::thread::sleep(std::time::Duration::from_millis(20));
    // another writer's open sweeps it (grace 0 here), and only it
    remote.writer = "next".into();
    let next_dir = tempfile::tempdir().unwrap();
    let next = Store::open(config(next_dir.path(), remote.clone())).unwrap();
    assert_eq!(objects(bucket.path()).len(), 1, "{:?}", objects(bucket.path()));
    let reader_dir = tempfile::tempdir().unwrap();
    let reader = Store::open_read_only(config(reader_dir.path(), remote)).unwrap();
    assert_eq!(ids(&everything(&reader)), (0..100).collect::<Vec<_>>());
    assert_eq!(next.sweep_orphans().unwrap(), 0);
}

#[test]
fn what_one_machine_writes_to_minio_another_reads_whole() {
    let minio = Minio::shared();
    let mut remote = minio.remote("read-back");
    remote.delete_grace_ms = 0;
    write_and_read_back(remote);
}

/// Kilobytes free in /dev/shm, by `df` (none where there is no /dev/shm).
fn kilobytes_free_in_memory() -> u64 {
    let out = std::process::Command::new("df").args(["-Pk", "/dev/shm"]).output();
    let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    text.lines().nth(1).and_then(|l| l.split_whitespace().nth(3)?.parse().ok()).unwrap_or(0)
}

#[test]
fn a_test_server_keeps_its_objects_in_memory_and_removes_them_when_it_stops() {
    let minio = Minio::start().unwrap();
    write_and_read_back(minio.remote("in-memory"));
    let objects = minio.objects_dir();
    let written = objects.join(&minio.bucket).join("in-memory");
    assert!(written.is_dir(), "no {} after a write", written.display());
    if kilobytes_free_in_memory() >= 4 * 1024 * 1024 {
        assert!(objects.starts_with("/dev/shm"), "objects on disk: {}", objects.display());
    }
    drop(minio);
    assert!(!objects.exists(), "{} outlived its server", objects.display());
}

#[test]
fn a_temporary_server_whose_owner_dies_is_removed_with_its_directory() {
    // an owner that ends without stopping its server, as a test binary does with the shared one
    let mut owner = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let dir = tempfile::Builder::new().prefix("needle-minio-owner-").tempdir().unwrap().keep();
    let pid = owner.id().to_string();
    let dir_arg = dir.to_str().unwrap();
    let started = std::process::Command::new("bash")
        .arg(Minio::script())
        .args(["start", dir_arg, "--owner", &pid, "--in-memory", "--temporary"])
        .output()
        .unwrap();
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    let objects = match std::fs::read_to_string(dir.join("data_in_memory")) {
        Ok(path) => PathBuf::from(path.trim()),
        Err(_) => dir.join("data"),
    };
    assert!(objects.is_dir());
    owner.kill().unwrap();
    owner.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while (dir.exists() || objects.exists()) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(!dir.exists(), "{} outlived its owner", dir.display());
    assert!(!objects.exists(), "{} outlived its owner", objects.display());
}

#[test]
fn a_cold_read_of_one_block_fetches_ranges_not_the_part() {
    let minio = Minio::shared();
    let remote = minio.remote("cold-read");
    let writer_dir = tempfile::tempdir().unwrap();
    let mut c = config(writer_dir.path(), remote.clone());
    c.block_rows = 4096;
    c.page_rows = 512;
    c.partition_ms = 3_600_000_000;
    let store = Store::open(c.clone()).unwrap();
    store.append((0..200_000).map(|i| (record(i), 0)), None).unwrap();
    store.flush().unwrap();
    let part_bytes = store.info().unwrap().bytes;
    drop(store);

    let reader_dir = tempfile::tempdir().unwrap();
    c.dir = reader_dir.path().to_owned();
    let reader = Store::open_read_only(c).unwrap();
    let footers = reader.info().unwrap().remote.unwrap().fetched_bytes;
    // one sensor's readings in a short range: a few blocks of the sorted part
    let plan =
        needle_query::compile("SELECT * FROM STREAM() WHERE sensor = 's3'", &Default::default())
            .unwrap();
    let filter = plan.stage.filter.unwrap();
    let from = 1_700_000_000_000 + 10_000 * 97;
    let scan = reader
        .scan(&ScanRequest {
            from_ms: from,
            to_ms: from + 2_000 * 97,
            filter: Some(filter),
            fields: None,
        })
        .unwrap();
    assert!(scan.blocks.len() <= 6, "{:?}", scan.stats);
    let rows: usize = scan.blocks.iter().map(|b| b.read().unwrap().len()).sum();
    assert!(rows > 0);
    let info = reader.info().unwrap().remote.unwrap();
    let fetched = info.fetched_bytes;
    assert!(
        fetched < part_bytes / 2,
        "fetched {fetched} bytes (footers {footers}) of a {part_bytes}-byte part"
    );
    // warm: the same read fetches nothing more
    for block in &scan.blocks {
        block.read().unwrap();
    }
    assert_eq!(reader.info().unwrap().remote.unwrap().fetched_bytes, fetched);
}

#[test]
fn an_outage_keeps_every_record_and_the_position_waits_for_the_upload() {
    // a server of this test's own: it is stopped and started
    let minio = Minio::start().unwrap();
    let mut remote = minio.remote("outage");
    remote.max_pending_bytes = 1;
    remote.options.request_timeout_ms = 1_000;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path(), remote.clone())).unwrap();
    store.append((0..500).map(|i| (record(i), 0)), Some("a".into())).unwrap();
    store.flush().unwrap();
    assert_eq!(store.durable_position().as_deref(), Some("a"));

    minio.stop().unwrap();
    store.append((500..1000).map(|i| (record(i), 0)), Some("b".into())).unwrap();
    // the part is written here; its upload fails: the position stays, history writes stop
    let _ = store.flush();
    assert_eq!(store.durable_position().as_deref(), Some("a"));
    assert!(matches!(store.health(), Health::WritesStopped { .. }), "{:?}", store.health());
    store.append((1000..1500).map(|i| (record(i), 0)), Some("c".into())).unwrap();
    assert!(store.flush().is_err(), "no new part while the uploads are behind");
    // reads go on, with every record
    assert_eq!(ids(&everything(&store)), (0..1500).collect::<Vec<_>>());

    minio.restart().unwrap();
    store.flush().unwrap();
    store.flush().unwrap();
    assert_eq!(store.health(), Health::Ok);
    assert_eq!(store.durable_position().as_deref(), Some("c"));
    let reader_dir = tempfile::tempdir().unwrap();
    let reader = Store::open_read_only(config(reader_dir.path(), remote)).unwrap();
    assert_eq!(ids(&everything(&reader)), (0..1500).collect::<Vec<_>>());
}

#[test]
fn a_second_process_under_a_writers_name_fences_the_first_out() {
    let bucket = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut remote = file_remote(bucket.path());
    remote.writer = "a".into();
    let first = Store::open(config(a_dir.path(), remote.clone())).unwrap();
    first.append((0..10).map(|i| (record(i), 0)), None).unwrap();
    first.flush().unwrap();
    let second = Store::open(config(b_dir.path(), remote)).unwrap();
    first.append((10..20).map(|i| (record(i), 0)), None).unwrap();
    let _ = first.flush();
    let Health::WritesStopped { reason } = first.health() else { panic!("{:?}", first.health()) };
    assert!(reason.contains("writer name a (epoch 2)"), "{reason}");
    // the second sees what the first committed before it took over, and nothing after
    assert_eq!(ids(&everything(&second)), (0..10).collect::<Vec<_>>());
}

/// Three writers share a store; one is gone. Each live writer's own scan holds its own records
/// only, and the live writers' shared scans hold, between them, every record once: the gone
/// writer's parts are dealt out among them.
fn writers_share_a_store_and_the_gone_ones_parts_are_read_once(bucket: RemoteConfig) {
    let names = ["w-a", "w-b", "w-c"];
    let dirs: Vec<tempfile::TempDir> = names.iter().map(|_| tempfile::tempdir().unwrap()).collect();
    let stores: Vec<Store> = names
        .iter()
        .zip(&dirs)
        .map(|(name, dir)| {
            let mut remote = bucket.clone();
            remote.writer = (*name).into();
            Store::open(config(dir.path(), remote)).unwrap()
        })
        .collect();
    for (w, store) in stores.iter().enumerate() {
        for round in 0..4 {
            let from = (w as i64) * 10_000 + round * 500;
            store.append((from..from + 500).map(|i| (record(i), 0)), None).unwrap();
            store.flush().unwrap();
        }
        store.maintain().unwrap();
    }
    for (w, store) in stores.iter().enumerate() {
        let own = ids(&everything(store));
        let from = (w as i64) * 10_000;
        assert_eq!(own, (from..from + 2_000).collect::<Vec<_>>(), "{}", names[w]);
    }
    // w-c is gone; w-a keeps one record in its write buffer
    stores[0].append(std::iter::once((record(99_999), 0)), None).unwrap();
    let roster: Vec<String> = names[..2].iter().map(|n| n.to_string()).collect();
    let everything_request =
        ScanRequest { from_ms: i64::MIN, to_ms: i64::MAX, filter: None, fields: None };
    let mut read = Vec::new();
    let mut shares = Vec::new();
    for store in &stores[..2] {
        let scan = store.scan_shared(&everything_request, &roster, None).unwrap();
        let mut got = scan.buffered;
        for block in &scan.blocks {
            got.extend(block.read().unwrap());
        }
        shares.push(got.len());
        read.extend(got);
    }
    let mut want: Vec<i64> = (0..2_000).chain(10_000..12_000).chain(20_000..22_000).collect();
    want.push(99_999);
    assert_eq!(ids(&read), want, "shares {shares:?}");
    assert!(shares.iter().all(|n| *n > 2_000), "both took a share of w-c's: {shares:?}");
}

#[test]
fn writers_share_a_store_on_a_file_url() {
    let bucket = tempfile::tempdir().unwrap();
    writers_share_a_store_and_the_gone_ones_parts_are_read_once(file_remote(bucket.path()));
}

#[test]
fn writers_share_a_store_on_minio() {
    writers_share_a_store_and_the_gone_ones_parts_are_read_once(
        Minio::shared().remote("shared-writers"),
    );
}

#[test]
fn a_corrupt_object_is_skipped_and_counted() {
    let bucket = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path(), file_remote(bucket.path()))).unwrap();
    store.append((0..300).map(|i| (record(i), 0)), None).unwrap();
    store.flush().unwrap();
    store.append((300..600).map(|i| (record(i * 1000), 0)), None).unwrap();
    store.flush().unwrap();
    drop(store);
    // truncate one of the uploaded parts
    let victim = std::fs::read_dir(bucket.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("p="))
        .flat_map(|e| std::fs::read_dir(e.path()).unwrap().flatten())
        .map(|e| e.path())
        .next()
        .unwrap();
    let bytes = std::fs::read(&victim).unwrap();
    std::fs::write(&victim, &bytes[..bytes.len() / 2]).unwrap();
    let reader_dir = tempfile::tempdir().unwrap();
    let reader =
        Store::open_read_only(config(reader_dir.path(), file_remote(bucket.path()))).unwrap();
    assert_eq!(reader.info().unwrap().corrupt_files, 1);
    let rows = everything(&reader).len();
    assert!(rows > 0 && rows < 600, "{rows}");
}

#[test]
fn wrong_credentials_or_bucket_name_the_setting() {
    let minio = Minio::shared();
    let dir = tempfile::tempdir().unwrap();
    let mut remote = minio.remote("creds");
    remote.options.settings.retain(|(k, _)| k != "aws_secret_access_key");
    remote.options.settings.push(("aws_secret_access_key".into(), "wrong".into()));
    let error = Store::open(config(dir.path(), remote)).unwrap_err().to_string();
    assert!(error.contains("history.object_store"), "{error}");
    let mut remote = minio.remote("x");
    remote.url = format!("s3://no-such-bucket-{}/x", std::process::id());
    let error = Store::open(config(dir.path(), remote)).unwrap_err().to_string();
    assert!(error.contains("history.object_store") && error.contains("no-such-bucket"), "{error}");
}

fn offsets(stream: &str, first: i64, next: i64) -> needle_history::OffsetRanges {
    [(stream.to_owned(), needle_history::OffsetRange { first, next })].into()
}

/// A writer dies with a flush waiting for upload; another takes its source stream over from the
/// last committed offset and keeps those records again. The first, restarted under its name,
/// drops the waiting part instead of uploading it: every record once, and the offsets the
/// store says it keeps are where a source must go on from.
#[test]
fn a_part_left_by_a_crash_is_not_uploaded_once_another_writer_kept_its_records() {
    let minio = Minio::start().unwrap();
    let mut remote = minio.remote("takeover");
    remote.options.request_timeout_ms = 1_000;
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a_remote = remote.clone();
    a_remote.writer = "a".into();
    let a = Store::open(config(a_dir.path(), a_remote.clone())).unwrap();
    let batch = |from: i64, to: i64| (from..to).map(|i| (record(i), 0)).collect::<Vec<_>>();
    a.append_from(batch(0, 100), None, &offsets("t/0", 0, 100)).unwrap();
    a.flush().unwrap();
    minio.stop().unwrap();
    a.append_from(batch(100, 150), None, &offsets("t/0", 100, 150)).unwrap();
    let _ = a.flush(); // written here, not uploaded: a dies with it waiting
    assert_eq!(a.kept_offsets().ok(), None, "the manifest cannot be read during the outage");
    drop(a);
    minio.restart().unwrap();

    let mut b_remote = remote.clone();
    b_remote.writer = "b".into();
    let b = Store::open(config(b_dir.path(), b_remote)).unwrap();
    assert_eq!(b.kept_offsets().unwrap(), [("t/0".to_owned(), 100)].into());
    b.append_from(batch(100, 180), None, &offsets("t/0", 100, 180)).unwrap();
    b.flush().unwrap();

    let a = Store::open(config(a_dir.path(), a_remote)).unwrap();
    assert_eq!(a.kept_offsets().unwrap(), [("t/0".to_owned(), 180)].into());
    a.append_from(batch(180, 200), None, &offsets("t/0", 180, 200)).unwrap();
    a.flush().unwrap();
    let reader_dir = tempfile::tempdir().unwrap();
    let reader = Store::open_read_only(config(reader_dir.path(), remote)).unwrap();
    assert_eq!(ids(&everything(&reader)), (0..200).collect::<Vec<_>>());
    let kept = reader.info().unwrap().remote.unwrap().kept_offsets;
    assert_eq!((kept["t/0"].next, kept["t/0"].writer.as_str()), (200, "a"), "{kept:?}");
}

/// On a local disk, the offsets kept are those of the parts, across a restart and a merge.
#[test]
fn a_local_store_says_which_offsets_it_keeps_across_a_restart_and_a_merge() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), file_remote(dir.path()));
    c.remote = None;
    let store = Store::open(c.clone()).unwrap();
    for round in 0..3 {
        let from = round * 10;
        store
            .append_from(
                (from..from + 10).map(|i| (record(i), 0)),
                None,
                &offsets(&format!("t/{}", round % 2), from, from + 10),
            )
            .unwrap();
        store.flush().unwrap();
    }
    store.maintain().unwrap();
    drop(store);
    let store = Store::open(c).unwrap();
    assert_eq!(
        store.kept_offsets().unwrap(),
        [("t/0".to_owned(), 30), ("t/1".to_owned(), 20)].into()
    );
}

/// A writer that never comes back does not keep its past forever: another writer's retention
/// retires its parts once their records are all past `retention_ms`, and deletes their objects
/// after the grace; its recent parts stay.
#[test]
fn retention_takes_the_expired_parts_of_a_writer_that_is_gone() {
    let bucket = tempfile::tempdir().unwrap();
    let (gone_dir, live_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            as i64;
    let at = |i: i64, ts: i64| {
        let mut r = record(i).into_map();
        r.insert("ts".into(), Value::Long(ts));
        (Record::from_map(r), 0)
    };
    let mut remote = file_remote(bucket.path());
    remote.writer = "gone".into();
    let gone = Store::open(config(gone_dir.path(), remote.clone())).unwrap();
    let day = 86_400_000;
    gone.append((0..100).map(|i| at(i, now - 3 * day + i)), None).unwrap();
    gone.flush().unwrap();
    // the recent records all in one partition (the minute before this one): a span that
    // crossed a partition's edge would be written as two parts
    let last_minute = (now / 60_000 - 1) * 60_000;
    gone.append((100..150).map(|i| at(i, last_minute + i)), None).unwrap();
    gone.flush().unwrap();
    drop(gone);

    remote.writer = "live".into();
    let mut c = config(live_dir.path(), remote.clone());
    c.retention_ms = Some(day as u64);
    let live = Store::open(c).unwrap();
    live.maintain().unwrap();
    live.maintain().unwrap(); // the objects go once retired (no grace here)
    let reader_dir = tempfile::tempdir().unwrap();
    let reader = Store::open_read_only(config(reader_dir.path(), remote)).unwrap();
    assert_eq!(ids(&everything(&reader)), (100..150).collect::<Vec<_>>());
    let objects = walk(bucket.path());
    assert_eq!(objects.iter().filter(|p| p.ends_with(".parquet")).count(), 1, "{objects:?}");
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path.display().to_string());
        }
    }
    out
}

/// A read planned from a manifest version deals the parts no writer will change (the
/// compacted cold spans of the live writers, every part of the gone ones) out among the live
/// writers: a writer that just joined reads its share of the past at once. Each writer reads
/// the rest of its own view, what it wrote since included (late records of a compacted span
/// make parts of their own, never merged into the compacted one): every record once.
#[test]
fn a_read_planned_from_a_manifest_version_deals_out_the_cold_past() {
    let bucket = tempfile::tempdir().unwrap();
    let mut remote = file_remote(bucket.path());
    remote.delete_grace_ms = 600_000; // a reader planning from an older version finds its parts
    let names = ["p-a", "p-b", "p-c", "p-gone"];
    let dirs: Vec<tempfile::TempDir> = names.iter().map(|_| tempfile::tempdir().unwrap()).collect();
    let stores: Vec<Store> = names
        .iter()
        .zip(&dirs)
        .map(|(name, dir)| {
            let mut remote = remote.clone();
            remote.writer = (*name).into();
            let mut c = config(dir.path(), remote);
            c.compact_after_ms = Some(1); // the records are of 2023: cold at once
            Store::open(c).unwrap()
        })
        .collect();
    // p-a, p-b and p-gone write and compact; p-c joins with nothing
    for (w, store) in stores.iter().enumerate().filter(|(w, _)| *w != 2) {
        for round in 0..3 {
            let from = (w as i64) * 10_000 + round * 300;
            store.append((from..from + 300).map(|i| (record(i), 0)), None).unwrap();
            store.flush().unwrap();
        }
        store.maintain().unwrap();
        let info = store.info().unwrap();
        assert_eq!(info.partitions, 1, "a cold day, compacted: {info:?}");
    }
    let planner = needle_history::manifest::Planner::open(&remote).unwrap();
    let version = planner.latest_version().unwrap();
    // since: late records of p-a's compacted day, in parts of their own; p-b keeps records in
    // its write buffer
    stores[0].append((900..1_200).map(|i| (record(i), 0)), None).unwrap();
    stores[0].flush().unwrap();
    stores[0].maintain().unwrap();
    assert_eq!(stores[0].info().unwrap().parts, 2, "the compacted part is not merged again");
    stores[1].append((10_900..11_000).map(|i| (record(i), 0)), None).unwrap();

    let roster: Vec<String> = names[..3].iter().map(|n| n.to_string()).collect();
    let request = ScanRequest { from_ms: i64::MIN, to_ms: i64::MAX, filter: None, fields: None };
    let read = |version: Option<u64>| {
        let mut all = Vec::new();
        let mut shares = Vec::new();
        for store in &stores[..3] {
            let scan = store.scan_shared(&request, &roster, version).unwrap();
            let mut got = scan.buffered;
            for block in &scan.blocks {
                got.extend(block.read().unwrap());
            }
            shares.push(got.len());
            all.extend(got);
        }
        (ids(&all), shares)
    };
    let expected: Vec<i64> = (0..1_200).chain(10_000..11_000).chain(30_000..30_900).collect();
    let (planned, shares) = read(Some(version));
    assert_eq!(planned, expected, "every record once; shares {shares:?}");
    assert!(shares[2] > 0, "the writer that joined reads its share of the past: {shares:?}");
    // by writers (no version, or one no longer kept): the same records, p-c reads only its
    // share of p-gone's parts
    for version in [None, Some(version + 1_000)] {
        assert_eq!(read(version).0, expected, "{version:?}");
    }
}
