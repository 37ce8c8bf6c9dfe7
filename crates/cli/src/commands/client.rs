//! What the commands that talk to a running server share: the server's URL (`--server`, else
//! `NEEDLE_SERVER`, else the default listen address), the bearer token (`NEEDLE_TOKEN`), and
//! turning an error answer into a message.

use reqwest::blocking::{Client, RequestBuilder, Response};

pub const DEFAULT_SERVER: &str = "http://127.0.0.1:9900";

/// Where the server is: `--server URL` > `NEEDLE_SERVER` > the default.
pub fn server_url(flag: Option<String>) -> String {
    flag.or_else(|| std::env::var("NEEDLE_SERVER").ok())
        .unwrap_or_else(|| DEFAULT_SERVER.to_owned())
        .trim_end_matches('/')
        .to_owned()
}

pub fn client() -> Client {
    Client::builder().timeout(None).build().expect("an HTTP client without TLS always builds")
}

/// Adds the bearer token from `NEEDLE_TOKEN`, if set.
pub fn authorized(request: RequestBuilder) -> RequestBuilder {
    match std::env::var("NEEDLE_TOKEN") {
        Ok(token) if !token.is_empty() => request.bearer_auth(token),
        _ => request,
    }
}

/// The body of a successful answer as JSON, or a message saying what the server (or the
/// connection) said.
pub fn json_or_message(
    response: reqwest::Result<Response>,
    server: &str,
) -> Result<serde_json::Value, String> {
    let response =
        response.map_err(|e| format!("cannot reach the needle server at {server}: {e}"))?;
    let status = response.status();
    let body: serde_json::Value = response.json().map_err(|e| {
        format!("the server at {server} answered {status} with a body that is not JSON: {e}")
    })?;
    if status.is_success() {
        return Ok(body);
    }
    let mut message = body["error"].as_str().unwrap_or("error").to_owned();
    if let (Some(line), Some(column)) = (body["line"].as_u64(), body["column"].as_u64()) {
        message.push_str(&format!("\nat line {line}, column {column}"));
    }
    if let Some(hint) = body["hint"].as_str() {
        message.push_str(&format!("\nhint: {hint}"));
    }
    Err(message)
}
