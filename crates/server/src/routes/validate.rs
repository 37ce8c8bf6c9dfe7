//! `POST /api/v1/validate`: checks a query without running it.

use crate::error::ApiError;
use crate::request::query_text;
use crate::state::AppState;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use serde_json::{json, Value};

/// The plan (as `needle validate` prints it) and its explanation in words, or the error with
/// line, column and hint.
#[utoipa::path(post, path = "/api/v1/validate", tag = "queries",
    request_body(description = "BQL (text/plain), {\"query\": \"...\"} or a Bullet JSON query (application/json)",
        content((crate::request::QueryText = "text/plain"), (crate::request::QueryJson = "application/json"))),
    responses((status = 200, description = "Valid: the plan and its explanation"),
        (status = 400, description = "Invalid", body = crate::error::ErrorBody),
        (status = 422, description = "Past a limit", body = crate::error::ErrorBody)))]
pub async fn validate(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let text = query_text(&headers, &body)?;
    let plan = needle_query::compile(&text, &state.config().query)
        .map_err(|e| ApiError::from_query_error(&e, &text))?;
    Ok(Json(json!({
        "valid": true,
        "plan": serde_json::to_value(&plan).unwrap_or(Value::Null),
        "explain": needle_query::explain::explain(&plan),
    })))
}
