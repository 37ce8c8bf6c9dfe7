//! needle's HTTP API. Routes live one file per area under `routes/`; every failure, including
//! the framework's own (unknown path, wrong method, body too large), answers with a JSON body
//! ([`error::ApiError`]); tokens, body limits and CORS come from [`needle_runtime::NeedleConfig`].
//! The OpenAPI document is generated from the handlers' annotations ([`openapi`]); HTTPS is
//! [`tls`].
//!
//! Its place in the flow: the outside of `needle serve` — it turns requests into the runtime's
//! submit, kill and status calls, and a query's result queue into an HTTP response, SSE or
//! WebSocket messages. A program embedding needle can nest the same router in its own
//! (`needle::Needle::http_api`).

pub mod auth;
pub mod error;
pub mod openapi;
pub mod request;
pub mod routes;
pub mod state;
pub mod tls;

pub use error::{ApiError, ServerError};
pub use state::AppState;

use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, Method};
use axum::Router;
use std::future::Future;
use tower_http::cors::{AllowOrigin, CorsLayer};

/// The whole API, ready to serve.
pub fn router(state: AppState) -> Router {
    let config = &state.config().server;
    let mut app = routes::routes()
        .fallback(error::not_found)
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::require_token))
        .layer(axum::middleware::from_fn(error::json_errors))
        .layer(DefaultBodyLimit::max(config.max_request_bytes));
    if !config.cors_origins.is_empty() {
        let origins: Vec<HeaderValue> =
            config.cors_origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()).collect();
        app = app.layer(
            CorsLayer::new()
                .allow_origin(AllowOrigin::list(origins))
                .allow_methods([Method::GET, Method::POST, Method::DELETE])
                .allow_headers([
                    axum::http::header::AUTHORIZATION,
                    axum::http::header::CONTENT_TYPE,
                ]),
        );
    }
    app.with_state(state)
}

/// Serves the API on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    use axum::serve::ListenerExt;
    let app = router(state).into_make_service_with_connect_info::<std::net::SocketAddr>();
    // Results are small writes that must go out at once: without TCP_NODELAY, Nagle's
    // algorithm holds them for the client's delayed ACK (~40 ms on Linux).
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await.map_err(ServerError::Serve)
}

/// [`serve`] over TLS: each connection's handshake with `tls` ([`tls::server_config`]) is done
/// before the API sees it.
pub async fn serve_tls(
    listener: tokio::net::TcpListener,
    tls: std::sync::Arc<rustls::ServerConfig>,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let app = router(state).into_make_service_with_connect_info::<std::net::SocketAddr>();
    use axum::serve::ListenerExt;
    let listener = tls::TlsListener::new(listener, tls).map_err(ServerError::Serve)?;
    // (through `tap_io`, which gives axum the client's address for `ConnectInfo`)
    let listener = listener.tap_io(|_| {});
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await.map_err(ServerError::Serve)
}
