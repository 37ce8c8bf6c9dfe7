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
