//! `GET /healthz`: the process is up and serving, and whether history is being kept.

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
    /// With history on: whether it is being written. Live queries go on either way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryHealth>,
}

/// The history store's state.
#[derive(Serialize, utoipa::ToSchema)]
pub struct HistoryHealth {
    /// `ok`, or `writes stopped` (a full disk, an I/O error: records are not kept meanwhile).
    pub status: &'static str,
    /// Why writes stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Liveness: answers while the process serves. Needs no token.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The server is up", body = Health)))]
pub async fn healthz(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok",
        uptime_ms: state.uptime_ms().min(u64::MAX as u128) as u64,
        version: env!("CARGO_PKG_VERSION"),
        history: state.runtime().history_store().map(|store| match store.health() {
            needle_history::Health::Ok => HistoryHealth { status: "ok", reason: None },
            needle_history::Health::WritesStopped { reason } => {
                HistoryHealth { status: "writes stopped", reason: Some(reason) }
            }
        }),
    })
}
