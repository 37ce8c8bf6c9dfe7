//! HTTP writes (`needle serve --source http` or `--ingest`): the real binary, written to over
//! real HTTP as the agents write (InfluxDB line protocol on `/api/v2/write` and `/write`, JSON
//! lines on `/api/v1/records`, OpenTSDB on `/api/put`, Prometheus remote write on
//! `/api/v1/write`), then queried.

mod common;

use common::Serve;
use reqwest::blocking::Client;
use serde_json::Value;
use std::time::{Duration, Instant};

fn write(url: &str, token: Option<&str>, body: &[u8]) -> (u16, Option<Value>) {
    let mut request = Client::new().post(url).body(body.to_vec());
    if let Some(token) = token {
        request = request.header("Authorization", token);
    }
    let r = request.send().unwrap();
    let status = r.status().as_u16();
    let text = r.text().unwrap();
    (status, (!text.is_empty()).then(|| serde_json::from_str(&text).expect(&text)))
}

/// Runs `query` on a thread, waiting until the server lists it before returning.
fn query_in_background(
    server: &Serve,
    query: &'static str,
) -> std::thread::JoinHandle<(u16, Value)> {
    let url = format!("{}/api/v1/query", server.url);
    let running = std::thread::spawn(move || {
        let r = Client::new().post(url).body(query).send().unwrap();
        (r.status().as_u16(), r.json().unwrap())
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listed: Value = server.get("/api/v1/queries").json().unwrap();
        if !listed["queries"].as_array().unwrap().is_empty() {
            return running;
        }
        assert!(Instant::now() < deadline, "the query did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn points_written_over_http_are_queried_and_bad_lines_are_skipped_and_counted() {
    let server = Serve::start(&["--workers", "2", "--source", "http"]);
    assert_eq!(server.source, "source: HTTP writes");
    let running = query_in_background(
        &server,
        "SELECT host, SUM(usage) AS total, COUNT(*) AS n FROM STREAM(3000, TIME) \
         WHERE measurement = 'cpu' GROUP BY host",
    );
    // InfluxDB 2's API, seconds; org and bucket are accepted and ignored; a bad line skipped
    let v2 = format!("{}/api/v2/write?org=o&bucket=b&precision=s", server.url);
    let lines =
        "cpu,host=a usage=1.5 1700000000\ncpu,host=a usage=broken\ncpu,host=b usage=2 1700000000\n";
    assert_eq!(write(&v2, None, lines.as_bytes()), (204, None));
    // InfluxDB 1's, nanoseconds by default, a db accepted and ignored
    let v1 = format!("{}/write?db=telegraf", server.url);
    assert_eq!(write(&v1, None, b"cpu,host=a usage=3 1700000000000000000"), (204, None));
    // JSON lines, as any source reads them
    let records = format!("{}/api/v1/records", server.url);
    let json = b"{\"measurement\": \"cpu\", \"host\": \"b\", \"usage\": 10}\n[not an object]\n";
    assert_eq!(write(&records, None, json), (204, None));

    let (status, body) = running.join().unwrap();
    assert_eq!(status, 200, "{body}");
    let mut rows: Vec<(String, f64, i64)> = body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["host"].as_str().unwrap().into(),
                r["total"].as_f64().unwrap(),
                r["n"].as_i64().unwrap(),
            )
        })
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(rows, [("a".into(), 4.5, 2), ("b".into(), 12.0, 2)], "{body}");
    let malformed = |protocol: &str| {
        server.metric(&format!("needle_protocol_lines_malformed_total{{protocol=\"{protocol}\"}}"))
    };
    assert_eq!((malformed("influx"), malformed("json")), (1.0, 1.0));
    assert!(server.log().contains("skipped malformed line 2"), "{}", server.log());

    // a body whose every line is bad is refused, naming the first bad line
    let (status, error) = write(&v2, None, b"\n# comment\nno fields here\nnor here");
    assert_eq!(status, 400);
    assert_eq!(error.as_ref().unwrap()["line"], 3, "{error:?}");
    // and one with no point at all
    let (status, error) = write(&records, None, b"\n\n");
    assert_eq!(status, 400);
    assert!(error.unwrap()["error"].as_str().unwrap().contains("no points"));
    // so are a body that is not UTF-8 and an unknown precision
    assert_eq!(write(&v1, None, b"cpu usage=1 \xff\xfe").0, 400);
    let (status, error) = write(&format!("{}/write?precision=h", server.url), None, b"cpu usage=1");
    assert_eq!(status, 400);
    assert!(error.unwrap()["error"].as_str().unwrap().contains("precision"));
    // one above server.max_request_bytes (1 MiB)
    let big = "cpu usage=1\n".repeat(100_000);
    assert_eq!(write(&v2, None, big.as_bytes()).0, 413);
    // gzip, as Telegraf's influxdb_v2 output sends it: a body that is not gzip gets 400, one
    // that decompresses past the limit 413, another encoding 415
    let encoded = |encoding: &str, body: Vec<u8>| {
        let r = Client::new().post(&v2).header("Content-Encoding", encoding).body(body);
        r.send().unwrap().status().as_u16()
    };
    assert_eq!(encoded("gzip", vec![0x1f, 0x8b]), 400);
    assert_eq!(encoded("gzip", gzip(big.as_bytes())), 413);
    assert_eq!(encoded("br", b"cpu usage=1".to_vec()), 415);
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

#[test]
fn gzipped_bodies_are_read_as_telegraf_sends_them() {
    let server = Serve::start(&["--workers", "1", "--source", "http"]);
    let running = query_in_background(
        &server,
        "SELECT COUNT(*) AS n, SUM(usage) AS total FROM STREAM(3000, TIME) WHERE measurement = 'cpu'",
    );
    let lines: String = (0..1000).map(|i| format!("cpu,host=h{} usage={i}\n", i % 7)).collect();
    let body = gzip(lines.as_bytes());
    assert!(body.len() < lines.len() / 3);
    let r = Client::new()
        .post(format!("{}/api/v2/write", server.url))
        .header("Content-Encoding", "gzip")
        .body(body)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    let records = format!("{}/api/v1/records", server.url);
    let json = gzip(b"{\"measurement\": \"cpu\", \"usage\": 0.5}\n");
    let r = Client::new().post(records).header("Content-Encoding", "gzip").body(json);
    assert_eq!(r.send().unwrap().status().as_u16(), 204);
    let (status, body) = running.join().unwrap();
    assert_eq!(status, 200, "{body}");
    let row = &body["records"][0];
    assert_eq!((row["n"].as_i64(), row["total"].as_f64()), (Some(1001), Some(499_500.5)), "{body}");
}

#[test]
fn writes_are_refused_until_enabled_and_taken_beside_another_source_with_ingest() {
    let plain = Serve::start(&["--workers", "1", "--source", "gen:small?rate=100"]);
    for path in ["/api/v2/write", "/write", "/api/v1/records"] {
        let (status, error) = write(&format!("{}{path}", plain.url), None, b"cpu usage=1");
        assert_eq!(status, 409, "{path}");
        let hint = error.unwrap()["hint"].as_str().unwrap().to_owned();
        assert!(hint.contains("--ingest") && hint.contains("--source http"), "{hint}");
    }
    drop(plain);

    let server = Serve::start(&["--workers", "1", "--ingest", "--source", "gen:small?rate=100"]);
    assert!(server.source.ends_with("and HTTP writes"), "{}", server.source);
    let running = query_in_background(
        &server,
        "SELECT COUNT(*) AS n, SUM(value) AS v FROM STREAM(2000, TIME) \
         WHERE measurement = 'written'",
    );
    let v2 = format!("{}/api/v2/write?precision=ms", server.url);
    assert_eq!(write(&v2, None, b"written value=7i 1700000000000").0, 204);
    let (status, body) = running.join().unwrap();
    assert_eq!(status, 200, "{body}");
    let written = &body["records"][0];
    assert_eq!((written["n"].as_i64(), written["v"].as_f64()), (Some(1), Some(7.0)), "{body}");
}

#[test]
fn with_tokens_writes_need_one_whose_scopes_include_write() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("needle.toml");
    std::fs::write(
        &config,
        r#"[server]
tokens = [{ name = "agent", token = "w-secret", scopes = ["write"] },
          { name = "ops", token = "a-secret", scopes = ["admin"] }]
"#,
    )
    .unwrap();
    let mut server =
        Serve::start(&["--workers", "1", "--source", "http", "--config", config.to_str().unwrap()]);
    let url = format!("{}/api/v2/write", server.url);
    let line = b"cpu usage=1";
    assert_eq!(write(&url, None, line).0, 401);
    assert_eq!(write(&url, Some("Bearer nope"), line).0, 401);
    // admin includes read and query, not write
    let (status, error) = write(&url, Some("Bearer a-secret"), line);
    assert_eq!(status, 403);
    assert!(error.unwrap()["error"].as_str().unwrap().contains("'write'"));
    assert_eq!(write(&url, Some("Bearer w-secret"), line), (204, None));
    // as InfluxDB 2's clients send it
    assert_eq!(write(&url, Some("Token w-secret"), line), (204, None));
    // a write token reads nothing
    let r = Client::new()
        .get(format!("{}/api/v1/queries", server.url))
        .bearer_auth("w-secret")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    // the server holding the workers' only way in still stops cleanly
    assert!(server.terminate(Duration::from_secs(15)).success(), "{}", server.log());
}

#[test]
fn opentsdb_data_points_are_written_and_bad_ones_detailed() {
    let server = Serve::start(&["--workers", "1", "--source", "http"]);
    let running = query_in_background(
        &server,
        "SELECT metric, host, value, timestamp FROM STREAM(2000, TIME) \
         WHERE metric = 'sys.cpu.user' LIMIT 10",
    );
    let put = format!("{}/api/put?details", server.url);
    // one bad point among good ones: the good ones are written, the bad one detailed
    let points = serde_json::json!([
        {"metric": "sys.cpu.user", "timestamp": 1356998400, "value": 42.5, "tags": {"host": "web01"}},
        {"metric": "sys.cpu.user", "timestamp": 1356998400, "value": "abc", "tags": {"host": "web02"}},
        {"metric": "sys.cpu.user", "timestamp": 1356998400123u64, "value": 7, "tags": {"host": "web03"}}
    ]);
    let (status, details) = write(&put, None, points.to_string().as_bytes());
    assert_eq!(status, 400);
    let details = details.unwrap();
    assert_eq!((&details["success"], &details["failed"]), (&2.into(), &1.into()), "{details}");
    assert_eq!(details["errors"][0]["datapoint"]["value"], "abc", "{details}");
    // one point, not in an array
    let point = serde_json::json!({"metric": "sys.cpu.user", "timestamp": 1356998401, "value": 1});
    assert_eq!(write(&put, None, point.to_string().as_bytes()), (204, None));
    // a body that is not data points
    let (status, error) = write(&put, None, b"put sys.cpu.user 1356998400 1");
    assert_eq!(status, 400);
    assert!(error.unwrap()["error"].as_str().unwrap().contains("not JSON"));

    let (status, body) = running.join().unwrap();
    assert_eq!(status, 200, "{body}");
    let mut rows = body["records"].as_array().unwrap().clone();
    rows.sort_by_key(|r| r["timestamp"].as_i64());
    let expected = serde_json::json!([
        {"metric": "sys.cpu.user", "host": "web01", "value": 42.5, "timestamp": 1356998400000u64},
        {"metric": "sys.cpu.user", "host": "web03", "value": 7, "timestamp": 1356998400123u64},
        {"metric": "sys.cpu.user", "host": null, "value": 1, "timestamp": 1356998401000u64},
    ]);
    assert_eq!(Value::Array(rows), expected, "{body}");
    let malformed = server.metric("needle_protocol_lines_malformed_total{protocol=\"opentsdb\"}");
    assert_eq!(malformed, 1.0);
}

/// Prometheus remote write 1.0, as Prometheus sends it (snappy, protobuf, its headers): one
/// record a sample; a stale marker skipped, a series without `__name__` counted as malformed;
/// a body that is not remote write refused with 400 (Prometheus does not send it again).
#[test]
fn prometheus_remote_write_samples_are_records_of_their_labels() {
    use needle_protocols::remote_write::{encode, TimeSeries, WriteRequest};
    let server = Serve::start(&["--workers", "1", "--source", "http"]);
    let running = query_in_background(
        &server,
        "SELECT instance, COUNT(*) AS n, SUM(value) AS total FROM STREAM(3000, TIME) \
         WHERE __name__ = 'up' GROUP BY instance",
    );
    let series = TimeSeries::of;
    let request = WriteRequest {
        timeseries: vec![
            series(
                &[("__name__", "up"), ("instance", "a"), ("job", "node")],
                &[(1.0, 1), (1.0, 2)],
            ),
            series(
                &[("__name__", "up"), ("instance", "b"), ("job", "node")],
                &[(0.0, 1), (f64::NAN, 2)],
            ),
            series(&[("job", "nameless")], &[(5.0, 1)]),
        ],
    };
    let url = format!("{}/api/v1/write", server.url);
    let sent = Client::new()
        .post(&url)
        .header("Content-Encoding", "snappy")
        .header("Content-Type", "application/x-protobuf")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .body(encode(&request))
        .send()
        .unwrap();
    assert_eq!(sent.status().as_u16(), 204);
    let (status, refused) = write(&url, None, b"not snappy protobuf");
    assert_eq!(status, 400, "{refused:?}");
    assert!(refused.unwrap()["error"].as_str().unwrap().contains("remote write"));

    let (status, body) = running.join().unwrap();
    assert_eq!(status, 200, "{body}");
    let mut rows: Vec<(String, i64, f64)> = body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let instance = r["instance"].as_str().unwrap().to_owned();
            (instance, r["n"].as_i64().unwrap(), r["total"].as_f64().unwrap())
        })
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(rows, vec![("a".to_owned(), 2, 2.0), ("b".to_owned(), 1, 0.0)], "{body}");
    let metrics = server.get("/metrics").text().unwrap();
    assert!(
        metrics.contains(r#"needle_protocol_lines_malformed_total{protocol="remote_write"} 1"#),
        "{metrics}"
    );
}

/// A store's rows in file order, as DuckDB reads them (`host`, `timestamp`), with the
/// partition directory each came from.
const DUCKDB_ROWS: &str = r#"
import sys
import duckdb
rows = duckdb.sql(f"""SELECT regexp_extract(filename, 'p=([0-9]+)', 1), host, "timestamp"
    FROM read_parquet('{sys.argv[1]}/**/*.parquet', filename = true)""").fetchall()
for r in rows:
    print(*r)
"#;

#[test]
fn with_history_on_points_are_timed_by_their_timestamp_and_kept_series_by_series() {
    let store = tempfile::tempdir().unwrap();
    let mut server = Serve::start(&[
        "--workers",
        "1",
        "--source",
        "http",
        "--history",
        store.path().to_str().unwrap(),
    ]);
    // three series interleaved, as an agent sends them, an hour in 2023 (seconds)
    let mut lines = String::new();
    for t in 0..20 {
        for host in ["c", "a", "b"] {
            lines.push_str(&format!("cpu,host={host} usage={t} {}\n", 1_700_000_000 + t));
        }
    }
    let v2 = format!("{}/api/v2/write?precision=s", server.url);
    assert_eq!(write(&v2, None, lines.as_bytes()), (204, None));
    assert!(server.terminate(Duration::from_secs(20)).success());

    let out = std::process::Command::new("python3")
        .args(["-c", DUCKDB_ROWS, store.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<Vec<String>> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split(' ').map(str::to_owned).collect())
        .collect();
    let mut want = Vec::new();
    for host in ["a", "b", "c"] {
        for t in 0..20 {
            // the partition of the point's own hour, not of the time it arrived
            let hour = (1_700_000_000_000i64 / 3_600_000 * 3_600_000).to_string();
            want.push(vec![hour, host.to_owned(), (1_700_000_000_000i64 + t * 1000).to_string()]);
        }
    }
    assert_eq!(rows, want);
}

/// Influx lines of `points` points of one measurement, one host of 50 a point.
fn influx_lines(measurement: &str, points: usize) -> String {
    (0..points)
        .map(|i| format!("{measurement},host=h{} usage={i} {}\n", i % 50, 1_000 + i))
        .collect()
}

#[test]
fn writers_that_outrun_the_workers_are_slowed_or_told_to_retry_and_nothing_taken_is_lost() {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("needle.toml");
    let store = dir.path().join("history");
    // one worker and a queue of one batch: the workers fall behind at once
    std::fs::write(
        &config,
        format!(
            "[runtime]\nworkers = 1\nqueue_batches = 1\n[history]\ndir = {:?}\nflush_ms = 200\n",
            store.to_str().unwrap()
        ),
    )
    .unwrap();
    let mut server = Serve::start(&[
        "--config",
        config.to_str().unwrap(),
        "--ingest",
        "--source",
        "tcp:127.0.0.1:0?format=influx&precision=ms",
    ]);
    let tcp = server.source.split(" on ").nth(1).unwrap().split(' ').next().unwrap().to_owned();
    // queries that make every record cost the one worker: a regular expression is matched
    // record by record (a WHERE over whole columns, or none, went by so fast that whether the
    // writers ever outran the worker depended on how busy the machine was)
    let queries: Vec<_> = (0..60)
        .map(|_| {
            let url = format!("{}/api/v1/query", server.url);
            std::thread::spawn(move || {
                let q = "SELECT host, COUNT(*) AS n, AVG(usage) AS a FROM STREAM(60000, TIME) \
                         WHERE host RLIKE '^h[0-9]+$' GROUP BY host";
                let _ = Client::new().post(url).body(q).timeout(Duration::from_secs(90)).send();
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.metric("needle_queries_active") < 60.0 {
        assert!(Instant::now() < deadline, "the queries did not start");
        std::thread::sleep(Duration::from_millis(50));
    }

    // a TCP writer sending as fast as its socket lets it: stalls when needle stops reading
    let stalls = Arc::new(AtomicU64::new(0));
    const TCP_POINTS: usize = 200_000;
    let tcp_writer = {
        let stalls = stalls.clone();
        std::thread::spawn(move || {
            let bytes = influx_lines("tcp", TCP_POINTS).into_bytes();
            let mut socket = std::net::TcpStream::connect(&tcp).unwrap();
            socket.set_nonblocking(true).unwrap();
            let mut sent = 0;
            while sent < bytes.len() {
                match socket.write(&bytes[sent..]) {
                    Ok(n) => sent += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        stalls.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        })
    };
    // HTTP writers: each request taken whole (204) or not at all (503, Retry-After)
    const BODY_POINTS: u64 = 10_000;
    let taken = Arc::new(AtomicU64::new(0));
    let retries = Arc::new(AtomicU64::new(0));
    let http_writers: Vec<_> = (0..3)
        .map(|_| {
            let (taken, retries) = (taken.clone(), retries.clone());
            let url = format!("{}/api/v2/write?precision=ms", server.url);
            std::thread::spawn(move || {
                let body = influx_lines("http", BODY_POINTS as usize);
                for _ in 0..8 {
                    let r = Client::new()
                        .post(&url)
                        .body(body.clone())
                        .timeout(Duration::from_secs(60))
                        .send()
                        .unwrap();
                    match r.status().as_u16() {
                        204 => _ = taken.fetch_add(BODY_POINTS, Ordering::Relaxed),
                        503 => {
                            assert_eq!(r.headers()["retry-after"], "1");
                            retries.fetch_add(1, Ordering::Relaxed);
                        }
                        other => panic!("{other}: {}", r.text().unwrap()),
                    }
                }
            })
        })
        .collect();
    // memory stays bounded while they push: the queue holds one batch, the heap stays small
    let writing = Arc::new(AtomicBool::new(true));
    let watcher = {
        let (writing, url) = (writing.clone(), server.url.clone());
        std::thread::spawn(move || {
            let mut peak: (f64, f64) = (0.0, 0.0);
            while writing.load(Ordering::Relaxed) {
                let text = Client::new().get(format!("{url}/metrics")).send().unwrap().text();
                let value = |name: &str| {
                    let text = text.as_ref().unwrap();
                    let line = text.lines().find(|l| l.starts_with(&format!("{name} ")));
                    line.and_then(|l| l.split(' ').nth(1)?.parse::<f64>().ok()).unwrap_or(0.0)
                };
                peak.0 = peak.0.max(value("needle_source_queue_depth"));
                peak.1 = peak.1.max(value("needle_heap_allocated_bytes"));
                std::thread::sleep(Duration::from_millis(20));
            }
            peak
        })
    };
    tcp_writer.join().unwrap();
    for writer in http_writers {
        writer.join().unwrap();
    }
    writing.store(false, Ordering::Relaxed);
    let (queue_peak, heap_peak) = watcher.join().unwrap();

    let (taken, retries, stalls) = (
        taken.load(Ordering::Relaxed),
        retries.load(Ordering::Relaxed),
        stalls.load(Ordering::Relaxed),
    );
    eprintln!("{taken} points taken over HTTP, {retries} requests refused, {stalls} TCP stalls, at most {queue_peak} batches queued and {heap_peak} bytes allocated");
    assert!(retries > 0, "no write was told to retry: the workers were never behind");
    assert!(stalls > 0, "the TCP writer was never slowed");
    assert!(taken > 0, "no write was taken");
    assert!(queue_peak <= 1.0, "{queue_peak} batches queued");
    assert!(heap_peak < 512.0 * 1024.0 * 1024.0, "{heap_peak} bytes allocated");
    // every point taken reaches the workers and history, once; nothing refused does
    let want = TCP_POINTS as f64 + taken as f64;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let kept = server.metric("needle_history_records_appended_total");
        let matched = server.metric("needle_records_read_total");
        assert!(kept <= want && matched <= want, "{kept} kept, {matched} read, {want} taken");
        if kept == want && matched == want {
            break;
        }
        assert!(Instant::now() < deadline, "{kept} kept, {matched} read, of {want} taken");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(server.terminate(Duration::from_secs(30)).success());
    for query in queries {
        query.join().unwrap();
    }
}

/// Line protocol over HTTP is kept in history as columns, and what a flush made durable stays:
/// a server killed with SIGKILL while a writer still sends leaves a store that opens whole and
/// holds every point flushed before the kill, each once (a prefix of what was sent, counted and
/// summed: COUNT DISTINCT is a sketch's estimate).
#[test]
fn a_server_killed_mid_write_keeps_every_flushed_point_once() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const T0: i64 = 1_700_000_000_000;
    let lines = |from: usize, to: usize| -> String {
        (from..to)
            .map(|i| format!("cpu,host=h{} id={i}i,usage={i}.5 {}\n", i % 50, T0 + i as i64))
            .collect()
    };
    let store = tempfile::tempdir().unwrap();
    let store_arg = store.path().to_str().unwrap().to_owned();
    let mut server = Serve::start(&["--workers", "1", "--source", "http", "--history", &store_arg]);
    let v2 = format!("{}/api/v2/write?precision=ms", server.url);
    for request in 0..20 {
        let body = lines(request * 1_000, (request + 1) * 1_000);
        assert_eq!(write(&v2, None, body.as_bytes()), (204, None));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.metric("needle_history_records_written") < 20_000.0 {
        assert!(Instant::now() < deadline, "the points were not flushed: {}", server.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // a writer goes on; the server is killed under it
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut request = 20;
            while !stop.load(Ordering::SeqCst) {
                let body = lines(request * 1_000, (request + 1) * 1_000);
                let sent = Client::new().post(&v2).body(body).send();
                if sent.is_err() {
                    break;
                }
                request += 1;
            }
        })
    };
    std::thread::sleep(Duration::from_millis(700));
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();

    let ask = |select: &str| -> Value {
        let query = format!("SELECT {select} FROM HISTORY({T0}, {})", T0 + 10_000_000);
        let out = common::needle(&["query", "--history", &store_arg, "--format", "json", &query]);
        let answer: Value = common::stdout(&out)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .next_back()
            .expect("an answer");
        answer["records"][0].clone()
    };
    // points are appended in the order they came: what is durable is ids 0..n, each once
    let row = ask("COUNT(*) AS n, MIN(id) AS lo, MAX(id) AS hi, SUM(id) AS total");
    let n = row["n"].as_i64().unwrap();
    assert!(n >= 20_000, "the flushed points are kept: {row}");
    assert_eq!((row["lo"].as_i64(), row["hi"].as_i64()), (Some(0), Some(n - 1)), "{row}");
    assert_eq!(row["total"].as_f64(), Some((n * (n - 1) / 2) as f64), "each point once: {row}");
    assert_eq!(row["lo"], 0, "{row}");
}
