//! `GET /api/v1/ws`: a WebSocket to run many queries at once over one connection.
//!
//! Client → server (text frames, JSON):
//! - `{"type": "start", "query": "<BQL or Bullet JSON>", "tag": "<optional, echoed back>"}`
//! - `{"type": "kill", "id": "<query id>"}`
//! - `{"type": "resume", "id": "<query id>", "after": n}`: follow a query this connection did not
//!   start, from the emission after number `n` (0 or absent: from the first). Any number of
//!   clients follow one query: the first client of a query started with `POST /api/v1/queries`
//!   (or adopted after its api node died) gets its emissions since its start, any other those
//!   from when it came. In the distributed mode, a client whose api node died sends it to the
//!   api node that adopted the query, with the `seq` of the last result it received.
//!   A query whose api node died and that is about to be adopted is waited for (up to 30 s;
//!   the connection's next messages wait with it). A query another live api node holds (it
//!   was started there, or adopted there) is answered with an error carrying that node's
//!   WebSocket URL ([`WsElsewhere`]): resume it there.
//!
//! Server → client:
//! - `{"type": "started", "id": ..., "tag": ...}`; `{"type": "resumed", "id": ..., "after": n}`
//! - `{"type": "result", "id": ..., "seq": n, "result": {"records": [...], "meta": {...}}}` per
//!   emission, `seq` numbering them from 1 (a gap: emissions dropped for a slow client)
//! - `{"type": "complete", "id": ..., "dropped": n}` when a query ends
//! - `{"type": "error", "tag"/"id": ..., "error": ..., "line", "column", "hint"}` for a bad message
//!   or query; the connection stays open. For a `resume` or `kill` of a query another api node
//!   holds, the error also has `"node"` (its name) and `"url"` (its WebSocket URL, `ws://` or
//!   `wss://` and `/api/v1/ws`).
//!
//! A slow client never stalls the workers: each query's results wait in the connection's own
//! bounded queue (oldest dropped and counted). Closing the socket leaves the queries it started
//! or resumed; a query no other client follows is killed.

use crate::request::{submit_error, Owner};
use crate::state::AppState;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use futures_util::{FutureExt, SinkExt, StreamExt};
use needle_engine::exec::Emission;
use needle_runtime::remote::Holder;
use needle_runtime::{ReadyQueues, ResultQueue};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Bytes a WebSocket reads at a time (a larger message is read in several).
const WS_READ_BUFFER_BYTES: usize = 8 << 10;

/// A WebSocket to start, follow (`resume`) and kill many queries on one connection, JSON text
/// messages each way (see the module doc for every message). A `resume` or `kill` of a query
/// that another api node holds (the distributed mode) is answered with a [`WsElsewhere`] error:
/// `{"type": "error", "id": ..., "error": ..., "node": ..., "url": "ws://HOST:PORT/api/v1/ws"}`.
#[utoipa::path(get, path = "/api/v1/ws", tag = "queries",
    responses((status = 101, description = "Switching to the WebSocket protocol described in the module doc"),
        (status = 400, description = "Not a WebSocket handshake (a plain GET)")))]
pub async fn websocket(
    State(state): State<AppState>,
    Owner(owner): Owner,
    grant: Option<axum::Extension<crate::auth::Grant>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let max = state.config().server.max_request_bytes;
    let grant = grant.map(|g| g.0);
    upgrade
        .max_message_size(max)
        // a connection's read buffer is allocated whole when it opens: tungstenite's default
        // 128 KiB made 10,000 idle connections hold 1.4 GB; a client's messages are small
        .read_buffer_size(WS_READ_BUFFER_BYTES)
        .on_upgrade(move |socket| session(socket, state, owner, grant))
}

async fn session(
    socket: WebSocket,
    state: AppState,
    owner: String,
    grant: Option<crate::auth::Grant>,
) {
    let (mut sink, mut incoming) = socket.split();
    let (out, mut outgoing) = mpsc::channel::<String>(64);
    // Messages waiting together go out in one write: under a burst of results, one flush
    // (a syscall) per message kept the HTTP thread busy.
    let writer = tokio::spawn(async move {
        while let Some(text) = outgoing.recv().await {
            let mut sent = sink.feed(Message::Text(text.into())).await;
            while let (Ok(()), Ok(text)) = (&sent, outgoing.try_recv()) {
                sent = sink.feed(Message::Text(text.into())).await;
            }
            if sent.is_err() || sink.flush().await.is_err() {
                break;
            }
        }
    });
    // One task sends the results of every query this connection follows: a task per query
    // cost ~700 bytes of each of a million idle queries.
    let ready = ReadyQueues::new();
    let follows = Arc::new(Mutex::new(Follows::default()));
    let pump = tokio::spawn(pump(follows.clone(), ready.clone(), out.clone()));
    let mut pumps = Pumps { follows, ready };
    // A message read while gathering a batch of starts that was not a start.
    let mut ahead: Option<Message> = None;
    loop {
        let message = match ahead.take() {
            Some(message) => message,
            None => match incoming.next().await {
                Some(Ok(message)) => message,
                _ => break,
            },
        };
        let request = match message {
            Message::Text(text) => match serde_json::from_str::<Value>(&text) {
                Ok(request) => request,
                Err(e) => {
                    let text = format!("the message is not valid JSON: {e}");
                    let _ = out.send(error(None, &text)).await;
                    continue;
                }
            },
            Message::Close(_) => break,
            Message::Binary(_) => {
                let _ = out.send(error(None, "send text frames with JSON messages")).await;
                continue;
            }
            _ => continue,
        };
        if !is_start(&request) {
            handle(&state, &owner, grant.as_ref(), request, &out, &mut pumps).await;
            continue;
        }
        // Starts that have already arrived are started together: one change of the workers'
        // snapshot for the lot (a client starting 100,000 queries sends them in a stream).
        let mut batch = vec![request];
        let mut closed = false;
        while batch.len() < START_BATCH {
            match incoming.next().now_or_never() {
                None => break,
                Some(Some(Ok(message))) => match start_request(&message) {
                    Some(request) => batch.push(request),
                    None => {
                        ahead = Some(message);
                        break;
                    }
                },
                Some(_) => {
                    closed = true;
                    break;
                }
            }
        }
        start(&state, &owner, batch, &out, &mut pumps).await;
        if closed {
            break;
        }
    }
    pump.abort();
    for (id, results) in pumps.unfinished() {
        if results.leave() {
            state.runtime().kill(&id);
        }
    }
    drop(out);
    let _ = writer.await;
}

async fn handle(
    state: &AppState,
    owner: &str,
    grant: Option<&crate::auth::Grant>,
    request: Value,
    out: &mpsc::Sender<String>,
    pumps: &mut Pumps,
) {
    let tag = request.get("tag").cloned();
    match request.get("type").and_then(Value::as_str) {
        Some("start") => start(state, owner, vec![request], out, pumps).await,
        Some("resume") => resume(state, grant, &request, out, pumps).await,
        Some("kill") => {
            let id = request.get("id").and_then(Value::as_str).unwrap_or_default();
            if let Some(holder) = state.runtime().holder(id) {
                let _ = out.send(elsewhere(id, holder)).await;
            } else if !crate::auth::may_kill(grant, state, id) {
                let refused = crate::auth::not_yours(id).body.error;
                let _ = out
                    .send(json!({"type": "error", "id": id, "error": refused}).to_string())
                    .await;
            } else if !state.runtime().kill(id) {
                let _ = out.send(json!({"type": "error", "id": id, "error": format!("no running query '{id}'")}).to_string()).await;
            }
        }
        other => {
            let what = other.map_or("a message without \"type\"".to_owned(), |t| {
                format!("unknown message type '{t}'")
            });
            let text = format!("{what}; send \"start\", \"kill\" or \"resume\"");
            let _ = out.send(error(tag, &text)).await;
        }
    }
}

/// The queries one connection follows, by id: what its pump reads from each.
#[derive(Default)]
struct Follows {
    by_id: HashMap<Arc<str>, Follow>,
}

struct Follow {
    results: Arc<ResultQueue>,
    /// Emissions numbered up to this one are not sent (a `resume` after them).
    after: u64,
}

/// A connection's side of its pump: the queries it follows, and the list their queues put
/// themselves on when they have something to send.
struct Pumps {
    follows: Arc<Mutex<Follows>>,
    ready: Arc<ReadyQueues>,
}

impl Pumps {
    fn lock(&self) -> std::sync::MutexGuard<'_, Follows> {
        self.follows.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends the results of query `id` from `results` (those numbered past `after`), then its
    /// `complete`.
    fn insert(&mut self, id: &str, results: Arc<ResultQueue>, after: u64) {
        let id: Arc<str> = Arc::from(id);
        self.lock().by_id.insert(id.clone(), Follow { results: results.clone(), after });
        results.watch(&self.ready, id);
    }

    /// Whether this connection follows query `id` now.
    fn follows(&self, id: &str) -> bool {
        self.lock().by_id.contains_key(id)
    }

    /// The queries whose results are still being sent, with the connection's queue of each.
    fn unfinished(self) -> impl Iterator<Item = (String, Arc<ResultQueue>)> {
        let by_id = std::mem::take(&mut self.lock().by_id);
        by_id.into_iter().map(|(id, follow)| (id.to_string(), follow.results))
    }
}

/// Sends the emissions of every query of `follows` whose queue `ready` says has something, in
/// order per query, each query's `complete` after its last; ends when the connection does.
async fn pump(follows: Arc<Mutex<Follows>>, ready: Arc<ReadyQueues>, out: mpsc::Sender<String>) {
    let lock = || follows.lock().unwrap_or_else(|e| e.into_inner());
    let mut keys = Vec::new();
    loop {
        ready.wait(&mut keys).await;
        for id in keys.drain(..) {
            let Some((results, after)) =
                lock().by_id.get(&id).map(|f| (f.results.clone(), f.after))
            else {
                continue;
            };
            loop {
                let (seq, emission) = match results.try_next_numbered() {
                    None => break,
                    Some(Some(next)) => next,
                    Some(None) => {
                        lock().by_id.remove(&id);
                        let done =
                            json!({"type": "complete", "id": &*id, "dropped": results.dropped()});
                        if out.send(done.to_string()).await.is_err() {
                            return;
                        }
                        break;
                    }
                };
                if seq <= after {
                    continue;
                }
                let message = if emission.approx_bytes() < LARGE_RESULT_BYTES {
                    result_message(&id, seq, &emission)
                } else {
                    // tens of MB of text: written on a thread of its own, not one of the few
                    // that serve every client
                    let id = id.clone();
                    let made =
                        tokio::task::spawn_blocking(move || result_message(&id, seq, &emission));
                    match made.await {
                        Ok(message) => message,
                        Err(_) => return,
                    }
                };
                if out.send(message).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Start messages gathered into one [`Runtime::submit_many`](needle_runtime::Runtime::submit_many)
/// at most.
const START_BATCH: usize = 4096;

fn is_start(request: &Value) -> bool {
    request.get("type").and_then(Value::as_str) == Some("start")
}

/// The request of a message when it is a start message.
fn start_request(message: &Message) -> Option<Value> {
    let Message::Text(text) = message else { return None };
    serde_json::from_str::<Value>(text).ok().filter(is_start)
}

/// Starts the queries of `requests` (start messages) together, answering each in order.
async fn start(
    state: &AppState,
    owner: &str,
    requests: Vec<Value>,
    out: &mpsc::Sender<String>,
    pumps: &mut Pumps,
) {
    let texts: Vec<Option<&str>> =
        requests.iter().map(|r| r.get("query").and_then(Value::as_str)).collect();
    let valid: Vec<String> = texts.iter().flatten().map(|&t| t.to_owned()).collect();
    let admitted = state.admit(valid, owner).await;
    let mut answers = admitted.into_iter();
    for (request, text) in requests.iter().zip(&texts) {
        let tag = request.get("tag").cloned();
        if text.is_none() {
            let _ = out.send(error(tag, "a start message needs \"query\": \"<BQL>\"")).await;
            continue;
        }
        match answers.next() {
            Some(Ok(handle)) => {
                let id = handle.id.clone();
                let _ =
                    out.send(json!({"type": "started", "id": id, "tag": tag}).to_string()).await;
                pumps.insert(&id, handle.results, 0);
            }
            Some(Err(refused)) => {
                let mut body =
                    serde_json::to_value(submit_error(refused).body).unwrap_or(Value::Null);
                body["type"] = "error".into();
                body["tag"] = tag.unwrap_or(Value::Null);
                let _ = out.send(body.to_string()).await;
            }
            None => {}
        }
    }
}

/// A result whose records hold more than this is turned into its message's text off the HTTP
/// threads (an emission of 10,000 records of 7 KB is 70 MB of text: tens of milliseconds in
/// which the thread would serve no other client).
const LARGE_RESULT_BYTES: usize = 1 << 20;

/// Follows a query this connection did not start (see the module doc).
async fn resume(
    state: &AppState,
    grant: Option<&crate::auth::Grant>,
    request: &Value,
    out: &mpsc::Sender<String>,
    pumps: &mut Pumps,
) {
    let id = request.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
    let after = match request.get("after") {
        None | Some(Value::Null) => Some(0),
        Some(n) => n.as_u64(),
    };
    let refused = |text: String| json!({"type": "error", "id": id, "error": text}).to_string();
    let Some(after) = after else {
        let text = "\"after\" is the seq of the last result received: a number".to_owned();
        let _ = out.send(refused(text)).await;
        return;
    };
    if let Some(holder) = state.locate(&id).await {
        let _ = out.send(elsewhere(&id, holder)).await;
        return;
    }
    // following a query is a kill's right: the last follower's closing the socket ends it
    if !crate::auth::may_kill(grant, state, &id) {
        let _ = out.send(refused(crate::auth::not_yours(&id).body.error)).await;
        return;
    }
    if pumps.follows(&id) {
        let _ = out.send(refused(format!("this connection follows query '{id}' already"))).await;
        return;
    }
    match state.follow(&id) {
        Ok(results) => {
            let _ =
                out.send(json!({"type": "resumed", "id": id, "after": after}).to_string()).await;
            pumps.insert(&id, results, after);
        }
        Err(why) => {
            let _ = out.send(refused(super::queries::unfollowable(&id, why).body.error)).await;
        }
    }
}

/// `{"type": "result", "id": ..., "seq": n, "result": {"records": [...], "meta": {...}}}`, written
/// straight from the emission ([`Emission::write_json`]: a record kept as its line's text is
/// copied): building the `serde_json::Value` tree of every result first (and freeing it) was
/// most of the HTTP threads' time when 50,000 queries completed within seconds.
fn result_message(id: &str, seq: u64, emission: &Emission) -> String {
    use std::io::Write;
    let mut out = Vec::with_capacity(64 + id.len() + emission.approx_bytes());
    out.extend_from_slice(b"{\"type\":\"result\",\"id\":");
    serde_json::to_writer(&mut out, id).expect("a string always serializes");
    // into the message itself, not through a string of its own (one allocation per result)
    write!(out, ",\"seq\":{seq},\"result\":").expect("writing to a vector cannot fail");
    emission.write_json(&mut out);
    out.push(b'}');
    String::from_utf8(out).expect("JSON text is UTF-8")
}

/// The error message for a query another api node holds (the distributed mode): resume or
/// kill it on that node.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct WsElsewhere {
    /// `error`.
    #[serde(rename = "type")]
    #[schema(example = "error")]
    pub kind: &'static str,
    /// The query id.
    pub id: String,
    /// What happened, for a person.
    pub error: String,
    /// The api node holding the query (its `kafka.node_id`).
    pub node: String,
    /// That node's WebSocket URL: its `server.advertised_url` as `ws://` or `wss://`, and
    /// `/api/v1/ws`.
    pub url: String,
}

fn elsewhere(id: &str, holder: Holder) -> String {
    let ws = holder.url.replacen("http", "ws", 1);
    let url = format!("{ws}/api/v1/ws");
    let message = WsElsewhere {
        kind: "error",
        id: id.to_owned(),
        error: format!("query '{id}' is held by api node {}: resume it at {url}", holder.node),
        node: holder.node,
        url,
    };
    serde_json::to_string(&message).unwrap_or_else(|e| error(None, &e.to_string()))
}

fn error(tag: Option<Value>, message: &str) -> String {
    json!({"type": "error", "tag": tag, "error": message}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_message_is_the_emission_as_json() {
        let emission = Emission {
            records: vec![[("id".to_owned(), needle_record::Value::from("x"))]
                .into_iter()
                .collect()],
            meta: [("Query ID".to_owned(), json!("q"))].into_iter().collect(),
            is_final: true,
        };
        let text = result_message("q-1", 3, &emission);
        let expected =
            json!({"type": "result", "id": "q-1", "seq": 3, "result": emission.to_json()});
        assert_eq!(text, expected.to_string());

        // a record kept as its line's text is copied as it came, and reads as the same JSON
        let line = br#" {"id":"y", "n":1e2,"s":"\u00e9"} "#;
        let set = needle_record::FieldSet::new(["id"]);
        set.decode(line).unwrap();
        let kept = Emission { records: vec![set.whole_record(line).unwrap()], ..emission };
        let text = result_message("q-2", 4, &kept);
        assert!(text.contains(r#"{"id":"y", "n":1e2,"s":"\u00e9"}"#), "{text}");
        let expected = json!({"type": "result", "id": "q-2", "seq": 4, "result": kept.to_json()});
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), expected);
    }

    #[test]
    fn a_query_held_elsewhere_is_answered_with_its_node_s_websocket_url() {
        let holder = |url: &str| Holder { node: "api_b".into(), url: url.into() };
        let text = elsewhere("api_a-1-2", holder("https://b.example.com:9443/needle"));
        let message: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(message["type"], "error");
        assert_eq!(message["id"], "api_a-1-2");
        assert_eq!(message["node"], "api_b");
        assert_eq!(message["url"], "wss://b.example.com:9443/needle/api/v1/ws");
        let message: Value =
            serde_json::from_str(&elsewhere("q", holder("http://10.0.0.2:9900"))).unwrap();
        assert_eq!(message["url"], "ws://10.0.0.2:9900/api/v1/ws");
        assert!(message["error"].as_str().unwrap().contains("api_b"), "{message}");
    }

    fn emission(n: u64, is_final: bool) -> Emission {
        let meta = [("n".to_owned(), json!(n))].into_iter().collect();
        Emission { records: Vec::new(), meta, is_final }
    }

    /// One pump sends the results of every query of its connection, each query's in order and
    /// its `complete` last, skips what a resume came after, and lets go of ended queries.
    #[tokio::test]
    async fn one_pump_sends_every_query_s_results_in_order_and_lets_ended_ones_go() {
        let ready = ReadyQueues::new();
        let follows = Arc::new(Mutex::new(Follows::default()));
        let (out, mut sent) = mpsc::channel::<String>(1024);
        let task = tokio::spawn(pump(follows.clone(), ready.clone(), out));
        let mut pumps = Pumps { follows, ready };
        let queues: Vec<Arc<ResultQueue>> = (0..3).map(|_| ResultQueue::new(16)).collect();
        queues[2].push(emission(1, false)); // waiting before it is followed
        for (i, q) in queues.iter().enumerate() {
            pumps.insert(&format!("q{i}"), q.clone(), if i == 2 { 1 } else { 0 });
        }
        for n in 2..5 {
            for q in &queues {
                q.push(emission(n, n == 4));
            }
        }
        let mut by_query: HashMap<String, Vec<Value>> = HashMap::new();
        while by_query.values().flatten().filter(|m| m["type"] == "complete").count() < 3 {
            let text = sent.recv().await.unwrap();
            let message: Value = serde_json::from_str(&text).unwrap();
            by_query.entry(message["id"].as_str().unwrap().to_owned()).or_default().push(message);
        }
        for (i, id) in ["q0", "q1", "q2"].iter().enumerate() {
            let kinds: Vec<(String, Value)> = by_query[*id]
                .iter()
                .map(|m| (m["type"].as_str().unwrap().to_owned(), m["seq"].clone()))
                .collect();
            // q2's first emission (seq 1) came before its resume's `after`: not sent
            let seqs = if i == 2 { vec![2, 3, 4] } else { vec![1, 2, 3] };
            let mut expected: Vec<(String, Value)> =
                seqs.into_iter().map(|s| ("result".to_owned(), json!(s))).collect();
            expected.push(("complete".to_owned(), Value::Null));
            assert_eq!(kinds, expected, "{id}");
        }
        assert!(!pumps.follows("q0") && pumps.unfinished().next().is_none());
        task.abort();
    }
}
