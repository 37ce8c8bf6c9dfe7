//! `GET /healthz`: the process is up and serving.

use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use serde::Serialize;

#[derive(Serialize, utoipa::ToSchema)]
pub struct Health {
    /// Always `ok` when the server answers.
    pub status: &'static str,
    /// Milliseconds since the server started.
    pub uptime_ms: u64,
    pub version: &'static str,
}

/// Liveness: answers while the process serves. Needs no token.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The server is up", body = Health)))]
pub async fn healthz(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok",
        uptime_ms: state.uptime_ms().min(u64::MAX as u128) as u64,
        version: env!("CARGO_PKG_VERSION"),
    })
}
