//! `needle query --server URL QUERY`: runs a query on a needle server and prints its results as
//! they arrive (the same table or JSON lines as a local run). While it runs, a progress line on
//! stderr (when it is a terminal) shows the time left and the records seen and matched. Ctrl-C
//! kills the query on the server; its final result, saying so, is still printed.
//!
//! Exit codes: 0 done, 1 the server could not be reached or failed, 2 the query was refused,
//! 130 killed by Ctrl-C.

use super::client::{authorized, client, json_or_message, server_url};
use super::output::{read_query, Format, Printer};
use indicatif::{ProgressBar, ProgressStyle};
use needle_engine::exec::Emission;
use serde_json::Value as Json;
use std::io::{BufRead, BufReader};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

enum Event {
    Result(Box<Emission>),
    Complete,
    Failed(String),
}

pub fn run(server: &str, query: &str, format: Format) -> ExitCode {
    let server = server_url(Some(server.to_owned()));
    let text = match read_query(query) {
        Ok(text) => text,
        Err(code) => return code,
    };
    let http = client();
    let answer =
        authorized(http.post(format!("{server}/api/v1/queries")).body(text.clone())).send();
    let started = match answer {
        Ok(response) if response.status().is_client_error() => {
            let body: Json = response.json().unwrap_or(Json::Null);
            eprint!("{}", render_refusal(&body, &text));
            return ExitCode::from(2);
        }
        other => match json_or_message(other, &server) {
            Ok(body) => body,
            Err(message) => {
                eprintln!("error: {message}");
                return ExitCode::from(1);
            }
        },
    };
    let id = started["id"].as_str().unwrap_or_default().to_owned();
    let events_url = format!("{server}{}", started["urls"]["events"].as_str().unwrap_or_default());
    let events = match authorized(http.get(&events_url)).send() {
        Ok(response) if response.status().is_success() => response,
        Ok(response) => {
            eprintln!("error: the server would not stream the results: {}", response.status());
            return ExitCode::from(1);
        }
        Err(e) => {
            eprintln!("error: cannot follow the query's results: {e}");
            return ExitCode::from(1);
        }
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || read_events(events, tx));

    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let interrupted = interrupted.clone();
        let _ = ctrlc::set_handler(move || interrupted.store(true, Ordering::SeqCst));
    }
    let progress = ProgressBar::new_spinner();
    progress.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("a valid template"));
    let mut out = Printer { format, stdout: std::io::stdout().lock() };
    let mut kill_sent = false;
    loop {
        if interrupted.load(Ordering::SeqCst) && !kill_sent {
            kill_sent = true;
            progress.set_message(format!("killing query {id} ..."));
            let _ = authorized(http.delete(format!("{server}/api/v1/queries/{id}"))).send();
        }
        match rx.recv_timeout(Duration::from_millis(250)) {
            Ok(Event::Result(emission)) => {
                let printed = progress.suspend(|| out.print(&emission));
                if printed.is_err() {
                    let _ = authorized(http.delete(format!("{server}/api/v1/queries/{id}"))).send();
                    return ExitCode::SUCCESS; // stdout closed (a pipe into `head`)
                }
            }
            Ok(Event::Complete) => break,
            Ok(Event::Failed(message)) => {
                progress.finish_and_clear();
                eprintln!("error: {message}");
                return ExitCode::from(1);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if !kill_sent {
                    show_progress(&progress, &http, &server, &id);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    progress.finish_and_clear();
    if kill_sent {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    }
}

fn show_progress(progress: &ProgressBar, http: &reqwest::blocking::Client, server: &str, id: &str) {
    let Ok(response) = authorized(http.get(format!("{server}/api/v1/queries/{id}"))).send() else {
        return;
    };
    let Ok(status) = response.json::<Json>() else { return };
    if status.get("id").is_none() {
        return;
    }
    let left = status["time_left_ms"].as_i64().unwrap_or(0) as f64 / 1000.0;
    progress.set_message(format!(
        "query {id}: {left:.1} s left, {} records seen, {} matched",
        status["records_seen"], status["records_matched"]
    ));
    progress.tick();
}

/// Reads the Server-Sent Events stream: `result` events carry emissions, `complete` ends it.
fn read_events(response: reqwest::blocking::Response, tx: mpsc::Sender<Event>) {
    let mut event = String::new();
    for line in BufReader::new(response).lines() {
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                let _ = tx.send(Event::Failed(format!("the result stream broke: {e}")));
                return;
            }
        };
        if let Some(name) = line.strip_prefix("event:") {
            event = name.trim().to_owned();
        } else if let Some(data) = line.strip_prefix("data:") {
            let message = match event.as_str() {
                "result" => match emission(data.trim()) {
                    Some(e) => Event::Result(Box::new(e)),
                    None => {
                        Event::Failed(format!("the server sent a result that is not one: {data}"))
                    }
                },
                "complete" => Event::Complete,
                _ => continue,
            };
            let end = !matches!(message, Event::Result(_));
            if tx.send(message).is_err() || end {
                return;
            }
        }
    }
}

/// An emission back from its JSON form.
fn emission(data: &str) -> Option<Emission> {
    let json: Json = serde_json::from_str(data).ok()?;
    let records = json["records"]
        .as_array()?
        .iter()
        .map(|r| needle_record::decode_record(r.to_string().as_bytes()).ok())
        .collect::<Option<Vec<_>>>()?;
    let meta = json["meta"].as_object()?.clone();
    let is_final =
        meta.get("Window").and_then(|w| w.get("Final")).and_then(Json::as_bool).unwrap_or(false);
    Some(Emission { records, meta: meta.into(), is_final })
}

/// A refused query as `needle validate` prints errors: the message, where, a caret, the hint.
fn render_refusal(body: &Json, text: &str) -> String {
    let mut out =
        format!("error: {}\n", body["error"].as_str().unwrap_or("the server refused the query"));
    if let (Some(line), Some(column)) = (body["line"].as_u64(), body["column"].as_u64()) {
        out.push_str(&format!("at line {line}, column {column}\n"));
        if let Some(source) = text.lines().nth(line.saturating_sub(1) as usize) {
            out.push_str(&format!(
                "  {source}\n  {}^\n",
                " ".repeat(column.saturating_sub(1) as usize)
            ));
        }
    }
    if let Some(hint) = body["hint"].as_str() {
        out.push_str(&format!("hint: {hint}\n"));
    }
    out
}
