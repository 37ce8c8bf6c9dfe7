//! `needle serve`: reads a live stream with one worker per core and answers queries over HTTP
//! until Ctrl-C or SIGTERM, which end every running query with a final result first.
//!
//! `--role` picks the part of needle this process is (the distributed mode, over Kafka, see
//! `docs/kafka.md`): `all` (the default) is everything in one process; `worker` reads its share
//! of the data topic (or `--source`), runs the queries the api nodes publish and sends partials
//! to the results topic, serving only metrics, health and status over HTTP; `api` reads no data,
//! takes queries over HTTP, publishes them and merges the workers' partials.
//!
//! Prints `needle listening on http://ADDR` and `source: ...` on stdout once ready (scripts and
//! tests wait for that line; with `--listen 127.0.0.1:0` it names the port picked).

use super::config::load;
use needle_kafka::Node;
use needle_runtime::metrics::Metrics;
use needle_runtime::source::{SourceOptions, SourceRegistry};
use needle_runtime::Runtime;
use needle_server::AppState;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct Args {
    /// A needle.toml (default: ./needle.toml when it exists); NEEDLE_* variables override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Where records come from: file:PATH[?follow=true], stdin,
    /// tcp:HOST:PORT[?format=json|influx|opentsdb|graphite&precision=ns|us|ms|s],
    /// gen:bullet|iot|small[?rate=N&seed=S&needle=FIELD=VALUE...],
    /// kafka://HOST:PORT/TOPIC[?group=G&start=latest|earliest], kafka (the [kafka] section's
    /// data topic; the default of a worker node), or http (records only from HTTP writes: POST
    /// /api/v2/write, /write, /api/put, /api/v1/records).
    #[arg(long)]
    pub source: Option<String>,
    /// Take HTTP writes (POST /api/v2/write, /write, /api/put, /api/v1/records) beside --source.
    #[arg(long)]
    pub ingest: bool,
    /// all: the whole of needle in this process; worker: read data, run the queries api nodes
    /// publish, send partials to Kafka; api: take queries over HTTP, merge the workers' partials.
    #[arg(long, default_value = "all", value_parser = ["all", "worker", "api"])]
    pub role: String,
    /// Tail file sources as they grow.
    #[arg(long)]
    pub follow: bool,
    /// Address for the HTTP API (default 127.0.0.1:9900).
    #[arg(long)]
    pub listen: Option<String>,
    /// The base URL clients reach this server at, http[s]://HOST[:PORT][/PREFIX]
    /// (`server.advertised_url`; default: http:// or https:// and the address listened on). An
    /// api node writes it in its queries' notices; the other api nodes redirect clients asking
    /// them for those queries there.
    #[arg(long, value_name = "URL")]
    pub advertised_url: Option<String>,
    /// Serve HTTPS with this certificate chain (PEM; `server.tls_cert`), with --tls-key.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<String>,
    /// The certificate's private key (PEM; `server.tls_key`).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<String>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    pub workers: Option<usize>,
    /// How much of each record is checked as JSON: line (the whole line, the default) or fields
    /// (only the fields queries read: faster, but errors elsewhere in a line go unnoticed).
    #[arg(long, value_parser = ["line", "fields"])]
    pub validate: Option<String>,
    #[command(flatten)]
    pub history: super::history::HistoryFlags,
}

pub fn run(args: Args) -> ExitCode {
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {}", needle_runtime::secrets::scrub(&message));
            ExitCode::from(1)
        }
    }
}

fn serve(args: Args) -> Result<(), String> {
    raise_open_files_limit();
    let mut config = load(args.config)?;
    let role = args.role.as_str();
    match (role, args.source) {
        ("api", Some(_)) => {
            return Err("an api node reads no source: its workers do (drop --source)".into())
        }
        (_, Some(source)) => config.source.spec = source,
        ("worker", None) => config.source.spec = "kafka".into(),
        _ => {}
    }
    config.source.follow |= args.follow;
    // `http`: no source of its own, every record written over HTTP
    let only_writes = config.source.spec == "http";
    let ingest = args.ingest || only_writes;
    if ingest && role != "all" {
        return Err(format!(
            "HTTP writes (--ingest, --source http) are taken by needle serve --role all only, \
             not by a{} {role} node",
            if role == "api" { "n" } else { "" }
        ));
    }
    if let Some(listen) = args.listen {
        config.server.listen = listen;
    }
    if let Some(url) = args.advertised_url {
        config.server.advertised_url = url;
    }
    if !config.server.advertised_url.is_empty() {
        config.server.advertised_url =
            needle_runtime::config::check_advertised_url(&config.server.advertised_url)
                .map_err(|e| e.to_string())?;
    }
    if let (Some(cert), Some(key)) = (args.tls_cert, args.tls_key) {
        (config.server.tls_cert, config.server.tls_key) = (cert, key);
    }
    let tls = match (config.server.tls_cert.as_str(), config.server.tls_key.as_str()) {
        ("", "") => None,
        ("", _) | (_, "") => {
            return Err("HTTPS needs both server.tls_cert and server.tls_key (or neither)".into())
        }
        (cert, key) => Some(
            needle_server::tls::server_config(Path::new(cert), Path::new(key))
                .map_err(|e| e.to_string())?,
        ),
    };
    if let Some(validate) = &args.validate {
        config.runtime.validate = validate.parse()?;
    }
    if let Some(workers) = args.workers {
        config.runtime.workers = workers;
    }
    args.history.apply(&mut config.history);
    let options = SourceOptions {
        max_line_bytes: config.runtime.max_line_bytes,
        follow: config.source.follow,
        ..SourceOptions::default()
    };
    let metrics = Arc::new(Metrics::new());
    metrics.watch_heap(Box::new(crate::heap_bytes));
    let mut registry = SourceRegistry::default();
    needle_kafka::register(&mut registry, &config.kafka, metrics.clone());
    let source = match role {
        "api" => None,
        _ if only_writes => None,
        _ => Some(registry.open(&config.source.spec, &options).map_err(|e| e.to_string())?),
    };
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("needle-http")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the HTTP runtime: {e}"))?;
    tokio.block_on(async move {
        let mut config = config;
        let listen = config.server.listen.clone();
        let listener = tokio::net::TcpListener::bind(&listen)
            .await
            .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        let address = listener.local_addr().map_err(|e| e.to_string())?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        if config.server.advertised_url.is_empty() {
            config.server.advertised_url = format!("{scheme}://{address}");
            if role == "api" && address.ip().is_unspecified() {
                eprintln!(
                    "needle: listening on {address}, this api node tells clients to come to \
                     {}: set server.advertised_url (--advertised-url) to an address they reach",
                    config.server.advertised_url
                );
            }
        }
        // (connecting to Kafka blocks: not on the async runtime's threads)
        let role = role.to_owned();
        let (process, writes) = tokio::task::spawn_blocking(move || match ingest {
            true => Process::start_ingesting(config, source, metrics),
            false => Process::start(&role, config, source, metrics).map(|p| (p, None)),
        })
        .await
        .map_err(|e| format!("starting failed: {e}"))??;
        let runtime = process.runtime().clone();
        let state = match writes {
            Some(sink) => AppState::with_ingest(runtime.clone(), sink),
            None => AppState::new(runtime.clone()),
        };
        // (a reader that stopped reading must not bring the server down: no println!)
        let mut out = std::io::stdout();
        let _ = writeln!(out, "needle listening on {scheme}://{address}");
        let _ = writeln!(out, "source: {}", runtime.source_description());
        let _ = out.flush();
        let closing = state.clone();
        let shutdown = async move {
            wait_for_signal().await;
            eprintln!("needle: shutting down; ending running queries with their results so far");
            // the workers end once nothing can hand them records: writes first
            closing.close_ingest();
            let _ = tokio::task::spawn_blocking(move || process.shutdown()).await;
        };
        match tls {
            Some(tls) => needle_server::serve_tls(listener, tls, state, shutdown).await,
            None => needle_server::serve(listener, state, shutdown).await,
        }
        .map_err(|e| e.to_string())
    })
}

/// What runs behind the HTTP API: a whole runtime, or a node of the distributed mode.
enum Process {
    All(Arc<Runtime>),
    Node(Node),
}

impl Process {
    fn start(
        role: &str,
        config: needle_runtime::NeedleConfig,
        source: Option<Box<dyn needle_runtime::source::Source>>,
        metrics: Arc<Metrics>,
    ) -> Result<Self, String> {
        let started = match (role, source) {
            ("worker", Some(source)) => {
                Node::start_worker(config, metrics, source).map(Process::Node)
            }
            ("api", _) => Node::start_api(config, metrics).map(Process::Node),
            (_, Some(source)) => {
                return Runtime::start(config, source, metrics)
                    .map(Process::All)
                    .map_err(|e| e.to_string())
            }
            (_, None) => return Err("no source".into()),
        };
        started.map_err(|e| e.to_string())
    }

    /// The whole of needle (`--role all`) taking HTTP writes: the sink they go to, beside
    /// `source` if there is one (`--ingest`), or instead of one (`--source http`).
    fn start_ingesting(
        config: needle_runtime::NeedleConfig,
        source: Option<Box<dyn needle_runtime::source::Source>>,
        metrics: Arc<Metrics>,
    ) -> Result<(Self, Option<needle_runtime::source::BatchSink>), String> {
        let runtime = Runtime::start_role(config, needle_runtime::Role::All, metrics)
            .map_err(|e| e.to_string())?;
        let description = match &source {
            Some(source) => format!("{} and HTTP writes", source.describe()),
            None => "HTTP writes".to_owned(),
        };
        let started = runtime.push_sink(&description).and_then(|sink| {
            if let Some(source) = source {
                runtime.run_source_with(source, sink.clone())?;
            }
            Ok(sink)
        });
        match started {
            Ok(sink) => Ok((Process::All(runtime), Some(sink))),
            Err(error) => {
                runtime.shutdown();
                Err(error.to_string())
            }
        }
    }

    fn runtime(&self) -> &Arc<Runtime> {
        match self {
            Process::All(runtime) => runtime,
            Process::Node(node) => node.runtime(),
        }
    }

    fn shutdown(&self) {
        match self {
            Process::All(runtime) => runtime.shutdown(),
            Process::Node(node) => node.shutdown(),
        }
    }
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

/// Lets the process hold as many connections as the system allows it: the soft limit on open
/// files (often 1,024) raised to the hard one. Each client connection and each idle WebSocket is
/// a file.
fn raise_open_files_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}
