//! Producing to Kafka: the producer every needle writer shares (query notices, partials and
//! progress, `needle gen --to`), and [`TopicWriter`], which turns NDJSON written to it into one
//! message per line.
//!
//! A full local queue (the brokers are slow or away) is waited out, never dropped: the writer
//! blocks, which is backpressure on whoever writes. Deliveries that finally fail (after
//! librdkafka's retries, `message.timeout.ms`) are counted and logged.

use crate::client::{Connection, Throttled, CONNECT_TIMEOUT};
use crate::KafkaError;
use needle_runtime::framing::Receipt;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError as RdKafkaError;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Largest message needle produces (a partial of a large GROUP BY or RAW window); the results
/// topic is created to accept it.
pub const MAX_MESSAGE_BYTES: usize = 32 << 20;

/// Receipts riding on a message: dropped when its delivery is reported. Shared: receipts riding
/// on several messages (a worker's progress goes to every partition of the results topic) drop
/// when the last of them is reported.
pub type Riders = std::sync::Arc<Vec<Receipt>>;

/// The delivery side of a producer: failures counted and logged; receipts dropped.
pub struct Deliveries {
    log: Throttled,
    failed: AtomicU64,
    first_failure: Mutex<Option<String>>,
}

impl ClientContext for Deliveries {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        self.log.librdkafka_log(level, facility, message);
    }

    fn error(&self, error: RdKafkaError, reason: &str) {
        self.log.librdkafka_error(&error, reason);
    }
}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = Riders;

    fn delivery(&self, result: &DeliveryResult<'_>, riders: Riders) {
        if let Err((error, _)) = result {
            self.failed.fetch_add(1, Ordering::Relaxed);
            let mut first = self.first_failure.lock().unwrap_or_else(|e| e.into_inner());
            first.get_or_insert_with(|| error.to_string());
            self.log.say(format_args!("a message could not be delivered: {error}"));
        }
        drop(riders);
    }
}

/// A producer with a background thread serving its deliveries.
pub struct Writer {
    producer: ThreadedProducer<Deliveries>,
}

impl Writer {
    /// A producer on `connection`; `settings` are librdkafka properties for this producer (the
    /// pass-through ones still win).
    pub fn new(
        connection: &Connection,
        who: &str,
        settings: &[(&str, &str)],
    ) -> Result<Self, KafkaError> {
        let mut config = connection.config();
        config.set("message.max.bytes", MAX_MESSAGE_BYTES.to_string());
        for (key, value) in settings {
            config.set(*key, *value);
        }
        for (key, value) in &connection.properties {
            config.set(key, value);
        }
        let context = Deliveries {
            log: Throttled::new(who, Duration::from_secs(5)),
            failed: AtomicU64::new(0),
            first_failure: Mutex::new(None),
        };
        Ok(Self { producer: connection.create(&config, context)? })
    }

    /// Queues a message, waiting while librdkafka's queue is full for as long as `keep_waiting`
    /// says (given how long it has waited): [`Patience`].
    pub fn send(
        &self,
        mut record: BaseRecord<'_, str, [u8], Riders>,
        keep_waiting: impl Fn(Duration) -> bool,
    ) -> Result<(), KafkaError> {
        let since = Instant::now();
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((RdKafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back))
                    if keep_waiting(since.elapsed()) =>
                {
                    record = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err((error, _)) => return Err(KafkaError::client(what_failed(&error), error)),
            }
        }
    }

    /// Waits (at most `timeout`) until every queued message is delivered or failed.
    pub fn flush(&self, timeout: Duration) -> Result<(), KafkaError> {
        self.producer
            .flush(timeout)
            .map_err(|e| KafkaError::client("waiting for Kafka to acknowledge what was sent", e))
    }

    /// Messages whose delivery failed so far, and the first reason.
    pub fn failures(&self) -> (u64, Option<String>) {
        let context = self.producer.context();
        let first = context.first_failure.lock().unwrap_or_else(|e| e.into_inner()).clone();
        (context.failed.load(Ordering::Relaxed), first)
    }

    pub fn client(&self) -> &rdkafka::client::Client<Deliveries> {
        self.producer.client()
    }
}

/// How long [`Writer::send`] waits for room.
pub struct Patience;

impl Patience {
    /// As long as it takes (backpressure on the caller).
    pub fn forever(_: Duration) -> bool {
        true
    }

    /// At most `limit`.
    pub fn at_most(limit: Duration) -> impl Fn(Duration) -> bool {
        move |waited| waited < limit
    }
}

fn what_failed(error: &RdKafkaError) -> &'static str {
    match error {
        RdKafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge) => {
            "producing to Kafka (the message is larger than message.max.bytes)"
        }
        _ => "producing to Kafka",
    }
}

/// NDJSON in, one message per line out, spread round-robin over the topic's partitions (so a
/// consumer group's members share the work evenly). `flush` waits for every delivery.
pub struct TopicWriter {
    writer: Writer,
    topic: String,
    partitions: Vec<i32>,
    next: usize,
    pending: Vec<u8>,
    sent: u64,
}

impl TopicWriter {
    /// Connects to `brokers` and writes to `topic`, creating it with `partitions` partitions when
    /// it does not exist.
    pub fn open(connection: &Connection, topic: &str, partitions: i32) -> Result<Self, KafkaError> {
        let writer = Writer::new(connection, "writer", &[("linger.ms", "20")])?;
        connection.check_reachable(writer.client())?;
        connection.ensure_topic(topic, partitions.max(1), &[])?;
        let probe = connection.probe("writer")?;
        let partitions = connection.partitions(probe.client(), topic, "")?;
        Ok(Self {
            writer,
            topic: topic.to_owned(),
            partitions,
            next: 0,
            pending: Vec::new(),
            sent: 0,
        })
    }

    /// Messages queued so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Produces one message to the next partition in turn.
    pub fn send_line(&mut self, line: &[u8]) -> Result<(), KafkaError> {
        let partition = self.partitions[self.next % self.partitions.len()];
        self.next += 1;
        let record = BaseRecord::with_opaque_to(&self.topic, Riders::default())
            .partition(partition)
            .payload(line);
        self.writer.send(record, Patience::forever)?;
        self.sent += 1;
        Ok(())
    }

    fn send_complete_lines(&mut self) -> io::Result<()> {
        let Some(end) = self.pending.iter().rposition(|&b| b == b'\n') else { return Ok(()) };
        let rest = self.pending.split_off(end + 1);
        let complete = std::mem::replace(&mut self.pending, rest);
        for line in complete.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            self.send_line(line).map_err(io::Error::other)?;
        }
        Ok(())
    }
}

impl Write for TopicWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        self.send_complete_lines()?;
        Ok(buf.len())
    }

    /// Sends a last line without a newline, then waits for every delivery; an error when any
    /// message could not be delivered.
    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            let last = std::mem::take(&mut self.pending);
            self.send_line(&last).map_err(io::Error::other)?;
        }
        self.writer.flush(CONNECT_TIMEOUT * 6).map_err(io::Error::other)?;
        match self.writer.failures() {
            (0, _) => Ok(()),
            (n, first) => Err(io::Error::other(format!(
                "{n} message(s) could not be delivered to topic {}: {}",
                self.topic,
                first.unwrap_or_default()
            ))),
        }
    }
}
