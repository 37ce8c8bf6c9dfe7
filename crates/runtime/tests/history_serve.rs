//! History in a running runtime: what the source reads is kept, `FROM HISTORY(...)` reads it
//! back, and `SINCE` joins the stored past and the live records at an exact seam — under a
//! steady feed, every record is counted once.

use needle_engine::exec::Emission;
use needle_runtime::metrics::Metrics;
use needle_runtime::source::{SourceOptions, TcpSource};
use needle_runtime::{NeedleConfig, ResultQueue, Runtime, SubmitError};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn start(config: NeedleConfig) -> (Arc<Runtime>, SocketAddr) {
    let source = TcpSource::bind("127.0.0.1:0", &SourceOptions::default()).unwrap();
    let addr = source.local_addr().unwrap();
    let runtime = Runtime::start(config, Box::new(source), Arc::new(Metrics::new())).unwrap();
    (runtime, addr)
}

fn config(dir: &std::path::Path) -> NeedleConfig {
    let mut c = NeedleConfig::default();
    c.runtime.workers = 2;
    c.runtime.tick_ms = 20;
    c.history.dir = dir.display().to_string();
    c.history.flush_ms = 100;
    c
}

/// Every emission until the query ends (or `timeout`).
fn all(results: &ResultQueue, timeout: Duration) -> Vec<Emission> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    while Instant::now() < deadline {
        match results.try_next() {
            Some(Some(e)) => {
                let last = e.is_final;
                out.push(e);
                if last {
                    return out;
                }
            }
            Some(None) => return out,
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    panic!("the query did not end within {timeout:?}: {out:?}");
}

fn count(e: &Emission) -> i64 {
    e.records[0].get("n").and_then(|v| v.as_i64()).unwrap()
}

#[test]
fn since_counts_every_record_once_across_the_seam_under_a_steady_feed() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, addr) = start(config(dir.path()));
    let total = 6_000u64;
    let feeder = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        for i in 0..total {
            writeln!(stream, r#"{{"i":{i},"k":"{}"}}"#, i % 3).unwrap();
            if i % 100 == 99 {
                stream.flush().unwrap();
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    });
    // the feed runs for ~0.6 s: start the query in the middle of it
    std::thread::sleep(Duration::from_millis(250));
    let handle = runtime
        .submit("SELECT COUNT(*) AS n, SUM(i) AS s FROM STREAM(3000, TIME) SINCE 0", "t")
        .unwrap();
    feeder.join().unwrap();
    let out = all(&handle.results, Duration::from_secs(20));
    let last = out.last().unwrap();
    assert_eq!(count(last) as u64, total, "{:?}", last.meta);
    let sum = last.records[0].get("s").and_then(|v| v.as_f64()).unwrap();
    assert_eq!(sum, (total * (total - 1) / 2) as f64, "each record once: no gap, no overlap");
    assert!(last.meta.contains_key("History"), "{:?}", last.meta);

    // and the past alone, once everything is kept
    let handle = runtime.submit("SELECT COUNT(*) AS n FROM HISTORY(0)", "t").unwrap();
    let out = all(&handle.results, Duration::from_secs(20));
    assert_eq!(count(out.last().unwrap()) as u64, total);
    runtime.shutdown();
}

#[test]
fn a_history_query_on_a_runtime_without_history_is_refused_with_its_place() {
    let mut c = NeedleConfig::default();
    c.runtime.workers = 1;
    let source = TcpSource::bind("127.0.0.1:0", &SourceOptions::default()).unwrap();
    let runtime = Runtime::start(c, Box::new(source), Arc::new(Metrics::new())).unwrap();
    let text = "SELECT COUNT(*)\nFROM HISTORY('-1h')";
    match runtime.submit(text, "t") {
        Err(SubmitError::Invalid { error, .. }) => {
            assert_eq!(error.line_column(text), (2, 6), "{error}");
            assert!(error.to_string().contains("history"), "{error}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    runtime.shutdown();
}

#[test]
fn killing_a_history_query_ends_it_with_a_final_emission() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, addr) = start(config(dir.path()));
    let mut stream = TcpStream::connect(addr).unwrap();
    for i in 0..2_000 {
        writeln!(stream, r#"{{"i":{i}}}"#).unwrap();
    }
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(10);
    while runtime.metrics().records_read.get() < 2_000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let handle = runtime.submit("SELECT * FROM HISTORY(0) LIMIT 5", "t").unwrap();
    runtime.kill(&handle.id);
    let out = all(&handle.results, Duration::from_secs(10));
    assert!(out.last().unwrap().is_final);
    runtime.shutdown();
}

/// A source of three batches whose receipts (Kafka's offsets, in the real source) say when
/// they are dropped, and which then idles until stopped.
struct ReceiptSource {
    dropped: Arc<std::sync::atomic::AtomicUsize>,
}

struct Token(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Token {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl needle_runtime::source::Source for ReceiptSource {
    fn describe(&self) -> String {
        "three batches with receipts".into()
    }

    fn run(
        self: Box<Self>,
        sink: needle_runtime::source::BatchSink,
    ) -> Result<(), needle_runtime::RuntimeError> {
        use needle_runtime::framing::{Batch, Receipt};
        for b in 0..3 {
            let lines: String = (0..10).map(|i| format!("{{\"b\":{b},\"i\":{i}}}\n")).collect();
            let receipt = Receipt::new(Token(self.dropped.clone()));
            if !sink.send(Batch::with_receipt(lines.into_bytes(), receipt)) {
                return Ok(());
            }
        }
        while !sink.is_stopped() {
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }
}

#[test]
fn a_batch_is_done_with_only_once_its_records_are_durable_in_history() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.history.flush_ms = 600_000; // no flush but the one this test makes
    let dropped = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let source = ReceiptSource { dropped: dropped.clone() };
    let runtime = Runtime::start(c, Box::new(source), Arc::new(Metrics::new())).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while runtime.metrics().history_records_appended.get() < 30 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    // the workers are long done with the batches (many ticks): the records are not durable yet
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(runtime.metrics().records_read.get(), 30);
    assert_eq!(
        dropped.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "offsets would be committed before the records are durable"
    );
    runtime.history_store().unwrap().flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while dropped.load(std::sync::atomic::Ordering::SeqCst) < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(dropped.load(std::sync::atomic::Ordering::SeqCst), 3);
    runtime.shutdown();
}

/// A restart on a store that already holds a durable position (its last run's, or on object
/// storage another machine's under the same writer name) still waits for this run's records:
/// both runs counted their batches from 0, and the old position released the new receipts at
/// once.
#[test]
fn after_a_restart_a_batch_still_waits_for_its_records_to_be_durable() {
    let local = tempfile::tempdir().unwrap();
    let bucket = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let stores =
        [local.path().display().to_string(), format!("file://{}", bucket.path().display())];
    for store in stores {
        let run = |expect_durable_before_flush: usize| {
            let mut c = config(local.path());
            c.history.dir = store.clone();
            c.history.cache_dir = cache.path().display().to_string();
            c.history.flush_ms = 600_000; // no flush but the one this test makes
            let dropped = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let source = ReceiptSource { dropped: dropped.clone() };
            let runtime = Runtime::start(c, Box::new(source), Arc::new(Metrics::new())).unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            while runtime.metrics().history_records_appended.get() < 30 && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            std::thread::sleep(Duration::from_millis(300));
            assert_eq!(
                dropped.load(std::sync::atomic::Ordering::SeqCst),
                expect_durable_before_flush,
                "{store}: offsets would be committed before the records are durable"
            );
            runtime.history_store().unwrap().flush().unwrap();
            let deadline = Instant::now() + Duration::from_secs(5);
            while dropped.load(std::sync::atomic::Ordering::SeqCst) < 3 && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert_eq!(dropped.load(std::sync::atomic::Ordering::SeqCst), 3, "{store}");
            runtime.shutdown();
        };
        run(0);
        run(0);
    }
}

/// A metrics protocol's points reach history as columns (no JSON in between): the store holds
/// exactly the records the protocol's lines are, those `history.filter` keeps, whatever their
/// shape — several shapes in one batch, a tag named like the protocol's own part (a record),
/// strings, booleans and integers — and a malformed line is skipped.
#[test]
fn a_protocol_s_points_are_kept_as_the_records_they_are_through_a_history_filter() {
    use needle_history::ScanRequest;
    use needle_protocols::{Format, Precision};
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.history.time_field = "timestamp".into();
    config.history.filter = "host != 'skip'".into();
    let format = Format::Influx(Precision::Milliseconds);
    let source = TcpSource::bind("127.0.0.1:0", &SourceOptions::default())
        .unwrap()
        .with_format(Some(format));
    let addr = source.local_addr().unwrap();
    let metrics = Arc::new(Metrics::new());
    let runtime = Runtime::start(config, Box::new(source), metrics.clone()).unwrap();
    let now = 1_795_000_000_000i64;
    let mut lines = Vec::new();
    for i in 0..3_000i64 {
        let host = ["a", "b", "skip"][(i % 3) as usize];
        lines.push(match i % 5 {
            0 => format!("cpu,host={host} usage={}.5 {}", i, now + i),
            1 => format!("mem,host={host},region=eu used={}i,ok=true {}", i, now + i),
            2 => format!("cpu,host={host} usage={}i {}", i, now + i),
            3 => format!("log,host={host},timestamp=x msg=\"say \\\"hi\\\"\" {}", now + i),
            _ => format!("cpu,host={host} usage=1,usage=2 {}", now + i),
        });
    }
    let sent = lines.join("\n") + "\n";
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(sent.as_bytes()).unwrap();
    drop(stream);
    let want: Vec<String> = lines
        .iter()
        .filter_map(|line| format.parse_line(line.as_bytes(), 0).ok().flatten())
        .filter(|r| r.get("host").and_then(|h| h.as_str()) != Some("skip"))
        .map(|r| r.to_json())
        .collect();
    assert_eq!(want.len(), 1_600, "4 lines of 5 are points, 2 hosts of 3 kept");
    let deadline = Instant::now() + Duration::from_secs(20);
    while metrics.history_records_appended.get() < want.len() as u64 {
        assert!(Instant::now() < deadline, "{} appended", metrics.history_records_appended.get());
        std::thread::sleep(Duration::from_millis(20));
    }
    let store = runtime.history_store().unwrap();
    store.flush().unwrap();
    let scan = store
        .scan(&ScanRequest { from_ms: i64::MIN, to_ms: i64::MAX, ..Default::default() })
        .unwrap();
    let mut got: Vec<String> = scan
        .buffered
        .iter()
        .map(|r| r.record.clone())
        .chain(scan.blocks.iter().flat_map(|b| b.read().unwrap()).map(|r| r.record))
        .map(|r| r.to_json())
        .collect();
    let mut want = want;
    got.sort();
    want.sort();
    assert_eq!(got.len(), want.len());
    assert_eq!(got, want);
    assert_eq!(metrics.records_malformed.get(), 600, "the lines with a field twice");
    assert_eq!(metrics.bytes_read.get(), sent.len() as u64, "the protocol's bytes, as read");
    runtime.shutdown();
}
