//! History over real HTTP: records sent to the server's TCP source are kept, a HISTORY query
//! reads them back, `/healthz` reports the store, and a server that keeps no history answers a
//! history query with a 400 that points at the clause.

mod common;

use common::Server;
use needle_runtime::NeedleConfig;
use reqwest::StatusCode;
use serde_json::Value;
use std::time::Duration;

#[tokio::test]
async fn a_history_query_over_http_reads_what_the_server_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = NeedleConfig::default();
    config.history.dir = dir.path().display().to_string();
    config.history.flush_ms = 50;
    let server = Server::start(config).await;
    let lines: Vec<String> = (0..500).map(|i| format!(r#"{{"i":{i},"k":"k{}"}}"#, i % 5)).collect();
    server.send(lines).await;
    let client = reqwest::Client::new();
    // wait until the server has read them all (the history tap appends what the workers get)
    let mut n = 0;
    for _ in 0..100 {
        let text = "SELECT COUNT(*) AS n FROM HISTORY(0) WHERE k = 'k3'";
        let body = server.post_json("/api/v1/query", text).await;
        n = body["records"][0]["n"].as_i64().unwrap_or(0);
        if n == 100 {
            assert!(body["meta"]["History"].is_object(), "{body}");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(n, 100);
    let health: Value =
        client.get(server.url("/healthz")).send().await.unwrap().json().await.unwrap();
    assert_eq!(health["history"]["status"], "ok", "{health}");
    let metrics = client.get(server.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("needle_history_records_appended_total 500"), "{metrics}");
    server.shutdown().await;
}

#[tokio::test]
async fn without_history_a_history_query_is_a_400_pointing_at_the_clause() {
    let server = Server::start(NeedleConfig::default()).await;
    let client = reqwest::Client::new();
    let response = client
        .post(server.url("/api/v1/query"))
        .body("SELECT COUNT(*)\nFROM STREAM(1000, TIME) SINCE '-1h'")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body: Value = response.json().await.unwrap();
    assert_eq!((body["line"].as_u64(), body["column"].as_u64()), (Some(2), Some(25)), "{body}");
    assert!(body["hint"].as_str().unwrap().contains("--history"), "{body}");
    let health: Value =
        client.get(server.url("/healthz")).send().await.unwrap().json().await.unwrap();
    assert!(health.get("history").is_none(), "{health}");
    // and a time that is not one: 400 with its place
    let response = client
        .post(server.url("/api/v1/validate"))
        .body("SELECT * FROM HISTORY('last tuesday')")
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["column"].as_u64(), Some(23), "{body}");
    server.shutdown().await;
}
