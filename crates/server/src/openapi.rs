//! The OpenAPI document, generated from the handlers' `#[utoipa::path]` annotations, served at
//! `GET /api/v1/openapi.json`.

use axum::Json;
use utoipa::OpenApi;

#[derive(OpenApi)]
#[openapi(
    info(title = "needle", description = "Ad-hoc queries over live event streams: BQL and Bullet JSON queries in, results out."),
    paths(
        crate::routes::queries::run_query,
        crate::routes::queries::start_query,
        crate::routes::queries::list_queries,
        crate::routes::queries::query_status,
        crate::routes::queries::kill_query,
        crate::routes::queries::query_events,
        crate::routes::validate::validate,
        crate::routes::schema::schema,
        crate::routes::ws::websocket,
        crate::routes::health::healthz,
        crate::routes::metrics::metrics,
        openapi_json
    ),
    components(schemas(
        crate::error::ErrorBody,
        crate::routes::health::Health,
        crate::routes::health::HistoryHealth,
        crate::routes::queries::Started,
        crate::routes::queries::Urls,
        crate::routes::queries::QueryProgress
    )),
    tags(
        (name = "queries", description = "Run, follow, list and kill queries"),
        (name = "operations", description = "Health, metrics and this document")
    )
)]
pub struct ApiDoc;

/// This document.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "operations",
    responses((status = 200, description = "The OpenAPI 3 document")))]
pub async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
