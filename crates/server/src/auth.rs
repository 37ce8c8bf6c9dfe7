//! Bearer tokens: when `server.tokens` is configured, every request but `GET /healthz` must carry
//! `Authorization: Bearer <one of them>`, and the token's scopes must allow what it asks: `read`
//! for the rest, `query` to start queries (and kill its own), `admin` to kill another owner's
//! query, `write` (which only a token naming it has) to write records; `Authorization: Token
//! <token>`, as InfluxDB 2's clients send it, is taken too. The token found becomes the
//! request's [`Grant`]: the owner its queries are listed under (its name, never its text). Without tokens (the default, on loopback) the API is open. The web
//! UI's page and assets are open too (they hold no data): the page asks for a token.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use needle_runtime::config::{token_digest, Scope, TokenConfig};

/// Paths anyone may call: liveness checks must work without credentials.
const OPEN_PATHS: &[&str] = &["/healthz"];

/// Paths that write records ([`crate::routes::write`]): they need the `write` scope.
const WRITE_PATHS: &[&str] =
    &["/api/v1/records", "/api/v2/write", "/write", "/api/put", "/api/v1/write"];

/// The token a request was let in with.
#[derive(Debug, Clone)]
pub struct Grant {
    /// The owner of the queries it starts.
    pub owner: String,
    token: TokenConfig,
}

impl Grant {
    /// Whether the token may do what `scope` allows.
    pub fn allows(&self, scope: Scope) -> bool {
        self.token.allows(scope)
    }
}

pub async fn require_token(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let tokens = &state.config().server.tokens;
    let path = request.uri().path();
    if tokens.is_empty()
        || OPEN_PATHS.contains(&path)
        || (request.method() == Method::GET && (path == "/" || path.starts_with("/assets/")))
    {
        return next.run(request).await;
    }
    let Some(presented) = presented_token(request.headers(), request.uri()) else {
        return unauthorized("this server needs a bearer token");
    };
    // every token compared, each as a SHA-256 digest in constant time (so a token given by its
    // digest in needle.toml is found as one given as itself)
    let presented = token_digest(&presented);
    let found = tokens.iter().fold(None, |found, t| found.or(t.accepts(&presented).then_some(t)));
    let Some(token) = found else {
        return unauthorized("the bearer token is not one this server accepts");
    };
    let needed = scope_needed(request.method(), path);
    if !token.allows(needed) {
        return forbidden(needed);
    }
    request.extensions_mut().insert(Grant { owner: token.owner(), token: token.clone() });
    next.run(request).await
}

/// The scope a request needs: `write` to write records, `query` to start queries, kill one or
/// follow its events (the last follower's closing its stream kills it), `read` for the rest.
fn scope_needed(method: &Method, path: &str) -> Scope {
    if WRITE_PATHS.contains(&path) {
        return Scope::Write;
    }
    let starts = matches!(path, "/api/v1/query" | "/api/v1/queries") && method == Method::POST;
    // following a query's events ends it when the last follower's stream closes
    let kills = (method == Method::DELETE && path.starts_with("/api/v1/queries/"))
        || (path.starts_with("/api/v1/queries/") && path.ends_with("/events"));
    // the WebSocket starts and kills queries
    match starts || kills || path == "/api/v1/ws" {
        true => Scope::Query,
        false => Scope::Read,
    }
}

/// Whether the request's token may kill query `id` (or follow its events, which kills it when
/// its last follower leaves): any query for an `admin` token (or with no tokens configured),
/// else only the queries it started. An unknown id is the caller's to refuse.
pub fn may_kill(grant: Option<&Grant>, state: &AppState, id: &str) -> bool {
    match grant {
        Some(grant) if !grant.allows(Scope::Admin) => {
            state.runtime().query(id).is_none_or(|status| *status.owner == *grant.owner)
        }
        _ => true,
    }
}

/// 403 for a kill of another owner's query.
pub fn not_yours(id: &str) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, format!("query '{id}' was started by another owner"))
        .with_hint("only a token with the 'admin' scope kills another owner's queries")
}

/// 403: the token is known but its scopes do not allow this.
pub fn forbidden(needed: Scope) -> Response {
    ApiError::new(
        StatusCode::FORBIDDEN,
        format!("this token's scopes do not include '{}'", needed.name()),
    )
    .with_hint("use a token given that scope in server.tokens")
    .into_response()
}

/// The token a request presents: `Authorization: Bearer <token>`, or, for the WebSocket only
/// (a browser cannot set headers on one), the query parameter `access_token`.
pub fn presented_token(headers: &HeaderMap, uri: &Uri) -> Option<String> {
    let header = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        // (InfluxDB 2's clients, Telegraf's influxdb_v2 output among them, say `Token`)
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("Token ")))
        .map(|t| t.trim().to_owned());
    header.or_else(|| {
        if uri.path() != "/api/v1/ws" {
            return None;
        }
        uri.query()?.split('&').find_map(|pair| {
            let value = pair.strip_prefix("access_token=")?;
            Some(percent_decode(value))
        })
    })
}

/// Decodes `%XX` escapes (and `+` as a space) in a query parameter's value.
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match (escaped, bytes[i]) {
            (Some(b), _) => {
                out.push(b);
                i += 3;
                continue;
            }
            (None, b'+') => out.push(b' '),
            (None, b) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn unauthorized(message: &str) -> Response {
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, message)
        .with_hint(
            "send the header 'Authorization: Bearer <token>' with a token from server.tokens",
        )
        .into_response();
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_websocket_may_carry_its_token_in_the_query() {
        let headers = HeaderMap::new();
        let ws: Uri = "/api/v1/ws?access_token=a%2Fb+c".parse().unwrap();
        assert_eq!(presented_token(&headers, &ws).as_deref(), Some("a/b c"));
        let other: Uri = "/api/v1/queries?access_token=x".parse().unwrap();
        assert_eq!(presented_token(&headers, &other), None);
    }
}
