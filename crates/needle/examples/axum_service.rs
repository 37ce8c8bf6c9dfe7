//! needle inside an axum service, next to the program's own routes.
//!
//! ```text
//! cargo run -p needle --example axum_service                 # serves on 127.0.0.1:8080
//! cargo run -p needle --example axum_service -- --self-test  # a free port; checks itself, exits
//! ```
//! The program's own routes: `GET /hello`, and `POST /events` (NDJSON lines, pushed into needle).
//! needle's HTTP API is nested under `/needle`: `POST /needle/api/v1/query` with a BQL query
//! answers over the events posted meanwhile, and `/needle/metrics`, `/needle/api/v1/queries`...
//! work as on `needle serve`.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use needle::{Needle, Pusher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The program's state: its needle's pusher, shared by the requests that post events.
#[derive(Clone)]
struct App {
    pusher: Arc<Mutex<Pusher>>,
}

async fn hello() -> &'static str {
    "hello from the program's own route\n"
}

/// Pushes every line of the body into needle.
async fn events(State(app): State<App>, body: Bytes) -> Result<String, (StatusCode, String)> {
    let mut pusher = app.pusher.lock().unwrap_or_else(|e| e.into_inner());
    let mut lines = 0;
    for line in body.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        pusher.push_json(line).map_err(|e| (StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
        lines += 1;
    }
    pusher.flush().map_err(|e| (StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    Ok(format!("{lines} events\n"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let self_test = std::env::args().any(|a| a == "--self-test");
    let needle = Needle::builder().workers(2).start()?;
    let app = App { pusher: Arc::new(Mutex::new(needle.pusher()?)) };
    let routes = Router::new()
        .route("/hello", get(hello))
        .route("/events", post(events))
        .with_state(app)
        .nest_service("/needle", needle.http_api());
    let address = if self_test { "127.0.0.1:0" } else { "127.0.0.1:8080" };
    let listener = tokio::net::TcpListener::bind(address).await?;
    let url = format!("http://{}", listener.local_addr()?);
    println!("listening on {url}: GET /hello, POST /events, needle under /needle");
    let server = tokio::spawn(async move { axum::serve(listener, routes).await });
    if !self_test {
        server.await??;
        return Ok(());
    }
    check(&url).await?;
    server.abort();
    println!("self-test passed");
    Ok(())
}

/// Posts a query and, while it runs, 500 events of which 50 are needles; the query's answer
/// must count all 50.
async fn check(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let client = reqwest::Client::new();
    let hello = client.get(format!("{url}/hello")).send().await?.text().await?;
    assert!(hello.starts_with("hello"), "{hello}");
    let query = client
        .post(format!("{url}/needle/api/v1/query"))
        .header("content-type", "text/plain")
        .body("SELECT COUNT(*) AS needles FROM STREAM(1500, TIME) WHERE kind = 'needle'")
        .send();
    let query = tokio::spawn(query);
    // the query starts when its request arrives: post the events a little after
    tokio::time::sleep(Duration::from_millis(300)).await;
    let body: String = (0..500)
        .map(|i| {
            format!("{{\"i\":{i},\"kind\":\"{}\"}}\n", if i % 10 == 0 { "needle" } else { "hay" })
        })
        .collect();
    let posted = client.post(format!("{url}/events")).body(body).send().await?.text().await?;
    println!("POST /events: {}", posted.trim());
    let answer: serde_json::Value = query.await??.json().await?;
    println!("POST /needle/api/v1/query: {answer}");
    assert_eq!(answer["records"][0]["needles"], 50, "{answer}");
    let metrics = client.get(format!("{url}/needle/metrics")).send().await?.text().await?;
    assert!(metrics.contains("needle_records_read_total 500"), "{metrics}");
    Ok(())
}
