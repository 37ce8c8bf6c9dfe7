//! A needle server for benchmarks, in this process: the runtime reading a `tcp:` source and the
//! HTTP API, both on free loopback ports, with a background feeder writing generated records
//! into the source at a steady rate (so latencies are measured under load, as in Bullet's
//! tests), all stopped when dropped.

use needle_runtime::metrics::Metrics;
use needle_runtime::source::{SourceOptions, TcpSource};
use needle_runtime::{NeedleConfig, Runtime};
use needle_server::AppState;
use needle_workload::{parse_spec, Generator, Pacer};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub struct BenchServer {
    pub url: String,
    pub data: SocketAddr,
    runtime: Arc<Runtime>,
    http: Option<HttpServer>,
    feeder: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl BenchServer {
    /// Starts the server, and a feeder at `rate` bullet records/s when `rate > 0`.
    pub fn start(rate: f64) -> Result<Self, String> {
        let source =
            TcpSource::bind("127.0.0.1:0", &SourceOptions::default()).map_err(|e| e.to_string())?;
        let data = source.local_addr().ok_or("the source has no address")?;
        let runtime = Runtime::start(bench_config(0), Box::new(source), Arc::new(Metrics::new()))
            .map_err(|e| e.to_string())?;
        let http = HttpServer::start(runtime.clone(), 1)?;
        let feeder = (rate > 0.0).then(|| {
            let running = Arc::new(AtomicBool::new(true));
            let flag = running.clone();
            let handle = std::thread::spawn(move || feed(data, rate, &flag));
            (running, handle)
        });
        Ok(Self { url: http.url.clone(), data, runtime, http: Some(http), feeder })
    }
}

/// The configuration of a benchmark server: `workers` worker threads (0: one per core), a 20 ms
/// tick, and the query caps raised far past what any scenario submits (the limits protect a
/// shared server; a benchmark measures what the runtime can hold).
pub fn bench_config(workers: usize) -> NeedleConfig {
    let mut config = NeedleConfig::default();
    config.runtime.workers = workers;
    config.runtime.tick_ms = 20;
    config.runtime.max_queries = 1_000_000;
    config.server.max_queries_per_client = 1_000_000;
    config
}

/// needle's HTTP API over a runtime, on a free loopback port, served by `threads` tokio
/// workers on a thread of its own; stopped when dropped.
pub struct HttpServer {
    pub url: String,
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl HttpServer {
    pub fn start(runtime: Arc<Runtime>, threads: usize) -> Result<Self, String> {
        Self::serve(AppState::new(runtime), threads)
    }

    /// [`HttpServer::start`] over a given state (one taking HTTP writes, say).
    pub fn serve(state: AppState, threads: usize) -> Result<Self, String> {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let addr = std_listener.local_addr().map_err(|e| e.to_string())?;
        let url = format!("http://{addr}");
        std_listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let tokio = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads.max(1))
                .enable_all()
                .build()
                .expect("a tokio runtime");
            tokio.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).expect("listener");
                let _ = needle_server::serve(listener, state, async {
                    let _ = stopped.await;
                })
                .await;
            });
        });
        Ok(Self { url, addr, stop: Some(stop), thread: Some(thread) })
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Writes generated bullet records to the source at `rate` per second until told to stop.
fn feed(data: SocketAddr, rate: f64, running: &AtomicBool) {
    let Ok(mut socket) = TcpStream::connect(data) else { return };
    let _ = socket.set_nodelay(true);
    let spec = parse_spec("bullet?seed=11").expect("a valid spec");
    let mut generator = Generator::new(&spec).expect("a valid generator");
    let pacer = Pacer::new(rate, Instant::now());
    let mut buf = Vec::new();
    while running.load(Ordering::Relaxed) {
        let due = pacer.due(Instant::now());
        buf.clear();
        while generator.produced() < due {
            generator.write_next(&mut buf);
            buf.push(b'\n');
        }
        if !buf.is_empty() && socket.write_all(&buf).is_err() {
            return;
        }
        let wait = pacer.when(generator.produced()).saturating_duration_since(Instant::now());
        std::thread::sleep(wait.min(Duration::from_millis(20)));
    }
}

impl Drop for BenchServer {
    fn drop(&mut self) {
        if let Some((running, handle)) = self.feeder.take() {
            running.store(false, Ordering::Relaxed);
            let _ = handle.join();
        }
        self.runtime.shutdown();
        drop(self.http.take());
    }
}
