//! The library's front door end to end: events pushed from code (typed, records, JSON) through
//! real queries, a source attached instead, errors, kill, counts and the async stream.

use futures_util::StreamExt;
use needle::{Error, Needle, Record, Value};
use std::io::Write;
use std::time::Duration;

fn needle() -> Needle {
    let mut config = needle::Config::default();
    // windows of tens of milliseconds, to see several in a short test
    config.query.min_window_emit_ms = 10;
    Needle::builder().config(config).workers(2).tick(Duration::from_millis(20)).start().unwrap()
}

/// The records of every emission of a query, as JSON text, the final one last.
fn emissions(query: needle::Query) -> Vec<String> {
    query.map(|e| serde_json::to_string(&e.records).unwrap()).collect()
}

#[test]
fn typed_events_records_and_json_lines_give_the_same_answer() {
    let text = "SELECT device, COUNT(*) AS n, SUM(ms) AS total FROM STREAM(400, TIME) \
                WHERE ms > 10 GROUP BY device ORDER BY device";
    let events: Vec<(String, i64)> =
        (0..5_000).map(|i| (format!("d{}", i % 7), (i * 13 % 100) as i64)).collect();
    let mut answers = Vec::new();
    for way in ["typed", "record", "json"] {
        let needle = needle();
        let query = needle.query(text).unwrap();
        let mut pusher = needle.pusher().unwrap();
        for (device, ms) in &events {
            match way {
                "typed" => pusher.push_with(|e| {
                    e.set_str("device", device).set_i64("ms", *ms);
                }),
                "record" => {
                    let mut r = Record::new();
                    r.insert("device", Value::from(device.as_str()));
                    r.insert("ms", Value::Long(*ms));
                    pusher.push(r)
                }
                _ => pusher.push_json(format!(r#"{{"device":"{device}","ms":{ms}}}"#).as_bytes()),
            }
            .unwrap();
        }
        pusher.flush().unwrap();
        answers.push(emissions(query).pop().unwrap());
    }
    let expected: Vec<serde_json::Value> = (0..7)
        .map(|d| {
            let mine: Vec<i64> = events
                .iter()
                .filter(|(dev, ms)| *dev == format!("d{d}") && *ms > 10)
                .map(|(_, ms)| *ms)
                .collect();
            serde_json::json!({"device": format!("d{d}"), "n": mine.len(), "total": mine.iter().sum::<i64>() as f64})
        })
        .collect();
    assert_eq!(answers[0], serde_json::to_string(&expected).unwrap());
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[0], answers[2]);
}

#[test]
fn events_of_changing_shapes_keep_exactly_their_own_fields() {
    let needle = needle();
    let query = needle.query("SELECT * FROM STREAM(300, TIME) LIMIT 10").unwrap();
    let mut pusher = needle.pusher().unwrap();
    pusher
        .push_with(|e| {
            e.set_str("a", "x").set_i64("b", 1).set_bool("c", true);
        })
        .unwrap();
    pusher
        .push_with(|e| {
            e.set_i64("b", 2);
        })
        .unwrap();
    pusher
        .push_with(|e| {
            e.set_f64("d", 0.5).set_str("a", "y");
        })
        .unwrap();
    pusher.flush().unwrap();
    let last = emissions(query).pop().unwrap();
    assert_eq!(last, r#"[{"a":"x","b":1,"c":true},{"b":2},{"d":0.5,"a":"y"}]"#);
}

#[test]
fn a_windowed_top_k_emits_each_window_and_kill_ends_it() {
    let needle = needle();
    let mut query = needle
        .query("SELECT TOP(2, device) FROM STREAM(60000, TIME) WINDOWING TUMBLING(100, TIME)")
        .unwrap();
    assert!(query.is_windowed());
    let mut pusher = needle.pusher().unwrap();
    let mut windows = 0;
    while windows < 3 {
        for device in ["a", "b", "b", "c", "c", "c"] {
            pusher
                .push_with(|e| {
                    e.set_str("device", device);
                })
                .unwrap();
        }
        pusher.flush().unwrap();
        let emission = query.next().expect("an emission per window");
        if !emission.records.is_empty() {
            assert_eq!(emission.records[0].get("device"), Some(&Value::from("c")));
            windows += 1;
        }
    }
    assert_eq!(needle.queries().len(), 1);
    assert!(query.kill());
    let rest: Vec<_> = query.by_ref().collect();
    assert!(rest.last().is_some_and(|e| e.is_final), "killing gives a final emission");
    assert!(query.next().is_none());
    let gone = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        needle.queries().is_empty()
    });
    assert!(gone, "a killed query is still listed");
}

#[test]
fn a_bad_query_says_where_and_what_to_do() {
    let needle = needle();
    match needle.query("SELECT COUNT(*) FROM STREAM(1000, TIME)\nWHERE devce = 'a' AND") {
        Err(Error::Query { line, column, rendered, .. }) => {
            assert_eq!(line, 2, "{rendered}");
            assert!(column > 1, "{rendered}");
            assert!(rendered.contains("at line 2"), "{rendered}");
        }
        other => panic!("expected a query error, got {other:?}"),
    }
    let limited = Needle::builder().workers(1).max_queries(1).start().unwrap();
    let _first = limited.query("SELECT * FROM STREAM(5000, TIME) LIMIT 1").unwrap();
    let second = limited.query("SELECT * FROM STREAM(5000, TIME) LIMIT 1").unwrap_err();
    assert!(matches!(second, Error::TooMany(_)), "{second}");
}

#[test]
fn dropping_a_query_ends_it() {
    let needle = needle();
    let query = needle.query("SELECT * FROM STREAM(60000, TIME) LIMIT 5").unwrap();
    let id = query.id().to_owned();
    assert!(needle.status(&id).is_some_and(|s| s.ended_ms.is_none()));
    drop(query);
    let ended = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        needle.queries().is_empty()
    });
    assert!(ended, "the query still runs after its handle was dropped");
}

#[test]
fn malformed_json_is_counted_and_the_good_lines_around_it_are_read() {
    let needle = needle();
    let query = needle.query("SELECT COUNT(*) AS n FROM STREAM(300, TIME)").unwrap();
    let mut pusher = needle.pusher().unwrap();
    for line in [&br#"{"a":1}"#[..], b"not json", br#"{"a":2}"#, b"[1,2]", br#"{"a":3}"#] {
        pusher.push_json(line).unwrap();
    }
    pusher.flush().unwrap();
    assert_eq!(emissions(query).pop().unwrap(), r#"[{"n":3}]"#);
    let counts = needle.counts();
    assert_eq!((counts.records_read, counts.records_malformed), (5, 2));
    assert!(needle.metrics_text().contains("needle_records_malformed_total 2"));
}

#[test]
fn a_source_is_read_instead_of_pushed_events() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    for i in 0..1000 {
        writeln!(file, r#"{{"id":{i},"kind":"{}"}}"#, if i % 10 == 0 { "needle" } else { "hay" })
            .unwrap();
    }
    file.flush().unwrap();
    let needle = Needle::builder()
        .workers(1)
        .source(format!("file:{}?follow=true", file.path().display()))
        .start()
        .unwrap();
    let read = (0..250).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        needle.counts().records_read == 1000
    });
    assert!(read, "the file was not read: {:?}", needle.counts());
    let query =
        needle.query("SELECT COUNT(*) AS n FROM STREAM(2000, TIME) WHERE kind = 'needle'").unwrap();
    let refused = needle.pusher().unwrap_err();
    assert!(matches!(refused, Error::Closed(_)), "{refused}");
    writeln!(file, r#"{{"id":-1,"kind":"needle"}}"#).unwrap();
    file.flush().unwrap();
    let last = emissions(query).pop().unwrap();
    assert_eq!(last, r#"[{"n":1}]"#, "only the line written after the query started");
    let bad = Needle::builder().source("nosuch:thing").start().unwrap_err();
    assert!(bad.to_string().contains("unknown source kind"), "{bad}");
}

#[test]
fn emissions_stream_without_blocking_a_thread() {
    let needle = needle();
    let query = needle
        .query("SELECT COUNT(*) AS n FROM STREAM(60000, TIME) WINDOWING TUMBLING(50, TIME)")
        .unwrap();
    let mut pusher = needle.pusher().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let counted: u64 = runtime.block_on(async move {
        let mut stream = query.into_stream();
        let mut counted = 0;
        for _ in 0..3 {
            for _ in 0..10 {
                pusher
                    .push_with(|e| {
                        e.set_i64("x", 1);
                    })
                    .unwrap();
            }
            pusher.flush().unwrap();
            let emission = stream.next().await.unwrap();
            counted += emission.records.first().and_then(|r| r.get("n")?.as_i64()).unwrap_or(0);
        }
        counted as u64
    });
    assert!(counted > 0 && counted <= 30, "{counted}");
}

#[test]
fn shutdown_ends_queries_with_what_was_pushed_and_pushers_then_refuse() {
    let needle = needle();
    let query = needle.query("SELECT COUNT(*) AS n FROM STREAM(60000, TIME)").unwrap();
    let mut pusher = needle.pusher().unwrap();
    for _ in 0..2500 {
        pusher
            .push_with(|e| {
                e.set_i64("x", 1);
            })
            .unwrap();
    }
    pusher.flush().unwrap();
    let reader = std::thread::spawn(move || emissions(query).pop().unwrap());
    needle.shutdown();
    assert_eq!(reader.join().unwrap(), r#"[{"n":2500}]"#);
    pusher
        .push_with(|e| {
            e.set_i64("x", 1);
        })
        .unwrap();
    assert!(matches!(pusher.flush(), Err(Error::Closed(_))));
}

#[test]
fn typed_events_are_kept_in_history_and_found_looking_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().to_str().unwrap().to_owned();
    {
        let needle = Needle::builder().workers(1).history(store.clone(), "").start().unwrap();
        let mut pusher = needle.pusher().unwrap();
        for i in 0..300 {
            pusher
                .push_with(|e| {
                    e.set_i64("id", i).set_str("kind", if i % 3 == 0 { "needle" } else { "hay" });
                })
                .unwrap();
        }
        drop(pusher);
        needle.shutdown();
    }
    let needle = Needle::builder().workers(1).history(store, "").start().unwrap();
    let query = needle
        .query("SELECT COUNT(*) AS n, MAX(id) AS top FROM HISTORY('-1h') WHERE kind = 'needle'")
        .unwrap();
    assert_eq!(emissions(query).pop().unwrap(), r#"[{"n":100,"top":297}]"#);
}

#[test]
fn a_bullet_json_query_runs_as_its_bql_twin_does() {
    let needle = needle();
    let json = needle
        .query(
            r#"{"filters": [{"field": "device", "operation": "==", "values": ["ipad"]}],
                "aggregation": {"type": "COUNT DISTINCT", "fields": {"id": ""}},
                "duration": 300}"#,
        )
        .unwrap();
    let bql = needle
        .query("SELECT COUNT(DISTINCT id) FROM STREAM(300, TIME) WHERE device = 'ipad'")
        .unwrap();
    let mut pusher = needle.pusher().unwrap();
    for i in 0..100 {
        pusher
            .push_with(|e| {
                e.set_i64("id", i % 30).set_str("device", if i % 2 == 0 { "ipad" } else { "pc" });
            })
            .unwrap();
    }
    pusher.flush().unwrap();
    let json = json.last().unwrap();
    let bql = bql.last().unwrap();
    let distinct = |e: &needle::Emission| e.records[0].iter().next().unwrap().1.as_f64();
    assert_eq!(distinct(&json), Some(15.0), "{}", json.to_json_string());
    assert_eq!(distinct(&json), distinct(&bql));
}

/// Typed events are read column at a time when every query allows it, row by row when one does
/// not (a RAW or TOP K query beside them): either way each query's answer, and the records
/// matched by some query, are those of the same events pushed as JSON lines — events with
/// fields left out, and now and then one whose field changed type (kept as a record).
#[test]
fn typed_events_read_as_columns_answer_as_json_lines_do() {
    let aggregates = [
        "SELECT COUNT(*) AS n, SUM(v) AS s, MIN(v) AS lo, MAX(v) AS hi, AVG(v) AS mean, \
         MAX(t) AS last FROM STREAM(700, TIME)",
        "SELECT k, COUNT(*) AS n, SUM(i) AS s, MIN(t) AS first FROM STREAM(700, TIME) \
         WHERE (v > 2.5 AND k IN ('a', 'b')) OR flag GROUP BY k ORDER BY k",
        "SELECT flag, COUNT(*) AS n, SUM(v) AS sv, MAX(k) AS mk FROM STREAM(700, TIME) \
         WHERE i BETWEEN (3, 40) AND NOT t IS NULL GROUP BY flag ORDER BY flag",
        "SELECT COUNT(*) AS n FROM STREAM(700, TIME) WHERE missing = 1",
    ];
    let rows_too = [
        "SELECT * FROM STREAM(700, TIME) WHERE i = 7 LIMIT 500",
        "SELECT TOP(3, k) FROM STREAM(700, TIME)",
    ];
    let event = |n: usize| {
        let mut fields: Vec<(&str, Value)> = vec![
            ("k", Value::from(["a", "b", "c", "d"][n % 4])),
            ("v", Value::Double((n % 13) as f64 * 0.5)),
            ("i", Value::Long((n % 50) as i64)),
            ("flag", Value::Bool(n.is_multiple_of(3))),
        ];
        if !n.is_multiple_of(7) {
            fields.push(("t", Value::Long(n as i64)));
        }
        if n % 500 == 499 {
            fields[1].1 = Value::from("not a number");
        }
        fields
    };
    for queries in [&aggregates[..], &[&aggregates[..], &rows_too[..]].concat()] {
        let mut answers = Vec::new();
        for typed in [true, false] {
            let needle = needle();
            let running: Vec<needle::Query> =
                queries.iter().map(|q| needle.query(q).unwrap()).collect();
            let mut pusher = needle.pusher().unwrap();
            for n in 0..5_000 {
                let fields = event(n);
                if typed {
                    pusher.push_with(|e| {
                        for (name, value) in &fields {
                            e.set(name, value.clone());
                        }
                    })
                } else {
                    let mut record = Record::new();
                    for (name, value) in fields {
                        record.insert(name, value);
                    }
                    pusher.push_json(record.to_json().as_bytes())
                }
                .unwrap();
            }
            pusher.flush().unwrap();
            let mut results: Vec<Vec<String>> = running
                .into_iter()
                .map(|query| {
                    let last = query.last().expect("a final emission");
                    let mut records: Vec<String> =
                        last.records.iter().map(|r| r.to_json()).collect();
                    records.sort();
                    records
                })
                .collect();
            results.push(vec![needle.counts().records_matched.to_string()]);
            answers.push(results);
        }
        assert_eq!(answers[0], answers[1], "typed (left) against JSON lines (right)");
        assert!(answers[0][0][0].contains(r#""n":5000"#), "{:?}", answers[0][0]);
    }
}
