//! The routes, one file per area.

pub mod health;
pub mod metrics;

use crate::state::AppState;
use axum::routing::get;
use axum::Router;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/metrics", get(metrics::metrics))
        .route("/api/v1/openapi.json", get(crate::openapi::openapi_json))
}
