//! needle on a real Kafka broker, as a user runs it: `needle gen --to kafka://...` fills topics,
//! `needle serve` processes read them (one process; or an api node and worker processes), and
//! failures are real: a worker killed with SIGKILL, the broker stopped and started again. The
//! broker is `scripts/kafka/broker.sh`'s (Kafka's own jars); one is shared by the tests of this
//! file, the broker-restart test has its own.

mod common;

use common::{Serve, NEEDLE};
use needle_kafka::testing::{Broker, Partitions};
use serde_json::Value;
use std::io::Write;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `needle gen ARGS --to kafka://BROKER/TOPIC`, checked.
fn gen(broker: &str, topic: &str, args: &[&str]) {
    let out = Command::new(NEEDLE)
        .arg("gen")
        .args(args)
        .args(["--to", &format!("kafka://{broker}/{topic}"), "--partitions", "4"])
        .output()
        .unwrap();
    assert!(out.status.success(), "needle gen: {}", String::from_utf8_lossy(&out.stderr));
}

/// Generated bullet records with `count` needle records (`id` = `needle`) in the middle.
fn gen_needles(broker: &str, topic: &str, records: u64, needle: &str, count: u64, seed: u64) {
    let (records, count, seed) = (records.to_string(), count.to_string(), seed.to_string());
    let id = format!("id={needle}");
    let args =
        ["bullet", "--count", &records, "--seed", &seed, "--needle", &id, "--needle-count", &count];
    gen(broker, topic, &args);
}

/// A needle.toml for nodes sharing topics named after `name`, with quick failure detection.
fn kafka_config(broker: &str, name: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    write!(
        f,
        r#"
[runtime]
tick_ms = 50

[kafka]
brokers = "{broker}"
data_topic = "{name}"
query_topic = "{name}-queries"
results_topic = "{name}-results"
group = "{name}-workers"

[kafka.properties]
"session.timeout.ms" = 6000
"heartbeat.interval.ms" = 500
"reconnect.backoff.max.ms" = 1000
"#
    )
    .unwrap();
    f
}

/// Runs a query to its end on a background thread (`POST /api/v1/query`) and returns its id
/// (from the node's list of queries) and the handle giving the result.
fn run_query(api: &Serve, text: &str) -> (String, std::thread::JoinHandle<Value>) {
    let before: Vec<String> = list(api);
    let url = format!("{}/api/v1/query", api.url);
    let body = text.to_owned();
    let handle = std::thread::spawn(move || {
        let client =
            reqwest::blocking::Client::builder().timeout(Duration::from_secs(180)).build().unwrap();
        client.post(url).body(body).send().unwrap().json::<Value>().unwrap()
    });
    let mut id = None;
    wait_until("the query to start", Duration::from_secs(10), || {
        id = list(api).into_iter().find(|i| !before.contains(i));
        id.is_some()
    });
    (id.unwrap(), handle)
}

fn list(node: &Serve) -> Vec<String> {
    let body: Value = node.get("/api/v1/queries").json().unwrap();
    body["queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["id"].as_str().unwrap().to_owned())
        .collect()
}

fn kill(node: &Serve, id: &str) {
    let r = reqwest::blocking::Client::new()
        .delete(format!("{}/api/v1/queries/{id}", node.url))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
}

fn matched(node: &Serve, id: &str) -> u64 {
    node.status(id).map_or(0, |s| s["records_matched"].as_u64().unwrap())
}

/// Waits until the workers read nothing more and the api node merges nothing more: records read
/// again (at-least-once) count in `matched` too, so a count alone cannot say all arrived.
fn settle(api: &Serve, id: &str, workers: &[&Serve]) {
    let progress = || {
        let read: f64 = workers.iter().map(|w| w.metric("needle_records_read_total")).sum();
        (read, matched(api, id))
    };
    let mut last = progress();
    wait_until("the workers to catch up", Duration::from_secs(60), || {
        std::thread::sleep(Duration::from_millis(1_000));
        let now = progress();
        std::mem::replace(&mut last, now) == now
    });
}

/// id → count of a `GROUP BY id` result.
fn counts(result: &Value) -> std::collections::BTreeMap<String, u64> {
    result["records"]
        .as_array()
        .unwrap_or_else(|| panic!("{result}"))
        .iter()
        .map(|r| (r["id"].as_str().unwrap().to_owned(), r["n"].as_u64().unwrap()))
        .collect()
}

const BY_ID: &str = "SELECT id, COUNT(*) AS n FROM STREAM(120000, TIME) \
                     WHERE id = 'needlea' OR id = 'needleb' GROUP BY id";

#[test]
fn one_process_reads_a_four_partition_topic_and_finds_the_needles() {
    let broker = Broker::shared();
    broker.create_topic("single", 4).unwrap();
    let server = Serve::start(&[
        "--workers",
        "2",
        "--source",
        &format!("kafka://{}/single", broker.bootstrap),
    ]);
    assert!(server.source.contains("kafka topic single"), "{}", server.source);
    wait_until("4 partitions", Duration::from_secs(30), || server.partitions() == 4.0);
    let url = format!("{}/api/v1/query", server.url);
    let waiting = std::thread::spawn(move || {
        let q = "SELECT id, event_ts FROM STREAM(60000, TIME) WHERE id = 'c39ba8cfe8' LIMIT 6";
        reqwest::blocking::Client::new().post(url).body(q).send().unwrap().json::<Value>().unwrap()
    });
    wait_until("the query", Duration::from_secs(10), || !list(&server).is_empty());
    // Six consecutive needles, round-robin over the partitions: each partition holds some.
    gen_needles(&broker.bootstrap, "single", 4_000, "c39ba8cfe8", 6, 3);
    let body = waiting.join().unwrap();
    let records = body["records"].as_array().unwrap_or_else(|| panic!("{body}"));
    assert_eq!(records.len(), 6, "{body}");
    assert!(records.iter().all(|r| r["id"] == "c39ba8cfe8"));
    assert!(server.metric("needle_records_read_total") >= 4_000.0);
}

#[test]
fn an_api_node_and_two_workers_find_each_needle_once_skip_garbage_and_survive_a_killed_worker() {
    let broker = Broker::shared();
    broker.create_topic("scale", 4).unwrap();
    let config = kafka_config(&broker.bootstrap, "scale");
    let config = config.path().to_str().unwrap();
    let api = Serve::start(&["--role", "api", "--config", config]);
    assert!(api.source.contains("api node"), "{}", api.source);
    let mut first = Serve::start(&["--role", "worker", "--workers", "1", "--config", config]);
    let second = Serve::start(&["--role", "worker", "--workers", "1", "--config", config]);
    wait_until("two partitions each", Duration::from_secs(30), || {
        first.partitions() == 2.0 && second.partitions() == 2.0
    });
    let (id, result) = run_query(&api, BY_ID);
    wait_until("the workers learning the query", Duration::from_secs(10), || {
        first.status(&id).is_some() && second.status(&id).is_some()
    });
    // A worker takes no queries of its own.
    let refused = reqwest::blocking::Client::new()
        .post(format!("{}/api/v1/query", first.url))
        .body(BY_ID)
        .send()
        .unwrap();
    assert_eq!(refused.status(), 409);

    // 3,000 records with 8 needles over the 4 partitions, and garbage in between.
    gen_needles(&broker.bootstrap, "scale", 3_000, "needlea", 8, 1);
    let garbage: [&[u8]; 4] = [b"not json", b"{\"id\": \"needlea\"", b"[1, 2, 3]", &[0xc3, 0x28]];
    broker.produce("scale", Partitions::Spread(4), &garbage).unwrap();
    wait_until("8 needles merged", Duration::from_secs(30), || matched(&api, &id) >= 8);
    wait_until("every message read", Duration::from_secs(30), || {
        first.metric("needle_records_read_total") + second.metric("needle_records_read_total")
            >= 3_004.0
    });
    let malformed = first.metric("needle_records_malformed_total")
        + second.metric("needle_records_malformed_total");
    assert_eq!(malformed, 4.0, "garbage is counted and skipped");
    assert!(matched(&first, &id) > 0 && matched(&second, &id) > 0, "both workers found needles");

    // Kill a worker mid-query: its partitions move to the survivor.
    let _ = first.child.kill();
    let _ = first.child.wait();
    wait_until("the survivor taking every partition", Duration::from_secs(40), || {
        second.partitions() == 4.0
    });
    gen_needles(&broker.bootstrap, "scale", 2_000, "needleb", 8, 2);
    wait_until("the needles produced after the rebalance", Duration::from_secs(30), || {
        matched(&api, &id) >= 16
    });
    settle(&api, &id, &[&second]);
    kill(&api, &id);
    let result = result.join().unwrap();
    let found = counts(&result);
    assert_eq!(found.get("needleb"), Some(&8), "after the rebalance, each once: {result}");
    // Before the kill: each at least once (a killed process's last uncommitted records are read
    // again by the next owner: at-least-once).
    assert!(found.get("needlea").is_some_and(|&n| n >= 8), "{result}");
    assert!(api.log().is_empty() || !api.log().contains("panicked"), "{}", api.log());
}

/// `POST /api/v1/query` to its end.
fn query(node: &Serve, text: &str) -> Value {
    let client =
        reqwest::blocking::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
    client
        .post(format!("{}/api/v1/query", node.url))
        .body(text.to_owned())
        .send()
        .unwrap()
        .json()
        .unwrap()
}

#[test]
fn worker_nodes_keep_history_and_an_api_node_reads_it_back_each_record_once() {
    let broker = Broker::shared();
    broker.create_topic("hist", 4).unwrap();
    let config = kafka_config(&broker.bootstrap, "hist");
    let config = config.path().to_str().unwrap();
    let api = Serve::start(&["--role", "api", "--config", config]);
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let worker = |dir: &tempfile::TempDir| {
        let dir = dir.path().to_str().unwrap();
        Serve::start(&["--role", "worker", "--workers", "1", "--config", config, "--history", dir])
    };
    let mut first = worker(&dir_a);
    let second = worker(&dir_b);
    wait_until("two partitions each", Duration::from_secs(30), || {
        first.partitions() == 2.0 && second.partitions() == 2.0
    });
    gen_needles(&broker.bootstrap, "hist", 3_000, "needlea", 8, 1);
    let appended = |w: &Serve| w.metric("needle_history_records_appended_total");
    wait_until("every record kept", Duration::from_secs(30), || {
        appended(&first) + appended(&second) >= 3_000.0
    });
    assert!(appended(&first) > 0.0 && appended(&second) > 0.0, "each keeps its partitions'");

    // The past, read by both workers and merged by the api node: each record once.
    let all = query(&api, "SELECT COUNT(*) AS n FROM HISTORY('-1h')");
    assert_eq!(all["records"][0]["n"], 3_000, "{all}");
    assert_eq!(all["meta"]["History"]["workers"], 2, "{all}");
    assert_eq!(all["meta"]["History"]["records_read"], 3_000, "{all}");
    let needles = query(&api, &BY_ID.replace("STREAM(120000, TIME)", "HISTORY('-1h')"));
    assert_eq!(counts(&needles).get("needlea"), Some(&8), "{needles}");
    // Windows by record time over two stores: one bucket's partials from both are merged.
    let windows =
        query(&api, "SELECT COUNT(*) AS n FROM HISTORY('-1h') WINDOWING TUMBLING(3600000, TIME)");
    let emissions = windows.as_array().unwrap_or_else(|| panic!("{windows}"));
    let total: u64 = emissions.iter().map(|e| e["records"][0]["n"].as_u64().unwrap_or(0)).sum();
    assert_eq!(total, 3_000, "{windows}");
    let first_records = query(&api, "SELECT id FROM HISTORY('-1h') WHERE id = 'needlea' LIMIT 3");
    assert_eq!(first_records["records"].as_array().map(Vec::len), Some(3), "{first_records}");

    // Past and live: each worker makes its own seam; every needle counted once.
    let since = BY_ID.replace("STREAM(120000, TIME)", "STREAM(120000, TIME) SINCE '-1h'");
    let (id, result) = run_query(&api, &since);
    wait_until("the workers learning the query", Duration::from_secs(10), || {
        first.status(&id).is_some() && second.status(&id).is_some()
    });
    gen_needles(&broker.bootstrap, "hist", 2_000, "needleb", 8, 2);
    wait_until("the live needles", Duration::from_secs(30), || matched(&api, &id) >= 16);
    settle(&api, &id, &[&first, &second]);
    kill(&api, &id);
    let result = result.join().unwrap();
    let found = counts(&result);
    assert_eq!(found.get("needlea"), Some(&8), "from the past: {result}");
    assert_eq!(found.get("needleb"), Some(&8), "live: {result}");

    // A worker gone mid-read: the result goes on without its part and says so.
    let _ = first.child.kill();
    let _ = first.child.wait();
    let partial = query(&api, "SELECT COUNT(*) AS n FROM HISTORY('-1h')");
    let missing = &partial["meta"]["History"]["workers_missing"];
    let n = partial["records"][0]["n"].as_u64().unwrap_or(0);
    if missing.as_array().is_some_and(|m| !m.is_empty()) {
        assert!(n < 5_000, "{partial}");
    } else {
        // (the roster had already dropped it: only the survivor was asked)
        assert_eq!(partial["meta"]["History"]["workers"], 1, "{partial}");
    }
    assert!(n > 0, "the survivor's part: {partial}");
    assert!(!api.log().contains("panicked"), "{}", api.log());
}

/// A needle.toml as [`kafka_config`]'s, with a results topic of three partitions and the node's
/// name.
fn failover_config(broker: &str, name: &str, node: &str) -> tempfile::NamedTempFile {
    let mut f = kafka_config(broker, name);
    let text = std::fs::read_to_string(f.path())
        .unwrap()
        .replace("[kafka]\n", &format!("[kafka]\nresults_partitions = 3\nnode_id = \"{node}\"\n"));
    f.as_file_mut().set_len(0).unwrap();
    std::fs::write(f.path(), text).unwrap();
    f
}

/// One Server-Sent Event: its `event:`, `id:` and `data:`.
#[derive(Debug, Clone, PartialEq)]
struct SseEvent {
    event: String,
    id: Option<String>,
    data: String,
}

/// Follows `GET /api/v1/queries/{id}/events` (with `Last-Event-ID` when given) until the stream
/// ends or breaks: the events received, and the URL they came from (redirects are followed, as
/// an `EventSource` follows them). A 404 (the query not adopted yet) or a refused connection
/// (a redirect to an api node just killed) is tried again, for up to a minute.
fn follow(url: &str, id: &str, last_event_id: Option<&str>) -> Vec<SseEvent> {
    follow_from(url, id, last_event_id).0
}

/// [`follow`], with the URL the events came from.
fn follow_from(url: &str, id: &str, last_event_id: Option<&str>) -> (Vec<SseEvent>, String) {
    let events = Mutex::default();
    let from = follow_into(url, id, last_event_id, &events);
    (events.into_inner().unwrap(), from)
}

/// [`follow`], each event put in `events` as it comes; the URL they came from.
fn follow_into(
    url: &str,
    id: &str,
    last_event_id: Option<&str>,
    events: &Mutex<Vec<SseEvent>>,
) -> String {
    use std::io::BufRead;
    let client = reqwest::blocking::Client::builder().timeout(None).build().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let response = loop {
        let mut request = client.get(format!("{url}/api/v1/queries/{id}/events"));
        if let Some(last) = last_event_id {
            request = request.header("Last-Event-ID", last);
        }
        match request.send() {
            Ok(r) if r.status() == 200 => break r,
            Ok(r) if r.status() == 404 && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Ok(r) => panic!("following {id}: {} {}", r.status(), r.text().unwrap_or_default()),
            Err(e) if e.is_connect() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("following {id}: {e}"),
        }
    };
    let from = response.url().to_string();
    let mut current = SseEvent { event: String::new(), id: None, data: String::new() };
    for line in std::io::BufReader::new(response).lines() {
        let Ok(line) = line else { break }; // the server went away
        if line.is_empty() {
            if !current.event.is_empty() {
                events.lock().unwrap().push(current.clone());
            }
            current = SseEvent { event: String::new(), id: None, data: String::new() };
        } else if let Some(v) = line.strip_prefix("event:") {
            current.event = v.trim().to_owned();
        } else if let Some(v) = line.strip_prefix("id:") {
            current.id = Some(v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("data:") {
            current.data.push_str(v.trim_start());
        }
    }
    from
}

/// A needle search for 16 needles (8 `needlea`, 8 `needleb`), started on `api` and followed
/// there on a thread: RAW without a window, it answers once, when it has its 16 records (or its
/// 90 s are up). Its id, the start answer, and the thread giving the events received there.
fn start_needle_search(api: &Serve) -> (String, Value, std::thread::JoinHandle<Vec<SseEvent>>) {
    let needles = "SELECT id, event_ts FROM STREAM(90000, TIME) \
                   WHERE id = 'needlea' OR id = 'needleb' LIMIT 16";
    start_following(api, needles)
}

/// Starts `text` on `api` and follows it there on a thread: its id, the start answer, and the
/// thread giving the events received there.
fn start_following(
    api: &Serve,
    text: &str,
) -> (String, Value, std::thread::JoinHandle<Vec<SseEvent>>) {
    let needles = text.to_owned();
    let started: Value = reqwest::blocking::Client::new()
        .post(format!("{}/api/v1/queries", api.url))
        .body(needles)
        .send()
        .unwrap()
        .json()
        .unwrap();
    let id = started["id"].as_str().unwrap_or_else(|| panic!("{started}")).to_owned();
    let following = {
        let (url, id) = (api.url.clone(), id.clone());
        std::thread::spawn(move || follow(&url, &id, None))
    };
    (id, started, following)
}

/// Checks the events of [`start_needle_search`]'s query followed to its end: one result, the
/// first emission, with each of the 16 needles once.
fn assert_every_needle_once(events: &[SseEvent]) {
    let results: Vec<&SseEvent> = events.iter().filter(|e| e.event == "result").collect();
    assert_eq!(results.len(), 1, "{events:?}");
    assert_eq!(results[0].id.as_deref(), Some("1"), "the first emission: {events:?}");
    assert_eq!(events.last().map(|e| e.event.as_str()), Some("complete"), "{events:?}");
    let result: Value = serde_json::from_str(&results[0].data).unwrap();
    let records = result["records"].as_array().unwrap_or_else(|| panic!("{result}"));
    let mut by_id = std::collections::BTreeMap::new();
    for r in records {
        *by_id.entry(r["id"].as_str().unwrap().to_owned()).or_insert(0) += 1;
    }
    let distinct: std::collections::HashSet<String> =
        records.iter().map(|r| r.to_string()).collect();
    assert_eq!(distinct.len(), 16, "no record twice: {result}");
    assert_eq!(by_id.get("needlea"), Some(&8), "merged by the dead node: {result}");
    assert_eq!(by_id.get("needleb"), Some(&8), "sent while no api node merged: {result}");
}

/// The records of the result events, as JSON text.
fn needles_in(events: &[SseEvent]) -> Vec<String> {
    let mut records = Vec::new();
    for event in events.iter().filter(|e| e.event == "result") {
        let result: Value = serde_json::from_str(&event.data).unwrap();
        records.extend(result["records"].as_array().unwrap().iter().map(|r| r.to_string()));
    }
    records
}

/// Kills `api` with SIGKILL once it merged the 8 `needlea` the worker found, then has the 8
/// `needleb` found while no api node merges the query: what its client had (`following`'s
/// answer).
fn kill_9_mid_query_on<T>(
    broker: &str,
    topic: &str,
    api: &mut Serve,
    worker: &Serve,
    id: &str,
    following: std::thread::JoinHandle<T>,
    before_kill: &dyn Fn() -> bool,
) -> T {
    wait_until("the worker learning the query", Duration::from_secs(10), || {
        worker.status(id).is_some()
    });
    gen_needles(broker, topic, 3_000, "needlea", 8, 1);
    wait_until("the api node merging 8 needles", Duration::from_secs(30), || matched(api, id) >= 8);
    wait_until("what the client is to have before the kill", Duration::from_secs(30), before_kill);
    // kill -9: nothing ends cleanly, no tombstone, the client's stream breaks.
    api.child.kill().unwrap();
    api.child.wait().unwrap();
    let before = following.join().unwrap();
    gen_needles(broker, topic, 2_000, "needleb", 8, 2);
    wait_until("the worker finding them", Duration::from_secs(30), || matched(worker, id) >= 16);
    before
}

#[test]
fn an_api_node_killed_mid_query_has_its_query_adopted_and_every_needle_arrives_once() {
    let broker = Broker::shared();
    broker.create_topic("failover", 4).unwrap();
    let configs: Vec<_> = ["api_a", "api_b", "api_c", "worker_1"]
        .iter()
        .map(|node| failover_config(&broker.bootstrap, "failover", node))
        .collect();
    let config = |i: usize| configs[i].path().to_str().unwrap().to_owned();
    let mut first = Serve::start(&["--role", "api", "--config", &config(0)]);
    let others = [
        Serve::start(&["--role", "api", "--config", &config(1)]),
        Serve::start(&["--role", "api", "--config", &config(2)]),
    ];
    let worker = Serve::start(&["--role", "worker", "--workers", "1", "--config", &config(3)]);
    wait_until("the worker reading 4 partitions", Duration::from_secs(30), || {
        worker.partitions() == 4.0
    });
    let (id, started, following) = start_needle_search(&first);
    let before = kill_9_mid_query_on(
        &broker.bootstrap,
        "failover",
        &mut first,
        &worker,
        &id,
        following,
        &|| true,
    );
    assert!(before.iter().all(|e| e.event != "complete"), "{before:?}");

    // One of the two live api nodes adopts the query, the one both choose.
    let mut adopter = None;
    wait_until("an api node adopting the query", Duration::from_secs(60), || {
        adopter = others.iter().position(|api| api.status(&id).is_some());
        adopter.is_some()
    });
    let (adopter, other) = match adopter {
        Some(0) => (&others[0], &others[1]),
        _ => (&others[1], &others[0]),
    };
    // The client comes back to it by the query's id, as an EventSource would.
    let last = before.iter().rev().find_map(|e| e.id.clone());
    let after = follow(&adopter.url, &id, last.as_deref());
    assert_every_needle_once(&after);
    // Its records seen count from its first start: the 3,000 records read before the kill (and
    // counted by the dead node) are counted again, from the progress on its results partition
    let result = after.iter().find(|e| e.event == "result").expect("a result");
    let result: Value = serde_json::from_str(&result.data).unwrap();
    let seen = result["meta"]["Stats"]["Records Seen"].as_u64().unwrap_or(0);
    assert!((3_000..=5_000).contains(&seen), "Records Seen {seen}: {result}");
    // Adopted as it was: its end still counts from its first start.
    let status = adopter.status(&id).expect("the adopter knows the query");
    assert_eq!(status["ends_ms"], started["ends_ms"], "{status}");
    assert!(adopter.log().contains(&format!("adopted query {id}")), "{}", adopter.log());
    // Its end is announced (a tombstone): the worker lets it go long before its end time.
    wait_until("the worker releasing the query", Duration::from_secs(20), || {
        worker.status(&id).is_none()
    });
    assert!(other.status(&id).is_none(), "adopted once");
    assert!(!other.log().contains(&format!("adopted query {id}")), "{}", other.log());
    assert!(!adopter.log().contains("panicked"), "{}", adopter.log());
}

#[test]
fn a_windowed_query_adopted_after_kill_9_cuts_its_windows_as_before_and_each_needle_arrives_once() {
    let broker = Broker::shared();
    broker.create_topic("failover-windows", 4).unwrap();
    let configs: Vec<_> = ["api_w1", "api_w2", "worker_w"]
        .iter()
        .map(|node| failover_config(&broker.bootstrap, "failover-windows", node))
        .collect();
    let config = |i: usize| configs[i].path().to_str().unwrap().to_owned();
    let mut first = Serve::start(&["--role", "api", "--config", &config(0)]);
    let second = Serve::start(&["--role", "api", "--config", &config(1)]);
    let worker = Serve::start(&["--role", "worker", "--workers", "1", "--config", &config(2)]);
    wait_until("the worker reading 4 partitions", Duration::from_secs(30), || {
        worker.partitions() == 4.0
    });
    // The needles as they come, a window a second: the client has some windows when the api
    // node dies, and the rest come from the one that adopts the query.
    let windows = "SELECT id, event_ts FROM STREAM(30000, TIME) \
                   WHERE id = 'needlea' OR id = 'needleb' WINDOWING TUMBLING(1000, TIME)";
    let (id, received, following) = start_following_windows(&first, windows);
    // killed once the client has the window with the first 8 needles
    let had_needles = || needles_in(&received.lock().unwrap()).len() >= 8;
    let before = kill_9_mid_query_on(
        &broker.bootstrap,
        "failover-windows",
        &mut first,
        &worker,
        &id,
        following,
        &had_needles,
    );
    let after = follow_on(&second, &id, &before);
    let records = assert_numbered_on_each_needle_once(&before, &after, 16);
    assert_eq!(records.iter().filter(|r| r.contains("needlea")).count(), 8, "{records:?}");
    assert!(needles_in(&after).iter().all(|r| !r.contains("needlea")), "none again: {after:?}");
}

/// The events a client received so far, as they come.
type Received = Arc<Mutex<Vec<SseEvent>>>;

/// Starts windowed query `text` on `api` and follows it there on a thread, each event put in
/// the list it gives as it comes: its id, that list, and the thread giving the events.
fn start_following_windows(
    api: &Serve,
    text: &str,
) -> (String, Received, std::thread::JoinHandle<Vec<SseEvent>>) {
    let started: Value = reqwest::blocking::Client::new()
        .post(format!("{}/api/v1/queries", api.url))
        .body(text.to_owned())
        .send()
        .unwrap()
        .json()
        .unwrap();
    let id = started["id"].as_str().unwrap_or_else(|| panic!("{started}")).to_owned();
    let received: Received = Arc::default();
    let following = {
        let (url, id, received) = (api.url.clone(), id.clone(), received.clone());
        std::thread::spawn(move || {
            let _ = follow_into(&url, &id, None, &received);
            let events = received.lock().unwrap().clone();
            events
        })
    };
    (id, received, following)
}

/// A client whose stream from a killed api node gave it `before` comes back for the rest of
/// query `id` on `api`, from the last event it had (`Last-Event-ID`), until the query ends.
fn follow_on(api: &Serve, id: &str, before: &[SseEvent]) -> Vec<SseEvent> {
    assert!(before.iter().all(|e| e.event != "complete"), "{before:?}");
    let last = before.iter().rev().find_map(|e| e.id.clone());
    let after = follow(&api.url, id, last.as_deref());
    assert_eq!(after.last().map(|e| e.event.as_str()), Some("complete"), "{after:?}");
    after
}

/// Checks a windowed needle search's emissions before and after its api node was killed: the
/// ones after numbered on from the last before, none missing, and `needles` records in all,
/// each once. The records.
fn assert_numbered_on_each_needle_once(
    before: &[SseEvent],
    after: &[SseEvent],
    needles: usize,
) -> Vec<String> {
    let last = before.iter().rev().find_map(|e| e.id.clone());
    let numbers: Vec<u64> =
        after.iter().filter_map(|e| e.id.as_deref()).map(|n| n.parse().unwrap()).collect();
    let first_after = last.as_deref().map_or(1, |n| n.parse::<u64>().unwrap() + 1);
    let expected: Vec<u64> = (first_after..first_after + numbers.len() as u64).collect();
    assert_eq!(numbers, expected, "{after:?}");
    let records: Vec<String> = [needles_in(before), needles_in(after)].concat();
    let distinct: std::collections::HashSet<&String> = records.iter().collect();
    assert_eq!((records.len(), distinct.len()), (needles, needles), "each once: {records:?}");
    records
}

/// Three api nodes (the first to be killed) and a worker on topics named `topic`, the nodes
/// named `names`.
fn three_api_nodes_and_a_worker(
    broker: &Broker,
    topic: &str,
    names: [&str; 4],
) -> (Serve, [Serve; 2], Serve) {
    broker.create_topic(topic, 4).unwrap();
    let configs: Vec<_> =
        names.iter().map(|node| failover_config(&broker.bootstrap, topic, node)).collect();
    let config = |i: usize| configs[i].path().to_str().unwrap().to_owned();
    let first = Serve::start(&["--role", "api", "--config", &config(0)]);
    let others = [
        Serve::start(&["--role", "api", "--config", &config(1)]),
        Serve::start(&["--role", "api", "--config", &config(2)]),
    ];
    let worker = Serve::start(&["--role", "worker", "--workers", "1", "--config", &config(3)]);
    wait_until("the worker reading 4 partitions", Duration::from_secs(30), || {
        worker.partitions() == 4.0
    });
    (first, others, worker)
}

/// Of `others` (named `names`), the api node that adopts query `id` (every node makes the same
/// choice) and the one that does not.
fn adopter_and_other<'a>(
    id: &str,
    others: &'a [Serve; 2],
    names: [&str; 2],
) -> (&'a Serve, &'a Serve) {
    let alive = names.map(String::from);
    if needle_kafka::failover::adopter(id, &alive) == names[0] {
        (&others[0], &others[1])
    } else {
        (&others[1], &others[0])
    }
}

#[test]
fn a_client_following_redirects_re_attaches_through_an_api_node_that_did_not_adopt_the_query() {
    let broker = Broker::shared();
    let names = ["api_d1", "api_d2", "api_d3", "worker_d"];
    let (mut first, others, worker) =
        three_api_nodes_and_a_worker(broker, "failover-redirect", names);
    let (id, _, following) = start_needle_search(&first);
    let before = kill_9_mid_query_on(
        &broker.bootstrap,
        "failover-redirect",
        &mut first,
        &worker,
        &id,
        following,
        &|| true,
    );
    assert!(before.iter().all(|e| e.event != "complete"), "{before:?}");
    // The client asks, by the query's id, the api node that does not adopt it, at once: that
    // node waits while the query is being adopted, then sends the client to its adopter.
    let (adopter, other) = adopter_and_other(&id, &others, [names[1], names[2]]);
    let last = before.iter().rev().find_map(|e| e.id.clone());
    let (after, from) = follow_from(&other.url, &id, last.as_deref());
    // (one hop, counted in the query string)
    let there = format!("{}/api/v1/queries/{id}/events?needle_hops=1", adopter.url);
    assert_eq!(from, there, "{after:?}");
    assert_every_needle_once(&after);
    assert!(adopter.log().contains(&format!("adopted query {id}")), "{}", adopter.log());
    assert!(!other.log().contains(&format!("adopted query {id}")), "{}", other.log());
}

/// Two api nodes and a worker node keeping history, on `topic` (made here, 4 partitions), named
/// `names`, with the past in the worker's store: 8 `needlea` records among 3,000. (Bind every
/// field: a field left to `..` is dropped at once, and its node stopped.)
struct Past {
    first: Serve,
    second: Serve,
    _worker: Serve,
    _store: tempfile::TempDir,
    _configs: Vec<tempfile::NamedTempFile>,
}

impl Past {
    fn start(broker: &Broker, topic: &str, names: [&str; 3]) -> Past {
        broker.create_topic(topic, 4).unwrap();
        let configs: Vec<_> =
            names.iter().map(|node| failover_config(&broker.bootstrap, topic, node)).collect();
        let config = |i: usize| configs[i].path().to_str().unwrap().to_owned();
        let first = Serve::start(&["--role", "api", "--config", &config(0)]);
        let second = Serve::start(&["--role", "api", "--config", &config(1)]);
        let store = tempfile::tempdir().unwrap();
        let worker = Serve::start(&[
            "--role",
            "worker",
            "--workers",
            "1",
            "--config",
            &config(2),
            "--history",
            store.path().to_str().unwrap(),
        ]);
        wait_until("the worker reading 4 partitions", Duration::from_secs(30), || {
            worker.partitions() == 4.0
        });
        // the past: 8 needles kept in the worker's store before a query starts
        gen_needles(&broker.bootstrap, topic, 3_000, "needlea", 8, 1);
        wait_until("every record kept", Duration::from_secs(30), || {
            worker.metric("needle_history_records_appended_total") >= 3_000.0
        });
        Past { first, second, _worker: worker, _store: store, _configs: configs }
    }
}

/// A query that reads the stored past then goes on live (`SINCE`), its api node killed after
/// merging the past: the adopter gathers the worker's read of its store again from the results
/// topic, then the live partials, and every needle, past and live, arrives once.
#[test]
fn a_query_reading_the_past_is_adopted_after_kill_9_and_every_needle_arrives_once() {
    let broker = Broker::shared();
    let topic = "failover-past";
    let Past { mut first, second, _worker, _store, _configs } =
        Past::start(broker, topic, ["api_p1", "api_p2", "worker_p"]);
    let since = "SELECT id, event_ts FROM STREAM(90000, TIME) SINCE '-1h' \
                 WHERE id = 'needlea' OR id = 'needleb' LIMIT 16";
    let (id, _, following) = start_following(&first, since);
    wait_until("the api node merging the past's 8 needles", Duration::from_secs(30), || {
        matched(&first, &id) >= 8
    });
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let before = following.join().unwrap();
    assert!(before.iter().all(|e| e.event != "complete"), "{before:?}");
    // live needles, sent while no api node merges the query
    gen_needles(&broker.bootstrap, topic, 2_000, "needleb", 8, 2);
    wait_until("the api node left adopting the query", Duration::from_secs(60), || {
        second.status(&id).is_some()
    });
    assert_every_needle_once(&follow(&second.url, &id, None));
    assert!(second.log().contains(&format!("adopted query {id}")), "{}", second.log());
    assert!(!second.log().contains("panicked"), "{}", second.log());
}

/// A windowed query that reads the past then goes on live (`SINCE ... WINDOWING`), its api node
/// killed after its past and some live windows went out: the adopter gathers the past again,
/// goes live where the dead node did, and the client coming back gets the rest of the windows,
/// numbered on, each needle once (the past's, the live ones the dead node merged, those sent
/// while no api node merged the query).
#[test]
fn a_windowed_since_query_is_adopted_after_kill_9_and_each_needle_arrives_once() {
    let broker = Broker::shared();
    let topic = "failover-since-windows";
    let Past { mut first, second, _worker, _store, _configs } =
        Past::start(broker, topic, ["api_sw1", "api_sw2", "worker_sw"]);
    let windows = "SELECT id, event_ts FROM STREAM(40000, TIME) SINCE '-10m' \
                   WHERE id = 'needlea' OR id = 'needleb' OR id = 'needlec' \
                   WINDOWING TUMBLING(1000, TIME)";
    let (id, received, following) = start_following_windows(&first, windows);
    let had = |n: usize| needles_in(&received.lock().unwrap()).len() >= n;
    wait_until("the client having the past's 8 needles", Duration::from_secs(30), || had(8));
    gen_needles(&broker.bootstrap, topic, 2_000, "needleb", 8, 2);
    wait_until("the client having 8 live ones", Duration::from_secs(30), || had(16));
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let before = following.join().unwrap();
    // live needles, sent while no api node merges the query
    gen_needles(&broker.bootstrap, topic, 2_000, "needlec", 8, 3);
    let after = follow_on(&second, &id, &before);
    assert_numbered_on_each_needle_once(&before, &after, 24);
    let again = needles_in(&after);
    assert!(again.iter().all(|r| r.contains("needlec")), "none again: {after:?}");
    assert!(second.log().contains(&format!("adopted query {id}")), "{}", second.log());
    assert!(!second.log().contains("panicked"), "{}", second.log());
}

/// A query whose api node died and that its adopter cannot run (a notice of another build: its
/// plan is not what this node compiles) is ended by the adopter, so a client asking for it is
/// answered 404 at once, not after waiting half a minute for an adoption that will not come.
#[test]
fn a_query_its_adopter_cannot_run_is_ended_and_a_client_is_answered_at_once() {
    let broker = Broker::shared();
    broker.create_topic("failover-unrunnable", 4).unwrap();
    let config = failover_config(&broker.bootstrap, "failover-unrunnable", "api_u");
    let api = Serve::start(&["--role", "api", "--config", config.path().to_str().unwrap()]);
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            as i64;
    // the notice of an api node never heard from (so its query is an orphan at once)
    let notice = needle_kafka::wire::QueryNotice {
        v: 1,
        id: "api_ghost-1".into(),
        owner: "api_ghost".into(),
        query: "SELECT * FROM STREAM(90000, TIME) LIMIT 1".into(),
        config: needle_query::QueryConfig::default(),
        plan: "the plan of another build".into(),
        received_ms: now,
        ends_ms: now + 90_000,
        history: None,
        client: "someone".into(),
        results_from: Some(0),
        url: String::new(),
        history_workers: Vec::new(),
        history_version: None,
    };
    let message = [(Some(notice.id.as_str()), notice.to_bytes())];
    let message: Vec<(Option<&str>, &[u8])> =
        message.iter().map(|(k, v)| (*k, v.as_slice())).collect();
    broker.produce_keyed("failover-unrunnable-queries", Partitions::One(0), &message).unwrap();
    wait_until("the api node giving the query up", Duration::from_secs(60), || {
        api.log().contains("query api_ghost-1 of api node api_ghost could not be adopted")
    });
    assert!(api.log().contains("it ends (its end is announced)"), "{}", api.log());
    let asked = Instant::now();
    let answer = api.get("/api/v1/queries/api_ghost-1");
    assert_eq!(answer.status(), 404, "{:?}", answer.text());
    // (the server waits up to 30 s for a query being adopted)
    assert!(asked.elapsed() < Duration::from_secs(20), "answered after {:?}", asked.elapsed());
    assert!(!api.log().contains("panicked"), "{}", api.log());
}

/// A WebSocket to `needle serve` at `url` (`http://...`, or `ws://.../api/v1/ws`), each read
/// waiting at most `timeout`.
fn ws_connect(
    url: &str,
    timeout: Duration,
) -> tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<std::net::TcpStream>> {
    let url = match url.strip_prefix("http://") {
        Some(rest) => format!("ws://{rest}/api/v1/ws"),
        None => url.to_owned(),
    };
    let (socket, _) = tungstenite::connect(url.as_str()).unwrap_or_else(|e| panic!("{url}: {e}"));
    if let tungstenite::stream::MaybeTlsStream::Plain(tcp) = socket.get_ref() {
        tcp.set_read_timeout(Some(timeout)).unwrap();
    }
    socket
}

/// The next JSON message of `socket`; `None` once it is closed or broken.
fn ws_read(
    socket: &mut tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<std::net::TcpStream>>,
) -> Option<Value> {
    loop {
        match socket.read() {
            Ok(tungstenite::Message::Text(text)) => {
                return Some(serde_json::from_str(&text).unwrap())
            }
            Ok(tungstenite::Message::Close(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

fn ws_send(
    socket: &mut tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<std::net::TcpStream>>,
    message: Value,
) {
    socket.send(tungstenite::Message::Text(message.to_string().into())).unwrap();
}

/// The records of the `result` messages, as JSON text.
fn ws_needles(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["type"] == "result")
        .flat_map(|m| m["result"]["records"].as_array().unwrap().iter().map(|r| r.to_string()))
        .collect()
}

#[test]
fn a_websocket_client_resumes_on_the_adopter_after_kill_9_and_gets_every_needle_once() {
    let broker = Broker::shared();
    let names = ["api_s1", "api_s2", "api_s3", "worker_s"];
    let (mut first, others, worker) = three_api_nodes_and_a_worker(broker, "failover-ws", names);
    // A window a second: the client has the window with the first 8 needles when its api node
    // is killed, and the rest come from the node that adopts the query.
    let windows = "SELECT id, event_ts FROM STREAM(120000, TIME) \
                   WHERE id = 'needlea' OR id = 'needleb' WINDOWING TUMBLING(1000, TIME)";
    let mut socket = ws_connect(&first.url, Duration::from_secs(120));
    ws_send(&mut socket, serde_json::json!({"type": "start", "query": windows}));
    let started = ws_read(&mut socket).expect("an answer to the start");
    assert_eq!(started["type"], "started", "{started}");
    let id = started["id"].as_str().unwrap().to_owned();
    let received: Arc<Mutex<Vec<Value>>> = Arc::default();
    let following = {
        let received = received.clone();
        std::thread::spawn(move || {
            while let Some(message) = ws_read(&mut socket) {
                received.lock().unwrap().push(message);
            }
        })
    };
    let had_needles = || ws_needles(&received.lock().unwrap()).len() >= 8;
    kill_9_mid_query_on(
        &broker.bootstrap,
        "failover-ws",
        &mut first,
        &worker,
        &id,
        following,
        &had_needles,
    );
    let before = received.lock().unwrap().clone();
    assert!(before.iter().all(|m| m["type"] != "complete"), "{before:?}");
    let last = before.iter().filter_map(|m| m["seq"].as_u64()).max().expect("results before");

    // Asked to resume it, the api node that does not adopt it waits while it is being adopted,
    // then names the adopter's WebSocket. (Within seconds of the kill it may still name the
    // dead node, not yet noticed dead: a client that cannot reach the node named asks again.)
    let (adopter, other) = adopter_and_other(&id, &others, [names[1], names[2]]);
    let resume = serde_json::json!({"type": "resume", "id": id, "after": last});
    let mut asked = ws_connect(&other.url, Duration::from_secs(90));
    let dead_ws = format!("ws://{}/api/v1/ws", first.url.strip_prefix("http://").unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    let elsewhere = loop {
        ws_send(&mut asked, resume.clone());
        let answer = ws_read(&mut asked).expect("an answer to the resume");
        if answer["url"] != dead_ws.as_str() || Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let adopter_ws = format!("ws://{}/api/v1/ws", adopter.url.strip_prefix("http://").unwrap());
    assert_eq!(elsewhere["type"], "error", "{elsewhere}");
    assert_eq!(elsewhere["url"], adopter_ws.as_str(), "{elsewhere}");
    let adopter_name = if std::ptr::eq(adopter, &others[0]) { names[1] } else { names[2] };
    assert_eq!(elsewhere["node"], adopter_name, "{elsewhere}");

    // There, it goes on after the last result the client had.
    let mut resumed = ws_connect(elsewhere["url"].as_str().unwrap(), Duration::from_secs(90));
    ws_send(&mut resumed, resume);
    let answer = ws_read(&mut resumed).expect("an answer to the resume");
    assert_eq!(answer["type"], "resumed", "{answer}");
    let mut after = Vec::new();
    while ws_needles(&before).len() + ws_needles(&after).len() < 16 {
        let message = ws_read(&mut resumed).unwrap_or_else(|| panic!("closed: {after:?}"));
        assert_eq!(message["type"], "result", "{message}");
        after.push(message);
    }

    // Its status and its kill, asked of the other node, are sent to the adopter too.
    let direct =
        reqwest::blocking::Client::builder().redirect(reqwest::redirect::Policy::none()).build();
    let redirected = direct.unwrap().get(format!("{}/api/v1/queries/{id}?from=test", other.url));
    let redirected = redirected.send().unwrap();
    assert_eq!(redirected.status(), 307);
    let location = redirected.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(location, format!("{}/api/v1/queries/{id}?from=test&needle_hops=1", adopter.url));
    let body: Value = redirected.json().unwrap();
    assert_eq!(
        (body["node"].as_str(), body["location"].as_str()),
        (Some(adopter_name), Some(location.as_str())),
        "{body}"
    );
    let status: Value = reqwest::blocking::get(format!("{}/api/v1/queries/{id}", other.url))
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(
        (status["id"].as_str(), status["running"].as_bool()),
        (Some(id.as_str()), Some(true)),
        "{status}"
    );
    let killed = reqwest::blocking::Client::new()
        .delete(format!("{}/api/v1/queries/{id}", other.url))
        .send()
        .unwrap();
    assert_eq!(killed.status(), 200);
    assert_eq!(killed.json::<Value>().unwrap()["killed"], true);
    loop {
        let message = ws_read(&mut resumed).unwrap_or_else(|| panic!("closed: {after:?}"));
        let done = message["type"] == "complete";
        after.push(message);
        if done {
            break;
        }
    }

    // numbered on from the last the client had, none missing
    let seqs: Vec<u64> = after.iter().filter_map(|m| m["seq"].as_u64()).collect();
    let expected: Vec<u64> = (last + 1..last + 1 + seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "{after:?}");
    let records: Vec<String> = [ws_needles(&before), ws_needles(&after)].concat();
    let distinct: std::collections::HashSet<&String> = records.iter().collect();
    assert_eq!((records.len(), distinct.len()), (16, 16), "each needle once: {records:?}");
    assert_eq!(records.iter().filter(|r| r.contains("needlea")).count(), 8, "{records:?}");
    assert!(ws_needles(&after).iter().all(|r| !r.contains("needlea")), "none again: {after:?}");
}

#[test]
fn an_api_node_restarted_after_kill_9_adopts_its_own_query_and_every_needle_arrives_once() {
    let broker = Broker::shared();
    broker.create_topic("failover-restart", 4).unwrap();
    let api_config = failover_config(&broker.bootstrap, "failover-restart", "api_r");
    let worker_config = failover_config(&broker.bootstrap, "failover-restart", "worker_r");
    let api_config = api_config.path().to_str().unwrap();
    let mut api = Serve::start(&["--role", "api", "--config", api_config]);
    let worker = Serve::start(&[
        "--role",
        "worker",
        "--workers",
        "1",
        "--config",
        worker_config.path().to_str().unwrap(),
    ]);
    wait_until("the worker reading 4 partitions", Duration::from_secs(30), || {
        worker.partitions() == 4.0
    });
    let (id, started, following) = start_needle_search(&api);
    let before = kill_9_mid_query_on(
        &broker.bootstrap,
        "failover-restart",
        &mut api,
        &worker,
        &id,
        following,
        &|| true,
    );
    assert!(before.iter().all(|e| e.event != "complete"), "{before:?}");

    // The same node, started again: no other api node is alive to adopt the query.
    let again = Serve::start(&["--role", "api", "--config", api_config]);
    let last = before.iter().rev().find_map(|e| e.id.clone());
    assert_every_needle_once(&follow(&again.url, &id, last.as_deref()));
    let status = again.status(&id).expect("the restarted node knows the query");
    assert_eq!(status["ends_ms"], started["ends_ms"], "{status}");
    wait_until("the worker releasing the query", Duration::from_secs(20), || {
        worker.status(&id).is_none()
    });
}

#[test]
fn a_broker_restarted_mid_query_is_ridden_out() {
    let broker = Broker::start().expect("a broker of its own");
    broker.create_topic("outage", 4).unwrap();
    let config = kafka_config(&broker.bootstrap, "outage");
    let config = config.path().to_str().unwrap();
    let mut api = Serve::start(&["--role", "api", "--config", config]);
    let mut worker = Serve::start(&["--role", "worker", "--workers", "1", "--config", config]);
    wait_until("partitions", Duration::from_secs(30), || worker.partitions() == 4.0);
    let (id, result) = run_query(&api, BY_ID);
    wait_until("the worker learning the query", Duration::from_secs(10), || {
        worker.status(&id).is_some()
    });
    gen_needles(&broker.bootstrap, "outage", 1_000, "needlea", 5, 1);
    wait_until("the needles before the outage", Duration::from_secs(30), || {
        matched(&api, &id) >= 5
    });
    broker.stop();
    std::thread::sleep(Duration::from_secs(2));
    broker.restart().expect("the broker starts again");
    gen_needles(&broker.bootstrap, "outage", 1_000, "needleb", 5, 2);
    wait_until("the needles after the outage", Duration::from_secs(60), || {
        matched(&api, &id) >= 10
    });
    settle(&api, &id, &[&worker]);
    kill(&api, &id);
    let result = result.join().unwrap();
    let found = counts(&result);
    // Nothing is lost. Records whose offsets were not committed when the broker went away may
    // be read again when the group forms anew (at-least-once).
    assert!(found.get("needlea").is_some_and(|&n| n >= 5), "{result}");
    assert!(found.get("needleb").is_some_and(|&n| n >= 5), "{result}");
    assert!(worker.terminate(Duration::from_secs(30)).success(), "{}", worker.log());
    assert!(api.terminate(Duration::from_secs(30)).success(), "{}", api.log());
}

#[test]
fn kafka_mistakes_are_clear_errors() {
    let run = |args: &[&str]| {
        let out = Command::new(NEEDLE).args(args).env_remove("NEEDLE_SERVER").output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) =
        run(&["serve", "--listen", "127.0.0.1:0", "--source", "kafka://127.0.0.1:1/t"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("cannot reach Kafka at 127.0.0.1:1"), "{err}");
    let (code, err) = run(&["serve", "--listen", "127.0.0.1:0", "--source", "kafka:oops"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("kafka://HOST:PORT/TOPIC"), "{err}");
    let (code, err) = run(&["serve", "--role", "api", "--source", "stdin"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("reads no source"), "{err}");
    let (code, err) = run(&["gen", "bullet", "--to", "kafka://h:1/t?x=1"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no options"), "{err}");

    let broker = Broker::shared();
    let (code, err) = run(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--source",
        &format!("kafka://{}/no-such-topic", broker.bootstrap),
    ]);
    assert_eq!(code, Some(1));
    assert!(err.contains("'no-such-topic' does not exist"), "{err}");

    let mut bad = tempfile::NamedTempFile::new().unwrap();
    write!(
        bad,
        "[kafka]\nbrokers = \"{}\"\n[kafka.properties]\n\"group.id\" = \"mine\"\n",
        broker.bootstrap
    )
    .unwrap();
    let path = bad.path().to_str().unwrap();
    let (code, err) =
        run(&["serve", "--role", "worker", "--listen", "127.0.0.1:0", "--config", path]);
    assert_eq!(code, Some(1));
    assert!(err.contains("\"group.id\" cannot be set") && err.contains("kafka.group"), "{err}");
    let mut typo = tempfile::NamedTempFile::new().unwrap();
    write!(typo, "[kafka]\nbroker = \"x:1\"\n").unwrap();
    let (code, err) = run(&["config", "--config", typo.path().to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(err.contains("broker"), "{err}");
    let (code, out) = {
        let out = Command::new(NEEDLE)
            .args(["config"])
            .env("NEEDLE_KAFKA__GROUP", "g9")
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    assert_eq!(code, Some(0));
    assert!(out.contains("[kafka]") && out.contains("group = \"g9\""), "{out}");
}

#[test]
fn the_kafka_scaling_bench_reports_needle_and_the_bare_consumer() {
    let broker = Broker::shared();
    let out_dir = tempfile::tempdir().unwrap();
    let out = Command::new(NEEDLE)
        .args(["bench", "data-scaling", "--source", "kafka", "--brokers", &broker.bootstrap])
        .args(["--topic-records", "3000", "--workers", "1", "--format", "json", "--out"])
        .arg(out_dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let readers: Vec<&str> = rows.iter().map(|r| r["reader"].as_str().unwrap()).collect();
    assert_eq!(
        readers,
        [
            "rdkafka consumer",
            "needle, from a file (before)",
            "needle",
            "needle, from a file (after)"
        ],
        "{rows:?}"
    );
    for row in &rows[1..] {
        assert_eq!(row["needles_found"], 10, "{rows:?}");
    }
    // the Kafka row is measured against reading the same records from memory
    assert!(rows[2]["ratio_to_in_memory_per_cpu_sec"].as_f64().is_some(), "{rows:?}");
    assert!(rows[1]["ratio_to_in_memory_per_cpu_sec"].is_null(), "{rows:?}");
    for row in &rows {
        assert_eq!(row["records"], 3000, "{row}");
        assert!(row["records_per_sec_per_process"].as_f64().unwrap() > 0.0, "{row}");
    }
    assert!(out_dir.path().join("data-scaling-kafka.json").is_file());
    let bad = Command::new(NEEDLE)
        .args(["bench", "data-scaling", "--source", "kafka", "--workers", "0"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

/// A needle.toml keeping history in MinIO under `prefix`, this process's cache in `cache`,
/// with `kafka` as its `[kafka]` section's settings (quick failure detection added).
fn minio_history_config(
    prefix: &str,
    cache: &std::path::Path,
    kafka: &str,
) -> tempfile::NamedTempFile {
    let minio = needle_history::testing::Minio::shared();
    let mut f = tempfile::NamedTempFile::new().unwrap();
    write!(
        f,
        r#"
[runtime]
tick_ms = 50

[kafka]
{kafka}

[kafka.properties]
"session.timeout.ms" = 6000
"heartbeat.interval.ms" = 500

[history]
dir = "{url}"
cache_dir = "{cache}"
flush_ms = 200

[history.object_store]
endpoint = "{endpoint}"
region = "us-east-1"
access_key_id = "{key}"
secret_access_key = "{secret}"
allow_http = true
"#,
        url = minio.url(prefix),
        cache = cache.display(),
        endpoint = minio.endpoint,
        key = minio.access_key,
        secret = minio.secret_key,
    )
    .unwrap();
    f
}

/// The distinct `ts` of the records a store on object storage holds (each `small` record's
/// `ts` is its own), and how many records it holds in all.
fn stored_times(remote: needle_history::RemoteConfig) -> (std::collections::HashSet<i64>, u64) {
    let elsewhere = tempfile::tempdir().unwrap();
    let mut config = needle_history::StoreConfig::new(elsewhere.path());
    config.remote = Some(remote);
    let store = needle_history::Store::open_read_only(config).unwrap();
    let scan = store
        .scan(&needle_history::ScanRequest {
            from_ms: i64::MIN,
            to_ms: i64::MAX,
            filter: None,
            fields: Some(vec!["ts".into()]),
        })
        .unwrap();
    let (mut times, mut all) = (std::collections::HashSet::new(), 0);
    for block in &scan.blocks {
        for r in block.read().unwrap() {
            all += 1;
            times.insert(r.record.get("ts").and_then(|v| v.as_i64()).unwrap());
        }
    }
    (times, all)
}

/// A process keeping a Kafka topic's history in a real S3 server (MinIO) is killed with
/// SIGKILL mid-ingest, and started again on a machine that lost its disk (a new cache
/// directory): every record the topic holds is in the store (offsets were committed only for
/// records whose parts were uploaded), once (the records uploaded whose offsets the kill left
/// uncommitted are read again, but not kept again), read back by a third process.
#[test]
fn a_process_killed_mid_ingest_into_an_object_store_loses_no_record() {
    let broker = Broker::shared();
    let minio = needle_history::testing::Minio::shared();
    broker.create_topic("s3hist", 4).unwrap();
    const RECORDS: usize = 200_000;
    gen(&broker.bootstrap, "s3hist", &["small", "--count", &RECORDS.to_string()]);
    let remote = minio.remote("kill-9-mid-ingest");
    let config = |cache: &std::path::Path| {
        minio_history_config(
            "kill-9-mid-ingest",
            cache,
            "group = \"s3hist-readers\"\nstart = \"earliest\"",
        )
    };
    let source = format!("kafka://{}/s3hist", broker.bootstrap);
    let (cache_a, cache_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config_a = config(cache_a.path());
    let mut first = Serve::start(&[
        "--workers",
        "2",
        "--source",
        &source,
        "--config",
        config_a.path().to_str().unwrap(),
    ]);
    let appended = |s: &Serve| s.metric("needle_history_records_appended_total");
    wait_until("a part of the topic kept", Duration::from_secs(60), || {
        appended(&first) >= (RECORDS / 4) as f64
    });
    first.child.kill().unwrap();
    let _ = first.child.wait();
    let (before, _) = stored_times(remote.clone());
    assert!(before.len() < RECORDS, "the kill came after everything was stored");

    let config_b = config(cache_b.path());
    let second = Serve::start(&[
        "--workers",
        "2",
        "--source",
        &source,
        "--config",
        config_b.path().to_str().unwrap(),
    ]);
    wait_until("the rest of the topic kept", Duration::from_secs(120), || {
        std::thread::sleep(Duration::from_millis(500));
        stored_times(remote.clone()).0.len() >= RECORDS
    });
    let (times, all) = stored_times(remote.clone());
    assert_eq!((times.len(), all as usize), (RECORDS, RECORDS), "every record, once");
    assert!(!second.log().contains("panicked"), "{}", second.log());
}

/// Two worker nodes keep one history store in a real S3 server (MinIO), each under its own
/// name; an api node reads it back: every record once. Then one worker is killed with
/// SIGKILL as soon as its records are uploaded (their offsets not yet committed): the survivor
/// takes its partitions over, reads its parts too, and keeps none of its records again; a
/// query reading the past then going on live counts every record once across the seam, and
/// the past holds every record produced, once.
#[test]
fn workers_sharing_a_store_on_minio_answer_for_a_killed_workers_past() {
    let broker = Broker::shared();
    let minio = needle_history::testing::Minio::shared();
    broker.create_topic("shist", 4).unwrap();
    let node_config = |name: &str, cache: &std::path::Path| {
        let kafka = format!(
            "brokers = \"{}\"\ndata_topic = \"shist\"\nquery_topic = \"shist-queries\"\n\
             results_topic = \"shist-results\"\ngroup = \"shist-workers\"\nnode_id = \"{name}\"",
            broker.bootstrap
        );
        minio_history_config("shared-workers", cache, &kafka)
    };
    // the api node reads the store's manifest to plan history queries from
    let cache_api = tempfile::tempdir().unwrap();
    let api_config = node_config("api-s", cache_api.path());
    let api = Serve::start(&["--role", "api", "--config", api_config.path().to_str().unwrap()]);
    let worker_config = node_config;
    let (cache_a, cache_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (config_a, config_b) =
        (worker_config("w-a", cache_a.path()), worker_config("w-b", cache_b.path()));
    let worker = |config: &tempfile::NamedTempFile| {
        Serve::start(&[
            "--role",
            "worker",
            "--workers",
            "1",
            "--config",
            config.path().to_str().unwrap(),
        ])
    };
    let mut first = worker(&config_a);
    let second = worker(&config_b);
    wait_until("two partitions each", Duration::from_secs(30), || {
        first.partitions() == 2.0 && second.partitions() == 2.0
    });
    const RECORDS: usize = 3_000;
    gen(&broker.bootstrap, "shist", &["small", "--count", &RECORDS.to_string()]);
    let remote = minio.remote("shared-workers");
    wait_until("every record in the object store", Duration::from_secs(60), || {
        std::thread::sleep(Duration::from_millis(300));
        stored_times(remote.clone()).0.len() >= RECORDS
    });
    let appended = |w: &Serve| w.metric("needle_history_records_appended_total");
    assert!(appended(&first) > 0.0 && appended(&second) > 0.0, "each keeps its partitions'");

    let all = query(&api, "SELECT COUNT(*) AS n FROM HISTORY('-1h')");
    assert_eq!(all["records"][0]["n"], RECORDS, "{all}");
    assert_eq!(all["meta"]["History"]["workers"], 2, "{all}");
    assert_eq!(all["meta"]["History"]["scan"]["planned"], 2, "planned from the manifest: {all}");

    // at once: the offsets of records made durable are committed within a second
    // (auto-commit), so the survivor reads the last of them again
    first.child.kill().unwrap();
    let _ = first.child.wait();
    // once the api node no longer counts the dead worker among those it asks
    wait_until("the api node to give up on the killed worker", Duration::from_secs(30), || {
        std::thread::sleep(Duration::from_millis(500));
        let r = query(&api, "SELECT COUNT(*) AS n FROM HISTORY('-1h')");
        r["meta"]["History"]["workers"] == 1 && second.partitions() == 4.0
    });
    let after =
        query(&api, "SELECT COUNT(*) AS n, MIN(ts) AS lo, MAX(ts) AS hi FROM HISTORY('-1h')");
    assert_eq!(after["records"][0]["n"], RECORDS, "the dead worker's past too: {after}");
    assert!(after["meta"]["History"]["scan"]["parts_of_others"].as_u64() > Some(0), "{after}");
    let missing = &after["meta"]["History"]["workers_missing"];
    assert!(missing.as_array().is_none_or(|m| m.is_empty()), "{after}");

    // the past, then live: each record once across the seam
    let since = "SELECT COUNT(*) AS n FROM STREAM(120000, TIME) SINCE '-1h'";
    let (id, result) = run_query(&api, since);
    wait_until("the worker learning the query", Duration::from_secs(10), || {
        second.status(&id).is_some()
    });
    const MORE: usize = 2_000;
    gen(&broker.bootstrap, "shist", &["small", "--count", &MORE.to_string(), "--seed", "2"]);
    wait_until("the live records", Duration::from_secs(30), || {
        matched(&api, &id) >= (RECORDS + MORE) as u64
    });
    settle(&api, &id, &[&second]);
    kill(&api, &id);
    let result = result.join().unwrap();
    let total = RECORDS + MORE;
    assert_eq!(result["records"][0]["n"], total, "{result}");
    wait_until("the live records kept", Duration::from_secs(30), || {
        std::thread::sleep(Duration::from_millis(300));
        stored_times(remote.clone()).1 as usize >= total
    });
    let past = query(&api, "SELECT COUNT(*) AS n FROM HISTORY('-1h')");
    assert_eq!(past["records"][0]["n"], total, "nothing lost, nothing twice: {past}");
    let distinct = query(&api, "SELECT COUNT(DISTINCT id) AS ids FROM HISTORY('-1h')");
    assert_eq!(distinct["records"][0]["ids"], total as f64, "{distinct}");
    let (_, all) = stored_times(remote);
    assert_eq!(all as usize, total, "each record once in the store");
    assert!(!api.log().contains("panicked") && !second.log().contains("panicked"));
}
