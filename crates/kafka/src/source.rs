//! The Kafka source: a member of a consumer group on the data topic. Kafka spreads the topic's
//! partitions over the group's members (processes); within a process, batches of messages go to
//! the worker threads through the usual bounded queue.
//!
//! - **Messages**: each value is one JSON object, or several as NDJSON lines. Malformed ones are
//!   counted (`needle_records_malformed_total`) and skipped by the workers like any source's;
//!   empty values (tombstones) are skipped; values longer than `runtime.max_line_bytes` are
//!   dropped and counted as oversized.
//! - **Start**: a partition the group never committed starts at its latest offset (queries look
//!   forward; the end offset is looked up when the partition is assigned, before reading, so
//!   nothing produced after the assignment is skipped) or the earliest (`start = "earliest"`); a
//!   partition with a committed offset resumes after it.
//! - **Backpressure**: when the workers' queue stays full (half a second), the consumer pauses
//!   its partitions and keeps polling (so it stays in the group) without fetching, until there is
//!   room; nothing it accepted is dropped.
//! - **Offsets** ([`crate::offsets`]): a record's offset is stored for commit only once the
//!   partials made from it have gone out (to the joiner, or delivered to the results topic), and
//!   committed every `auto.commit.interval.ms` (1 s unless set in `kafka.properties`).
//! - **Reading** (the `fetch` module): the assigned partitions' messages go to a queue of the
//!   source's own, taken up to 64 at a time; their payloads go to the workers in place (a
//!   batch's chunks, not copied), one batch of about 64 KiB per hand-off. librdkafka keeps at
//!   most [`SOURCE_DEFAULTS`]' 2 MiB of prefetched messages (its default is 64 MiB): what the
//!   workers read is still in the CPU's caches from the socket. `kafka.properties` may set
//!   other values.
//! - **Rebalances**: before partitions are taken away, the source waits (up to 10 s) until the
//!   workers have handed on every batch the queue took, commits, and drops batches it had not yet
//!   handed to the workers (the next owner reads them from the committed offset). So a clean
//!   rebalance neither loses nor repeats a record. A process that dies without a rebalance (killed)
//!   leaves its last second or so of records uncommitted: the next owner reads them again
//!   (at-least-once for live queries). See `docs/kafka.md`.
//! - **History, exactly once**: with history on, each batch tells the store which offsets its
//!   records came from, and a partition taken over (after a kill, or a restart) starts from
//!   the committed offset as always, but the records before the offset history keeps already
//!   (by whichever process) go to the workers as [`Batch::kept_already`]: live queries read
//!   them again, history does not keep them twice, and a query that reads the past and goes on
//!   live waits until they are read (`KeptAlready`).

use crate::client::{Connection, Throttled};
use crate::fetch::{Message, MessageQueue, Messages};
use crate::offsets::{RoundId, Tracker};
use crate::spec::Endpoint;
use crate::KafkaError;
use needle_runtime::config::StartFrom;
use needle_runtime::framing::{Batch, Receipt};
use needle_runtime::history::{OffsetRange, OffsetRanges};
use needle_runtime::metrics::Metrics;
use needle_runtime::source::{BatchSink, Refused, Source, SourceOptions};
use needle_runtime::RuntimeError;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError as RdKafkaError, RDKafkaErrorCode as ErrorCode};
use rdkafka::message::Message as _;
use rdkafka::statistics::Statistics;
use rdkafka::types::{RDKafkaErrorCode, RDKafkaRespErr};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

/// Bytes of messages gathered into one batch (at least, unless the queue runs dry).
const BATCH_BYTES: usize = 64 << 10;
/// Messages taken from the message queue per call, once one is there.
const TAKE: usize = 64;
/// librdkafka properties the source's consumer gets unless `kafka.properties` sets them:
/// prefetch 2 MiB instead of 64 MiB, so that what the workers read was fetched moments ago
/// and is still in the CPU's caches (copying messages fetched long before, from memory no
/// cache held any more, was most of the source thread's time before they were read in place),
/// and fetch again 10 ms after the queue was full rather than a second later, so a queue that
/// small never runs dry.
pub const SOURCE_DEFAULTS: &[(&str, &str)] =
    &[("queued.max.messages.kbytes", "2048"), ("fetch.queue.backoff.ms", "10")];
/// How long the workers' queue may stay full before the consumer pauses its partitions.
const PAUSE_AFTER: Duration = Duration::from_millis(500);
/// How long a revocation waits for the workers to hand on what they were given.
const REVOKE_WAIT: Duration = Duration::from_secs(10);
/// How long stopping waits for the same.
const STOP_WAIT: Duration = Duration::from_secs(5);
/// How long an offset lookup during a rebalance may take.
const LOOKUP_WAIT: Duration = Duration::from_secs(5);

pub struct KafkaSource {
    endpoint: Endpoint,
    shared: Arc<Shared>,
    max_line_bytes: usize,
}

/// The consumer and its message queue, kept alive by the source and by every batch of messages
/// the workers hold (a message must not outlive its client). Fields drop in order: the queue
/// handle before the consumer.
struct Shared {
    queue: MessageQueue,
    consumer: BaseConsumer<SourceContext>,
}

impl KafkaSource {
    /// Connects (checking the brokers answer and the topic exists) and joins nothing yet: the
    /// group is joined when the source runs.
    pub fn open(
        endpoint: Endpoint,
        properties: &BTreeMap<String, String>,
        options: &SourceOptions,
        metrics: Arc<Metrics>,
    ) -> Result<Self, KafkaError> {
        let connection = Connection::new(&endpoint.brokers, properties)?;
        let mut config = connection.config();
        config
            .set("group.id", &endpoint.group)
            .set("auto.offset.reset", endpoint.start.as_str())
            .set("enable.auto.commit", "true")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false");
        if !properties.contains_key("auto.commit.interval.ms") {
            config.set("auto.commit.interval.ms", "1000");
        }
        // librdkafka's statistics once a second: each partition's consumer lag
        // (`needle_kafka_consumer_lag`, the cluster view)
        if !properties.contains_key("statistics.interval.ms") {
            config.set("statistics.interval.ms", "1000");
        }
        for (key, value) in SOURCE_DEFAULTS {
            if !properties.contains_key(*key) {
                config.set(*key, *value);
            }
        }
        let context = SourceContext {
            log: Arc::new(Throttled::new(
                format!("source {}", endpoint.topic),
                Duration::from_secs(5),
            )),
            tracker: Tracker::new(),
            metrics,
            topic: endpoint.topic.clone(),
            group: endpoint.group.clone(),
            start: endpoint.start,
            shared: OnceLock::new(),
            kept: Arc::default(),
        };
        let consumer: BaseConsumer<SourceContext> = connection.create(&config, context)?;
        connection.check_reachable(consumer.client())?;
        connection.partitions(
            consumer.client(),
            &endpoint.topic,
            "create it (for example: needle gen bullet --to kafka://BROKERS/TOPIC --partitions 4)",
        )?;
        // SAFETY: the queue is dropped before the consumer (`Shared`'s field order).
        let queue =
            unsafe { MessageQueue::new(consumer.client().native_ptr()) }.ok_or_else(|| {
                KafkaError::Config("librdkafka could not make the source a message queue".into())
            })?;
        let shared = Arc::new(Shared { queue, consumer });
        let _ = shared.consumer.context().shared.set(Arc::downgrade(&shared));
        Ok(Self { endpoint, shared, max_line_bytes: options.max_line_bytes })
    }
}

/// A batch the workers' queue has not taken yet.
struct Held {
    batch: Batch,
    round: RoundId,
    /// Its records are kept in history already.
    kept_already: bool,
}

/// Messages gathered for the next batch: taken from the message queue and kept as they are, or
/// (a partition whose queue could not be forwarded) polled from the consumer's and copied.
#[derive(Default)]
struct Gathered {
    data: Vec<u8>,
    kept: Vec<Message>,
    kept_bytes: usize,
    /// Per partition, the first offset gathered and the one after the last.
    first: BTreeMap<i32, i64>,
    next: BTreeMap<i32, i64>,
    oversized: u64,
}

impl Gathered {
    fn is_empty(&self) -> bool {
        self.next.is_empty()
    }

    fn bytes(&self) -> usize {
        self.data.len() + self.kept_bytes
    }

    /// A message from the message queue: kept for the batch unless it is empty or too long;
    /// its offset moves either way. An error on a partition is logged, and moves nothing.
    fn keep(&mut self, message: Message, max_line_bytes: usize, log: &Throttled) {
        if let Some(error) = message.error() {
            log.say(format_args!("reading: {}", ErrorCode::from(error)));
            return;
        }
        self.first.entry(message.partition()).or_insert(message.offset());
        self.next.insert(message.partition(), message.offset() + 1);
        match message.payload().len() {
            0 => {}
            n if n > max_line_bytes => self.oversized += 1,
            n => {
                self.kept_bytes += n;
                self.kept.push(message);
            }
        }
    }

    /// The offsets gathered, per `topic/partition`, for history.
    fn offsets(&self, topic: &str) -> OffsetRanges {
        self.first
            .iter()
            .map(|(partition, first)| {
                let next = self.next.get(partition).copied().unwrap_or(first + 1);
                (format!("{topic}/{partition}"), OffsetRange { first: *first, next })
            })
            .collect()
    }

    /// The batch of what was gathered, with `receipt`; kept messages keep `alive` alive.
    fn into_batch(self, receipt: Receipt, alive: &Arc<Shared>) -> Batch {
        let batch = Batch::with_receipt(self.data, receipt);
        if self.kept.is_empty() {
            return batch;
        }
        batch.with_chunks(Box::new(Messages::new(self.kept, alive.clone())))
    }

    fn add(&mut self, partition: i32, offset: i64, payload: Option<&[u8]>, max_line_bytes: usize) {
        self.first.entry(partition).or_insert(offset);
        self.next.insert(partition, offset + 1);
        match payload {
            None | Some([]) => {}
            Some(value) if value.len() > max_line_bytes => self.oversized += 1,
            Some(value) => {
                self.data.extend_from_slice(value);
                if !value.ends_with(b"\n") {
                    self.data.push(b'\n');
                }
            }
        }
    }
}

impl Source for KafkaSource {
    fn describe(&self) -> String {
        let e = &self.endpoint;
        format!(
            "kafka topic {} on {} (group {}, a new group starts at the {} offset)",
            e.topic,
            e.brokers,
            e.group,
            e.start.as_str()
        )
    }

    fn run(self: Box<Self>, sink: BatchSink) -> Result<(), RuntimeError> {
        let shared = &self.shared;
        let (consumer, queue) = (&shared.consumer, &shared.queue);
        let context = consumer.context().clone();
        let tracker = &context.tracker;
        consumer.subscribe(&[&self.endpoint.topic]).map_err(|e| {
            RuntimeError::io(
                format!("subscribing to kafka topic {}", self.endpoint.topic),
                std::io::Error::other(e),
            )
        })?;
        let _ = context.kept.sink.set(sink.clone());
        let mut held: VecDeque<Held> = VecDeque::new();
        let mut paused = false;
        let mut generation = tracker.generation();
        let mut taken: Vec<Message> = Vec::with_capacity(TAKE);
        'reading: loop {
            // Hand on what waits, oldest first; keep the rest (backpressure).
            while let Some(next) = held.pop_front() {
                if next.round.generation != tracker.generation() {
                    continue; // its partitions were revoked: the next owner reads it again
                }
                // Wait a little for room before pausing: pausing drops librdkafka's prefetched
                // messages, to be fetched again on resuming.
                let patience = if paused { Duration::from_millis(20) } else { PAUSE_AFTER };
                tracker.handing_on(next.round);
                match sink.offer(next.batch, patience) {
                    Ok(()) => {}
                    Err(Refused::Full(batch)) => {
                        tracker.held_again(next.round);
                        held.push_front(Held { batch, ..next });
                        break;
                    }
                    Err(Refused::Stopping(batch)) => {
                        tracker.held_again(next.round);
                        drop(batch); // never handed on: its round is abandoned, not done
                        break 'reading;
                    }
                }
            }
            if !held.is_empty() && !paused {
                paused = set_paused(consumer, true, &context.log);
            } else if held.is_empty() && paused {
                paused = !set_paused(consumer, false, &context.log);
            }
            store(consumer, &self.endpoint.topic, tracker.completed(), &context.log);
            sink.set_catching_up(context.kept.pending() || held.iter().any(|h| h.kept_already));
            if sink.is_stopped() {
                break;
            }

            // The group's events: rebalances (run inside poll), commits, errors; and the
            // messages of a partition whose fetch queue could not be forwarded, copied. Records
            // history keeps already are gathered apart (`again`).
            let mut gathered = Gathered::default();
            let mut again = Gathered::default();
            while let Some(result) = consumer.poll(Duration::ZERO) {
                if tracker.generation() != generation {
                    // A rebalance ran inside poll: what was gathered before it is not ours.
                    generation = tracker.generation();
                    gathered = Gathered::default();
                    again = Gathered::default();
                    paused = false;
                }
                match result {
                    Ok(message) => {
                        let (partition, offset) = (message.partition(), message.offset());
                        let into = if context.kept.is_kept(partition, offset) {
                            &mut again
                        } else {
                            &mut gathered
                        };
                        into.add(partition, offset, message.payload(), self.max_line_bytes);
                    }
                    Err(error) => context.log.say(format_args!("reading: {error}")),
                }
            }
            if tracker.generation() != generation {
                generation = tracker.generation();
                gathered = Gathered::default();
                again = Gathered::default();
                paused = false;
            }
            // The messages: wait for the first, then take what is there, many per call.
            let mut wait = match (gathered.is_empty(), held.is_empty()) {
                (false, _) => Duration::ZERO,
                (true, true) => Duration::from_millis(100),
                (true, false) => Duration::from_millis(20),
            };
            loop {
                let max = if wait.is_zero() { TAKE } else { 1 };
                let got = queue.consume(wait, max, &mut taken);
                for message in taken.drain(..) {
                    let into = if context.kept.is_kept(message.partition(), message.offset()) {
                        &mut again
                    } else {
                        &mut gathered
                    };
                    into.keep(message, self.max_line_bytes, &context.log);
                }
                if got < max || gathered.bytes() + again.bytes() >= BATCH_BYTES {
                    break;
                }
                wait = Duration::ZERO;
            }
            // what history keeps already first: in each partition, it comes before the rest
            for (gathered, kept_already) in [(again, true), (gathered, false)] {
                if gathered.is_empty() {
                    continue;
                }
                sink.count_oversized(gathered.oversized);
                let offsets = gathered.offsets(&self.endpoint.topic);
                let next = gathered.next.iter().map(|(p, o)| (*p, *o)).collect();
                let (token, round) = tracker.begin(next);
                let batch = gathered.into_batch(Receipt::new(token), shared);
                let batch =
                    if kept_already { batch.kept_already() } else { batch.with_offsets(offsets) };
                held.push_back(Held { batch, round, kept_already });
            }
        }
        // Stopping: drop what was not handed on (abandoned: the next owner reads it), let the
        // workers finish what they took, commit it, leave the group.
        drop(held);
        tracker.wait_idle(STOP_WAIT);
        store(consumer, &self.endpoint.topic, tracker.completed(), &context.log);
        commit(consumer, &context.log);
        Ok(())
    }
}

fn set_paused(consumer: &BaseConsumer<SourceContext>, pause: bool, log: &Throttled) -> bool {
    let assignment = match consumer.assignment() {
        Ok(assignment) => assignment,
        Err(e) => {
            log.say(format_args!("reading the assignment: {e}"));
            return false;
        }
    };
    let result = if pause { consumer.pause(&assignment) } else { consumer.resume(&assignment) };
    match result {
        Ok(()) => true,
        Err(e) => {
            log.say(format_args!("{}: {e}", if pause { "pausing" } else { "resuming" }));
            false
        }
    }
}

/// Stores the offsets of finished rounds, to be committed with the next (auto-)commit.
fn store<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    next: BTreeMap<i32, i64>,
    log: &Throttled,
) {
    if next.is_empty() {
        return;
    }
    let mut list = TopicPartitionList::new();
    for (partition, offset) in next {
        if let Err(e) = list.add_partition_offset(topic, partition, Offset::Offset(offset)) {
            log.say(format_args!("storing offset {offset} of partition {partition}: {e}"));
        }
    }
    if let Err(e) = consumer.store_offsets(&list) {
        // A partition revoked in the meantime: its next owner starts from the last commit.
        log.say(format_args!("storing offsets: {e}"));
    }
}

fn commit<C: ConsumerContext>(consumer: &BaseConsumer<C>, log: &Throttled) {
    match consumer.commit_consumer_state(CommitMode::Sync) {
        Ok(()) | Err(RdKafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
        Err(e) => log.say(format_args!("committing offsets: {e}")),
    }
}

/// The consumer's context: logs, and the rebalance handling described in the module doc.
#[derive(Clone)]
struct SourceContext {
    log: Arc<Throttled>,
    tracker: Arc<Tracker>,
    metrics: Arc<Metrics>,
    topic: String,
    group: String,
    start: StartFrom,
    /// The source's consumer and message queue, to forward the partitions it is given to.
    shared: OnceLock<Weak<Shared>>,
    /// Which records of the partitions read history keeps already.
    kept: Arc<KeptAlready>,
}

/// Per partition read, the offset before which history keeps the records already (a partition
/// taken over from a process that kept them and died before committing their offsets), found
/// when the partition is assigned and forgotten once reading passes it.
#[derive(Default)]
struct KeptAlready {
    /// The source's sink, through which the history store is asked.
    sink: OnceLock<BatchSink>,
    before: Mutex<BTreeMap<i32, i64>>,
    /// Whether `before` has anything (read per message without the lock).
    any: AtomicBool,
}

impl KeptAlready {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<i32, i64>> {
        self.before.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Partitions assigned, each reading from its start offset (`None`: not known): those
    /// whose records history keeps past their start are read as kept already up to there.
    fn assigned(&self, topic: &str, starts: &BTreeMap<i32, Option<i64>>, log: &Throttled) {
        let Some(sink) = self.sink.get() else { return };
        let kept = match sink.kept_offsets() {
            None => return,
            Some(Ok(kept)) => kept,
            Some(Err(e)) => {
                log.say(format_args!(
                    "asking history which offsets it keeps: {e}; records read again after a \
                     takeover may be kept twice"
                ));
                return;
            }
        };
        let mut before = self.lock();
        before.clear();
        for (partition, start) in starts {
            let Some(&kept) = kept.get(&format!("{topic}/{partition}")) else { continue };
            if start.is_none_or(|start| start < kept) {
                before.insert(*partition, kept);
            }
        }
        if !before.is_empty() {
            let list: Vec<String> = before.iter().map(|(p, o)| format!("{p} (to {o})")).collect();
            eprintln!(
                "needle: kafka source {topic}: history keeps records past the committed \
                 offsets of partitions {}: read again for live queries, not kept twice",
                list.join(", ")
            );
        }
        self.any.store(!before.is_empty(), Ordering::SeqCst);
    }

    /// Whether the record at `offset` of `partition` is kept in history already.
    fn is_kept(&self, partition: i32, offset: i64) -> bool {
        if !self.any.load(Ordering::Relaxed) {
            return false;
        }
        let mut before = self.lock();
        let Some(&end) = before.get(&partition) else { return false };
        if offset + 1 >= end {
            before.remove(&partition);
            self.any.store(!before.is_empty(), Ordering::SeqCst);
        }
        offset < end
    }

    /// Some partition is still to be read up to what history keeps.
    fn pending(&self) -> bool {
        self.any.load(Ordering::Relaxed)
    }

    fn forget(&self) {
        self.lock().clear();
        self.any.store(false, Ordering::SeqCst);
    }
}

impl ClientContext for SourceContext {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        self.log.librdkafka_log(level, facility, message);
    }

    fn error(&self, error: RdKafkaError, reason: &str) {
        self.log.librdkafka_error(&error, reason);
    }

    /// librdkafka's statistics (every `statistics.interval.ms`): the consumer lag of each
    /// partition read (high watermark minus committed offset), for `needle_kafka_consumer_lag`
    /// and the cluster view.
    fn stats(&self, statistics: Statistics) {
        let Some(topic) = statistics.topics.get(&self.topic) else { return };
        for (number, partition) in &topic.partitions {
            if *number >= 0 && partition.consumer_lag >= 0 {
                self.metrics.cluster.lag(&self.topic, *number, partition.consumer_lag);
            }
        }
    }
}

impl ConsumerContext for SourceContext {
    /// The eager protocol's rebalance, done here rather than by rdkafka's default so that
    /// "latest" is resolved before reading starts (see [`SourceContext::resolve_latest`]) and
    /// revocation drains first.
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        list: &mut TopicPartitionList,
    ) {
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                if self.start == StartFrom::Latest {
                    self.resolve_latest(consumer, list);
                }
                self.find_kept_already(consumer, list);
                self.forward_to_queue(list);
                if let Err(e) = consumer.assign(list) {
                    self.log.say(format_args!("taking partitions {}: {e}", partitions(list)));
                    return;
                }
                // A partition paused before it was taken away and given back stays paused in
                // some librdkafka versions; the loop believes a new assignment is not paused.
                if let Err(e) = consumer.resume(list) {
                    self.log.say(format_args!("resuming partitions {}: {e}", partitions(list)));
                }
                self.metrics.source_partitions.set(list.count() as i64);
                let numbers: Vec<i32> = list.elements().iter().map(|e| e.partition()).collect();
                self.metrics.cluster.assigned(&self.topic, &numbers);
                let text = format!("reading partitions {} of {}", partitions(list), self.topic);
                self.metrics.cluster.event(crate::queries::now_ms(), "rebalance", text);
                eprintln!(
                    "needle: kafka source {}: reading partitions {}",
                    self.topic,
                    partitions(list)
                );
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                self.hand_back(consumer, list);
                if let Err(e) = consumer.unassign() {
                    self.log.say(format_args!("handing back partitions: {e}"));
                }
            }
            other => {
                self.log.say(format_args!("rebalance error: {other:?}"));
                self.tracker.reset();
                self.kept.forget();
                self.metrics.source_partitions.set(0);
                self.metrics.cluster.released(&self.topic);
                let _ = consumer.unassign();
            }
        }
    }
}

impl SourceContext {
    /// Sends the messages of the partitions about to be assigned to the source's message queue
    /// (see [`crate::fetch`]). A partition that cannot be forwarded still works: its messages
    /// arrive on the consumer's queue, and the source copies them from there.
    fn forward_to_queue(&self, list: &TopicPartitionList) {
        let Some(shared) = self.shared.get().and_then(Weak::upgrade) else { return };
        for element in list.elements() {
            if !shared.queue.take_partition(element.topic(), element.partition()) {
                self.log.say(format_args!(
                    "partition {} of {} could not be given its own queue: its messages are \
                     copied as they come",
                    element.partition(),
                    element.topic()
                ));
            }
        }
    }

    /// With history on, which records of the partitions about to be read history keeps
    /// already ([`KeptAlready`]): from where each starts (the offset set on the list, else
    /// the group's committed one).
    fn find_kept_already(&self, consumer: &BaseConsumer<Self>, list: &TopicPartitionList) {
        if self.kept.sink.get().is_none_or(|sink| sink.kept_offsets().is_none()) {
            return;
        }
        let committed = consumer.committed_offsets(list.clone(), LOOKUP_WAIT).ok();
        let starts: BTreeMap<i32, Option<i64>> = list
            .elements()
            .iter()
            .map(|e| {
                let of_list = match e.offset() {
                    Offset::Offset(o) => Some(o),
                    _ => None,
                };
                let of_group = committed.as_ref().and_then(|c| {
                    match c.find_partition(e.topic(), e.partition())?.offset() {
                        Offset::Offset(o) => Some(o),
                        _ => None,
                    }
                });
                (e.partition(), of_list.or(of_group))
            })
            .collect();
        self.kept.assigned(&self.topic, &starts, &self.log);
    }

    /// Before partitions go: waits for the workers to finish what they took, stores and commits
    /// it, and forgets the rest (see the module doc).
    fn hand_back(&self, consumer: &BaseConsumer<Self>, list: &TopicPartitionList) {
        self.kept.forget();
        let idle = self.tracker.wait_idle(REVOKE_WAIT);
        store(consumer, &self.topic, self.tracker.completed(), &self.log);
        if !consumer.assignment_lost() {
            commit(consumer, &self.log);
        }
        self.tracker.reset();
        self.metrics.source_partitions.set(0);
        self.metrics.cluster.released(&self.topic);
        let text = format!("partitions {} of {} handed back", partitions(list), self.topic);
        self.metrics.cluster.event(crate::queries::now_ms(), "rebalance", text);
        let note = if idle {
            ""
        } else {
            "; the workers had not finished every batch in time, so the next owner will read \
             some records again"
        };
        eprintln!(
            "needle: kafka source {}: partitions {} handed back{note}",
            self.topic,
            partitions(list)
        );
    }

    /// For partitions the group never committed, starts at the end offset as it is now, looked
    /// up before reading starts (librdkafka would otherwise resolve "latest" lazily, after the
    /// assignment, and skip what arrives in between), and commits it at once: "latest" is where
    /// the group first started, so a partition that moves (a rebalance, a broker restart)
    /// before its first records were committed resumes there instead of skipping ahead again.
    fn resolve_latest(&self, consumer: &BaseConsumer<Self>, list: &mut TopicPartitionList) {
        let committed = match consumer.committed_offsets(list.clone(), LOOKUP_WAIT) {
            Ok(committed) => committed,
            Err(e) => {
                self.log.say(format_args!("reading committed offsets: {e}"));
                return;
            }
        };
        let mut started = TopicPartitionList::new();
        for element in committed.elements() {
            if matches!(element.offset(), Offset::Offset(_)) {
                continue;
            }
            let (topic, partition) = (element.topic(), element.partition());
            let set =
                consumer.fetch_watermarks(topic, partition, LOOKUP_WAIT).and_then(|(_, high)| {
                    list.set_partition_offset(topic, partition, Offset::Offset(high))?;
                    started.add_partition_offset(topic, partition, Offset::Offset(high))
                });
            if let Err(e) = set {
                self.log.say(format_args!("finding the end of partition {partition}: {e}"));
            }
        }
        if started.count() > 0 {
            if let Err(e) = consumer.commit(&started, CommitMode::Sync) {
                self.log.say(format_args!("committing the starting offsets: {e}"));
            }
            eprintln!(
                "needle: kafka source {}: partitions {} are new to group {}: starting at their end",
                self.topic,
                partitions(&started),
                self.group
            );
        }
    }
}

fn partitions(list: &TopicPartitionList) -> String {
    let ids: Vec<String> = list.elements().iter().map(|e| e.partition().to_string()).collect();
    if ids.is_empty() {
        "(none)".into()
    } else {
        ids.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_become_lines_and_skipped_ones_still_move_the_offset() {
        let mut g = Gathered::default();
        g.add(0, 10, Some(br#"{"a":1}"#), 100);
        g.add(1, 4, Some(b"{\"a\":2}\n{\"a\":3}\n"), 100);
        g.add(0, 11, None, 100);
        g.add(0, 12, Some(&[b'x'; 200]), 100);
        g.add(1, 5, Some(b""), 100);
        assert_eq!(g.data, b"{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");
        assert_eq!(g.next, BTreeMap::from([(0, 13), (1, 6)]));
        assert_eq!(g.oversized, 1);
        let offsets = g.offsets("t");
        let range = |first, next| OffsetRange { first, next };
        assert_eq!(offsets, [("t/0".into(), range(10, 13)), ("t/1".into(), range(4, 6))].into());
        let lines: Vec<_> = Batch::new(g.data).lines().map(<[u8]>::to_vec).collect();
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn records_before_what_history_keeps_are_kept_already_until_reading_passes_it() {
        let kept = KeptAlready::default();
        assert!(!kept.is_kept(0, 5) && !kept.pending(), "nothing known: nothing kept");
        kept.before.lock().unwrap().extend([(0, 10), (1, 3)]);
        kept.any.store(true, Ordering::SeqCst);
        assert!(kept.is_kept(0, 8));
        assert!(!kept.is_kept(2, 0), "another partition");
        assert!(kept.is_kept(1, 2), "the last one kept: partition 1 is done");
        assert!(!kept.is_kept(1, 2) && kept.pending(), "partition 0 is not");
        assert!(!kept.is_kept(0, 10), "past it: partition 0 is done too");
        assert!(!kept.pending());
        assert!(!kept.is_kept(0, 3), "forgotten once passed");
    }
}
