//! What the query endpoints read from a request: the query text (BQL as `text/plain`, JSON
//! `{"query": "..."}`, or a Bullet JSON query object) and who is asking (the bearer token, or
//! the client's address), for the per-client query limit.

use crate::error::ApiError;
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use needle_runtime::SubmitError;
use std::net::SocketAddr;

/// A query as `text/plain`: BQL, not blank (for the OpenAPI document).
pub struct QueryText;

impl utoipa::PartialSchema for QueryText {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .min_length(Some(1))
            .pattern(Some("\\S"))
            .examples([serde_json::json!(EXAMPLE)])
            .into()
    }
}

impl utoipa::ToSchema for QueryText {}

const EXAMPLE: &str = "SELECT * FROM STREAM(10000, TIME) LIMIT 5";

/// A query as `application/json`: `{"query": "<BQL>"}`, or a Bullet JSON query object (whose
/// fields are Bullet's: `filters`, `projection`, `aggregation`, `window`, `duration`).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // (only its schema is used)
pub struct QueryJson {
    /// BQL; without it, the object is a Bullet JSON query.
    #[schema(
        min_length = 1,
        pattern = "\\S",
        example = "SELECT * FROM STREAM(10000, TIME) LIMIT 5"
    )]
    query: Option<String>,
}

/// The query in a request body.
pub fn query_text(headers: &HeaderMap, body: &[u8]) -> Result<String, ApiError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, "the request body is not UTF-8 text"))?
        .trim();
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let query = if is_json {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("the request body is not valid JSON: {e}"),
            )
            .with_hint("send BQL as text/plain, {\"query\": \"...\"} or a Bullet JSON query")
        })?;
        match value.get("query") {
            Some(serde_json::Value::String(q)) => q.trim().to_owned(),
            Some(_) => {
                return Err(ApiError::new(StatusCode::BAD_REQUEST, "\"query\" must be a string")
                    .with_hint("{\"query\": \"SELECT * FROM STREAM(10000, TIME) LIMIT 5\"}"))
            }
            None => text.to_owned(), // a Bullet JSON query object
        }
    } else {
        text.to_owned()
    };
    if query.is_empty() {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "the request has no query")
            .with_hint("send BQL such as: SELECT * FROM STREAM(10000, TIME) LIMIT 5"));
    }
    Ok(query)
}

/// A refused submission as the client sees it.
pub fn submit_error(error: SubmitError) -> ApiError {
    match error {
        SubmitError::Invalid { error, text } => ApiError::from_query_error(&error, &text),
        SubmitError::Engine(message) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message),
        SubmitError::TooMany(reason) => ApiError::new(StatusCode::TOO_MANY_REQUESTS, reason),
        SubmitError::ShuttingDown => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the server is shutting down")
        }
        SubmitError::WrongRole(reason) => ApiError::new(StatusCode::CONFLICT, reason),
        SubmitError::Unavailable(reason) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, reason),
    }
}

/// Who is asking: the owner of the token the request was let in with ([`crate::auth::Grant`]),
/// else (no tokens configured) the client's IP address.
pub struct Owner(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Owner {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let token = parts.extensions.get::<crate::auth::Grant>().map(|g| g.owner.clone());
        let address = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.ip().to_string());
        Ok(Owner(token.or(address).unwrap_or_else(|| "unknown".into())))
    }
}
