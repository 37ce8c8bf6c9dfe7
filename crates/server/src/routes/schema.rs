//! `GET /api/v1/schema`: the fields seen in a sample of the stream, with their types and how
//! often they appear.

use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use serde_json::Value;

/// Fields (and keys of top-level maps, as `map.key`) seen in sampled records, with a count per
/// type and the fraction of sampled records that had them.
#[utoipa::path(get, path = "/api/v1/schema", tag = "queries",
    responses((status = 200, description = "sampled_records, fields [{name, seen, fraction, types}], untracked_fields")))]
pub async fn schema(State(state): State<AppState>) -> Json<Value> {
    Json(serde_json::to_value(state.runtime().schema()).unwrap_or(Value::Null))
}
