//! Errors: [`ServerError`] (the crate's error type, for serving), [`ApiError`] (what a client gets:
//! a status and a JSON body), and the middleware that turns the framework's own plain-text
//! rejections into the same JSON shape, so every 4xx/5xx a client sees is JSON.

use axum::body::to_bytes;
use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

/// Failures of the server itself.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("serving HTTP failed: {0}")]
    Serve(#[source] std::io::Error),
    #[error("TLS: {message}")]
    Tls { message: String },
}

/// The JSON body of every error response.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// What went wrong, for a person.
    pub error: String,
    /// For query errors: `syntax`, `semantic` or `limit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// For query errors: where in the query (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    /// What the client can do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// An error answer: a status and an [`ErrorBody`].
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub body: ErrorBody,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            body: ErrorBody {
                error: message.into(),
                kind: None,
                line: None,
                column: None,
                hint: None,
            },
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.body.hint = Some(hint.into());
        self
    }

    /// A query that cannot run: 400 for syntax and semantic errors, 422 for limits, with the
    /// line, column and hint.
    pub fn from_query_error(error: &needle_query::QueryError, text: &str) -> Self {
        let status = match error.kind {
            needle_query::QueryErrorKind::Limit => StatusCode::UNPROCESSABLE_ENTITY,
            _ => StatusCode::BAD_REQUEST,
        };
        let (line, column) = error.line_column(text);
        let kind = serde_json::to_value(error.kind).ok().and_then(|v| v.as_str().map(String::from));
        Self {
            status,
            body: ErrorBody {
                error: error.message.clone(),
                kind,
                line: Some(line),
                column: Some(column),
                hint: error.hint.clone(),
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}

/// The answer for a path no route knows.
pub async fn not_found(request: Request) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, format!("no such endpoint: {}", request.uri().path()))
        .with_hint("see GET /api/v1/openapi.json for the endpoints")
}

/// Rewrites error responses that are not JSON (the framework's rejections: wrong method, body
/// too large, a body that does not parse) into an [`ErrorBody`], keeping the status and the
/// framework's message.
pub async fn json_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = to_bytes(body, 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    let mut error = ApiError::new(status, message);
    if status == StatusCode::METHOD_NOT_ALLOWED {
        // The router adds the Allow header after this middleware has run.
        error = error.with_hint("the Allow header lists the methods this endpoint accepts");
    }
    let mut rewritten = error.into_response();
    for name in [header::ALLOW, header::WWW_AUTHENTICATE] {
        if let Some(value) = parts.headers.get(&name) {
            rewritten.headers_mut().insert(name, value.clone());
        }
    }
    rewritten
}
