//! HTTP writes: records sent to `needle serve` by the agents people already run, when it was
//! started to take them (`--source http`: records come only from writes; `--ingest`: writes
//! beside another source). Without either, these routes answer `409` saying how to enable them.
//!
//! | route | body |
//! |---|---|
//! | `POST /api/v2/write`, `POST /write` | InfluxDB line protocol (`?precision=ns\|us\|ms\|s`, ns by default) |
//! | `POST /api/v1/records` | JSON lines, one object a line, as the other sources read them |
//! | `POST /api/put` | OpenTSDB's JSON: a data point `{"metric", "timestamp", "value", "tags"}` or an array of them |
//! | `POST /api/v1/write` | Prometheus remote write 1.0: a snappy block of a protobuf `WriteRequest`, one record a sample |
//!
//! A request's points become one batch — line protocol's points as columns, a batch per shape
//! of point ([`PointBatches`]), the others as JSON lines — handed to the workers whole or not at all:
//! when their queue stays full for [`WRITE_PATIENCE`], the answer is `503` with `Retry-After` and
//! nothing of the request was taken, so a client's retry neither loses nor duplicates a point.
//! The body is bounded by `server.max_request_bytes` (`413` above it), and the queue by
//! `runtime.queue_batches`: memory stays bounded.
//!
//! Bad lines are skipped, counted per protocol in `needle_protocol_lines_malformed_total`
//! (`influx`, or `json` for `/api/v1/records`) and in `needle_records_malformed_total`, and
//! a sample of them logged; the good lines are kept and the answer is `204`. Only a request
//! with no point gets `400`: naming the first bad line (1-based) and why when there was one,
//! else (an empty body, only comments) saying it holds none, as InfluxDB 2 does.

use crate::error::ApiError;
use crate::state::AppState;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use needle_protocols::{Format, Precision};
use needle_runtime::columns::PointBatches;
use needle_runtime::framing::Batch;
use needle_runtime::source::{BatchSink, Refused};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a write waits for room in the workers' queue before it is refused with `503`.
pub const WRITE_PATIENCE: Duration = Duration::from_secs(1);
/// The `Retry-After` of a write refused because the workers are behind, in seconds.
const RETRY_AFTER_SECONDS: &str = "1";

/// Malformed lines written over HTTP so far: the 1st, 2nd, 4th, 8th... are logged.
static MALFORMED_SEEN: AtomicU64 = AtomicU64::new(0);

/// Line protocol's query parameters, as InfluxDB's write APIs take them.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InfluxParams {
    /// The timestamps' unit: `ns` (the default), `us`, `ms` or `s` (InfluxDB 1's `n` and `u`
    /// too).
    #[param(pattern = "^(ns|us|ms|s|n|u)$")]
    pub precision: Option<String>,
    /// InfluxDB 1's database: accepted and ignored (needle has one stream).
    pub db: Option<String>,
    /// InfluxDB 2's organization: accepted and ignored.
    pub org: Option<String>,
    /// InfluxDB 2's bucket: accepted and ignored.
    pub bucket: Option<String>,
}

/// A body of lines, as the OpenAPI document shows it.
pub struct Lines;

impl utoipa::PartialSchema for Lines {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .into()
    }
}

impl utoipa::ToSchema for Lines {}

const NOT_ENABLED: &str = "this server takes no writes";
const ENABLE_HINT: &str = "start needle serve with --ingest (writes beside --source) or with \
                           --source http (records only from writes)";

/// A binary body, as the OpenAPI document shows it.
pub struct Protobuf;

impl utoipa::PartialSchema for Protobuf {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                utoipa::openapi::KnownFormat::Binary,
            )))
            .into()
    }
}

impl utoipa::ToSchema for Protobuf {}

/// The refusals every write route documents (401, 403, 409, 413).
#[derive(utoipa::IntoResponses)]
pub enum WriteRefusals {
    /// With tokens configured: no token, or an unknown one.
    #[response(status = 401)]
    NoToken(crate::error::ErrorBody),
    /// With tokens configured: the token's scopes do not include `write`.
    #[response(status = 403)]
    NotWrite(crate::error::ErrorBody),
    /// This server takes no writes (start it with --ingest or --source http).
    #[response(status = 409)]
    NotEnabled(crate::error::ErrorBody),
    /// The body, or what it decompresses to, is larger than server.max_request_bytes.
    #[response(status = 413)]
    TooLarge(crate::error::ErrorBody),
}

/// The workers are behind (nothing was written: send it again after `Retry-After` seconds),
/// or the server is shutting down.
#[derive(utoipa::IntoResponses)]
#[response(
    status = 503,
    headers(("Retry-After" = String, description = "Seconds to wait before sending again"))
)]
pub struct WriteBehind(pub crate::error::ErrorBody);

/// Writes Prometheus remote write 1.0 (what Prometheus's `remote_write` sends): one record a
/// sample, `{"__name__": ..., <labels>..., "value": ..., "timestamp": ms}`. NaN samples (stale
/// markers) are skipped; a series with no `__name__` or a label twice is counted as malformed.
#[utoipa::path(post, path = "/api/v1/write", tag = "writes",
    request_body(description = "A snappy block (Content-Encoding: snappy) of a protobuf prometheus.WriteRequest; Prometheus sends it as application/x-protobuf, which is read the same (the content type is not checked)", content((Protobuf = "application/octet-stream"))),
    responses(
        (status = 204, description = "Written: every sample of a good series (bad series and non-finite samples are skipped and counted)"),
        (status = 400, description = "The body is not a snappy block of a WriteRequest (Prometheus does not send it again)", body = crate::error::ErrorBody),
        WriteRefusals,
        WriteBehind))]
pub async fn remote_write(
    State(state): State<AppState>,
    from: Option<Extension<ConnectInfo<SocketAddr>>>,
    body: Bytes,
) -> Response {
    if !state.writes_enabled() {
        return ApiError::new(StatusCode::CONFLICT, NOT_ENABLED)
            .with_hint(ENABLE_HINT)
            .into_response();
    }
    // each series' samples as points, gathered as columns per shape (no record, no JSON)
    let mut points = PointBatches::for_one_request();
    let decoded = needle_protocols::remote_write::decode_points(&body, |point| {
        // the decoder checked each series' names
        let _ = points.push_point(point);
    });
    let decoded = match decoded {
        Ok(decoded) => decoded,
        Err(error) => {
            return ApiError::new(StatusCode::BAD_REQUEST, error.to_string())
                .with_hint("send what Prometheus's remote_write sends: a snappy block of a protobuf WriteRequest (remote write 1.0)")
                .into_response()
        }
    };
    let Some(sink) = state.ingest() else {
        return shutting_down();
    };
    if decoded.malformed > 0 {
        let client =
            from.map_or_else(|| "a client".to_owned(), |Extension(ConnectInfo(a))| a.to_string());
        let from = format!("HTTP write from {client} to /api/v1/write");
        let why = "a series without __name__, or a label given twice";
        log_malformed(&from, "samples", why, &format!("{} samples", decoded.malformed));
    }
    let Some(batch) = points.finish().map(|batch| batch.with_source_bytes(body.len())) else {
        // nothing to hand on (stale markers only, say): taken all the same
        sink.count_malformed("remote_write", decoded.malformed);
        return StatusCode::NO_CONTENT.into_response();
    };
    match offer(sink, batch, "remote_write", decoded.malformed).await {
        Some(refusal) => refusal,
        None => StatusCode::NO_CONTENT.into_response(),
    }
}

/// Writes InfluxDB line protocol (InfluxDB 2's write API).
#[utoipa::path(post, path = "/api/v2/write", tag = "writes",
    params(InfluxParams),
    request_body(description = "InfluxDB line protocol, one point a line", content((Lines = "text/plain"))),
    responses(
        (status = 204, description = "Written: every good line (bad lines are skipped and counted)"),
        (status = 400, description = "No point: every line was bad (`line` names the first), or the body is empty; or the body is not UTF-8, or the precision is unknown", body = crate::error::ErrorBody),
        WriteRefusals,
        (status = 415, description = "The body is encoded other than as gzip (Content-Encoding)", body = crate::error::ErrorBody),
        WriteBehind))]
pub async fn influx_v2(
    state: State<AppState>,
    from: Option<Extension<ConnectInfo<SocketAddr>>>,
    params: Query<InfluxParams>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    influx(state, from, params, headers, body, "/api/v2/write").await
}

/// Writes InfluxDB line protocol (InfluxDB 1's write API).
#[utoipa::path(post, path = "/write", tag = "writes",
    params(InfluxParams),
    request_body(description = "InfluxDB line protocol, one point a line", content((Lines = "text/plain"))),
    responses(
        (status = 204, description = "Written: every good line (bad lines are skipped and counted)"),
        (status = 400, description = "No point: every line was bad (`line` names the first), or the body is empty; or the body is not UTF-8, or the precision is unknown", body = crate::error::ErrorBody),
        WriteRefusals,
        (status = 415, description = "The body is encoded other than as gzip (Content-Encoding)", body = crate::error::ErrorBody),
        WriteBehind))]
pub async fn influx_v1(
    state: State<AppState>,
    from: Option<Extension<ConnectInfo<SocketAddr>>>,
    params: Query<InfluxParams>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    influx(state, from, params, headers, body, "/write").await
}

async fn influx(
    State(state): State<AppState>,
    from: Option<Extension<ConnectInfo<SocketAddr>>>,
    Query(params): Query<InfluxParams>,
    headers: HeaderMap,
    body: Bytes,
    route: &str,
) -> Response {
    let precision = match params.precision.as_deref() {
        None => Ok(Precision::Nanoseconds),
        Some("n") => Ok(Precision::Nanoseconds),
        Some("u") => Ok(Precision::Microseconds),
        Some(other) => Precision::parse(other),
    };
    let precision = match precision {
        Ok(precision) => precision,
        Err(error) => {
            return ApiError::new(StatusCode::BAD_REQUEST, error.to_string()).into_response()
        }
    };
    let format = Format::Influx(precision);
    let convert = |text: &str, from: &str| convert_points(text, from, format);
    write(&state, from, &headers, &body, route, format.name(), convert).await
}

/// Writes records as JSON lines: one JSON object a line, as every other source reads them.
#[utoipa::path(post, path = "/api/v1/records", tag = "writes",
    request_body(description = "JSON lines: one JSON object a line", content((Lines = "application/x-ndjson"), (Lines = "text/plain"))),
    responses(
        (status = 204, description = "Written: every good line (bad lines are skipped and counted)"),
        (status = 400, description = "No record: every line was bad (`line` names the first), or the body is empty; or the body is not UTF-8", body = crate::error::ErrorBody),
        WriteRefusals,
        (status = 415, description = "The body is encoded other than as gzip (Content-Encoding)", body = crate::error::ErrorBody),
        WriteBehind))]
pub async fn records(
    State(state): State<AppState>,
    from: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let convert = |text: &str, from: &str| convert_lines(text, from, |line, _| json_line(line));
    write(&state, from, &headers, &body, "/api/v1/records", "json", convert).await
}

/// The answer to a `/api/put` some of whose data points were bad (OpenTSDB's `details`), or
/// whose body is not data points at all (`error` alone).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PutDetails {
    /// What went wrong, for a person.
    pub error: String,
    /// Data points written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success: Option<usize>,
    /// Data points not written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<usize>,
    /// Each bad data point, as sent, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<PointError>>,
}

/// A data point that was not written.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PointError {
    /// The data point as sent.
    pub datapoint: serde_json::Value,
    /// Why it was not written.
    pub error: String,
}

fn put_refusal(error: impl Into<String>) -> Response {
    let details = PutDetails { error: error.into(), success: None, failed: None, errors: None };
    (StatusCode::BAD_REQUEST, Json(details)).into_response()
}

/// Writes OpenTSDB data points (OpenTSDB's HTTP `/api/put`), as records of the shape of its
/// telnet `put` lines.
#[utoipa::path(post, path = "/api/put", tag = "writes",
    request_body(description = "An OpenTSDB data point {\"metric\", \"timestamp\", \"value\", \"tags\"}, or an array of them", content((PutBody = "application/json"))),
    responses(
        (status = 204, description = "Every data point written"),
        (status = 400, description = "Some data points were bad: the others were written, `errors` has each bad one and why; or the body is not data points (`error` alone)", body = PutDetails),
        WriteRefusals,
        (status = 415, description = "The body is encoded other than as gzip (Content-Encoding)", body = crate::error::ErrorBody),
        WriteBehind))]
pub async fn put(
    State(state): State<AppState>,
    from: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let text = match writable(&state, &headers, &body) {
        Ok(text) => text,
        Err(refusal) => return refusal.into_response(),
    };
    let points = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Array(points)) => points,
        Ok(point @ serde_json::Value::Object(_)) => vec![point],
        Ok(_) => return put_refusal("the body is neither a data point nor an array of them"),
        Err(error) => return put_refusal(format!("the body is not JSON: {error}")),
    };
    if points.is_empty() {
        return put_refusal("the request holds no data points");
    }
    let client =
        from.map_or_else(|| "a client".to_owned(), |Extension(ConnectInfo(a))| a.to_string());
    let from = format!("HTTP write from {client} to /api/put");
    let total = points.len();
    let mut json = Vec::with_capacity(text.len());
    let mut errors = Vec::new();
    for (index, point) in points.into_iter().enumerate() {
        match put_point(&point) {
            Ok(record) => {
                json.extend_from_slice(&record);
                json.push(b'\n');
            }
            Err(error) => {
                let what = format!("data point {}", index + 1);
                log_malformed(&from, &what, &error, &point.to_string());
                errors.push(PointError { datapoint: point, error });
            }
        }
    }
    let Some(sink) = state.ingest() else {
        return shutting_down();
    };
    let failed = errors.len();
    if failed < total {
        if let Some(refusal) = offer(sink, Batch::new(json), "opentsdb", failed as u64).await {
            return refusal;
        }
    } else {
        sink.count_malformed("opentsdb", failed as u64);
    }
    if errors.is_empty() {
        return StatusCode::NO_CONTENT.into_response();
    }
    let details = PutDetails {
        error: format!(
            "{failed} of {total} data points were not written (the first: {})",
            errors[0].error
        ),
        success: Some(total - failed),
        failed: Some(failed),
        errors: Some(errors),
    };
    (StatusCode::BAD_REQUEST, Json(details)).into_response()
}

/// An OpenTSDB data point, as the OpenAPI document shows it.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // (only its schema is used)
pub struct PutBody {
    /// The metric's name.
    #[schema(example = "sys.cpu.user")]
    metric: String,
    /// Seconds (10 digits) or milliseconds (13) since the epoch.
    #[schema(example = 1356998400)]
    timestamp: i64,
    /// An integer (written without a point) or a floating point number.
    #[schema(example = 42.5)]
    value: f64,
    /// Tag names and their values.
    tags: Option<std::collections::BTreeMap<String, String>>,
}

/// One data point as a record (a JSON line without its newline), through the telnet `put`
/// line it stands for, so that both read alike.
fn put_point(point: &serde_json::Value) -> Result<Vec<u8>, String> {
    use serde_json::Value;
    let Value::Object(fields) = point else {
        return Err("a data point is a JSON object".into());
    };
    let word = |name: &str, value: Option<&Value>| -> Result<String, String> {
        let text = match value {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Number(n)) => n.to_string(),
            Some(_) => return Err(format!("'{name}' is not a string or a number")),
            None => return Err(format!("'{name}' is missing")),
        };
        if text.is_empty() || text.contains(char::is_whitespace) {
            return Err(format!("'{name}' is empty or holds whitespace"));
        }
        Ok(text)
    };
    let metric = match fields.get("metric") {
        Some(Value::String(_)) => word("metric", fields.get("metric"))?,
        _ => return Err("'metric' is missing or not a string".into()),
    };
    let mut line = format!(
        "put {metric} {} {}",
        word("timestamp", fields.get("timestamp"))?,
        word("value", fields.get("value"))?
    );
    match fields.get("tags") {
        None | Some(Value::Null) => {}
        Some(Value::Object(tags)) => {
            for (key, value) in tags {
                if key.is_empty() || key.contains('=') || key.contains(char::is_whitespace) {
                    return Err(format!("tag name '{key}' is empty or holds '=' or whitespace"));
                }
                line.push(' ');
                line.push_str(key);
                line.push('=');
                line.push_str(&word(&format!("tags.{key}"), Some(value))?);
            }
        }
        Some(_) => return Err("'tags' is not an object".into()),
    }
    let record = needle_protocols::opentsdb::parse(&line).map_err(|e| e.to_string())?;
    let mut json = Vec::new();
    record.write_json(&mut json);
    Ok(json)
}

/// A JSON lines line as the workers will read it: `None` when blank, an error when it is not
/// one JSON object.
fn json_line(line: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let text = line.trim_ascii();
    if text.is_empty() {
        return Ok(None);
    }
    if text.first() != Some(&b'{') {
        return Err("not a JSON object".into());
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(text).map_err(|e| format!("not JSON: {e}"))?;
    Ok(Some(text.to_vec()))
}

/// What a request's lines came to.
#[derive(Debug, Default)]
pub struct Converted {
    /// The points, as one batch (none when there were none).
    pub batch: Option<Batch>,
    pub points: usize,
    pub malformed: usize,
    /// The first bad line: its number (1-based) and why.
    pub first_bad: Option<(usize, String)>,
}

/// The body's lines through `convert`; bad ones are logged (a sample) and left out.
pub fn convert_lines(
    body: &str,
    from: &str,
    convert: impl Fn(&[u8], i64) -> Result<Option<Vec<u8>>, String>,
) -> Converted {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut out = Converted::default();
    let mut lines = Vec::with_capacity(body.len() * 2);
    for (index, line) in body.split('\n').enumerate() {
        match convert(line.as_bytes(), now_ms) {
            Ok(Some(json)) => {
                lines.extend_from_slice(&json);
                lines.push(b'\n');
                out.points += 1;
            }
            Ok(None) => {}
            Err(reason) => {
                out.malformed += 1;
                let number = index + 1;
                log_malformed(from, &format!("line {number}"), &reason, line);
                if out.first_bad.is_none() {
                    out.first_bad = Some((number, reason));
                }
            }
        }
    }
    out.batch = (out.points > 0).then(|| Batch::new(lines));
    out
}

/// The body's lines of a metrics protocol gathered as one batch of events, each shape of point
/// as columns ([`PointBatches`]: no JSON in between); bad lines are logged (a sample) and left
/// out.
pub fn convert_points(body: &str, from: &str, format: Format) -> Converted {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut out = Converted::default();
    let mut points = PointBatches::for_one_request();
    points.expect(body.len() / 48 + 16);
    for (index, line) in body.split('\n').enumerate() {
        if let Err(error) = points.push_line(format, line.as_bytes(), now_ms) {
            out.malformed += 1;
            let number = index + 1;
            let reason = error.to_string();
            log_malformed(from, &format!("line {number}"), &reason, line);
            if out.first_bad.is_none() {
                out.first_bad = Some((number, reason));
            }
        }
    }
    out.points = points.points();
    out.batch = points.finish().map(|batch| batch.with_source_bytes(body.len()));
    out
}

/// Logs the 1st, 2nd, 4th, 8th... malformed line (or data point) written over HTTP.
fn log_malformed(from: &str, what: &str, reason: &str, text: &str) {
    let seen = MALFORMED_SEEN.fetch_add(1, Ordering::Relaxed) + 1;
    if seen.is_power_of_two() {
        let mut end = text.len().min(120);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let shown = &text[..end];
        eprintln!(
            "needle: {from}: skipped malformed {what} (#{seen} written over HTTP; {reason}): \
             {shown}"
        );
    }
}

/// Checks that writes are taken, and gives the body as UTF-8 text: as sent, or decompressed
/// (`Content-Encoding: gzip`) within `server.max_request_bytes`.
fn writable<'a>(
    state: &AppState,
    headers: &HeaderMap,
    body: &'a [u8],
) -> Result<Cow<'a, str>, ApiError> {
    if !state.writes_enabled() {
        return Err(ApiError::new(StatusCode::CONFLICT, NOT_ENABLED).with_hint(ENABLE_HINT));
    }
    let body = plain_body(headers, body, state.config().server.max_request_bytes)?;
    let not_text = || ApiError::new(StatusCode::BAD_REQUEST, "the request body is not UTF-8 text");
    match body {
        Cow::Borrowed(bytes) => {
            std::str::from_utf8(bytes).map(Cow::Borrowed).map_err(|_| not_text())
        }
        Cow::Owned(bytes) => String::from_utf8(bytes).map(Cow::Owned).map_err(|_| not_text()),
    }
}

/// The body as sent (`Content-Encoding` absent or `identity`) or gunzipped (`gzip`, as
/// Telegraf's `influxdb_v2` output sends it by default), at most `limit` bytes either way:
/// `413` past it, `400` for a body that is not gzip, `415` for another encoding.
pub fn plain_body<'a>(
    headers: &HeaderMap,
    body: &'a [u8],
    limit: usize,
) -> Result<Cow<'a, [u8]>, ApiError> {
    let encoding = headers.get(header::CONTENT_ENCODING).map(|v| v.to_str().unwrap_or("?").trim());
    match encoding {
        None | Some("") => Ok(Cow::Borrowed(body)),
        Some(e) if e.eq_ignore_ascii_case("identity") => Ok(Cow::Borrowed(body)),
        Some(e) if e.eq_ignore_ascii_case("gzip") || e.eq_ignore_ascii_case("x-gzip") => {
            let mut plain = Vec::with_capacity(body.len().saturating_mul(4).min(limit));
            // one byte past the limit tells a body that is too large from one that fits
            let read = flate2::read::MultiGzDecoder::new(body)
                .take(limit as u64 + 1)
                .read_to_end(&mut plain);
            match read {
                Ok(_) if plain.len() > limit => Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the decompressed body is larger than {limit} bytes"),
                )
                .with_hint("send fewer points a request, or raise server.max_request_bytes")),
                Ok(_) => Ok(Cow::Owned(plain)),
                Err(error) => Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!("the body is not gzip (Content-Encoding: gzip): {error}"),
                )),
            }
        }
        Some(other) => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("bodies encoded as '{other}' are not read"),
        )
        .with_hint("send the body as it is, or gzip it (Content-Encoding: gzip)")),
    }
}

/// Hands `json` (JSON lines, at least one) to the workers on a blocking thread, counting
/// `malformed` bad lines of `protocol` once it is taken; the refusal, else `None`.
async fn offer(
    sink: BatchSink,
    batch: Batch,
    protocol: &'static str,
    malformed: u64,
) -> Option<Response> {
    let offered = tokio::task::spawn_blocking(move || {
        let outcome = hand_on(&sink, batch, WRITE_PATIENCE);
        if outcome.is_ok() {
            sink.count_malformed(protocol, malformed);
        }
        outcome
    })
    .await;
    match offered {
        Ok(Ok(())) => None,
        Ok(Err(refusal)) => Some(refusal.into_response()),
        Err(_) => Some(
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "the write failed").into_response(),
        ),
    }
}

async fn write(
    state: &AppState,
    from: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: &HeaderMap,
    body: &[u8],
    route: &str,
    protocol: &'static str,
    convert: impl FnOnce(&str, &str) -> Converted + Send,
) -> Response {
    let text = match writable(state, headers, body) {
        Ok(text) => text,
        Err(refusal) => return refusal.into_response(),
    };
    let client =
        from.map_or_else(|| "a client".to_owned(), |Extension(ConnectInfo(a))| a.to_string());
    let converted = convert(&text, &format!("HTTP write from {client} to {route}"));
    let Some(sink) = state.ingest() else {
        return shutting_down();
    };
    let Some(batch) = converted.batch.filter(|_| converted.points > 0) else {
        if let Some((line, reason)) = converted.first_bad {
            sink.count_malformed(protocol, converted.malformed as u64);
            let mut error = ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("no line was written: line {line}: {reason}"),
            );
            error.body.line = Some(line);
            return error.into_response();
        }
        // (as InfluxDB 2 answers: "writing requires points")
        return ApiError::new(StatusCode::BAD_REQUEST, "the request holds no points")
            .with_hint("send one point (or record) a line")
            .into_response();
    };
    match offer(sink, batch, protocol, converted.malformed as u64).await {
        Some(refusal) => refusal,
        None => StatusCode::NO_CONTENT.into_response(),
    }
}

/// Why a write's batch was not taken: nothing of the request was.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The workers' queue stayed full: `503` with `Retry-After`.
    Behind,
    /// The runtime is stopping: `503`.
    Stopping,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::Behind => {
                let refusal = ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the workers are behind: nothing of this request was written",
                )
                .with_hint("send it again after Retry-After seconds");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [(header::RETRY_AFTER, RETRY_AFTER_SECONDS)],
                    Json(refusal.body),
                )
                    .into_response()
            }
            Refusal::Stopping => shutting_down(),
        }
    }
}

/// Hands a request's batch to the workers whole, waiting at most `patience` for room; refused
/// (and nothing taken) when there is none or the runtime is stopping.
pub fn hand_on(sink: &BatchSink, batch: Batch, patience: Duration) -> Result<(), Refusal> {
    match sink.offer(batch, patience) {
        Ok(()) => Ok(()),
        Err(Refused::Full(_)) => Err(Refusal::Behind),
        Err(Refused::Stopping(_)) => Err(Refusal::Stopping),
    }
}

fn shutting_down() -> Response {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the server is shutting down: nothing written")
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use needle_runtime::source::{SourceCounters, StopSignal};
    use std::sync::Arc;

    #[test]
    fn good_lines_are_kept_and_the_first_bad_one_is_named() {
        let body = "cpu,host=a usage=1.5 1700000000\nnot a point\n\n# comment\ncpu v=2i 1\nx";
        let out = convert_points(body, "test", Format::Influx(Precision::Seconds));
        assert_eq!((out.points, out.malformed), (2, 2));
        assert_eq!(out.first_bad.as_ref().map(|(n, _)| *n), Some(2));
        let batch = out.batch.unwrap();
        assert_eq!(batch.columns().len(), 2, "two shapes");
        assert_eq!(
            String::from_utf8(batch.to_ndjson()).unwrap(),
            "{\"measurement\":\"cpu\",\"host\":\"a\",\"usage\":1.5,\"timestamp\":1700000000000}\n\
             {\"measurement\":\"cpu\",\"v\":2,\"timestamp\":1000}\n"
        );
    }

    #[test]
    fn json_lines_must_be_objects() {
        let out = convert_lines("{\"a\":1}\r\n[1]\n{\"b\":\n\n  {\"c\":2}  ", "test", |l, _| {
            json_line(l)
        });
        assert_eq!((out.points, out.malformed), (2, 2));
        assert_eq!(out.first_bad.map(|(n, _)| n), Some(2));
        assert_eq!(out.batch.unwrap().to_ndjson(), b"{\"a\":1}\n{\"c\":2}\n");
    }

    #[test]
    fn opentsdb_data_points_read_as_their_put_lines() {
        let point = serde_json::json!({"metric": "sys.cpu.user", "timestamp": 1356998400,
            "value": 42, "tags": {"host": "web01", "value": "x"}});
        assert_eq!(
            String::from_utf8(put_point(&point).unwrap()).unwrap(),
            r#"{"metric":"sys.cpu.user","host":"web01","_value":"x","value":42,"timestamp":1356998400000}"#
        );
        let strings =
            serde_json::json!({"metric": "m", "timestamp": "1356998400500", "value": "1.5"});
        assert!(put_point(&strings).is_ok());
        for bad in [
            serde_json::json!({"metric": "m", "timestamp": 1, "value": "abc"}),
            serde_json::json!({"metric": "a b", "timestamp": 1356998400, "value": 1}),
            serde_json::json!({"metric": "m", "value": 1}),
            serde_json::json!({"metric": "m", "timestamp": 1356998400, "value": 1, "tags": {"k": "a b"}}),
            serde_json::json!([1]),
        ] {
            assert!(put_point(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn gzip_bodies_are_read_up_to_the_limit_and_other_encodings_refused() {
        use std::io::Write;
        let gzip = |bytes: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(bytes).unwrap();
            e.finish().unwrap()
        };
        let with = |encoding: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_ENCODING, encoding.parse().unwrap());
            headers
        };
        let body = b"cpu usage=1\ncpu usage=2\n";
        assert_eq!(plain_body(&HeaderMap::new(), body, 24).unwrap().as_ref(), body);
        assert_eq!(plain_body(&with("Identity"), body, 24).unwrap().as_ref(), body);
        // two gzip members, as a concatenating client sends them, read as one body
        let mut two = gzip(&body[..12]);
        two.extend(gzip(&body[12..]));
        assert_eq!(plain_body(&with("gzip"), &two, 24).unwrap().as_ref(), body);
        let status = |r: Result<Cow<[u8]>, ApiError>| r.unwrap_err().status;
        assert_eq!(status(plain_body(&with("gzip"), &two, 23)), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(status(plain_body(&with("gzip"), body, 24)), StatusCode::BAD_REQUEST);
        let refused = status(plain_body(&with("deflate"), body, 24));
        assert_eq!(refused, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }

    #[test]
    fn a_full_queue_refuses_the_whole_request_with_retry_after() {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let sink = BatchSink::new(tx, StopSignal::new(), Arc::new(SourceCounters::default()));
        let patience = Duration::from_millis(20);
        assert!(hand_on(&sink, Batch::new(b"{\"a\":1}\n".to_vec()), patience).is_ok());
        // the workers took nothing: the queue is full, the next write is refused whole
        let refused = hand_on(&sink, Batch::new(b"{\"a\":2}\n".to_vec()), patience).unwrap_err();
        assert_eq!(refused, Refusal::Behind);
        let refused = refused.into_response();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        assert_eq!(rx.len(), 1, "only the first request's batch is queued");
        // once the workers catch up, it is taken
        rx.recv().unwrap();
        assert!(hand_on(&sink, Batch::new(b"{\"a\":2}\n".to_vec()), patience).is_ok());
    }
}
