//! What the scenarios that run needle live share (max-raw-queries, data-scaling, query-scaling,
//! eps): a server in this process (the runtime with a real source, and the HTTP API on
//! loopback), a WebSocket client that starts thousands of queries on one connection and reads
//! their results on a thread of its own, paced feeders that write pre-generated lines into the
//! `tcp:` source, and the measurements every scenario reads: the runtime's read→match
//! histogram, the CPU time of needle's threads, and resident memory.
//!
//! Everything is measured from the outside of the runtime, through the same interfaces a user
//! has: queries go through `GET /api/v1/ws`, records through a source, figures come from the
//! runtime's metrics (what `/metrics` exports) and from `/proc`.

use super::harness::{bench_config, HttpServer};
use needle_runtime::metrics::Metrics;
use needle_runtime::source::{BatchSink, Source, SourceOptions, TcpSource};
use needle_runtime::{NeedleConfig, Runtime, RuntimeError};
use needle_workload::{Generator, Pacer, WorkloadKind, WorkloadSpec};
use serde_json::{json, Value};
use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The configuration of the live scenarios: [`bench_config`]'s raised query caps, `workers`
/// worker threads (0: one per core), and the runtime's default tick (100 ms; RAW matches go to
/// the joiner at once, whatever the tick).
pub fn live_config(workers: usize) -> NeedleConfig {
    let mut config = bench_config(workers);
    config.runtime.tick_ms = NeedleConfig::default().runtime.tick_ms;
    config
}

/// Microseconds since the first call in this process: the clock of `sent_us` fields, so the
/// time a record was written can travel inside it and be compared when its result arrives.
pub fn now_us() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_micros() as u64
}

/// A needle server in this process: the runtime reading `source`, held back until
/// [`LiveServer::open`] (so queries can be registered before the first record flows), and the
/// HTTP API. Everything stops when dropped.
pub struct LiveServer {
    pub runtime: Arc<Runtime>,
    pub http: HttpServer,
    /// The `tcp:` source's address, when the source is one.
    pub data: Option<SocketAddr>,
    gate: Arc<AtomicBool>,
}

impl LiveServer {
    /// A server reading a `tcp:` source on a free loopback port (open at once: clients decide
    /// when records flow).
    pub fn tcp(config: NeedleConfig) -> Result<Self, String> {
        let source =
            TcpSource::bind("127.0.0.1:0", &SourceOptions::default()).map_err(|e| e.to_string())?;
        let data = source.local_addr().ok_or("the source has no address")?;
        let mut server = Self::gated(config, Box::new(source))?;
        server.data = Some(data);
        server.open();
        Ok(server)
    }

    /// A server reading `source` once [`LiveServer::open`] is called.
    pub fn gated(config: NeedleConfig, source: Box<dyn Source>) -> Result<Self, String> {
        let gate = Arc::new(AtomicBool::new(false));
        let source = Box::new(Gated { inner: source, open: gate.clone() });
        let runtime =
            Runtime::start(config, source, Arc::new(Metrics::new())).map_err(|e| e.to_string())?;
        // as many HTTP threads as `needle serve` runs
        let http = HttpServer::start(runtime.clone(), 2)?;
        Ok(Self { runtime, http, data: None, gate })
    }

    pub fn url(&self) -> &str {
        &self.http.url
    }

    /// Lets the source start reading.
    pub fn open(&self) {
        self.gate.store(true, Ordering::SeqCst);
    }

    /// Records the workers have read so far.
    pub fn records_read(&self) -> u64 {
        self.runtime.metrics().records_read.get()
    }

    pub fn bytes_read(&self) -> u64 {
        self.runtime.metrics().bytes_read.get()
    }
}

impl Drop for LiveServer {
    fn drop(&mut self) {
        self.runtime.shutdown();
    }
}

/// A source that waits for its gate before running the real one (or ends when the runtime
/// stops first).
struct Gated {
    inner: Box<dyn Source>,
    open: Arc<AtomicBool>,
}

impl Source for Gated {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn run(self: Box<Self>, sink: BatchSink) -> Result<(), RuntimeError> {
        while !self.open.load(Ordering::SeqCst) {
            if sink.is_stopped() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.inner.run(sink)
    }
}

/// Lines generated once and held in memory, for feeders that write them over and over.
pub struct Pool {
    pub bytes: Vec<u8>,
    /// Where each line ends (after its newline).
    ends: Vec<usize>,
}

impl Pool {
    /// `count` lines of a generated workload (`bullet` or `small`), seeded.
    pub fn generate(kind: WorkloadKind, count: usize, seed: u64) -> Result<Self, String> {
        let spec = WorkloadSpec::new(kind).with_seed(seed);
        let mut generator = Generator::new(&spec).map_err(|e| e.to_string())?;
        let mut bytes = Vec::new();
        let mut ends = Vec::with_capacity(count);
        for _ in 0..count.max(1) {
            generator.write_next(&mut bytes);
            bytes.push(b'\n');
            ends.push(bytes.len());
        }
        Ok(Self { bytes, ends })
    }

    pub fn lines(&self) -> usize {
        self.ends.len()
    }

    /// Line `i` (without its newline).
    pub fn line(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i] - 1]
    }

    /// The bytes of lines `from..to` of the endless repetition of the pool, as contiguous
    /// slices (two when the range wraps around).
    fn slices(&self, from: u64, to: u64) -> impl Iterator<Item = &[u8]> {
        let n = self.ends.len() as u64;
        let mut at = from;
        std::iter::from_fn(move || {
            if at >= to {
                return None;
            }
            let first = (at % n) as usize;
            let last = ((to - at).min(n - at % n) + at % n) as usize;
            let start = if first == 0 { 0 } else { self.ends[first - 1] };
            at += (last - first) as u64;
            Some(&self.bytes[start..self.ends[last - 1]])
        })
    }
}

/// A thread writing a pool's lines into a `tcp:` source: at `rate` lines/s, or as fast as the
/// socket takes them (`None`: the source's backpressure is the pace), until `limit` lines or
/// until stopped. The connection stays open until [`Feeder::stop`], so the source's reader
/// thread (and its CPU time) outlives the last line.
pub struct Feeder {
    running: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

impl Feeder {
    pub fn start(
        data: SocketAddr,
        pool: Arc<Pool>,
        rate: Option<f64>,
        limit: Option<u64>,
    ) -> Result<Self, String> {
        let mut socket = TcpStream::connect(data).map_err(|e| e.to_string())?;
        socket.set_nodelay(true).map_err(|e| e.to_string())?;
        let running = Arc::new(AtomicBool::new(true));
        let written = Arc::new(AtomicU64::new(0));
        let (flag, count) = (running.clone(), written.clone());
        let thread = std::thread::Builder::new()
            .name("bench-feeder".into())
            .spawn(move || {
                let limit = limit.unwrap_or(u64::MAX);
                let start = Instant::now();
                let pacer = rate.map(|r| Pacer::new(r, start));
                // unpaced: about 256 KiB per write
                let chunk = (256 << 10) / (pool.bytes.len() / pool.lines()).max(1) as u64 + 1;
                let mut done = 0u64;
                while flag.load(Ordering::Relaxed) && done < limit {
                    let due = match pacer {
                        Some(p) => p.due(Instant::now()).min(limit),
                        None => (done + chunk).min(limit),
                    };
                    for slice in pool.slices(done, due) {
                        socket.write_all(slice).map_err(|e| format!("feeding the source: {e}"))?;
                    }
                    done = due;
                    count.store(done, Ordering::Relaxed);
                    if let Some(p) = pacer {
                        // write a millisecond's worth at a time at the least, not a line per
                        // write: at 100,000+ lines/s single-line writes cost the feeder a core
                        // and cut the source's reads into crumbs
                        let step = (p.rate() / 1000.0).ceil().max(1.0) as u64;
                        let wait = p.when(done + step).saturating_duration_since(Instant::now());
                        std::thread::sleep(wait.min(Duration::from_millis(5)));
                    }
                }
                while flag.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Ok(())
            })
            .map_err(|e| e.to_string())?;
        Ok(Self { running, written, thread: Some(thread) })
    }

    /// Lines written so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Stops the feeder (at once, or after its limit) and closes its connection.
    pub fn stop(mut self) -> Result<(), String> {
        self.running.store(false, Ordering::Relaxed);
        let thread = self.thread.take().ok_or("stopped twice")?;
        thread.join().map_err(|_| "the feeder panicked".to_owned())?
    }
}

impl Drop for Feeder {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A WebSocket to `GET /api/v1/ws`: many queries on one connection.
pub struct WsClient {
    ws: tungstenite::WebSocket<TcpStream>,
}

/// The queries a [`WsClient::start_all`] started.
#[derive(Debug, Default)]
pub struct Started {
    /// Per query text, in order: its id, or `None` when refused.
    pub ids: Vec<Option<String>>,
    /// The first refusals' messages.
    pub errors: Vec<String>,
    pub elapsed: Duration,
}

impl Started {
    pub fn count(&self) -> usize {
        self.ids.iter().flatten().count()
    }
}

/// At most this many start messages wait for their answer (so neither side's buffers fill).
const START_WINDOW: usize = 4096;

impl WsClient {
    /// Connects to the server at `url` (`http://HOST:PORT`).
    pub fn connect(url: &str) -> Result<Self, String> {
        let addr = url.strip_prefix("http://").ok_or(format!("not an http URL: {url}"))?;
        let stream = TcpStream::connect(addr).map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (ws, _) = tungstenite::client(format!("ws://{addr}/api/v1/ws"), stream)
            .map_err(|e| format!("opening the WebSocket: {e}"))?;
        // reads wake up now and then, to notice their deadline
        let _ = ws.get_ref().set_read_timeout(Some(Duration::from_millis(50)));
        Ok(Self { ws })
    }

    /// Starts every query, pipelined, and waits until each is answered. Every message read
    /// meanwhile (the answers too, after they are counted) goes to `each`.
    pub fn start_all(
        &mut self,
        texts: &[String],
        each: &mut dyn FnMut(&Value),
    ) -> Result<Started, String> {
        let start = Instant::now();
        let mut started = Started { ids: vec![None; texts.len()], ..Started::default() };
        let (mut sent, mut answered) = (0usize, 0usize);
        while answered < texts.len() {
            if sent < texts.len() && sent - answered < START_WINDOW {
                let end = (answered + START_WINDOW).min(texts.len());
                for (tag, text) in texts.iter().enumerate().take(end).skip(sent) {
                    let message = json!({"type": "start", "query": text, "tag": tag});
                    self.ws
                        .write(tungstenite::Message::text(message.to_string()))
                        .map_err(|e| format!("sending a query: {e}"))?;
                }
                self.ws.flush().map_err(|e| format!("sending queries: {e}"))?;
                sent = end;
            }
            let message = self.read(Duration::from_secs(60))?.ok_or_else(|| {
                format!("no answer to a start message for 60 s ({answered} of {sent} answered)")
            })?;
            let tag = message["tag"].as_u64().map(|t| t as usize).filter(|&t| t < texts.len());
            match (message["type"].as_str(), tag) {
                (Some("started"), Some(tag)) => {
                    started.ids[tag] = message["id"].as_str().map(str::to_owned);
                    answered += 1;
                }
                (Some("error"), Some(_)) => {
                    if started.errors.len() < 5 {
                        started.errors.push(message["error"].to_string());
                    }
                    answered += 1;
                }
                _ => {}
            }
            each(&message);
        }
        started.elapsed = start.elapsed();
        Ok(started)
    }

    /// Sends one JSON message.
    pub fn send(&mut self, message: &Value) -> Result<(), String> {
        self.ws.send(tungstenite::Message::text(message.to_string())).map_err(|e| e.to_string())
    }

    /// The next JSON message, or `None` after `timeout` without one.
    pub fn read(&mut self, timeout: Duration) -> Result<Option<Value>, String> {
        match self.read_text(timeout)? {
            Some(text) => serde_json::from_str(&text).map(Some).map_err(|e| e.to_string()),
            None => Ok(None),
        }
    }

    /// The next text message, unparsed, or `None` after `timeout` without one.
    pub fn read_text(&mut self, timeout: Duration) -> Result<Option<String>, String> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.ws.read() {
                Ok(tungstenite::Message::Text(text)) => return Ok(Some(text.as_str().to_owned())),
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                {
                    if Instant::now() >= deadline {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(format!("reading the WebSocket: {e}")),
            }
        }
    }

    /// Reads every message on a thread of its own, giving each (as text: the handler parses
    /// only what it needs, so the client takes little of the machine it shares with the
    /// server) to `on_message` with `state`, until `on_message` returns false, the connection
    /// ends, or [`Reader::finish`].
    pub fn spawn_reader<S: Send + 'static>(
        mut self,
        mut state: S,
        on_message: fn(&mut S, &str) -> bool,
    ) -> Reader<S> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("bench-ws-reader".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    match self.read_text(Duration::from_millis(100)) {
                        Ok(Some(message)) => {
                            if !on_message(&mut state, &message) {
                                break;
                            }
                        }
                        Ok(None) => {}
                        Err(_) => break,
                    }
                }
                state
            })
            .expect("a reader thread");
        Reader { stop, thread }
    }
}

/// A [`WsClient`] reading on its own thread.
pub struct Reader<S> {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<S>,
}

impl<S> Reader<S> {
    /// Waits for the reader to end by itself until `deadline`, then stops it; its state.
    pub fn finish(self, deadline: Instant) -> Result<S, String> {
        while !self.thread.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().map_err(|_| "the WebSocket reader panicked".into())
    }
}

/// The time from a record's `sent_us` to now, for the records of a result that carry one: the
/// latest written (the one the result waited for), in ms.
pub fn latency_of_latest(records: &[Value]) -> Option<f64> {
    let sent = records.iter().filter_map(|r| r["sent_us"].as_u64()).max()?;
    Some(now_us().saturating_sub(sent) as f64 / 1000.0)
}

/// A snapshot of the runtime's read→match histogram (`needle_read_to_match_seconds`): the time
/// from a batch being read by the source to its records having matched (Bullet's "read →
/// filter" latency), observed once per batch in which some record matched.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    /// (upper bound in seconds, cumulative count), ascending, the last one `+Inf`.
    buckets: Vec<(f64, u64)>,
}

impl Histogram {
    pub fn read_to_match(runtime: &Runtime) -> Self {
        Self::parse(&runtime.metrics().render(), "needle_read_to_match_seconds_bucket")
    }

    /// The buckets of `metric` in a Prometheus text exposition.
    pub fn parse(text: &str, metric: &str) -> Self {
        let prefix = format!("{metric}{{le=\"");
        let buckets = text
            .lines()
            .filter_map(|line| {
                let rest = line.strip_prefix(&prefix)?;
                let (le, count) = rest.split_once("\"} ")?;
                let le = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
                Some((le, count.trim().parse().ok()?))
            })
            .collect();
        Self { buckets }
    }

    /// What was observed between `earlier` and this snapshot.
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        let buckets = self
            .buckets
            .iter()
            .map(|&(le, n)| {
                let before = earlier.buckets.iter().find(|b| b.0 == le).map_or(0, |b| b.1);
                (le, n.saturating_sub(before))
            })
            .collect();
        Histogram { buckets }
    }

    pub fn count(&self) -> u64 {
        self.buckets.last().map_or(0, |b| b.1)
    }

    /// The `q` quantile in ms, interpolated linearly inside its bucket (as Prometheus's
    /// `histogram_quantile` does); NaN without observations, the largest finite bound when it
    /// falls in the `+Inf` bucket.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        let total = self.count();
        if total == 0 {
            return f64::NAN;
        }
        let target = q * total as f64;
        let (mut lower, mut below) = (0.0, 0u64);
        for &(le, cumulative) in &self.buckets {
            if cumulative as f64 >= target && cumulative > below {
                if le.is_infinite() {
                    return lower * 1000.0;
                }
                let fraction = (target - below as f64) / (cumulative - below) as f64;
                return (lower + (le - lower) * fraction.clamp(0.0, 1.0)) * 1000.0;
            }
            if le.is_finite() {
                lower = le;
            }
            below = cumulative;
        }
        lower * 1000.0
    }
}

/// CPU seconds this process's threads have used, by thread name prefix. Each thread's CPU
/// clock is read with `clock_gettime` on its per-thread clock id (what glibc's
/// `pthread_getcpuclockid` makes from a thread id), which includes the time of a thread
/// running right now: `/proc/self/task/*/stat` and `schedstat` lag on this tickless VM for a
/// worker that runs for seconds without being descheduled. Threads that ended are not counted.
pub fn thread_cpu_seconds(prefixes: &[&str]) -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return f64::NAN };
    let mut seconds = 0.0;
    for task in tasks.flatten() {
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !prefixes.iter().any(|p| name.trim_end().starts_with(p)) {
            continue;
        }
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) of the Linux ABI
        let clock = (!(tid as libc::clockid_t) << 3) | 6;
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `now` is a valid timespec to write; an invalid clock (a thread that just
        // ended) is an error return, not undefined behaviour.
        if unsafe { libc::clock_gettime(clock, &mut now) } == 0 {
            seconds += now.tv_sec as f64 + now.tv_nsec as f64 / 1e9;
        }
    }
    seconds
}

/// The names of needle's own threads: the source (and the `tcp:` source's client threads,
/// which inherit its name), the workers and the joiner.
pub const NEEDLE_THREADS: &[&str] = &["needle-source", "needle-worker", "needle-joiner"];

/// Waits until `done` or `timeout`; true when done.
pub fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_interpolate_inside_a_bucket_and_subtract_snapshots() {
        let text =
            "x_bucket{le=\"0.001\"} 10\nx_bucket{le=\"0.002\"} 30\nx_bucket{le=\"+Inf\"} 30\n";
        let before = Histogram::parse("x_bucket{le=\"0.001\"} 10\n", "x_bucket");
        let h = Histogram::parse(text, "x_bucket");
        assert_eq!(h.count(), 30);
        assert!((h.quantile_ms(0.5) - 1.25).abs() < 1e-9, "{}", h.quantile_ms(0.5));
        let d = h.since(&before);
        assert_eq!(d.count(), 30, "+Inf had no earlier value");
        assert!((d.quantile_ms(0.1) - 1.1).abs() < 1e-9, "{}", d.quantile_ms(0.1));
        assert!(Histogram::default().quantile_ms(0.5).is_nan());
    }

    #[test]
    fn pool_slices_wrap_around_whole_lines() {
        let pool = Pool { bytes: b"a\nbb\nccc\n".to_vec(), ends: vec![2, 5, 9] };
        let joined: Vec<u8> = pool.slices(2, 7).flatten().copied().collect();
        assert_eq!(joined, b"ccc\na\nbb\nccc\na\n");
        assert_eq!(pool.line(1), b"bb");
    }
}
