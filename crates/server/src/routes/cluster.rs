//! `GET /api/v1/cluster`: the nodes of the cluster as the node answering knows them (on an api
//! node, every node heard from on the results topic; on a single process, itself), the data
//! topic's partitions with their worker and consumer lag, and recent rebalances and adoptions.

use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use needle_runtime::cluster::ClusterView;

/// The cluster: nodes (role, name, URL, version, up since, last heard, queries, history),
/// partitions (worker, lag) and recent events.
#[utoipa::path(get, path = "/api/v1/cluster", tag = "operations",
    responses((status = 200, description = "The nodes, partitions and recent events this node knows of", body = ClusterView)))]
pub async fn cluster(State(state): State<AppState>) -> Json<ClusterView> {
    Json(state.runtime().cluster())
}
