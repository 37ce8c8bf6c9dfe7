//! The runtime end to end in one process: records sent over a real TCP socket to the `tcp:`
//! source, queries submitted through `Runtime::submit`, results read from their queues.

use needle_engine::exec::Emission;
use needle_record::Validation;
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

fn config() -> NeedleConfig {
    let mut c = NeedleConfig::default();
    c.runtime.workers = 2;
    c.runtime.tick_ms = 20;
    c
}

/// The next emission, waiting up to `timeout`; `None` when the stream ended or time ran out.
fn next(results: &ResultQueue, timeout: Duration) -> Option<Emission> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        match results.try_next() {
            Some(result) => return result,
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    None
}

fn send(addr: SocketAddr, lines: &[String]) {
    let mut s = TcpStream::connect(addr).unwrap();
    for line in lines {
        writeln!(s, "{line}").unwrap();
    }
}

#[test]
fn a_needle_record_is_found_and_the_limit_ends_the_query() {
    let (runtime, addr) = start(config());
    let q = runtime
        .submit("SELECT id, n FROM STREAM(20000, TIME) WHERE id = 'needle' LIMIT 2", "t")
        .unwrap();
    // Let the workers see the query before the records arrive.
    std::thread::sleep(Duration::from_millis(100));
    let mut lines: Vec<String> = (0..500).map(|i| format!(r#"{{"id":"x{i}","n":{i}}}"#)).collect();
    lines[100] = r#"{"id":"needle","n":100}"#.into();
    lines[300] = r#"{"id":"needle","n":300}"#.into();
    send(addr, &lines);
    let e = next(&q.results, Duration::from_secs(10)).expect("the needles arrive");
    assert!(e.is_final, "LIMIT 2 reached ends the query");
    let json = e.to_json();
    let ns: Vec<i64> =
        json["records"].as_array().unwrap().iter().map(|r| r["n"].as_i64().unwrap()).collect();
    let mut sorted = ns.clone();
    sorted.sort();
    assert_eq!(sorted, [100, 300], "{json}");
    assert_eq!(json["records"][0].as_object().unwrap().len(), 2, "projected to id, n");
    assert!(next(&q.results, Duration::from_millis(200)).is_none(), "nothing after the final");
    // The query has left the registry; its last status is still told, as ended.
    let ended = |runtime: &Runtime| runtime.query(&q.id).is_some_and(|s| s.ended_ms.is_some());
    let deadline = Instant::now() + Duration::from_secs(2);
    while !ended(&runtime) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(ended(&runtime));
    assert!(runtime.queries().iter().all(|s| *s.id != *q.id), "not listed as running");
    runtime.shutdown();
}

#[test]
fn a_query_that_reaches_its_limit_leaves_the_workers_at_once_not_at_the_next_tick() {
    let mut c = config();
    c.runtime.tick_ms = 60_000;
    let (runtime, addr) = start(c);
    let q = runtime.submit("SELECT * FROM STREAM(60000, TIME) LIMIT 1", "t").unwrap();
    assert_eq!(runtime.matching_queries(), 1);
    // records keep coming: the workers must stop decoding them whole for the ended query
    let lines: Vec<String> = (0..200).map(|i| format!(r#"{{"id":"x{i}"}}"#)).collect();
    send(addr, &lines);
    let e = next(&q.results, Duration::from_secs(10)).expect("a record arrives");
    assert!(e.is_final, "LIMIT 1 reached ends the query");
    let deadline = Instant::now() + Duration::from_secs(5);
    while runtime.matching_queries() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(runtime.matching_queries(), 0, "removed long before the 60 s tick");
    runtime.shutdown();
}

#[test]
fn a_group_by_over_a_window_counts_every_record_once() {
    let mut c = config();
    c.query.min_window_emit_ms = 100;
    let (runtime, addr) = start(c);
    let q = runtime
        .submit("SELECT k, COUNT(*) AS c FROM STREAM(1500, TIME) GROUP BY k WINDOWING EVERY(300, TIME, ALL)", "t")
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let lines: Vec<String> = (0..3000).map(|i| format!(r#"{{"k":"k{}"}}"#, i % 3)).collect();
    send(addr, &lines);
    let mut last = None;
    let mut emissions = 0;
    while let Some(e) = next(&q.results, Duration::from_secs(10)) {
        emissions += 1;
        let done = e.is_final;
        last = Some(e);
        if done {
            break;
        }
    }
    let last = last.expect("emissions").to_json();
    assert!(emissions >= 3, "an EVERY window emits several times, got {emissions}");
    let total: i64 =
        last["records"].as_array().unwrap().iter().map(|r| r["c"].as_i64().unwrap()).sum();
    assert_eq!(total, 3000, "{last}");
    runtime.shutdown();
}

/// While every query is an aggregation the column path folds, lines are read column at a time
/// (the fields read gathered as columns); a line whose field changes type, and a RAW query
/// beside, send lines one by one through the matcher: the answers are the same either way.
#[test]
fn aggregations_read_lines_column_at_a_time_until_a_query_needs_records() {
    let (runtime, addr) = start(config());
    let metrics = runtime.metrics().clone();
    let text = "SELECT k, COUNT(*) AS c, SUM(v) AS s FROM STREAM(800, TIME) WHERE v > 1 GROUP BY k";
    let q = runtime.submit(text, "t").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let lines: Vec<String> =
        (0..3000).map(|i| format!(r#"{{"k":"k{}","v":{},"x":[1]}}"#, i % 3, i % 5)).collect();
    // the last: `v` a string (no longer the column's type), which fails the WHERE
    let changed = [r#"{"k":"k0","v":"many"}"#.to_owned()];
    send(addr, &[lines.as_slice(), &changed].concat());
    let last = std::iter::from_fn(|| next(&q.results, Duration::from_secs(10)))
        .find(|e| e.is_final)
        .expect("a final emission")
        .to_json();
    let by_k: Vec<(String, i64, f64)> = last["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (r["k"].as_str().unwrap().into(), r["c"].as_i64().unwrap(), r["s"].as_f64().unwrap())
        })
        .collect();
    let mut by_k = by_k;
    by_k.sort_by(|a, b| a.0.cmp(&b.0));
    let want: Vec<(String, i64, f64)> = (0..3)
        .map(|k| {
            let v: Vec<i64> =
                (0..3000).filter(|i| i % 3 == k && i % 5 > 1).map(|i| i % 5).collect();
            (format!("k{k}"), v.len() as i64, v.iter().sum::<i64>() as f64)
        })
        .collect();
    assert_eq!(by_k, want, "{last}");
    assert_eq!(metrics.records_by_columns.get(), 3000, "every line but the last by columns");
    // a RAW query beside: every line one by one
    let sum = runtime.submit("SELECT SUM(v) AS s FROM STREAM(800, TIME)", "t").unwrap();
    let raw =
        runtime.submit("SELECT * FROM STREAM(800, TIME) WHERE k = 'none' LIMIT 1", "t").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    send(addr, &lines);
    let last = std::iter::from_fn(|| next(&sum.results, Duration::from_secs(10)))
        .find(|e| e.is_final)
        .expect("a final emission")
        .to_json();
    assert_eq!(last["records"][0]["s"], 6000.0, "{last}");
    assert_eq!(metrics.records_by_columns.get(), 3000, "none by columns beside a RAW query");
    drop(raw);
    runtime.shutdown();
}

#[test]
fn a_killed_query_ends_with_a_final_emission_saying_so() {
    let (runtime, _addr) = start(config());
    let q = runtime.submit("SELECT COUNT(*) FROM STREAM(60000, TIME)", "t").unwrap();
    assert_eq!(runtime.queries().len(), 1);
    assert!(runtime.kill(&q.id));
    let e = next(&q.results, Duration::from_secs(5)).expect("a final emission");
    assert!(e.is_final);
    assert!(e.to_json_string().contains("killed"), "{}", e.to_json_string());
    assert!(!runtime.kill("no-such-query"));
    runtime.shutdown();
}

#[test]
fn limits_and_bad_queries_are_refused_with_reasons() {
    let mut c = config();
    c.runtime.max_queries = 2;
    c.server.max_queries_per_client = 1;
    let (runtime, _addr) = start(c);
    runtime.submit("SELECT * FROM STREAM(60000, TIME)", "alice").unwrap();
    match runtime.submit("SELECT * FROM STREAM(60000, TIME)", "alice") {
        Err(SubmitError::TooMany(reason)) => {
            assert!(reason.contains("max_queries_per_client"), "{reason}")
        }
        other => panic!("expected a per-client refusal, got {other:?}"),
    }
    runtime.submit("SELECT * FROM STREAM(60000, TIME)", "bob").unwrap();
    match runtime.submit("SELECT * FROM STREAM(60000, TIME)", "carol") {
        Err(SubmitError::TooMany(reason)) => {
            assert!(reason.contains("runtime.max_queries"), "{reason}")
        }
        other => panic!("expected a server-wide refusal, got {other:?}"),
    }
    match runtime.submit("SELECT * FORM STREAM()", "dave") {
        Err(SubmitError::Invalid { error, text }) => {
            assert_eq!(error.line_column(&text), (1, 10));
        }
        other => panic!("expected an invalid query, got {other:?}"),
    }
    runtime.shutdown();
}

#[test]
fn malformed_records_are_counted_and_skipped_while_queries_go_on() {
    let (runtime, addr) = start(config());
    let q = runtime.submit("SELECT COUNT(*) AS c FROM STREAM(60000, TIME)", "t").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let lines: Vec<String> = (0..100)
        .map(|i| if i % 10 == 0 { "{not json".to_string() } else { format!(r#"{{"i":{i}}}"#) })
        .chain(["[1,2]".to_string(), "\"str\"".to_string()])
        .collect();
    send(addr, &lines);
    let deadline = Instant::now() + Duration::from_secs(5);
    while runtime.metrics().records_read.get() < 102 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(runtime.metrics().records_malformed.get(), 12);
    assert!(runtime.kill(&q.id));
    let e = next(&q.results, Duration::from_secs(5)).expect("final");
    assert_eq!(e.to_json()["records"][0]["c"], 90);
    runtime.shutdown();
}

/// `runtime.validate`: the whole line (the default) or only the fields queries read.
#[test]
fn checking_only_the_fields_read_accepts_lines_broken_elsewhere_and_still_refuses_garbage() {
    for (validate, expected_matches, expected_malformed) in
        [(Validation::Line, 1, 4), (Validation::Fields, 2, 3)]
    {
        let mut c = config();
        c.runtime.validate = validate;
        let (runtime, addr) = start(c);
        let q = runtime
            .submit("SELECT id FROM STREAM(60000, TIME) WHERE id = 'needle' LIMIT 10", "t")
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let pad = "x".repeat(needle_record::STREAM_MAX_BYTES);
        let lines = [
            r#"{"id":"needle","n":1}"#.to_owned(),
            // a long line broken after the field read: malformed for a whole-line check only
            format!(r#"{{"id":"needle","pad":"{pad}","n":tru}}"#),
            // a short line is read whole either way
            r#"{"id":"needle","n":tru}"#.to_owned(),
            r#"{"id":"nee"#.to_owned(),
            "not json at all".to_owned(),
            r#"{"n":1}"#.to_owned(),
        ];
        send(addr, &lines);
        let deadline = Instant::now() + Duration::from_secs(5);
        while runtime.metrics().records_read.get() < 6 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(runtime.metrics().records_malformed.get(), expected_malformed, "{validate:?}");
        assert!(runtime.kill(&q.id));
        let mut found = 0;
        while let Some(e) = next(&q.results, Duration::from_secs(5)) {
            found += e.to_json()["records"].as_array().unwrap().len();
            if e.is_final {
                break;
            }
        }
        assert_eq!(found, expected_matches, "{validate:?}");
        runtime.shutdown();
    }
}

#[test]
fn shutdown_ends_running_queries_with_a_final_message() {
    let (runtime, addr) = start(config());
    let q = runtime.submit("SELECT COUNT(*) AS c FROM STREAM(60000, TIME)", "t").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    send(addr, &(0..10).map(|i| format!(r#"{{"i":{i}}}"#)).collect::<Vec<_>>());
    std::thread::sleep(Duration::from_millis(200));
    runtime.shutdown();
    let e = next(&q.results, Duration::from_secs(5)).expect("final");
    assert!(e.is_final);
    let json = e.to_json();
    assert_eq!(json["records"][0]["c"], 10, "what was read before shutdown is counted: {json}");
    assert!(json.to_string().contains("shut down"), "{json}");
    assert!(matches!(
        runtime.submit("SELECT * FROM STREAM()", "t"),
        Err(SubmitError::ShuttingDown)
    ));
}

#[test]
fn a_raw_query_is_held_to_its_records_per_second() {
    let mut c = config();
    c.runtime.raw_records_per_sec = 50;
    let (runtime, addr) = start(c);
    let q = runtime
        .submit(
            "SELECT i FROM STREAM(60000, TIME) WINDOWING EVERY(1, RECORD, FIRST, 1, RECORD)",
            "t",
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    send(addr, &(0..200).map(|i| format!(r#"{{"i":{i}}}"#)).collect::<Vec<_>>());
    std::thread::sleep(Duration::from_millis(300));
    let mut records = 0;
    while let Some(Some(e)) = q.results.try_next() {
        records += e.records.len();
    }
    assert_eq!(records, 50, "one second's worth of records");
    assert_eq!(runtime.metrics().raw_records_rate_limited.get(), 150);
    runtime.shutdown();
}

/// A RAW query whose subscriber does not read loses emissions past its buffer; from then on the
/// workers keep none of its records for a tick at a time (they count them, as dropped) rather
/// than copy records that would be dropped at its queue. Every record is still counted matched.
#[test]
fn a_raw_query_nobody_reads_sheds_records_at_the_workers() {
    let mut c = config();
    c.runtime.subscriber_buffer = 2;
    let (runtime, addr) = start(c);
    let q = runtime
        .submit(
            "SELECT i FROM STREAM(60000, TIME) WINDOWING EVERY(1, RECORD, FIRST, 1, RECORD)",
            "t",
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    // a steady stream, 10 records every 2 ms: once its queue drops, the workers shed
    let mut s = TcpStream::connect(addr).unwrap();
    for i in 0..1_000 {
        writeln!(s, r#"{{"i":{i}}}"#).unwrap();
        if i % 10 == 9 {
            s.flush().unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    drop(s);
    std::thread::sleep(Duration::from_millis(200));
    runtime.kill(&q.id);
    let mut last = None;
    while let Some(e) = next(&q.results, Duration::from_secs(5)) {
        last = Some(e);
    }
    let last = last.expect("the final emission");
    let stats = &last.meta["Stats"];
    assert_eq!(stats["Records Matched"], 1_000, "{stats}");
    let dropped = stats["Records Dropped"].as_u64().unwrap();
    assert!(dropped > 0, "records shed at the workers are counted dropped: {stats}");
    runtime.shutdown();
}

/// Workers count records once for all queries (the index skips queries a record cannot match):
/// a query that matched nothing has still seen every record read while it ran.
#[test]
fn records_seen_counts_records_the_index_skipped() {
    let (runtime, addr) = start(config());
    let q = runtime
        .submit("SELECT COUNT(*) AS n FROM STREAM(20000, TIME) WHERE id = 'absent'", "t")
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let lines: Vec<String> = (0..500).map(|i| format!(r#"{{"id":"x{i}","n":{i}}}"#)).collect();
    send(addr, &lines);
    let deadline = Instant::now() + Duration::from_secs(5);
    while runtime.query(&q.id).is_none_or(|s| s.records_seen < 500) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(runtime.query(&q.id).unwrap().records_seen, 500);
    assert!(runtime.kill(&q.id));
    let e = next(&q.results, Duration::from_secs(5)).expect("the final emission");
    let json = e.to_json();
    assert_eq!(json["meta"]["Stats"]["Records Seen"], 500, "{json}");
    assert_eq!(json["records"][0]["n"], 0, "{json}");
    runtime.shutdown();
}

/// A batch of queries is answered in order (a bad one among them refused alone), and queries
/// that end together (one record completes them all) each get their result and all leave.
#[test]
fn a_batch_of_queries_starts_together_and_ends_together() {
    let (runtime, addr) = start(config());
    let mut texts: Vec<String> = (0..300)
        .map(|_| "SELECT id FROM STREAM(20000, TIME) WHERE id = 'needle' LIMIT 1".to_owned())
        .collect();
    texts[7] = "SELECT FROM".into();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let answers = runtime.submit_many(&refs, "t");
    assert_eq!(answers.len(), 300);
    assert!(matches!(answers[7], Err(SubmitError::Invalid { .. })));
    let handles: Vec<_> = answers.into_iter().filter_map(Result::ok).collect();
    assert_eq!(handles.len(), 299);
    assert_eq!(runtime.queries().len(), 299);
    std::thread::sleep(Duration::from_millis(100));
    send(addr, &[r#"{"id":"needle"}"#.to_owned()]);
    for handle in &handles {
        let e = next(&handle.results, Duration::from_secs(10)).expect("every query finds it");
        assert!(e.is_final && e.records.len() == 1);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while runtime.metrics().queries_active.get() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(runtime.metrics().queries_active.get(), 0);
    assert!(runtime.queries().is_empty());
    runtime.shutdown();
}

/// A running query's status counts the records read since it started, and those it matched,
/// while it waits (the status table is brought up to date for the queries that changed, the
/// live records counted when it is read); once it ended, the counts stay.
#[test]
fn a_waiting_query_s_status_counts_what_it_saw_and_matched() {
    let (runtime, addr) = start(config());
    let handle = runtime
        .submit("SELECT * FROM STREAM(60000, TIME) WHERE id = 'needle' LIMIT 5", "t")
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let mut lines: Vec<String> = (0..40).map(|i| format!(r#"{{"id":"hay-{i}"}}"#)).collect();
    lines.push(r#"{"id":"needle"}"#.to_owned());
    send(addr, &lines);
    let status = |id: &str| runtime.query(id).expect("known");
    let deadline = Instant::now() + Duration::from_secs(10);
    while (status(&handle.id).records_seen, status(&handle.id).records_matched) != (41, 1)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let running = status(&handle.id);
    assert_eq!((running.records_seen, running.records_matched), (41, 1));
    assert!(running.ended_ms.is_none());
    assert!(runtime.kill(&handle.id));
    let deadline = Instant::now() + Duration::from_secs(10);
    while status(&handle.id).ended_ms.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    send(addr, &lines);
    std::thread::sleep(Duration::from_millis(300));
    let ended = status(&handle.id);
    assert!(ended.ended_ms.is_some());
    assert_eq!((ended.records_seen, ended.records_matched), (41, 1), "the counts stay");
}

/// A worker node's outlet that keeps nothing (the test reads the node's own status table).
struct Discard;

impl needle_runtime::remote::PartialOutlet for Discard {
    fn partial(&self, _id: &str, _bytes: Vec<u8>) {}
    fn progress(&self, _records: u64, _receipts: Vec<needle_runtime::framing::Receipt>) {}
    fn history(&self, _id: &str, _event: needle_runtime::history::WorkerHistory<Vec<u8>>) {}
}

/// On a worker node, an adopted query's status counts the records the node read after it was
/// adopted (not those before), and what it matched.
#[test]
fn a_worker_node_s_status_counts_the_records_read_since_a_query_was_adopted() {
    let source = TcpSource::bind("127.0.0.1:0", &SourceOptions::default()).unwrap();
    let addr = source.local_addr().unwrap();
    let role = needle_runtime::remote::Role::Worker(Arc::new(Discard));
    let runtime = Runtime::start_role(config(), role, Arc::new(Metrics::new())).unwrap();
    runtime.run_source(Box::new(source)).unwrap();
    let hay: Vec<String> = (0..30).map(|i| format!(r#"{{"id":"hay-{i}"}}"#)).collect();
    let seen = |id: &str| runtime.query(id).map(|s| (s.records_seen, s.records_matched));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let adopt = |id: &str| {
        let plan = needle_query::compile(
            "SELECT * FROM STREAM(60000, TIME) WHERE id = 'needle'",
            &needle_query::QueryConfig::default(),
        )
        .unwrap();
        let query = Arc::new(needle_engine::CompiledQuery::compile(&plan).unwrap());
        runtime.adopt(id, query, "t", now, now + 60_000);
    };
    // 30 records read before the second query is adopted: the first one's, not the second's
    adopt("w-0");
    send(addr, &hay);
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen("w-0") != Some((30, 0)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(seen("w-0"), Some((30, 0)));
    adopt("w-1");
    let mut lines = hay[..10].to_vec();
    lines.push(r#"{"id":"needle"}"#.to_owned());
    send(addr, &lines);
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen("w-1") != Some((11, 1)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(seen("w-1"), Some((11, 1)), "the 11 records read since, the needle matched");
    assert_eq!(seen("w-0"), Some((41, 1)), "the first query saw all 41");
}
