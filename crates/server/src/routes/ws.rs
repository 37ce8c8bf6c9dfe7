//! `GET /api/v1/ws`: a WebSocket to run many queries at once over one connection.
//!
//! Client → server (text frames, JSON):
//! - `{"type": "start", "query": "<BQL or Bullet JSON>", "tag": "<optional, echoed back>"}`
//! - `{"type": "kill", "id": "<query id>"}`
//!
//! Server → client:
//! - `{"type": "started", "id": ..., "tag": ...}`
//! - `{"type": "result", "id": ..., "result": {"records": [...], "meta": {...}}}` per emission
//! - `{"type": "complete", "id": ..., "dropped": n}` when a query ends
//! - `{"type": "error", "tag"/"id": ..., "error": ..., "line", "column", "hint"}` for a bad message
//!   or query; the connection stays open.
//!
//! A slow client never stalls the workers: each query's results wait in its bounded queue
//! (oldest dropped and counted). Closing the socket kills the queries it started.

use crate::request::{submit_error, Owner};
use crate::state::AppState;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::collections::HashMap;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

#[utoipa::path(get, path = "/api/v1/ws", tag = "queries",
    responses((status = 101, description = "Switching to the WebSocket protocol described in the module doc")))]
pub async fn websocket(
    State(state): State<AppState>,
    Owner(owner): Owner,
    upgrade: WebSocketUpgrade,
) -> Response {
    let max = state.config().server.max_request_bytes;
    upgrade.max_message_size(max).on_upgrade(move |socket| session(socket, state, owner))
}

async fn session(socket: WebSocket, state: AppState, owner: String) {
    let (mut sink, mut incoming) = socket.split();
    let (out, mut outgoing) = mpsc::channel::<String>(64);
    let writer = tokio::spawn(async move {
        while let Some(text) = outgoing.recv().await {
            if sink.send(Message::Text(text.into())).await.is_err() {
                break;
            }
        }
    });
    let mut pumps: HashMap<String, JoinHandle<()>> = HashMap::new();
    while let Some(Ok(message)) = incoming.next().await {
        let text = match message {
            Message::Text(text) => text.to_string(),
            Message::Close(_) => break,
            Message::Binary(_) => {
                let _ = out.send(error(None, "send text frames with JSON messages")).await;
                continue;
            }
            _ => continue,
        };
        pumps.retain(|_, pump| !pump.is_finished());
        match serde_json::from_str::<Value>(&text) {
            Ok(request) => handle(&state, &owner, request, &out, &mut pumps).await,
            Err(e) => {
                let _ = out.send(error(None, &format!("the message is not valid JSON: {e}"))).await;
            }
        }
    }
    for (id, pump) in pumps {
        if !pump.is_finished() {
            state.runtime().kill(&id);
        }
    }
    drop(out);
    let _ = writer.await;
}

async fn handle(
    state: &AppState,
    owner: &str,
    request: Value,
    out: &mpsc::Sender<String>,
    pumps: &mut HashMap<String, JoinHandle<()>>,
) {
    let tag = request.get("tag").cloned();
    match request.get("type").and_then(Value::as_str) {
        Some("start") => {
            let Some(text) = request.get("query").and_then(Value::as_str) else {
                let _ = out.send(error(tag, "a start message needs \"query\": \"<BQL>\"")).await;
                return;
            };
            match state.runtime().submit(text, owner) {
                Ok(handle) => {
                    let id = handle.id.clone();
                    let _ = out
                        .send(json!({"type": "started", "id": id, "tag": tag}).to_string())
                        .await;
                    let out = out.clone();
                    let pump = tokio::spawn(async move {
                        while let Some(emission) = handle.results.next().await {
                            let msg = json!({"type": "result", "id": handle.id, "result": emission.to_json()});
                            if out.send(msg.to_string()).await.is_err() {
                                return;
                            }
                        }
                        let done = json!({"type": "complete", "id": handle.id, "dropped": handle.results.dropped()});
                        let _ = out.send(done.to_string()).await;
                    });
                    pumps.insert(id, pump);
                }
                Err(refused) => {
                    let mut body =
                        serde_json::to_value(submit_error(refused).body).unwrap_or(Value::Null);
                    body["type"] = "error".into();
                    body["tag"] = tag.unwrap_or(Value::Null);
                    let _ = out.send(body.to_string()).await;
                }
            }
        }
        Some("kill") => {
            let id = request.get("id").and_then(Value::as_str).unwrap_or_default();
            if !state.runtime().kill(id) {
                let _ = out.send(json!({"type": "error", "id": id, "error": format!("no running query '{id}'")}).to_string()).await;
            }
        }
        other => {
            let what = other.map_or("a message without \"type\"".to_owned(), |t| {
                format!("unknown message type '{t}'")
            });
            let _ = out.send(error(tag, &format!("{what}; send \"start\" or \"kill\""))).await;
        }
    }
}

fn error(tag: Option<Value>, message: &str) -> String {
    json!({"type": "error", "tag": tag, "error": message}).to_string()
}
