//! `GET /metrics`: the runtime's metrics in the Prometheus text format.

use crate::state::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

/// Prometheus text exposition of every metric.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "The OpenMetrics text format (Prometheus reads it)",
        content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8", body = String)))]
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        state.metrics().render(),
    )
}
