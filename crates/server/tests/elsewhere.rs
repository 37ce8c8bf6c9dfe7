//! An api node asked for a query that another api node holds (the distributed mode): `307` to
//! the same path and query string there for its status, its kill and its events, an error with
//! the holder's WebSocket URL for a WebSocket `resume`, and a wait while the query is being
//! adopted. No Kafka here: the announcer is a stand-in that says who holds what; the runtime
//! and the server are the real ones.

use futures_util::{SinkExt, StreamExt};
use needle_runtime::metrics::Metrics;
use needle_runtime::remote::{Announcement, Holder, QueryAnnouncer};
use needle_runtime::{NeedleConfig, Role, Runtime};
use needle_server::AppState;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Query [`HELD`] is held by api node `api_c`; query [`ADOPTED`] is being adopted until
/// `adopted_at`, then held by `api_c` too; query [`LOOPING`] is believed held by a node whose
/// URL is this node's own (two nodes each thinking the other holds it).
struct Announcer {
    adopted_at: Instant,
    own_url: String,
}

const LOOPING: &str = "api_d-19c-3";

const HELD: &str = "api_c-19c-1";
const ADOPTED: &str = "api_a-19c-2";
const HOLDER_URL: &str = "http://127.0.0.1:1/needle";

impl QueryAnnouncer for Announcer {
    fn started(&self, _: &Announcement<'_>) -> Result<(), String> {
        Ok(())
    }

    fn ended(&self, _: &str) {}

    fn history_workers(&self) -> Result<Vec<String>, String> {
        Err("none".into())
    }

    fn worker_alive(&self, _: &str) -> bool {
        false
    }

    fn adopting(&self, id: &str) -> bool {
        id == ADOPTED && Instant::now() < self.adopted_at
    }

    fn holder(&self, id: &str) -> Option<Holder> {
        if id == LOOPING {
            return Some(Holder { node: "api_d".into(), url: self.own_url.clone() });
        }
        let held = id == HELD || (id == ADOPTED && Instant::now() >= self.adopted_at);
        held.then(|| Holder { node: "api_c".into(), url: HOLDER_URL.into() })
    }
}

/// An api node's API on a free port, its query [`ADOPTED`] adopted elsewhere after `adoption`.
async fn api_node(adoption: Duration) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let announcer =
        Arc::new(Announcer { adopted_at: Instant::now() + adoption, own_url: base.clone() });
    let role = Role::Api { announcer, node: "api_b".into() };
    let runtime =
        Runtime::start_role(NeedleConfig::default(), role, Arc::new(Metrics::new())).unwrap();
    tokio::spawn(needle_server::serve(listener, AppState::new(runtime), std::future::pending()));
    base
}

fn not_following() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

/// Checks a `307` for query `id` to `path` on the holder.
async fn assert_sent_there(response: reqwest::Response, id: &str, path: &str) {
    assert_eq!(response.status(), 307);
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    // the same path and query string, the hop counted
    let hop = if path.contains('?') { "&needle_hops=1" } else { "?needle_hops=1" };
    assert_eq!(location, format!("{HOLDER_URL}{path}{hop}"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["id"], id, "{body}");
    assert_eq!(body["node"], "api_c", "{body}");
    assert_eq!(body["url"], HOLDER_URL, "{body}");
    assert_eq!(body["location"], location.as_str(), "{body}");
}

#[tokio::test]
async fn status_kill_and_events_of_a_query_held_elsewhere_are_redirected_there() {
    let base = api_node(Duration::from_secs(3600)).await;
    let client = not_following();
    let status = format!("/api/v1/queries/{HELD}?verbose=1&x=%20");
    let r = client.get(format!("{base}{status}")).send().await.unwrap();
    assert_sent_there(r, HELD, &status).await;
    let kill = format!("/api/v1/queries/{HELD}");
    let r = client.delete(format!("{base}{kill}")).send().await.unwrap();
    assert_sent_there(r, HELD, &kill).await;
    let events = format!("/api/v1/queries/{HELD}/events");
    let r = client.get(format!("{base}{events}")).header("Last-Event-ID", "3").send().await;
    assert_sent_there(r.unwrap(), HELD, &events).await;
    // a query nobody holds is not found, at once
    let asked = Instant::now();
    let r = client.get(format!("{base}/api/v1/queries/api_x-1-1")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert!(asked.elapsed() < Duration::from_secs(2), "{:?}", asked.elapsed());
}

#[tokio::test]
async fn a_query_being_adopted_is_waited_for_then_redirected_to_its_adopter() {
    // the adoption ends 1.5 s after the node's announcer is made, which is after `made`: the
    // answer must not come before (the node's start-up is not counted in the wait, so a slow
    // start cannot make the answer look early)
    let made = Instant::now();
    let base = api_node(Duration::from_millis(1500)).await;
    let path = format!("/api/v1/queries/{ADOPTED}/events");
    let r = not_following().get(format!("{base}{path}")).send().await.unwrap();
    assert!(made.elapsed() >= Duration::from_millis(1500), "waited: {:?}", made.elapsed());
    assert_sent_there(r, ADOPTED, &path).await;
}

#[tokio::test]
async fn nodes_that_send_a_request_round_in_a_loop_stop_after_three_hops() {
    let base = api_node(Duration::from_secs(3600)).await;
    let path = format!("/api/v1/queries/{LOOPING}?verbose=1");
    // each hop is counted in the query string, the rest of it kept
    let r = not_following().get(format!("{base}{path}&needle_hops=2")).send().await.unwrap();
    assert_eq!(r.status(), 307);
    let location = r.headers()["location"].to_str().unwrap();
    assert_eq!(location, format!("{base}{path}&needle_hops=3"));
    // a client that follows redirects is told to ask again, not sent round forever
    let r = reqwest::get(format!("{base}{path}")).await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "2");
    assert!(r.url().as_str().ends_with("needle_hops=3"), "{}", r.url());
    let body: Value = r.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("3 times"), "{body}");
    assert!(body["hint"].as_str().unwrap().contains("ask again"), "{body}");
    for method in [reqwest::Method::DELETE, reqwest::Method::GET] {
        let events = if method == reqwest::Method::GET { "/events" } else { "" };
        let url = format!("{base}/api/v1/queries/{LOOPING}{events}?needle_hops=3");
        let r = not_following().request(method, url).send().await.unwrap();
        assert_eq!(r.status(), 503, "{events}");
    }
}

#[tokio::test]
async fn a_websocket_resume_of_a_query_held_elsewhere_names_the_holder_s_websocket() {
    let base = api_node(Duration::from_secs(3600)).await;
    let url = format!("{}/api/v1/ws", base.replacen("http", "ws", 1));
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let mut ask = async |message: Value| -> Value {
        socket.send(message.to_string().into()).await.unwrap();
        let answer = socket.next().await.unwrap().unwrap();
        serde_json::from_str(answer.to_text().unwrap()).unwrap()
    };
    let ws = "ws://127.0.0.1:1/needle/api/v1/ws";
    for message in
        [json!({"type": "resume", "id": HELD, "after": 2}), json!({"type": "kill", "id": HELD})]
    {
        let answer = ask(message.clone()).await;
        assert_eq!(answer["type"], "error", "{message}: {answer}");
        assert_eq!(answer["id"], HELD, "{answer}");
        assert_eq!(answer["node"], "api_c", "{answer}");
        assert_eq!(answer["url"], ws, "{answer}");
    }
    let answer = ask(json!({"type": "resume", "id": "api_x-1-1"})).await;
    assert_eq!(answer["type"], "error", "{answer}");
    assert!(answer.get("url").is_none(), "nobody holds it: {answer}");
}

#[tokio::test]
async fn the_openapi_document_describes_the_redirects_and_the_websocket_error() {
    let doc = needle_server::openapi::document();
    for (path, method) in [
        ("/api/v1/queries/{id}", "get"),
        ("/api/v1/queries/{id}", "delete"),
        ("/api/v1/queries/{id}/events", "get"),
    ] {
        let redirect = &doc["paths"][path][method]["responses"]["307"];
        assert!(redirect["headers"]["Location"].is_object(), "{path} {method}: {redirect}");
        let looping = &doc["paths"][path][method]["responses"]["503"];
        assert!(looping["headers"]["Retry-After"].is_object(), "{path} {method}: {looping}");
        let schema = &redirect["content"]["application/json"]["schema"]["$ref"];
        assert_eq!(schema, "#/components/schemas/Elsewhere", "{path} {method}");
    }
    let ws = &doc["components"]["schemas"]["WsElsewhere"]["properties"];
    for field in ["type", "id", "error", "node", "url"] {
        assert!(ws[field].is_object(), "{field}: {ws}");
    }
}
