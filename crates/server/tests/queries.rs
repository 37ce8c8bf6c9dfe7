//! The query endpoints over real HTTP, SSE and WebSocket, with records arriving at the server's
//! real TCP source.

mod common;

use common::Server;
use futures_util::{SinkExt, StreamExt};
use needle_runtime::NeedleConfig;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::Duration;

/// The next piece of a streamed response body, waiting at most 10 s.
async fn next_chunk<B: AsRef<[u8]>>(
    stream: &mut (impl futures_util::Stream<Item = reqwest::Result<B>> + Unpin),
) -> String {
    let chunk = tokio::time::timeout(Duration::from_secs(10), stream.next()).await;
    String::from_utf8_lossy(
        chunk.expect("a chunk within 10 s").expect("more body").unwrap().as_ref(),
    )
    .into_owned()
}

fn records(n: usize, needles: &[usize]) -> Vec<String> {
    (0..n)
        .map(|i| {
            let id = if needles.contains(&i) { "needle".to_string() } else { format!("r{i}") };
            format!(r#"{{"id":"{id}","i":{i},"k":"k{}"}}"#, i % 4)
        })
        .collect()
}

#[tokio::test]
async fn a_query_waits_for_its_result_and_finds_the_needles() {
    let server = Server::start(NeedleConfig::default()).await;
    let client = reqwest::Client::new();
    let request = client
        .post(server.url("/api/v1/query"))
        .header("content-type", "text/plain")
        .body("SELECT id, i FROM STREAM(20000, TIME) WHERE id = 'needle' LIMIT 3")
        .send();
    let sender = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        server.send(records(1000, &[10, 500, 900])).await;
    };
    let (response, ()) = tokio::join!(request, sender);
    let response = response.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    let mut found: Vec<i64> =
        body["records"].as_array().unwrap().iter().map(|r| r["i"].as_i64().unwrap()).collect();
    found.sort();
    assert_eq!(found, [10, 500, 900], "{body}");
    assert!(body["meta"].is_object());
    server.shutdown().await;
}

#[tokio::test]
async fn a_windowed_query_answers_with_every_emission_and_json_bodies_work() {
    let mut config = NeedleConfig::default();
    config.query.min_window_emit_ms = 100;
    let server = Server::start(config).await;
    let client = reqwest::Client::new();
    let request = client
        .post(server.url("/api/v1/query"))
        .json(&json!({"query": "SELECT COUNT(*) AS c FROM STREAM(1000, TIME) WINDOWING TUMBLING(250, TIME)"}))
        .send();
    let sender = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        server.send(records(400, &[])).await;
    };
    let (response, ()) = tokio::join!(request, sender);
    let body: Value = response.unwrap().json().await.unwrap();
    let emissions = body.as_array().expect("a list of emissions");
    assert!(emissions.len() >= 3, "{body}");
    let total: i64 = emissions.iter().map(|e| e["records"][0]["c"].as_i64().unwrap_or(0)).sum();
    assert_eq!(total, 400, "tumbling windows count each record once: {body}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_bullet_json_query_runs_too() {
    let server = Server::start(NeedleConfig::default()).await;
    let client = reqwest::Client::new();
    let query = json!({"filters": [{"field": "k", "operation": "==", "values": ["k1"]}],
                       "aggregation": {"type": "GROUP", "attributes": {"operations": [{"type": "COUNT", "newName": "n"}]}},
                       "duration": 1000});
    let request = client.post(server.url("/api/v1/query")).json(&query).send();
    let sender = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        server.send(records(100, &[])).await;
    };
    let (response, ()) = tokio::join!(request, sender);
    let response = response.unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["records"][0]["n"], 25, "{body}");
    server.shutdown().await;
}

#[tokio::test]
async fn bad_requests_get_json_errors_with_the_right_status() {
    let mut config = NeedleConfig::default();
    config.server.max_request_bytes = 1000;
    config.runtime.max_queries = 1;
    let server = Server::start(config).await;
    let client = reqwest::Client::new();
    let post = |path: &str, body: String, ct: &str| {
        client.post(server.url(path)).header("content-type", ct).body(body).send()
    };

    let r = post("/api/v1/query", "SELECT * FORM STREAM()".into(), "text/plain").await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let e: Value = r.json().await.unwrap();
    assert_eq!((e["line"].as_u64(), e["column"].as_u64()), (Some(1), Some(10)), "{e}");
    assert!(e["hint"].as_str().unwrap_or("").contains("FROM"), "{e}");

    let r = post("/api/v1/query", "SELECT * FROM STREAM(99999999, TIME)".into(), "text/plain")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.json::<Value>().await.unwrap()["kind"], "limit");

    let r = post("/api/v1/query", "".into(), "text/plain").await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(r.json::<Value>().await.unwrap()["error"], "the request has no query");

    let r = post("/api/v1/query", "{oops".into(), "application/json").await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    let r = post("/api/v1/query", "x".repeat(5000), "text/plain").await.unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(r.json::<Value>().await.unwrap()["error"].is_string());

    let r = post("/api/v1/queries", "SELECT * FROM STREAM(60000, TIME)".into(), "text/plain")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let r = post("/api/v1/queries", "SELECT * FROM STREAM(60000, TIME)".into(), "text/plain")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.json::<Value>().await.unwrap()["error"].as_str().unwrap().contains("max_queries"));

    let r = client.delete(server.url("/api/v1/queries/nope")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    server.shutdown().await;
}

#[tokio::test]
async fn validate_answers_the_plan_or_the_error() {
    let server = Server::start(NeedleConfig::default()).await;
    let r = server.post("/api/v1/validate", "SELECT COUNT(*) FROM STREAM()").await;
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["plan"]["stage"]["aggregation"]["type"], "GROUP_ALL", "{body}");
    assert!(body["explain"].as_str().unwrap().len() > 10);
    let r = server.post("/api/v1/validate", "SELECT COUNT(*) FROM STREAM() WHERE").await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    server.shutdown().await;
}

#[tokio::test]
async fn a_started_query_streams_events_lists_progress_and_can_be_killed() {
    let server = Server::start(NeedleConfig::default()).await;
    let client = reqwest::Client::new();
    let r = server.post("/api/v1/queries", "SELECT i FROM STREAM(60000, TIME) WHERE id = 'needle' WINDOWING EVERY(1, RECORD, FIRST, 1, RECORD)").await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let started: Value = r.json().await.unwrap();
    let id = started["id"].as_str().unwrap().to_owned();
    let events =
        client.get(server.url(started["urls"]["events"].as_str().unwrap())).send().await.unwrap();
    assert_eq!(events.status(), StatusCode::OK);
    assert!(events.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let mut stream = events.bytes_stream();

    server.send(records(300, &[7, 123])).await;
    let mut text = String::new();
    while text.matches("event: result").count() < 2 {
        text.push_str(&next_chunk(&mut stream).await);
    }
    assert!(text.contains(r#""i":7"#) && text.contains(r#""i":123"#), "{text}");

    // the status table's counts are brought up to date every half second, so they may trail
    // the results already sent for a moment; they catch up
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let list = loop {
        let list: Value =
            client.get(server.url("/api/v1/queries")).send().await.unwrap().json().await.unwrap();
        if list["queries"][0]["records_matched"].as_u64().unwrap() >= 2
            || std::time::Instant::now() > deadline
        {
            break list;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let q = &list["queries"][0];
    assert_eq!(q["id"], id.as_str());
    assert!(q["records_matched"].as_u64().unwrap() >= 2, "{list}");
    assert!(q["time_left_ms"].as_i64().unwrap() > 0);

    let r = client.delete(server.url(&format!("/api/v1/queries/{id}"))).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    while !text.contains("event: complete") {
        text.push_str(&next_chunk(&mut stream).await);
    }
    assert!(text.contains("killed"), "{text}");
    let r = client.get(server.url(&format!("/api/v1/queries/{id}/events"))).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND, "nothing to follow once it ended");
    let body: Value = r.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("ended"), "{body}");
    let r = client.get(server.url("/api/v1/queries/nope/events")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // a query that ended still tells its last figures
    let status = server.get_json(&format!("/api/v1/queries/{id}")).await;
    assert_eq!(status["running"], false, "{status}");
    assert!(status["ended_ms"].as_i64().is_some() && status["time_left_ms"] == 0, "{status}");
    server.shutdown().await;
}

/// The events of a Server-Sent Events text, as (event name, data) pairs, read by the standard's
/// rules: lines end at CR, LF or CRLF; `data:` lines are joined with LF; a blank line ends an
/// event; a line starting with `:` is a comment.
fn parse_events(text: &str) -> Vec<(String, String)> {
    let (mut events, mut name, mut data) = (Vec::new(), String::new(), Vec::<&str>::new());
    for line in text.split("\r\n").flat_map(|l| l.split(['\r', '\n'])) {
        if line.is_empty() {
            if !data.is_empty() {
                events.push((std::mem::take(&mut name), data.join("\n")));
            }
            data.clear();
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push(value.strip_prefix(' ').unwrap_or(value));
        } else if let Some(value) = line.strip_prefix("event:") {
            name = value.trim_start().to_owned();
        }
    }
    events
}

#[tokio::test]
async fn an_emission_larger_than_a_piece_of_an_event_arrives_whole_and_as_sent() {
    let server = Server::start(NeedleConfig::default()).await;
    let client = reqwest::Client::new();
    let query = "SELECT * FROM STREAM(60000, TIME) WHERE id = 'big' LIMIT 400";
    let started: Value = server.post("/api/v1/queries", query).await.json().await.unwrap();
    let events = client.get(server.url(started["urls"]["events"].as_str().unwrap()));
    let mut stream = events.send().await.unwrap().bytes_stream();
    // the same over a WebSocket (its message is made off the HTTP threads)
    let url = server.url("/api/v1/ws").replace("http://", "ws://");
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let start = json!({"type": "start", "tag": "big", "query": query}).to_string();
    ws.send(tokio_tungstenite::tungstenite::Message::Text(start.into())).await.unwrap();
    assert_eq!(next_json(&mut ws).await["type"], "started");
    // 400 records of 5 KB (2 MB: the event is sent in pieces), one with a carriage return and
    // a tab between its tokens, which JSON allows and the event's data must keep valid
    let pad = "x".repeat(5000);
    let mut lines: Vec<String> =
        (0..400).map(|i| format!(r#"{{"id":"big","i":{i},"pad":"{pad}"}}"#)).collect();
    lines[200] = format!("{{\"id\":\"big\",\r\"i\":200,\t\"pad\":\"{pad}\"}}");
    server.send(lines).await;
    let mut text = String::new();
    while !text.contains("event: complete") {
        text.push_str(&next_chunk(&mut stream).await);
    }
    let events = parse_events(&text);
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["result", "complete"]);
    let result: Value = serde_json::from_str(&events[0].1).expect("the event's data is JSON");
    let records = result["records"].as_array().unwrap();
    // (the workers' batches may come in any order)
    let mut found: Vec<i64> = records.iter().map(|r| r["i"].as_i64().unwrap()).collect();
    found.sort_unstable();
    assert_eq!(found, (0..400).collect::<Vec<i64>>());
    assert!(records.iter().all(|r| r["pad"] == pad.as_str() && r["id"] == "big"));
    assert!(result["meta"].is_object(), "{}", result["meta"]);
    let message = next_json(&mut ws).await;
    assert_eq!(message["type"], "result", "{}", message["type"]);
    let by_i = |records: &Value| {
        let mut records = records.as_array().unwrap().clone();
        records.sort_by_key(|r| r["i"].as_i64());
        records
    };
    assert_eq!(by_i(&message["result"]["records"]), by_i(&result["records"]));
    server.shutdown().await;
}

#[tokio::test]
async fn events_and_websocket_results_are_numbered_and_resume_after_the_last_one_received() {
    let server = Server::start(NeedleConfig::default()).await;
    let client = reqwest::Client::new();
    let per_needle = "SELECT i FROM STREAM(60000, TIME) WHERE id = 'needle' \
                      WINDOWING EVERY(1, RECORD, FIRST, 1, RECORD)";
    let start = || async {
        let r = server.post("/api/v1/queries", per_needle).await;
        r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned()
    };
    let (sse, ws_id) = (start().await, start().await);
    // three emissions each, waiting for their subscribers
    server.send(records(300, &[7, 123, 250])).await;
    let events = server.url(&format!("/api/v1/queries/{sse}/events"));
    let r = client.get(&events).header("Last-Event-ID", "1").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let mut stream = r.bytes_stream();
    let mut text = String::new();
    while text.matches("event: result").count() < 2 {
        text.push_str(&next_chunk(&mut stream).await);
    }
    let ids: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("id: ")).collect();
    assert_eq!(ids, ["2", "3"], "the first emission was had already: {text}");
    assert_eq!(text.matches(r#""i":"#).count(), 2, "{text}");
    assert!(text.contains("retry: "), "an EventSource is told how soon to come back: {text}");

    let url = server.url("/api/v1/ws").replace("http://", "ws://");
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    use tokio_tungstenite::tungstenite::Message;
    let send = |v: Value| Message::Text(v.to_string().into());
    ws.send(send(json!({"type": "resume", "id": "nope"}))).await.unwrap();
    let v = next_json(&mut ws).await;
    assert!(v["type"] == "error" && v["id"] == "nope", "{v}");
    ws.send(send(json!({"type": "resume", "id": ws_id, "after": 2}))).await.unwrap();
    let v = next_json(&mut ws).await;
    assert_eq!(v, json!({"type": "resumed", "id": ws_id, "after": 2}));
    let v = next_json(&mut ws).await;
    assert!(v["type"] == "result" && v["seq"] == 3, "{v}");
    assert_eq!(v["result"]["records"].as_array().map(Vec::len), Some(1), "{v}");
    ws.send(send(json!({"type": "resume", "id": ws_id}))).await.unwrap();
    let v = next_json(&mut ws).await;
    assert!(v["type"] == "error" && v["error"].as_str().unwrap().contains("already"), "{v}");
    ws.close(None).await.unwrap();
    server.shutdown().await;
}

/// The `result` events of an event stream until `count` of them came: (id, the records' `i`).
async fn results_of<B: AsRef<[u8]>>(
    stream: &mut (impl futures_util::Stream<Item = reqwest::Result<B>> + Unpin),
    count: usize,
) -> Vec<(u64, Vec<i64>)> {
    let mut text = String::new();
    while text.matches("event: result").count() < count {
        text.push_str(&next_chunk(stream).await);
    }
    let numbers = text.lines().filter_map(|l| l.strip_prefix("id: ")).map(|n| n.parse().unwrap());
    let results = parse_events(&text).into_iter().filter(|(name, _)| name == "result");
    numbers
        .zip(results)
        .map(|(n, (_, data))| (n, found(&serde_json::from_str(&data).unwrap())))
        .collect()
}

/// The `i` of an emission's records.
fn found(emission: &Value) -> Vec<i64> {
    emission["records"].as_array().unwrap().iter().map(|r| r["i"].as_i64().unwrap()).collect()
}

/// Whether query `id` runs, as its status says.
async fn running(server: &Server, id: &str) -> bool {
    server.get_json(&format!("/api/v1/queries/{id}")).await["running"] == true
}

#[tokio::test]
async fn three_followers_of_one_query_each_get_every_emission_and_the_last_to_leave_ends_it() {
    let server = Server::start(NeedleConfig::default()).await;
    let client = reqwest::Client::new();
    let per_needle = "SELECT i FROM STREAM(60000, TIME) WHERE id = 'needle' \
                      WINDOWING EVERY(1, RECORD, FIRST, 1, RECORD)";
    let started: Value = server.post("/api/v1/queries", per_needle).await.json().await.unwrap();
    let id = started["id"].as_str().unwrap().to_owned();
    let events = server.url(started["urls"]["events"].as_str().unwrap());
    // two over Server-Sent Events, one over a WebSocket, all following before anything matched
    let mut first = client.get(&events).send().await.unwrap().bytes_stream();
    let second = client.get(&events).send().await.unwrap();
    assert_eq!(second.status(), StatusCode::OK, "a second follower is welcome");
    let mut second = second.bytes_stream();
    let url = server.url("/api/v1/ws").replace("http://", "ws://");
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    use tokio_tungstenite::tungstenite::Message;
    let resume = json!({"type": "resume", "id": id}).to_string();
    ws.send(Message::Text(resume.into())).await.unwrap();
    assert_eq!(next_json(&mut ws).await["type"], "resumed");

    server.send(records(300, &[7, 123, 250])).await;
    let from_first = results_of(&mut first, 3).await;
    let mut from_ws = Vec::new();
    while from_ws.len() < 3 {
        let v = next_json(&mut ws).await;
        assert_eq!(v["type"], "result", "{v}");
        from_ws.push((v["seq"].as_u64().unwrap(), found(&v["result"])));
    }
    let numbers: Vec<u64> = from_first.iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers, [1, 2, 3], "{from_first:?}");
    let mut needles: Vec<i64> = from_first.iter().flat_map(|(_, i)| i.clone()).collect();
    needles.sort_unstable();
    assert_eq!(needles, [7, 123, 250], "every emission, each needle once: {from_first:?}");
    assert_eq!(results_of(&mut second, 3).await, from_first, "the same emissions, numbered alike");
    assert_eq!(from_ws, from_first);

    // the query goes on while anyone follows it: the first two leave, the third gets the next
    drop((first, second));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(running(&server, &id).await, "two of three followers left: it runs on");
    server.send(records(10, &[4])).await;
    let v = next_json(&mut ws).await;
    assert!(v["type"] == "result" && v["seq"] == 4 && found(&v["result"]) == [4], "{v}");
    // a follower that comes late gets what is emitted from then on, numbered on
    let late = client.get(&events).send().await.unwrap();
    assert_eq!(late.status(), StatusCode::OK);
    let mut late = late.bytes_stream();
    server.send(records(10, &[5])).await;
    assert_eq!(results_of(&mut late, 1).await, [(5, vec![5])]);
    assert_eq!(next_json(&mut ws).await["seq"], 5);
    drop(late);
    // the last follower leaves: nobody follows the query, which ends
    ws.close(None).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while running(&server, &id).await {
        assert!(std::time::Instant::now() < deadline, "the query ends when its last follower goes");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_client_that_never_reads_does_not_hold_up_the_others() {
    let mut config = NeedleConfig::default();
    config.runtime.subscriber_buffer = 4;
    let server = Server::start(config).await;
    let client = reqwest::Client::new();
    // A streaming query whose events nobody reads.
    let r = server
        .post(
            "/api/v1/queries",
            "SELECT i FROM STREAM(60000, TIME) WINDOWING EVERY(1, RECORD, FIRST, 1, RECORD)",
        )
        .await;
    let idle: Value = r.json().await.unwrap();
    let request = client
        .post(server.url("/api/v1/query"))
        .body("SELECT COUNT(*) AS c FROM STREAM(1500, TIME)")
        .send();
    let sender = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        server.send(records(5000, &[])).await;
    };
    let (response, ()) = tokio::join!(request, sender);
    let body: Value = response.unwrap().json().await.unwrap();
    assert_eq!(body["records"][0]["c"], 5000, "{body}");
    // The idle subscriber lost all but the last few emissions, and is told so; once its queue
    // dropped, the workers kept none of its records for a while (shed: counted as dropped, in
    // its final emission)
    assert!(server.runtime.metrics().results_dropped.get() > 0);
    server.runtime.kill(idle["id"].as_str().unwrap());
    let events =
        client.get(server.url(idle["urls"]["events"].as_str().unwrap())).send().await.unwrap();
    let text = events.text().await.unwrap();
    assert!(text.contains("Dropped Emissions"), "{text}");
    let last = text
        .lines()
        .rev()
        .filter_map(|l| l.strip_prefix("data:"))
        .find(|data| data.contains("Stats"))
        .unwrap_or_else(|| panic!("no emission in {text}"));
    let emission: Value = serde_json::from_str(last.trim()).unwrap();
    let stats = &emission["meta"]["Stats"];
    assert_eq!(stats["Records Matched"], 5000, "{stats}");
    assert!(stats["Records Dropped"].as_u64().is_some_and(|d| d > 0), "{stats}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_websocket_runs_several_queries_and_kills_on_request() {
    let server = Server::start(NeedleConfig::default()).await;
    let url = server.url("/api/v1/ws").replace("http://", "ws://");
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    use tokio_tungstenite::tungstenite::Message;
    let send = |v: Value| Message::Text(v.to_string().into());
    ws.send(send(json!({"type": "start", "tag": "a", "query": "SELECT i FROM STREAM(60000, TIME) WHERE id = 'needle' LIMIT 1"}))).await.unwrap();
    ws.send(send(json!({"type": "start", "tag": "b", "query": "SELECT COUNT(*) AS c FROM STREAM(60000, TIME)"}))).await.unwrap();
    ws.send(send(json!({"type": "start", "tag": "c", "query": "SELECT FROM"}))).await.unwrap();
    ws.send(Message::Text("garbage".into())).await.unwrap();

    let mut ids = std::collections::HashMap::new();
    let mut errors = Vec::new();
    while ids.len() < 2 || errors.len() < 2 {
        let v = next_json(&mut ws).await;
        match v["type"].as_str().unwrap() {
            "started" => {
                ids.insert(
                    v["tag"].as_str().unwrap().to_owned(),
                    v["id"].as_str().unwrap().to_owned(),
                );
            }
            "error" => errors.push(v),
            other => panic!("unexpected {other}: {v}"),
        }
    }
    assert!(errors.iter().any(|e| e["tag"] == "c" && e["line"] == 1), "{errors:?}");
    server.send(records(200, &[42])).await;
    let (mut found, mut b_complete) = (None, None);
    let mut killed = false;
    while found.is_none() || b_complete.is_none() {
        let v = next_json(&mut ws).await;
        if v["type"] == "result" && v["id"] == ids["a"].as_str() {
            found = Some(v["result"]["records"][0]["i"].clone());
            if !killed {
                ws.send(send(json!({"type": "kill", "id": ids["b"]}))).await.unwrap();
                killed = true;
            }
        }
        if v["type"] == "result" && v["id"] == ids["b"].as_str() {
            assert!(v["result"].to_string().contains("killed"), "{v}");
        }
        if v["type"] == "complete" && v["id"] == ids["b"].as_str() {
            b_complete = Some(v);
        }
    }
    assert_eq!(found.unwrap(), 42);
    ws.close(None).await.unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn over_the_websocket_a_query_token_kills_only_its_own_queries() {
    use needle_runtime::config::{Scope, ScopedToken, TokenConfig};
    let scoped = |name: &str, scopes: Vec<Scope>| {
        let token = format!("{name}-secret");
        TokenConfig::Scoped(ScopedToken::new(name, &token, scopes))
    };
    let mut config = NeedleConfig::default();
    config.server.tokens =
        vec![scoped("reader", vec![Scope::Read]), scoped("bob", vec![Scope::Query])];
    let server = Server::start(config).await;
    let ws_url = |token: &str| {
        let base = server.url("/api/v1/ws").replace("http://", "ws://");
        format!("{base}?access_token={token}")
    };
    // a read token cannot open the socket that starts queries
    let refused = tokio_tungstenite::connect_async(ws_url("reader-secret")).await;
    let status = match refused {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => response.status(),
        other => panic!("a read token got a WebSocket: {:?}", other.map(|_| ())),
    };
    assert_eq!(status, 403);

    let other = server.runtime.submit("SELECT * FROM STREAM(60000, TIME)", "alice").unwrap();
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url("bob-secret")).await.unwrap();
    use tokio_tungstenite::tungstenite::Message;
    let kill = json!({"type": "kill", "id": &*other.id}).to_string();
    ws.send(Message::Text(kill.into())).await.unwrap();
    let answer = next_json(&mut ws).await;
    assert_eq!(answer["type"], "error", "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("another owner"), "{answer}");
    assert!(server.runtime.query(&other.id).unwrap().ended_ms.is_none(), "still running");
    ws.close(None).await.unwrap();
    server.shutdown().await;
}

/// The next WebSocket message, as JSON (waiting up to 30 s).
async fn next_json<S, E>(ws: &mut S) -> Value
where
    S: futures_util::Stream<Item = Result<tokio_tungstenite::tungstenite::Message, E>> + Unpin,
    E: std::fmt::Debug,
{
    let msg = tokio::time::timeout(Duration::from_secs(30), ws.next()).await.unwrap().unwrap();
    serde_json::from_str(msg.unwrap().to_text().unwrap()).unwrap()
}

/// Start messages sent in a stream are started in batches; each is still answered, by its tag.
#[tokio::test]
async fn a_websocket_starts_thousands_of_queries_sent_at_once() {
    let mut config = NeedleConfig::default();
    config.server.max_queries_per_client = 10_000;
    let server = Server::start(config).await;
    let url = server.url("/api/v1/ws").replace("http://", "ws://");
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    use tokio_tungstenite::tungstenite::Message;
    for i in 0..3000 {
        let start = if i == 1234 {
            json!({"type": "start", "tag": i})
        } else {
            json!({"type": "start", "tag": i, "query": format!("SELECT * FROM STREAM(60000, TIME) WHERE id = 'q{i}' LIMIT 1")})
        };
        ws.feed(Message::Text(start.to_string().into())).await.unwrap();
    }
    ws.flush().await.unwrap();
    let (mut started, mut refused) = (std::collections::HashSet::new(), Vec::new());
    while started.len() + refused.len() < 3000 {
        let v = next_json(&mut ws).await;
        match v["type"].as_str().unwrap() {
            "started" => assert!(started.insert(v["tag"].as_u64().unwrap()), "{v}"),
            "error" => refused.push(v["tag"].as_u64().unwrap()),
            other => panic!("unexpected {other}: {v}"),
        }
    }
    assert_eq!(refused, [1234]);
    assert_eq!(server.runtime.queries().len(), 2999);
    ws.close(None).await.unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn the_schema_reports_fields_seen_in_the_stream() {
    let server = Server::start(NeedleConfig::default()).await;
    let client = reqwest::Client::new();
    // No query is running: the schema still samples one line in 1024.
    server.send(records(4096, &[])).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let body = loop {
        let body: Value =
            client.get(server.url("/api/v1/schema")).send().await.unwrap().json().await.unwrap();
        if body["sampled_records"].as_u64().unwrap_or(0) >= 2
            || std::time::Instant::now() > deadline
        {
            break body;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let fields = body["fields"].as_array().unwrap();
    let i = fields.iter().find(|f| f["name"] == "i").expect("field i");
    assert_eq!(i["types"]["LONG"], i["seen"], "{body}");
    assert_eq!(i["fraction"], 1.0);
    assert!(fields.iter().any(|f| f["name"] == "id" && f["types"]["STRING"].is_number()));
    server.shutdown().await;
}
