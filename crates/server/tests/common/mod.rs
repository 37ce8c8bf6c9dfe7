//! A real server for the HTTP tests: the runtime reading a `tcp:` source on a free loopback
//! port, the API on another, stopped at the end of each test.

#![allow(dead_code)]

use needle_runtime::metrics::Metrics;
use needle_runtime::source::{SourceOptions, TcpSource};
use needle_runtime::{NeedleConfig, Runtime};
use needle_server::AppState;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

pub struct Server {
    pub base: String,
    pub data: SocketAddr,
    pub runtime: Arc<Runtime>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    pub async fn start(mut config: NeedleConfig) -> Self {
        config.runtime.workers = 2;
        config.runtime.tick_ms = 20;
        let source = TcpSource::bind("127.0.0.1:0", &SourceOptions::default()).unwrap();
        let data = source.local_addr().unwrap();
        let runtime = Runtime::start(config, Box::new(source), Arc::new(Metrics::new())).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = AppState::new(runtime.clone());
        let task = tokio::spawn(async move {
            needle_server::serve(listener, state, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        Self { base, data, runtime, stop: Some(stop), task }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// POSTs `body` (sent as is) to `path` and returns the answer.
    pub async fn post(&self, path: &str, body: impl Into<reqwest::Body>) -> reqwest::Response {
        reqwest::Client::new().post(self.url(path)).body(body).send().await.unwrap()
    }

    /// GETs `path` and returns its JSON body.
    pub async fn get_json(&self, path: &str) -> serde_json::Value {
        let r = reqwest::Client::new().get(self.url(path)).send().await.unwrap();
        r.json().await.unwrap()
    }

    /// POSTs `body` to `path` and returns its JSON body.
    pub async fn post_json(&self, path: &str, body: impl Into<reqwest::Body>) -> serde_json::Value {
        self.post(path, body).await.json().await.unwrap()
    }

    /// Sends NDJSON lines to the data source (from a blocking thread).
    pub async fn send(&self, lines: Vec<String>) {
        let addr = self.data;
        tokio::task::spawn_blocking(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            for line in lines {
                writeln!(s, "{line}").unwrap();
            }
        })
        .await
        .unwrap();
    }

    pub async fn shutdown(mut self) {
        let runtime = self.runtime.clone();
        tokio::task::spawn_blocking(move || runtime.shutdown()).await.unwrap();
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap();
    }
}
