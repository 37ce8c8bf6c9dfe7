//! The query endpoints: run one and wait for its results (`POST /api/v1/query`), start one and
//! follow it (`POST /api/v1/queries`, then Server-Sent Events at
//! `GET /api/v1/queries/{id}/events`), list, inspect and kill running queries.
//!
//! Any number of clients follow one query's events, each with its own bounded queue (a slow one
//! loses its own oldest emissions, no other's). A query its clients all left is stopped: the
//! waiting request's or the last event stream's drop kills it, so abandoned queries do not use
//! the workers until their duration ends.
//!
//! In the distributed mode, an api node asked for a query (its status, its kill, its events)
//! that another live api node holds answers `307 Temporary Redirect` to the same path and query
//! string on that node (its `server.advertised_url`), with an [`Elsewhere`] body; a query being
//! adopted after its api node died is waited for, then redirected to its adopter. The redirect
//! counts its hops in the query string ([`HOPS_PARAM`]); a request sent on [`MAX_HOPS`] times
//! gets `503` with `Retry-After` instead of another redirect, so that nodes briefly disagreeing
//! on a query's holder cannot send a client round in a loop.

use crate::error::ApiError;
use crate::request::{query_text, submit_error, Owner};
use crate::state::{AppState, Unfollowable};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::stream::{self, Stream};
use needle_engine::exec::JsonPieces;
use needle_runtime::remote::Holder;
use needle_runtime::results::DROPPED_EMISSIONS;
use needle_runtime::{QueryHandle, QueryStatus, ResultQueue, Runtime};
use serde::Serialize;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

/// A client following a query: when dropped unless disarmed (the client disconnected before
/// the end), it leaves the query, and kills it when no other client follows it.
pub(crate) struct LeaveOnDrop {
    pub runtime: Arc<Runtime>,
    pub id: String,
    pub results: Arc<ResultQueue>,
    pub armed: bool,
}

impl Drop for LeaveOnDrop {
    fn drop(&mut self) {
        if self.armed && self.results.leave() {
            self.runtime.kill(&self.id);
        }
    }
}

/// Runs a query and answers when it ends: its result `{"records": [...], "meta": {...}}`, or for
/// a windowed query the list of every emission.
#[utoipa::path(post, path = "/api/v1/query", tag = "queries",
    request_body(description = "BQL (text/plain), {\"query\": \"...\"} or a Bullet JSON query (application/json)",
        content((crate::request::QueryText = "text/plain"), (crate::request::QueryJson = "application/json"))),
    responses(
        (status = 200, description = "The result, or the list of emissions of a windowed query"),
        (status = 400, description = "The query is invalid", body = crate::error::ErrorBody),
        (status = 422, description = "The query is past a limit", body = crate::error::ErrorBody),
        (status = 429, description = "Too many queries running", body = crate::error::ErrorBody),
        (status = 409, description = "This node takes no queries (a worker node)", body = crate::error::ErrorBody),
        (status = 503, description = "Shutting down, or the query could not reach the worker nodes", body = crate::error::ErrorBody)))]
pub async fn run_query(
    State(state): State<AppState>,
    Owner(owner): Owner,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (_, handle) = submit(&state, &owner, &headers, &body).await?;
    let mut guard = LeaveOnDrop {
        runtime: state.runtime().clone(),
        id: handle.id.clone(),
        results: handle.results.clone(),
        armed: true,
    };
    // A windowed query answers with every emission, held here within the bytes one query's
    // results may take (the oldest go first, and the first kept says how many); any other
    // query with its last.
    let max_bytes = state.config().runtime.max_result_bytes_per_query;
    let mut emissions: std::collections::VecDeque<(needle_engine::exec::Emission, usize)> =
        std::collections::VecDeque::new();
    let dropped_before = |e: &needle_engine::exec::Emission| {
        e.meta.get(DROPPED_EMISSIONS).and_then(Value::as_u64).unwrap_or(0)
    };
    let (mut held, mut dropped) = (0usize, 0u64);
    while let Some(emission) = handle.results.next().await {
        if !handle.windowed {
            emissions.clear();
        }
        let bytes = emission.approx_bytes();
        while held + bytes > max_bytes {
            let Some((old, old_bytes)) = emissions.pop_front() else { break };
            held -= old_bytes;
            dropped += 1 + dropped_before(&old);
        }
        held += bytes;
        emissions.push_back((emission, bytes));
    }
    guard.armed = false;
    if let (true, Some((first, _))) = (dropped > 0, emissions.front_mut()) {
        let total = dropped + dropped_before(first);
        first.meta.insert(DROPPED_EMISSIONS.into(), total.into());
    }
    let mut emissions: Vec<Value> = emissions.into_iter().map(|(e, _)| e.to_json()).collect();
    if handle.windowed {
        return Ok(Json(Value::Array(emissions)).into_response());
    }
    match emissions.pop() {
        Some(result) => Ok(Json(result).into_response()),
        None => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the query ended without a result",
        )),
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Started {
    pub id: String,
    pub query: String,
    /// When the query ends by its duration, in ms since the epoch.
    pub ends_ms: i64,
    /// Where to follow it: `events` (SSE), `status`, and `kill` (DELETE).
    pub urls: Urls,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Urls {
    pub events: String,
    pub status: String,
    pub kill: String,
}

/// Starts a query and answers at once with its id and URLs; follow it with
/// `GET /api/v1/queries/{id}/events`.
#[utoipa::path(post, path = "/api/v1/queries", tag = "queries",
    request_body(description = "BQL (text/plain), {\"query\": \"...\"} or a Bullet JSON query (application/json)",
        content((crate::request::QueryText = "text/plain"), (crate::request::QueryJson = "application/json"))),
    responses(
        (status = 201, description = "Started", body = Started, links(
            ("status" = (operation_id = "query_status", parameters(("id" = "$response.body#/id")),
                description = "The query's progress")),
            ("kill" = (operation_id = "kill_query", parameters(("id" = "$response.body#/id")),
                description = "Kill the query")))),
        (status = 400, description = "The query is invalid", body = crate::error::ErrorBody),
        (status = 422, description = "The query is past a limit", body = crate::error::ErrorBody),
        (status = 429, description = "Too many queries running", body = crate::error::ErrorBody),
        (status = 409, description = "This node takes no queries (a worker node)", body = crate::error::ErrorBody),
        (status = 503, description = "Shutting down, or the query could not reach the worker nodes", body = crate::error::ErrorBody)))]
pub async fn start_query(
    State(state): State<AppState>,
    Owner(owner): Owner,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (text, handle) = submit(&state, &owner, &headers, &body).await?;
    let ends_in = Duration::from_millis((handle.ends_ms - now_ms()).max(0) as u64);
    state.keep_results(&handle.id, handle.results.clone(), ends_in);
    let base = format!("/api/v1/queries/{}", handle.id);
    let started = Started {
        id: handle.id.clone(),
        query: text,
        ends_ms: handle.ends_ms,
        urls: Urls { events: format!("{base}/events"), status: base.clone(), kill: base.clone() },
    };
    Ok((StatusCode::CREATED, [(header::LOCATION, base)], Json(started)).into_response())
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct QueryProgress {
    pub id: String,
    pub query: String,
    pub received_ms: i64,
    pub ends_ms: i64,
    pub time_left_ms: i64,
    pub records_seen: u64,
    pub records_matched: u64,
    pub emissions: u64,
    /// False once the query ended (its figures are then final).
    pub running: bool,
    /// When it ended, for a query that did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<i64>,
}

impl From<QueryStatus> for QueryProgress {
    fn from(s: QueryStatus) -> Self {
        Self {
            time_left_ms: if s.ended_ms.is_some() { 0 } else { (s.ends_ms - now_ms()).max(0) },
            id: s.id.to_string(),
            query: s.query.to_string(),
            received_ms: s.received_ms,
            ends_ms: s.ends_ms,
            records_seen: s.records_seen,
            records_matched: s.records_matched,
            emissions: s.emissions,
            running: s.ended_ms.is_none(),
            ended_ms: s.ended_ms,
        }
    }
}

/// The running queries with their progress.
#[utoipa::path(get, path = "/api/v1/queries", tag = "queries",
    responses((status = 200, description = "Running queries, oldest first")))]
pub async fn list_queries(State(state): State<AppState>) -> Json<Value> {
    let queries: Vec<QueryProgress> =
        state.runtime().queries().into_iter().map(Into::into).collect();
    Json(json!({ "queries": queries }))
}

/// One query's progress: a running one, or one that ended lately (its final figures, with
/// `running: false`).
#[utoipa::path(get, path = "/api/v1/queries/{id}", tag = "queries",
    params(("id" = String, Path, description = "The query id")),
    responses((status = 200, body = QueryProgress),
        (status = 307, description = ELSEWHERE, body = Elsewhere,
            headers(("Location" = String, description = "The same path on the api node that holds the query"))),
        (status = 503, description = LOOPING, body = crate::error::ErrorBody,
            headers(("Retry-After" = String, description = "Seconds to wait before asking again"))),
        (status = 404, body = crate::error::ErrorBody)))]
pub async fn query_status(
    State(state): State<AppState>,
    Path(id): Path<String>,
    uri: Uri,
) -> Result<Response, ApiError> {
    if let Some(holder) = state.locate(&id).await {
        return Ok(redirect(&id, holder, &uri));
    }
    let status = state.runtime().query(&id).ok_or_else(|| not_running(&id))?;
    Ok(Json(QueryProgress::from(status)).into_response())
}

/// What the `503` of a request sent on too many times says.
const LOOPING: &str = "In the distributed mode: the request was sent on between api nodes \
    needle_hops times already (at most 3), the nodes not agreeing yet on which one holds the \
    query (in the seconds after an api node's death); ask again after Retry-After";

/// What the `307` answers say.
const ELSEWHERE: &str = "In the distributed mode: another api node holds the query (it was \
    started there, or adopted there after its api node died); the Location header is this \
    request's path and query string on that node";

/// The body of a `307 Temporary Redirect` for a query another api node holds.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Elsewhere {
    /// The query id.
    pub id: String,
    /// The api node that holds it (its `kafka.node_id`).
    pub node: String,
    /// The base URL clients reach that node at (its `server.advertised_url`).
    pub url: String,
    /// This request's URL on that node (as the `Location` header).
    pub location: String,
    /// The same, for a person.
    pub message: String,
}

/// How many times one request may be sent on from api node to api node: past that the nodes
/// disagree on who holds the query (each thinking another does, for the seconds after an api
/// node's death in which they learn who adopted its queries), and the client is told to ask
/// again rather than sent round in a loop.
pub const MAX_HOPS: u32 = 3;

/// The query-string parameter that counts a request's hops ([`MAX_HOPS`]).
pub const HOPS_PARAM: &str = "needle_hops";

/// The hops a request has made, and its query string without them.
fn hops_of(query: Option<&str>) -> (u32, Vec<&str>) {
    let mut hops = 0;
    let mut rest = Vec::new();
    for pair in query.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        match pair.strip_prefix(HOPS_PARAM).and_then(|v| v.strip_prefix('=')) {
            Some(value) => hops = value.parse().unwrap_or(MAX_HOPS),
            None if pair == HOPS_PARAM => hops = MAX_HOPS,
            None => rest.push(pair),
        }
    }
    (hops, rest)
}

/// `307` to the same path and query string on `holder` (with [`HOPS_PARAM`] counting the hop),
/// or `503` with `Retry-After` once a request has made [`MAX_HOPS`] hops.
fn redirect(id: &str, holder: Holder, uri: &Uri) -> Response {
    let (hops, mut query) = hops_of(uri.query());
    if hops >= MAX_HOPS {
        let refusal = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "query '{id}' was sent on between api nodes {hops} times: they do not agree yet \
                 on which one holds it"
            ),
        )
        .with_hint(
            "ask again in a few seconds (without the needle_hops parameter): after an api node \
             dies the others learn within seconds which of them adopted its queries",
        );
        return (StatusCode::SERVICE_UNAVAILABLE, [(header::RETRY_AFTER, "2")], Json(refusal.body))
            .into_response();
    }
    let hop = format!("{HOPS_PARAM}={}", hops + 1);
    query.push(&hop);
    let location = format!("{}{}?{}", holder.url, uri.path(), query.join("&"));
    let body = Elsewhere {
        id: id.to_owned(),
        message: format!("query '{id}' is held by api node {}: ask it at {location}", holder.node),
        node: holder.node,
        url: holder.url,
        location: location.clone(),
    };
    (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, location)], Json(body)).into_response()
}

/// Kills a running query; its subscriber gets a final emission saying so. A query that already
/// ended is left as it was.
#[utoipa::path(delete, path = "/api/v1/queries/{id}", tag = "queries",
    params(("id" = String, Path, description = "The query id")),
    responses((status = 200, description = "Killed (`killed: true`), or it had already ended (`killed: false`)"),
        (status = 307, description = ELSEWHERE, body = Elsewhere,
            headers(("Location" = String, description = "The same path on the api node that holds the query"))),
        (status = 503, description = LOOPING, body = crate::error::ErrorBody,
            headers(("Retry-After" = String, description = "Seconds to wait before asking again"))),
        (status = 403, description = "With tokens configured: another owner's query, and this token is not an admin one", body = crate::error::ErrorBody),
        (status = 404, description = "No such query", body = crate::error::ErrorBody)))]
pub async fn kill_query(
    State(state): State<AppState>,
    grant: Option<axum::Extension<crate::auth::Grant>>,
    Path(id): Path<String>,
    uri: Uri,
) -> Result<Response, ApiError> {
    if let Some(holder) = state.locate(&id).await {
        return Ok(redirect(&id, holder, &uri));
    }
    if !crate::auth::may_kill(grant.as_deref(), &state, &id) {
        return Err(crate::auth::not_yours(&id));
    }
    if state.runtime().kill(&id) {
        return Ok(Json(json!({ "id": id, "killed": true })).into_response());
    }
    match state.runtime().query(&id) {
        Some(status) if status.ended_ms.is_some() => {
            let ended = json!({ "id": id, "killed": false, "ended_ms": status.ended_ms });
            Ok(Json(ended).into_response())
        }
        _ => Err(not_running(&id)),
    }
}

/// Server-Sent Events of a query: an event `result` per emission (data: the emission's JSON,
/// `id:` its number, from 1), then one `complete` event (data: `{"id": ..., "dropped": n}`).
/// Any number of clients follow one query, each at its own pace: the first client of a query
/// started with `POST /api/v1/queries` gets every emission since its start, any other those
/// from when it came (numbered alike). When the last of them closes its stream, the query is
/// killed. A `Last-Event-ID` header (an
/// `EventSource` reconnecting sends it by itself) skips the emissions up to that number (one
/// that is not a number is ignored): in the distributed mode, a client whose api node died
/// re-attaches by the query id on any api node, which sends it to the one that adopted the
/// query (`307`, the `Last-Event-ID` header to be sent again there), and gets the rest.
#[utoipa::path(get, path = "/api/v1/queries/{id}/events", tag = "queries",
    params(("id" = String, Path, description = "The query id"),
        ("Last-Event-ID" = Option<String>, Header, description = "Resume after this emission number (the id: of the last event received; one that is not a number is ignored)")),
    responses((status = 200, description = "text/event-stream"),
        (status = 307, description = ELSEWHERE, body = Elsewhere,
            headers(("Location" = String, description = "The same path on the api node that holds the query"))),
        (status = 503, description = LOOPING, body = crate::error::ErrorBody,
            headers(("Retry-After" = String, description = "Seconds to wait before asking again"))),
        (status = 404, description = "No such query runs here, or it ended and its results went to the clients that followed it", body = crate::error::ErrorBody),
        (status = 403, description = "With tokens configured: another owner's query, and this token is not an admin one", body = crate::error::ErrorBody)))]
pub async fn query_events(
    State(state): State<AppState>,
    grant: Option<axum::Extension<crate::auth::Grant>>,
    Path(id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    // the id: of an event this server sent is a number; anything else resumes nothing
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    // a query its api node died with may be about to run here, or on another node
    if let Some(holder) = state.locate(&id).await {
        return Ok(redirect(&id, holder, &uri));
    }
    // the last follower's closing the stream kills the query: following it is a kill's right
    if !crate::auth::may_kill(grant.as_deref(), &state, &id) {
        return Err(crate::auth::not_yours(&id));
    }
    let results = state.follow(&id).map_err(|why| unfollowable(&id, why))?;
    let guard =
        LeaveOnDrop { runtime: state.runtime().clone(), id: id.clone(), results, armed: true };
    let headers =
        [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")];
    let body = axum::body::Body::from_stream(event_stream(id, guard, after));
    Ok((headers, body).into_response())
}

/// The text of an event's data is sent in pieces of about this size: the HTTP threads write a
/// piece, then serve the other clients before the next (the stream yields between pieces), and
/// a writer holds a piece of an emission's text, not all of it (an emission of 10,000 records
/// of 7 KB is 70 MB, which took a thread for tens of milliseconds and kept every other client
/// of the server waiting; two such froze it). Without the yield, one poll of a stream whose
/// client reads fast wrote piece after piece until the task's budget ran out (tens of MB): a
/// query's one small result waited up to 355 ms behind 100 such streams.
const EVENT_PIECE_BYTES: usize = 256 << 10;

/// A comment line is sent after this long without an event, so that proxies and clients do not
/// take a quiet stream for a dead one.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Why a client cannot follow query `id`, as an answer.
pub(crate) fn unfollowable(id: &str, why: Unfollowable) -> ApiError {
    match why {
        Unfollowable::Unknown => {
            ApiError::new(StatusCode::NOT_FOUND, format!("no query '{id}' runs here"))
                .with_hint("start a query with POST /api/v1/queries, then follow its events")
        }
        Unfollowable::Ended => ApiError::new(
            StatusCode::NOT_FOUND,
            format!("query '{id}' ended; its results went to the clients that followed it"),
        )
        .with_hint(format!(
            "GET /api/v1/queries/{id} has its final figures; run the query again for results"
        )),
    }
}

/// Where the event stream of a query is: waiting for its next emission, or part-way through
/// sending one. The follower's queue is its guard's.
struct EventStream {
    id: String,
    guard: LeaveOnDrop,
    after: u64,
    sending: Option<JsonPieces>,
}

/// The events (Server-Sent Events' text) of a query's emissions numbered past `after`: a
/// `result` event for each, then a `complete` event with the emissions dropped in all. An
/// event's data is made and sent in pieces ([`EVENT_PIECE_BYTES`]).
fn event_stream(
    id: String,
    guard: LeaveOnDrop,
    after: u64,
) -> impl Stream<Item = Result<Bytes, Infallible>> {
    let state = EventStream { id, guard, after, sending: None };
    stream::unfold(Some(state), |state| async move {
        let mut state = state?;
        if let Some(pieces) = state.sending.take() {
            let (out, rest) = next_piece(pieces).await;
            state.sending = rest;
            return Some((Ok(Bytes::from(out)), Some(state)));
        }
        let next = loop {
            match tokio::time::timeout(KEEP_ALIVE, state.guard.results.next_numbered()).await {
                Err(_) => return Some((Ok(Bytes::from_static(b":\n\n")), Some(state))),
                Ok(Some((n, _))) if n <= state.after => continue,
                Ok(next) => break next,
            }
        };
        match next {
            Some((n, emission)) => {
                let mut out = Vec::with_capacity(EVENT_PIECE_BYTES + 1024);
                let retry = RECONNECT.as_millis();
                write!(out, "event: result\nid: {n}\nretry: {retry}\ndata: ")
                    .expect("writing to a vector cannot fail");
                state.sending = send_piece(&mut out, emission.into_json_pieces(EVENT_PIECE_BYTES));
                Some((Ok(Bytes::from(out)), Some(state)))
            }
            None => {
                state.guard.armed = false;
                let data = json!({ "id": state.id, "dropped": state.guard.results.dropped() });
                let event = format!("event: complete\ndata: {data}\n\n");
                Some((Ok(Bytes::from(event)), None))
            }
        }
    })
}

/// The next piece of an event's data being sent (with the event's end after its last), and the
/// pieces still to send, after the other streams on this thread had their turn (see
/// [`EVENT_PIECE_BYTES`]).
async fn next_piece(pieces: JsonPieces) -> (Vec<u8>, Option<JsonPieces>) {
    tokio::task::yield_now().await;
    let mut out = Vec::with_capacity(EVENT_PIECE_BYTES + 1024);
    let rest = send_piece(&mut out, pieces);
    (out, rest)
}

/// Appends the next piece of an event's data, and the event's end after its last piece; the
/// pieces still to send, if any.
fn send_piece(out: &mut Vec<u8>, mut pieces: JsonPieces) -> Option<JsonPieces> {
    let start = out.len();
    pieces.write_next(out);
    escape_line_breaks(out, start);
    if pieces.is_done() {
        out.extend_from_slice(b"\n\n");
        return None;
    }
    Some(pieces)
}

/// Makes what `out` holds past `start` (an event's data) fit the event: a line break in it (only
/// a line's insignificant whitespace can be one: JSON text escapes them in strings) starts
/// another `data:` line, which the client joins back with a line feed.
fn escape_line_breaks(out: &mut Vec<u8>, start: usize) {
    if memchr::memchr2(b'\n', b'\r', &out[start..]).is_none() {
        return;
    }
    let data = out.split_off(start);
    let mut from = 0;
    for at in memchr::memchr2_iter(b'\n', b'\r', &data) {
        out.extend_from_slice(&data[from..=at]);
        out.extend_from_slice(b"data: ");
        from = at + 1;
    }
    out.extend_from_slice(&data[from..]);
}

/// How soon an `EventSource` whose stream broke tries again (told in every result event).
const RECONNECT: Duration = Duration::from_secs(2);

/// Reads the query from the request and starts it for `owner`, off the HTTP threads
/// ([`AppState::admit`]).
async fn submit(
    state: &AppState,
    owner: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(String, QueryHandle), ApiError> {
    let text = query_text(headers, body)?;
    let answer = state.admit(vec![text.clone()], owner).await.pop();
    let handle =
        answer.unwrap_or(Err(needle_runtime::SubmitError::ShuttingDown)).map_err(submit_error)?;
    Ok((text, handle))
}

fn not_running(id: &str) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, format!("no running query '{id}'"))
        .with_hint("GET /api/v1/queries lists the running queries")
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use needle_engine::exec::Emission;

    #[tokio::test]
    async fn a_piece_after_the_first_waits_for_the_other_streams_turn() {
        let record: needle_record::Record =
            [("pad".to_owned(), needle_record::Value::from("x".repeat(1000)))]
                .into_iter()
                .collect();
        let emission =
            Emission { records: vec![record; 10], meta: Default::default(), is_final: true };
        let mut out = Vec::new();
        let rest = send_piece(&mut out, emission.into_json_pieces(2000)).expect("more to send");
        let mut next = std::pin::pin!(next_piece(rest));
        assert!(futures_util::poll!(next.as_mut()).is_pending(), "it yields before writing");
        let std::task::Poll::Ready((piece, rest)) = futures_util::poll!(next.as_mut()) else {
            panic!("ready once the others had their turn");
        };
        assert!(piece.len() >= 2000 && rest.is_some(), "{}", piece.len());
    }
}
