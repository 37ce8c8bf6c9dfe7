//! Sources: where records come from. A source reads bytes, cuts them into [`Batch`]es of whole
//! lines ([`LineFramer`]) and hands them to the workers through a [`BatchSink`], a bounded queue:
//! when the workers fall behind, `send` blocks and the source reads no further (backpressure),
//! so nothing accepted is dropped.
//!
//! Sources are named by a spec string and built by the [`SourceRegistry`]:
//!
//! | spec | source |
//! |---|---|
//! | `file:PATH` | an NDJSON file, read to its end |
//! | `file:PATH?follow=true` | a growing file, tailed until the runtime stops (`--follow`) |
//! | `stdin` | standard input, to its end |
//! | `tcp:HOST:PORT` | a listener; every client sends newline-delimited records |
//! | `tcp:HOST:PORT?format=influx` | the same, the lines InfluxDB line protocol (or `opentsdb`, `graphite`; `json` is the default) |
//! | `gen:bullet?rate=20000` | a generated workload (bullet, iot, small), paced, with needles |
//!
//! Other crates register more schemes (Kafka) with [`SourceRegistry::register`]; a factory may be
//! a closure, so a scheme can carry its configuration (Kafka's brokers and security settings).

mod file;
mod generator;
mod protocol;
mod stdin;
mod tcp;

pub use file::FileSource;
pub use generator::GeneratorSource;
pub use stdin::StdinSource;
pub use tcp::TcpSource;

use crate::framing::{Batch, LineFramer};
use crate::history::HistoryTap;
use crate::RuntimeError;
use crossbeam_channel::{SendTimeoutError, Sender};
use std::collections::BTreeMap;
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Settings every source shares.
#[derive(Debug, Clone)]
pub struct SourceOptions {
    /// Longer lines are dropped and counted (default 1 MiB).
    pub max_line_bytes: usize,
    /// Bytes asked of the OS per read (default 64 KiB).
    pub read_bytes: usize,
    /// Tail files (`--follow`) even without `?follow=true`.
    pub follow: bool,
}

impl Default for SourceOptions {
    fn default() -> Self {
        Self { max_line_bytes: 1 << 20, read_bytes: 64 << 10, follow: false }
    }
}

/// Raised once to ask every source (and the rest of the runtime) to stop.
#[derive(Debug, Clone, Default)]
pub struct StopSignal(Arc<AtomicBool>);

impl StopSignal {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// What the sources have read, for metrics.
#[derive(Debug, Default)]
pub struct SourceCounters {
    pub bytes: AtomicU64,
    pub batches: AtomicU64,
    pub oversized_lines: AtomicU64,
    /// Where lines too long to read are counted for `/metrics` too: the runtime's
    /// `needle_records_malformed_total`, beside the lines that are not JSON objects.
    pub malformed: prometheus_client::metrics::counter::Counter,
    /// Lines of a metrics protocol that were not (`tcp:...?format=influx`), per protocol: the
    /// runtime's `needle_protocol_lines_malformed_total`. They count in `malformed` too.
    pub protocol_malformed: prometheus_client::metrics::family::Family<
        Vec<(String, String)>,
        prometheus_client::metrics::counter::Counter,
    >,
}

/// Where a source puts its batches: a bounded queue to the workers, plus the stop signal and the
/// counters. Cheap to clone (one per TCP client, say).
#[derive(Clone)]
pub struct BatchSink {
    tx: Sender<Batch>,
    stop: StopSignal,
    counters: Arc<SourceCounters>,
    /// With history on, every batch the workers take is kept in the store too.
    tap: Option<Arc<HistoryTap>>,
}

impl std::fmt::Debug for BatchSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchSink").field("history", &self.tap.is_some()).finish_non_exhaustive()
    }
}

impl BatchSink {
    pub fn new(tx: Sender<Batch>, stop: StopSignal, counters: Arc<SourceCounters>) -> Self {
        Self { tx, stop, counters, tap: None }
    }

    /// Keeps every batch the workers take in history, through `tap`.
    pub fn with_history(mut self, tap: Arc<HistoryTap>) -> Self {
        self.tap = Some(tap);
        self
    }

    /// Hands a batch on, waiting while the queue is full. `false` when the runtime is stopping
    /// (or nobody is reading any more): the source should end.
    pub fn send(&self, batch: Batch) -> bool {
        match &self.tap {
            Some(tap) => {
                tap.dispatch(batch, |b| self.send_to_workers(b).map_err(|b| (b, ()))).is_ok()
            }
            None => self.send_to_workers(batch).is_ok(),
        }
    }

    fn send_to_workers(&self, batch: Batch) -> Result<(), Batch> {
        self.counters.bytes.fetch_add(batch.byte_len() as u64, Ordering::Relaxed);
        self.counters.batches.fetch_add(1, Ordering::Relaxed);
        let mut batch = batch;
        loop {
            if self.stop.is_stopped() {
                return Err(batch);
            }
            match self.tx.send_timeout(batch, Duration::from_millis(100)) {
                Ok(()) => return Ok(()),
                Err(SendTimeoutError::Timeout(b)) => batch = b,
                Err(SendTimeoutError::Disconnected(b)) => return Err(b),
            }
        }
    }

    /// Hands a batch on if the queue has room within `patience`. A refused batch comes back,
    /// so a source that must keep serving something else (Kafka's consumer) can wait its own way,
    /// and knows what it did not hand on.
    pub fn offer(&self, batch: Batch, patience: Duration) -> Result<(), Refused> {
        match &self.tap {
            Some(tap) => tap
                .dispatch(batch, |b| match self.offer_to_workers(b, patience) {
                    Ok(()) => Ok(()),
                    Err(Refused::Full(b)) => Err((b, true)),
                    Err(Refused::Stopping(b)) => Err((b, false)),
                })
                .map_err(|(b, full)| if full { Refused::Full(b) } else { Refused::Stopping(b) }),
            None => self.offer_to_workers(batch, patience),
        }
    }

    fn offer_to_workers(&self, batch: Batch, patience: Duration) -> Result<(), Refused> {
        if self.stop.is_stopped() {
            return Err(Refused::Stopping(batch));
        }
        let bytes = batch.byte_len() as u64;
        match self.tx.send_timeout(batch, patience) {
            Ok(()) => {
                self.counters.bytes.fetch_add(bytes, Ordering::Relaxed);
                self.counters.batches.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(SendTimeoutError::Timeout(batch)) => Err(Refused::Full(batch)),
            Err(SendTimeoutError::Disconnected(batch)) => Err(Refused::Stopping(batch)),
        }
    }

    pub fn is_stopped(&self) -> bool {
        self.stop.is_stopped()
    }

    /// With history on, per source stream, the offset after the last record history keeps
    /// (a source taking a stream over reads the records before it as
    /// [`Batch::kept_already`]); `None` without history.
    pub fn kept_offsets(
        &self,
    ) -> Option<Result<BTreeMap<String, i64>, needle_history::HistoryError>> {
        self.tap.as_ref().map(|tap| tap.kept_offsets())
    }

    /// The source is (or is no longer) reading records kept in history already: a query that
    /// reads the past then goes on live waits to start until it is done.
    pub fn set_catching_up(&self, catching_up: bool) {
        if let Some(tap) = &self.tap {
            tap.set_catching_up(catching_up);
        }
    }

    /// Counts `lines` lines of `protocol` skipped as malformed (see
    /// [`SourceCounters::protocol_malformed`]).
    pub fn count_malformed(&self, protocol: &str, lines: u64) {
        if lines > 0 {
            let label = vec![("protocol".to_owned(), protocol.to_owned())];
            self.counters.protocol_malformed.get_or_create(&label).inc_by(lines);
            self.counters.malformed.inc_by(lines);
        }
    }

    pub fn count_oversized(&self, lines: u64) {
        if lines > 0 {
            self.counters.oversized_lines.fetch_add(lines, Ordering::Relaxed);
            self.counters.malformed.inc_by(lines);
        }
    }
}

/// Why [`BatchSink::offer`] did not take a batch (which comes back).
#[derive(Debug)]
pub enum Refused {
    /// The queue stayed full: try again later.
    Full(Batch),
    /// The runtime is stopping (or nobody reads any more): the source should end.
    Stopping(Batch),
}

/// A producer of records.
pub trait Source: Send {
    /// What it reads, for logs and `/api/v1/...` status.
    fn describe(&self) -> String;
    /// Reads until the input ends or the sink says stop. Returns normally at the end of a finite
    /// input.
    fn run(self: Box<Self>, sink: BatchSink) -> Result<(), RuntimeError>;
}

/// Builds a source from the part of a spec after its scheme (`file:PATH` → `PATH`).
pub type SourceFactory =
    Arc<dyn Fn(&str, &SourceOptions) -> Result<Box<dyn Source>, RuntimeError> + Send + Sync>;

/// The known source schemes.
#[derive(Clone)]
pub struct SourceRegistry {
    factories: BTreeMap<&'static str, SourceFactory>,
}

impl Default for SourceRegistry {
    fn default() -> Self {
        let mut registry = Self { factories: BTreeMap::new() };
        registry.register("file", FileSource::from_spec);
        registry.register("gen", GeneratorSource::from_spec);
        registry.register("stdin", StdinSource::from_spec);
        registry.register("tcp", TcpSource::from_spec);
        registry
    }
}

impl SourceRegistry {
    /// Adds (or replaces) a scheme.
    pub fn register(
        &mut self,
        scheme: &'static str,
        factory: impl Fn(&str, &SourceOptions) -> Result<Box<dyn Source>, RuntimeError>
            + Send
            + Sync
            + 'static,
    ) {
        self.factories.insert(scheme, Arc::new(factory));
    }

    /// The schemes known, for help texts.
    pub fn schemes(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.factories.keys().copied()
    }

    /// Builds the source a spec names: `scheme:rest` or a bare scheme (`stdin`).
    pub fn open(
        &self,
        spec: &str,
        options: &SourceOptions,
    ) -> Result<Box<dyn Source>, RuntimeError> {
        let (scheme, rest) = spec.split_once(':').unwrap_or((spec, ""));
        match self.factories.get(scheme) {
            Some(factory) => factory(rest, options),
            None => Err(RuntimeError::bad_source(
                spec,
                format!(
                    "unknown source kind '{scheme}'; known: {}",
                    self.schemes().collect::<Vec<_>>().join(", ")
                ),
            )),
        }
    }
}

/// Splits `path?key=value&key2=value2` into the path and its options.
pub fn split_query(rest: &str) -> (&str, Vec<(&str, &str)>) {
    match rest.split_once('?') {
        Some((path, query)) => (
            path,
            query
                .split('&')
                .filter(|kv| !kv.is_empty())
                .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
                .collect(),
        ),
        None => (rest, Vec::new()),
    }
}

/// Reads a stream to its end through a framer into the sink. `Ok(true)` at the end of the input,
/// `Ok(false)` when the sink said stop.
pub(crate) fn pump(
    reader: &mut dyn Read,
    framer: &mut LineFramer,
    sink: &BatchSink,
    read_bytes: usize,
    context: &str,
) -> Result<bool, RuntimeError> {
    read_until_stopped(reader, read_bytes, read_bytes, context, |read| {
        let before = framer.oversized_lines();
        let batch = framer.push(read);
        sink.count_oversized(framer.oversized_lines() - before);
        batch.is_none_or(|batch| sink.send(batch))
    })
}

/// Reads `reader` to its end, handing each read to `on_read` until it says stop (false).
/// Reads take `read_bytes` at most at first; a read that fills them doubles them (more was
/// waiting), up to `most_bytes`. `Ok(true)` at the end of the input, `Ok(false)` when stopped.
pub(crate) fn read_until_stopped(
    reader: &mut dyn Read,
    read_bytes: usize,
    most_bytes: usize,
    context: &str,
    mut on_read: impl FnMut(&[u8]) -> bool,
) -> Result<bool, RuntimeError> {
    let mut buf = vec![0u8; read_bytes.max(1)];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return Ok(true),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(RuntimeError::io(context, e)),
        };
        if !on_read(&buf[..n]) {
            return Ok(false);
        }
        if n == buf.len() && buf.len() < most_bytes {
            buf.resize((buf.len() * 2).min(most_bytes), 0);
        }
    }
}

/// Sends the framer's last unfinished line, if any.
pub(crate) fn flush_last_line(framer: &mut LineFramer, sink: &BatchSink) -> bool {
    flush_last_line_converted(framer, sink, &mut Some)
}

/// [`flush_last_line`], the line passed through `convert` on its way.
pub(crate) fn flush_last_line_converted(
    framer: &mut LineFramer,
    sink: &BatchSink,
    convert: &mut dyn FnMut(Batch) -> Option<Batch>,
) -> bool {
    let before = framer.oversized_lines();
    let last = framer.finish();
    sink.count_oversized(framer.oversized_lines() - before);
    last.and_then(convert).is_none_or(|batch| sink.send(batch))
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crossbeam_channel::Receiver;

    /// A sink with a queue of `capacity`, and what reads from it.
    pub fn sink(capacity: usize) -> (BatchSink, Receiver<Batch>, StopSignal, Arc<SourceCounters>) {
        let (tx, rx) = crossbeam_channel::bounded(capacity);
        let stop = StopSignal::new();
        let counters = Arc::new(SourceCounters::default());
        (BatchSink::new(tx, stop.clone(), counters.clone()), rx, stop, counters)
    }

    pub fn lines_of(batches: impl IntoIterator<Item = Batch>) -> Vec<String> {
        batches
            .into_iter()
            .flat_map(|b| {
                let ndjson = b.to_ndjson();
                Batch::new(ndjson)
                    .lines()
                    .map(|l| String::from_utf8_lossy(l).into_owned())
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads that fill the buffer double it up to the most; one that does not leaves it; every
    /// byte is handed on once, in order; a stop ends the reading.
    #[test]
    fn reads_grow_while_they_fill_the_buffer_and_no_further() {
        let input: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        let (mut sizes, mut got) = (Vec::new(), Vec::new());
        let ended = read_until_stopped(&mut &input[..], 1024, 4096, "test", |read| {
            sizes.push(read.len());
            got.extend_from_slice(read);
            true
        });
        assert!(ended.unwrap());
        assert_eq!(got, input);
        assert_eq!(sizes[..5], [1024, 2048, 4096, 4096, 4096]);
        // a source that hands on less than the buffer each time: the buffer stays
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = buf.len().min(self.0.len()).min(700);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut capacity = Vec::new();
        let stopped = read_until_stopped(&mut Trickle(&input), 1024, 4096, "test", |read| {
            capacity.push(read.len());
            capacity.len() < 3
        });
        assert!(!stopped.unwrap(), "the third read said stop");
        assert_eq!(capacity, [700, 700, 700]);
    }

    #[test]
    fn unknown_schemes_are_refused_with_the_known_ones() {
        let err = SourceRegistry::default().open("kafak:x", &SourceOptions::default()).err();
        let text = err.expect("refused").to_string();
        assert!(text.contains("unknown source kind 'kafak'"), "{text}");
        assert!(text.contains("file, gen, stdin, tcp"), "{text}");
    }

    #[test]
    fn query_options_are_split_from_the_path() {
        assert_eq!(
            split_query("/a/b?follow=true&x"),
            ("/a/b", vec![("follow", "true"), ("x", "")])
        );
        assert_eq!(split_query("/a/b"), ("/a/b", vec![]));
    }

    #[test]
    fn offer_gives_a_batch_back_when_the_queue_stays_full() {
        let (sink, rx, stop, counters) = testing::sink(1);
        let offer = |text: &[u8]| sink.offer(Batch::new(text.to_vec()), Duration::from_millis(10));
        assert!(offer(b"a\n").is_ok());
        let Err(Refused::Full(back)) = offer(b"b\n") else { panic!("refused as full") };
        assert_eq!(back.bytes(), b"b\n");
        assert_eq!(counters.batches.load(Ordering::Relaxed), 1, "only accepted batches count");
        rx.recv().unwrap();
        assert!(offer(b"c\n").is_ok());
        stop.stop();
        let Err(Refused::Stopping(back)) = offer(b"d\n") else { panic!("refused: stopping") };
        assert_eq!(back.bytes(), b"d\n", "even then the batch comes back");
    }

    #[test]
    fn closures_can_be_registered_with_what_they_need() {
        let mut registry = SourceRegistry::default();
        let greeting = String::from("hello");
        registry.register("greet", move |rest, _| {
            Err(RuntimeError::bad_source(rest, format!("{greeting} from a closure")))
        });
        let err = registry.open("greet:x", &SourceOptions::default()).err().unwrap();
        assert!(err.to_string().contains("hello from a closure"), "{err}");
        assert!(registry.schemes().any(|s| s == "greet"));
    }

    #[test]
    fn a_full_queue_blocks_the_source_until_stop() {
        let (sink, rx, stop, _) = testing::sink(1);
        assert!(sink.send(Batch::new(b"a\n".to_vec())));
        let sender = {
            let sink = sink.clone();
            std::thread::spawn(move || sink.send(Batch::new(b"b\n".to_vec())))
        };
        std::thread::sleep(Duration::from_millis(150));
        assert!(!sender.is_finished(), "the second send must wait for room");
        stop.stop();
        assert!(!sender.join().unwrap(), "a stopped sink refuses");
        assert_eq!(rx.len(), 1);
    }
}
