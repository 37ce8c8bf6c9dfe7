//! `needle serve`: reads a live stream with one worker per core and answers queries over HTTP
//! until Ctrl-C or SIGTERM, which end every running query with a final result first.
//!
//! Prints `needle listening on http://ADDR` and `source: ...` on stdout once ready (scripts and
//! tests wait for that line; with `--listen 127.0.0.1:0` it names the port picked).

use super::config::load;
use needle_runtime::metrics::Metrics;
use needle_runtime::source::{SourceOptions, SourceRegistry};
use needle_runtime::Runtime;
use needle_server::AppState;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct Args {
    /// A needle.toml (default: ./needle.toml when it exists); NEEDLE_* variables override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Where records come from: file:PATH[?follow=true], stdin, tcp:HOST:PORT,
    /// gen:bullet|iot|small[?rate=N&seed=S&needle=FIELD=VALUE...].
    #[arg(long)]
    pub source: Option<String>,
    /// Tail file sources as they grow.
    #[arg(long)]
    pub follow: bool,
    /// Address for the HTTP API (default 127.0.0.1:9900).
    #[arg(long)]
    pub listen: Option<String>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    pub workers: Option<usize>,
}

pub fn run(args: Args) -> ExitCode {
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

fn serve(args: Args) -> Result<(), String> {
    let mut config = load(args.config)?;
    if let Some(source) = args.source {
        config.source.spec = source;
    }
    config.source.follow |= args.follow;
    if let Some(listen) = args.listen {
        config.server.listen = listen;
    }
    if let Some(workers) = args.workers {
        config.runtime.workers = workers;
    }
    let options = SourceOptions {
        max_line_bytes: config.runtime.max_line_bytes,
        follow: config.source.follow,
        ..SourceOptions::default()
    };
    let source =
        SourceRegistry::default().open(&config.source.spec, &options).map_err(|e| e.to_string())?;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("needle-http")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the HTTP runtime: {e}"))?;
    tokio.block_on(async move {
        let listen = config.server.listen.clone();
        let listener = tokio::net::TcpListener::bind(&listen)
            .await
            .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        let address = listener.local_addr().map_err(|e| e.to_string())?;
        let runtime =
            Runtime::start(config, source, Arc::new(Metrics::new())).map_err(|e| e.to_string())?;
        println!("needle listening on http://{address}");
        println!("source: {}", runtime.source_description());
        let _ = std::io::stdout().flush();
        let stopping = runtime.clone();
        let shutdown = async move {
            wait_for_signal().await;
            eprintln!("needle: shutting down; ending running queries with their results so far");
            let _ = tokio::task::spawn_blocking(move || stopping.shutdown()).await;
        };
        needle_server::serve(listener, AppState::new(runtime), shutdown)
            .await
            .map_err(|e| e.to_string())
    })
}

/// Ctrl-C, or SIGTERM on Unix.
async fn wait_for_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => return ctrl_c.await,
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await;
}
