//! The web UI: `GET /` and `GET /assets/...` answer with the app built from `ui/` (Vite's
//! `ui/dist`), embedded in the binary at compile time so the page works offline and needs no
//! CDN. The crate's build script builds `ui/dist` when it is missing or stale; when it could
//! not (no npm: the build says so in a warning), `/` answers with a short page saying how to
//! build the UI instead.

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use rust_embed::Embed;

/// `ui/dist`, as it was when this crate was compiled (`build.rs` builds it, and recompiles the
/// crate when it changes).
#[derive(Embed)]
#[folder = "../../ui/dist"]
#[allow_missing = true]
struct Dist;

/// Shown at `/` when the binary was built without the UI.
const NOT_BUILT: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>needle</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 40em; margin: 3em auto">
<h1>needle</h1>
<p>This needle was built without its web UI. The API is up: see
<a href="/api/v1/openapi.json">/api/v1/openapi.json</a> and <a href="/healthz">/healthz</a>.</p>
<p>To get the UI, build it and then the binary (the assets are embedded at compile time):</p>
<pre>cd ui &amp;&amp; npm ci &amp;&amp; npm run build &amp;&amp; cd ..
cargo build --release --bin needle</pre>
<p>or simply <code>make demo</code>.</p>
</body></html>
"#;

/// Whether this binary carries the built UI.
pub fn embedded() -> bool {
    Dist::get("index.html").is_some()
}

/// `GET /`: the app's page, or how to build it.
pub async fn index() -> Response {
    match Dist::get("index.html") {
        Some(file) => {
            let mut response = (StatusCode::OK, file.data.into_owned()).into_response();
            let headers = response.headers_mut();
            headers
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
            // The page names hashed assets: it must be revalidated so a new build is picked up.
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            response
        }
        None => Html(NOT_BUILT).into_response(),
    }
}

/// `GET /assets/{path}`: one of the app's files, with its content type. Their names carry a hash
/// of their content, so they may be cached for good.
pub async fn asset(Path(path): Path<String>) -> Response {
    let name = format!("assets/{path}");
    match Dist::get(&name) {
        Some(file) => {
            let mut response = (StatusCode::OK, file.data.into_owned()).into_response();
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type(&name)));
            headers.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=31536000, immutable"),
            );
            response
        }
        None => {
            crate::error::ApiError::new(StatusCode::NOT_FOUND, format!("no such asset: /{name}"))
                .with_hint("the UI's assets change with each build: reload the page")
                .into_response()
        }
    }
}

/// The content type of a built asset, from its extension.
pub fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("html") => "text/html; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json" | "map") => "application/json",
        Some("woff2") => "font/woff2",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::content_type;

    #[test]
    fn content_types_follow_extensions() {
        assert_eq!(content_type("assets/index-abc.js"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("assets/index-abc.css"), "text/css; charset=utf-8");
        assert_eq!(content_type("assets/logo.svg"), "image/svg+xml");
        assert_eq!(content_type("assets/blob"), "application/octet-stream");
    }
}
