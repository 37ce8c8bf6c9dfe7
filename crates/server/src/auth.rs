//! Bearer tokens: when `server.tokens` is configured, every request but `GET /healthz` must carry
//! `Authorization: Bearer <one of them>`. Without tokens (the default, on loopback) the API is
//! open.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
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
    if tokens.is_empty() || OPEN_PATHS.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match presented {
        Some(token) if tokens.iter().any(|t| constant_time_eq(t.as_bytes(), token.as_bytes())) => {
            next.run(request).await
        }
        Some(_) => unauthorized("the bearer token is not one this server accepts"),
        None => unauthorized("this server needs a bearer token"),
    }
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
