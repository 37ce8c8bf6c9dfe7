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
        crate::routes::cluster::cluster,
        crate::routes::ws::websocket,
        crate::routes::write::records,
        crate::routes::write::influx_v2,
        crate::routes::write::influx_v1,
        crate::routes::write::put,
        crate::routes::write::remote_write,
        crate::routes::health::healthz,
        crate::routes::metrics::metrics,
        openapi_json
    ),
    components(schemas(
        crate::error::ErrorBody,
        crate::routes::write::PutDetails,
        crate::routes::write::PointError,
        crate::routes::health::Health,
        crate::routes::health::HistoryHealth,
        crate::routes::queries::Started,
        crate::routes::queries::Urls,
        crate::routes::queries::QueryProgress,
        crate::routes::queries::Elsewhere,
        crate::routes::ws::WsElsewhere,
        needle_runtime::cluster::ClusterView,
        needle_runtime::cluster::NodeReport,
        needle_runtime::cluster::PartitionReport,
        needle_runtime::cluster::HistoryReport,
        needle_runtime::cluster::ClusterEvent,
        needle_runtime::cluster::PartitionView
    )),
    tags(
        (name = "queries", description = "Run, follow, list and kill queries"),
        (name = "writes", description = "Records written over HTTP (needle serve --ingest or --source http)"),
        (name = "operations", description = "Health, metrics and this document")
    )
)]
pub struct ApiDoc;

/// This document.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "operations",
    responses((status = 200, description = "The OpenAPI 3 document")))]
pub async fn openapi_json() -> Json<serde_json::Value> {
    Json(document())
}

/// The document as JSON. utoipa 5.5 writes a link's fields in snake case (`operation_id`);
/// OpenAPI spells them `operationId`, `operationRef`, `requestBody`, so they are renamed here.
pub fn document() -> serde_json::Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    if let Some(paths) = doc.get_mut("paths").and_then(serde_json::Value::as_object_mut) {
        let responses = paths
            .values_mut()
            .filter_map(serde_json::Value::as_object_mut)
            .flat_map(|operations| operations.values_mut())
            .filter_map(|operation| operation.get_mut("responses"))
            .filter_map(serde_json::Value::as_object_mut)
            .flat_map(|responses| responses.values_mut());
        for response in responses {
            let links = response.get_mut("links").and_then(serde_json::Value::as_object_mut);
            for link in links.into_iter().flat_map(|l| l.values_mut()) {
                let Some(link) = link.as_object_mut() else { continue };
                for (from, to) in [
                    ("operation_id", "operationId"),
                    ("operation_ref", "operationRef"),
                    ("request_body", "requestBody"),
                ] {
                    if let Some(value) = link.remove(from) {
                        link.insert(to.into(), value);
                    }
                }
            }
        }
    }
    doc
}
