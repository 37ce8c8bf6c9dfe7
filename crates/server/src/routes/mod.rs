//! The routes, one file per area.

pub mod cluster;
pub mod health;
pub mod metrics;
pub mod queries;
pub mod schema;
pub mod ui;
pub mod validate;
pub mod write;
pub mod ws;

use crate::state::AppState;
use axum::routing::{get, post};
use axum::Router;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/metrics", get(metrics::metrics))
        .route("/api/v1/openapi.json", get(crate::openapi::openapi_json))
        .route("/api/v1/query", post(queries::run_query))
        .route("/api/v1/queries", post(queries::start_query).get(queries::list_queries))
        .route("/api/v1/queries/{id}", get(queries::query_status).delete(queries::kill_query))
        .route("/api/v1/queries/{id}/events", get(queries::query_events))
        .route("/api/v1/validate", post(validate::validate))
        .route("/api/v1/schema", get(schema::schema))
        .route("/api/v1/cluster", get(cluster::cluster))
        .route("/api/v1/ws", get(ws::websocket))
        .route("/api/v1/records", post(write::records))
        .route("/api/v2/write", post(write::influx_v2))
        .route("/write", post(write::influx_v1))
        .route("/api/put", post(write::put))
        .route("/api/v1/write", post(write::remote_write))
        .route("/", get(ui::index))
        .route("/assets/{*path}", get(ui::asset))
}
