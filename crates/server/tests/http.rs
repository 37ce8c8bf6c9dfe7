//! The HTTP API served on a free loopback port and called with a real HTTP client.

mod common;

use common::Server;
use needle_runtime::NeedleConfig;
use reqwest::StatusCode;
use serde_json::Value;

async fn json(response: reqwest::Response) -> Value {
    let ct = response.headers()[reqwest::header::CONTENT_TYPE].to_str().unwrap().to_owned();
    assert!(ct.starts_with("application/json"), "content type {ct}");
    response.json().await.unwrap()
}

#[tokio::test]
async fn health_metrics_and_openapi_answer() {
    let server = Server::start(NeedleConfig::default()).await;
    let client = reqwest::Client::new();

    let r = client.get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(json(r).await["status"], "ok");

    let r = client.get(server.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let text = r.text().await.unwrap();
    assert!(text.contains("needle_records_read_total 0"), "{text}");

    let r = client.get(server.url("/api/v1/openapi.json")).send().await.unwrap();
    let doc = json(r).await;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    assert!(doc["paths"]["/healthz"]["get"].is_object(), "{doc}");
    server.shutdown().await;
}

#[tokio::test]
async fn unknown_paths_and_wrong_methods_get_json_errors() {
    let server = Server::start(NeedleConfig::default()).await;
    let client = reqwest::Client::new();

    let r = client.get(server.url("/api/v1/nope")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let body = json(r).await;
    assert_eq!(body["error"], "no such endpoint: /api/v1/nope");
    assert!(body["hint"].as_str().unwrap().contains("openapi.json"));

    let r = client.post(server.url("/healthz")).body("x").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(r.headers().contains_key(reqwest::header::ALLOW));
    let body = json(r).await;
    assert!(body["hint"].as_str().unwrap().contains("Allow header"), "{body}");
    server.shutdown().await;
}

#[tokio::test]
async fn tokens_guard_everything_but_health() {
    let mut config = NeedleConfig::default();
    config.server.tokens = vec!["s3cret".into()];
    let server = Server::start(config).await;
    let client = reqwest::Client::new();

    let r = client.get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    let r = client.get(server.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers()[reqwest::header::WWW_AUTHENTICATE], "Bearer");
    assert_eq!(json(r).await["error"], "this server needs a bearer token");

    let r = client.get(server.url("/metrics")).bearer_auth("wrong").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    let r = client.get(server.url("/metrics")).bearer_auth("s3cret").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    server.shutdown().await;
}

#[tokio::test]
async fn cors_is_off_by_default_and_on_when_configured() {
    let server = Server::start(NeedleConfig::default()).await;
    let client = reqwest::Client::new();
    let r = client.get(server.url("/healthz")).header("Origin", "http://a.example").send().await;
    assert!(!r.unwrap().headers().contains_key("access-control-allow-origin"));
    server.shutdown().await;

    let mut config = NeedleConfig::default();
    config.server.cors_origins = vec!["http://a.example".into()];
    let server = Server::start(config).await;
    let r = client.get(server.url("/healthz")).header("Origin", "http://a.example").send().await;
    assert_eq!(r.unwrap().headers()["access-control-allow-origin"], "http://a.example");
    server.shutdown().await;
}

#[tokio::test]
async fn the_page_and_its_assets_are_served_even_with_tokens() {
    let mut config = NeedleConfig::default();
    config.server.tokens = vec!["s3cret".into()];
    let server = Server::start(config).await;
    let client = reqwest::Client::new();

    let r = client.get(server.url("/")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let ct = r.headers()[reqwest::header::CONTENT_TYPE].to_str().unwrap().to_owned();
    assert!(ct.starts_with("text/html"), "content type {ct}");
    let page = r.text().await.unwrap();
    assert!(page.contains("<html"), "{page}");
    assert_eq!(needle_server::routes::ui::embedded(), !page.contains("npm run build"));

    // Every script and stylesheet the page names is served with its content type.
    let assets: Vec<&str> =
        page.split('"').filter(|s| s.starts_with("/assets/") && !s.contains(' ')).collect();
    assert_eq!(needle_server::routes::ui::embedded(), !assets.is_empty(), "{page}");
    for asset in assets {
        let r = client.get(server.url(asset)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{asset}");
        let ct = r.headers()[reqwest::header::CONTENT_TYPE].to_str().unwrap().to_owned();
        let expected = if asset.ends_with(".js") { "text/javascript" } else { "text/css" };
        assert!(ct.starts_with(expected), "{asset}: {ct}");
        assert!(!r.bytes().await.unwrap().is_empty());
    }

    let r = client.get(server.url("/assets/nope-123.js")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(json(r).await["error"], "no such asset: /assets/nope-123.js");

    // The API behind the page still wants the token.
    let r = client.get(server.url("/api/v1/queries")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    server.shutdown().await;
}
