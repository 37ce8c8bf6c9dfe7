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
async fn scoped_tokens_read_start_and_kill_only_what_they_may() {
    use needle_runtime::config::{Scope, ScopedToken, TokenConfig};
    let scoped = |name: &str, scopes: Vec<Scope>, max_queries: Option<usize>| {
        let token = format!("{name}-secret");
        TokenConfig::Scoped(ScopedToken { max_queries, ..ScopedToken::new(name, &token, scopes) })
    };
    let mut config = NeedleConfig::default();
    config.server.tokens = vec![
        scoped("reader", vec![Scope::Read], None),
        scoped("alice", vec![Scope::Query], Some(1)),
        scoped("bob", vec![Scope::Query], None),
        scoped("ops", vec![Scope::Admin], None),
        "plain-secret".into(),
    ];
    let server = Server::start(config).await;
    let client = reqwest::Client::new();
    let start = |token: &'static str| {
        let request = client.post(server.url("/api/v1/queries")).bearer_auth(token);
        request.body("SELECT * FROM STREAM(60000, TIME)").send()
    };
    let kill = |token: &'static str, id: &str| {
        client.delete(server.url(&format!("/api/v1/queries/{id}"))).bearer_auth(token).send()
    };

    // a read token reads, and starts nothing
    let r = client.get(server.url("/api/v1/queries")).bearer_auth("reader-secret").send().await;
    assert_eq!(r.unwrap().status(), StatusCode::OK);
    let r = start("reader-secret").await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(json(r).await["error"].as_str().unwrap().contains("'query'"));

    // alice's own cap is one query; her queries are hers by name, never by her token's text
    let r = start("alice-secret").await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let id = json(r).await["id"].as_str().unwrap().to_owned();
    assert_eq!(&*server.runtime.query(&id).unwrap().owner, "alice");
    let r = start("alice-secret").await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(json(r).await["error"].as_str().unwrap().contains("max_queries"));

    // nor may anyone else follow its events, which would end it when they close
    let events = |token: &'static str| {
        let url = server.url(&format!("/api/v1/queries/{id}/events"));
        client.get(url).bearer_auth(token).send()
    };
    assert_eq!(events("reader-secret").await.unwrap().status(), StatusCode::FORBIDDEN);
    assert_eq!(events("bob-secret").await.unwrap().status(), StatusCode::FORBIDDEN);

    // bob may not kill it (nor may a read token); an admin token may
    let r = kill("bob-secret", &id).await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(json(r).await["hint"].as_str().unwrap().contains("admin"));
    assert_eq!(kill("reader-secret", &id).await.unwrap().status(), StatusCode::FORBIDDEN);
    assert!(server.runtime.query(&id).unwrap().ended_ms.is_none(), "still running");
    let r = kill("ops-secret", &id).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(json(r).await["killed"], true);

    // bob kills his own; a plain token has every scope and a hashed owner
    let r = start("bob-secret").await.unwrap();
    let id = json(r).await["id"].as_str().unwrap().to_owned();
    assert_eq!(json(kill("bob-secret", &id).await.unwrap()).await["killed"], true);
    let r = start("plain-secret").await.unwrap();
    let id = json(r).await["id"].as_str().unwrap().to_owned();
    let owner = server.runtime.query(&id).unwrap().owner.to_string();
    assert!(owner.starts_with("token-") && !owner.contains("plain"), "{owner}");
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
