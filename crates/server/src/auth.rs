//! Bearer tokens: when `server.tokens` is configured, every request but `GET /healthz` must carry
//! `Authorization: Bearer <one of them>`. Without tokens (the default, on loopback) the API is
//! open. The web UI's page and assets are open too (they hold no data): the page asks for a token.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Paths anyone may call: liveness checks must work without credentials.
const OPEN_PATHS: &[&str] = &["/healthz"];

pub async fn require_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let tokens = &state.config().server.tokens;
    let path = request.uri().path();
    if tokens.is_empty()
        || OPEN_PATHS.contains(&path)
        || (request.method() == axum::http::Method::GET
            && (path == "/" || path.starts_with("/assets/")))
    {
        return next.run(request).await;
    }
    match presented_token(request.headers(), request.uri()) {
        Some(token) if tokens.iter().any(|t| constant_time_eq(t.as_bytes(), token.as_bytes())) => {
            next.run(request).await
        }
        Some(_) => unauthorized("the bearer token is not one this server accepts"),
        None => unauthorized("this server needs a bearer token"),
    }
}

/// The token a request presents: `Authorization: Bearer <token>`, or, for the WebSocket only
/// (a browser cannot set headers on one), the query parameter `access_token`.
pub fn presented_token(headers: &HeaderMap, uri: &Uri) -> Option<String> {
    let header = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| t.trim().to_owned());
    header.or_else(|| {
        if uri.path() != "/api/v1/ws" {
            return None;
        }
        uri.query()?.split('&').find_map(|pair| {
            let value = pair.strip_prefix("access_token=")?;
            Some(percent_decode(value))
        })
    })
}

/// Decodes `%XX` escapes (and `+` as a space) in a query parameter's value.
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match (escaped, bytes[i]) {
            (Some(b), _) => {
                out.push(b);
                i += 3;
                continue;
            }
            (None, b'+') => out.push(b' '),
            (None, b) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn unauthorized(message: &str) -> Response {
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, message)
        .with_hint(
            "send the header 'Authorization: Bearer <token>' with a token from server.tokens",
        )
        .into_response();
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// Compares without stopping at the first difference, so timing does not reveal a token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_websocket_may_carry_its_token_in_the_query() {
        let headers = HeaderMap::new();
        let ws: Uri = "/api/v1/ws?access_token=a%2Fb+c".parse().unwrap();
        assert_eq!(presented_token(&headers, &ws).as_deref(), Some("a/b c"));
        let other: Uri = "/api/v1/queries?access_token=x".parse().unwrap();
        assert_eq!(presented_token(&headers, &other), None);
    }
}
