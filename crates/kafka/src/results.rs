//! The results topic: how worker nodes hand partials to the api nodes that own the queries.
//!
//! - [`ResultsOutlet`] (worker node) is the runtime's [`PartialOutlet`]: each partial is sent
//!   addressed to its query's api node, to the partition its query id hashes to
//!   ([`crate::queries::partition_of`]), so a query's partials keep their order whichever api node reads them.
//!   A progress message goes to every partition, all of them carrying the receipts of the
//!   batches it covers, dropped when Kafka has acknowledged every one: with an idempotent
//!   producer (order kept per partition) that means every partial sent before it was delivered
//!   too, on whichever partition. Only then are the records' offsets committed (see
//!   [`crate::offsets`]). Every copy carries the count of records read: an api node counts
//!   partition 0's, and one adopting a query counts those on the query's partition since the
//!   query started, so its "Records Seen" go on from what its first api node had counted
//!   (worker and api nodes of one needle version: an older api node would count every copy).
//! - [`ResultsReader`] (api node) reads the topic from its end at start-up and hands the partials
//!   of the queries this node merges, and every progress message, to the runtime's joiner.
//!   For a query adopted from an api node that died it goes back on the query's partition to
//!   where its partials start ([`Rewind`]) and hands them on again, each with the time it was
//!   sent, and the places where the dead node cut its emissions (a windowed query's), up to
//!   where it was; then tells the runtime the query caught up. Messages that are not needle's
//!   are logged (sampled) and skipped.
//! - Queries that look back: each worker node keeping history sends its read of its store
//!   (plan, pieces in time order, end) addressed like partials. Every worker node says it is up
//!   once a second ([`crate::peers::HEARTBEAT`]); an api node's [`Roster`] of the workers heard from lately
//!   says which reads a query waits for, and which worker stopped answering.

use crate::background::{stopped, Background};
use crate::client::{Connection, Quiet, Throttled, CONNECT_TIMEOUT};
use crate::peers::{Owners, Reports, Roster};
use crate::produce::{Riders, Writer};
use crate::queries::now_ms;
use crate::queries::{partition_of, Shared};
use crate::wire::{HistoryWire, ReadReport, ResultsMessage};
use crate::KafkaError;
use needle_runtime::cluster::NodeReport;
use needle_runtime::framing::Receipt;
use needle_runtime::history::WorkerHistory;
use needle_runtime::remote::{Cut, PartialOutlet};
use needle_runtime::{Runtime, Sent};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::producer::BaseRecord;
use rdkafka::{Offset, TopicPartitionList};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Duration;

/// The partition of the results topic that worker heartbeats and the count of records read go to.
const FIRST: i32 = 0;

/// A worker node's outlet.
pub struct ResultsOutlet {
    writer: Writer,
    topic: String,
    owners: Owners,
    /// The results topic's partitions.
    partitions: i32,
    /// This worker node's name (its reads of the past are signed with it).
    worker: String,
    log: Throttled,
    stopping: AtomicBool,
}

impl ResultsOutlet {
    pub fn new(
        connection: &Connection,
        topic: &str,
        partitions: i32,
        owners: Owners,
        worker: &str,
    ) -> Result<Self, KafkaError> {
        let writer = Writer::new(
            connection,
            "results outlet",
            &[("linger.ms", "2"), ("enable.idempotence", "true")],
        )?;
        let log = Throttled::new("results outlet", Duration::from_secs(5));
        Ok(Self {
            writer,
            topic: topic.to_owned(),
            partitions: partitions.max(1),
            owners,
            worker: worker.to_owned(),
            log,
            stopping: AtomicBool::new(false),
        })
    }

    /// Says this worker node is up (and whether it keeps history), and how it is (`report`,
    /// for the api nodes' cluster view).
    pub fn heartbeat(&self, history: bool, report: &NodeReport) {
        let value = ResultsMessage::Worker { name: &self.worker, history }.encode();
        self.send(FIRST, "", &value, Riders::default());
        let json = serde_json::to_vec(report).unwrap_or_default();
        let value = ResultsMessage::Report { json: &json }.encode();
        self.send(FIRST, "", &value, Riders::default());
    }

    /// Waits (at most `timeout`) for what was sent to be acknowledged.
    pub fn flush(&self, timeout: Duration) -> Result<(), KafkaError> {
        self.writer.flush(timeout)
    }

    /// The node is stopping: sending gives up after a grace instead of waiting for the brokers
    /// as long as it takes.
    pub fn stopping(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    fn send(&self, partition: i32, key: &str, value: &[u8], riders: Riders) {
        let record = BaseRecord::with_opaque_to(&self.topic, riders)
            .partition(partition)
            .key(key)
            .payload(value);
        // Waits as long as librdkafka's queue is full: backpressure on the workers; but not
        // past a shutdown's grace, or a node whose brokers are gone could never stop.
        let keep_waiting = |waited: Duration| {
            !self.stopping.load(Ordering::Relaxed) || waited < Duration::from_secs(10)
        };
        if let Err(e) = self.writer.send(record, keep_waiting) {
            self.log.say(format_args!("a message for the api nodes was lost: {e}"));
        }
    }
}

impl PartialOutlet for ResultsOutlet {
    fn partial(&self, id: &str, bytes: Vec<u8>) {
        // A query released meanwhile (ended): its api node no longer merges it.
        let Some(owner) = self.owners.get(id) else { return };
        let value = ResultsMessage::Partial { owner: &owner, id, partial: &bytes }.encode();
        self.send(partition_of(id, self.partitions), &owner, &value, Riders::default());
    }

    fn progress(&self, records: u64, receipts: Vec<Receipt>) {
        // a fence on every partition: the receipts drop when all of them are acknowledged; each
        // carries the count (an api node counts the first partition's, and one adopting a query
        // reads the count on the query's partition again)
        let receipts = Riders::new(receipts);
        let value = ResultsMessage::Progress { records }.encode();
        for partition in 0..self.partitions {
            self.send(partition, "", &value, receipts.clone());
        }
    }

    fn history(&self, id: &str, event: WorkerHistory<Vec<u8>>) {
        let Some(owner) = self.owners.get(id) else { return };
        let report;
        let event = match &event {
            WorkerHistory::Planned { data } => HistoryWire::Planned { data: *data },
            WorkerHistory::Piece { at_ms, partial } => {
                HistoryWire::Piece { at_ms: *at_ms, partial }
            }
            WorkerHistory::Done { report: read } => {
                report = ReadReport::to_bytes(read);
                HistoryWire::Done { report: &report }
            }
        };
        let value =
            ResultsMessage::History { owner: &owner, id, worker: &self.worker, event }.encode();
        self.send(partition_of(id, self.partitions), &owner, &value, Riders::default());
    }
}

/// A history message's event as the runtime takes it (`None`: a report that does not parse).
fn history_event(event: HistoryWire<'_>) -> Result<WorkerHistory<Vec<u8>>, String> {
    Ok(match event {
        HistoryWire::Planned { data } => WorkerHistory::Planned { data },
        HistoryWire::Piece { at_ms, partial } => {
            WorkerHistory::Piece { at_ms, partial: partial.to_vec() }
        }
        HistoryWire::Done { report } => {
            WorkerHistory::Done { report: ReadReport::from_bytes(report)? }
        }
    })
}

/// An api node's reader of the results topic.
pub struct ResultsReader {
    thread: Background,
}

/// A request to the results reader: make query `id` (adopted) one of this node's and hand it
/// its partials from offset `from` of `partition` (none: the oldest the topic keeps), then tell
/// the runtime it caught up.
#[derive(Debug, Clone)]
pub struct Rewind {
    pub id: String,
    pub partition: i32,
    pub from: Option<i64>,
}

/// What an api node's results reader hears besides partials.
pub struct Hearing {
    /// The worker nodes.
    pub workers: Roster,
    /// The api nodes.
    pub apis: Roster,
    /// Every node's last report, for the cluster view.
    pub reports: Reports,
}

impl ResultsReader {
    /// Starts reading at the topic's current end, on a thread of its own. Partials go to the
    /// runtime when `shared.mine` says they are this node's; progress, heartbeats and reads of
    /// the past once (a partition read again for an adopted query hands on only its partials).
    pub fn start(
        connection: &Connection,
        topic: &str,
        runtime: Arc<Runtime>,
        node: &str,
        hearing: Hearing,
        shared: Shared,
        rewinds: Receiver<Rewind>,
    ) -> Result<Self, KafkaError> {
        let consumer = connection.probe("results reader")?;
        let partitions = shared.partitions;
        let mut at = Vec::new();
        for p in 0..partitions {
            let (_, high) = crate::client::watermarks(&consumer, topic, p)?;
            shared.positions.set(p, high);
            at.push(high);
        }
        let mut reading = Reading {
            topic: topic.to_owned(),
            runtime,
            node: node.to_owned(),
            hearing,
            shared,
            catching: vec![Vec::new(); at.len()],
            at,
            log: Throttled::new("results reader", Duration::from_secs(5)),
        };
        reading.assign(&consumer)?;
        let thread = Background::spawn("needle-results-reader", move |stop| {
            while !stopped(stop) {
                while let Ok(rewind) = rewinds.try_recv() {
                    reading.rewind(&consumer, rewind);
                }
                reading.release_caught_up();
                match consumer.poll(Duration::from_millis(100)) {
                    Some(Ok(message)) => reading.take(&message),
                    Some(Err(e)) => reading.log.say(format_args!("reading the results topic: {e}")),
                    None => {}
                }
            }
        })?;
        Ok(Self { thread })
    }

    pub fn stop(&mut self) {
        self.thread.stop();
    }
}

/// The results reader's thread.
struct Reading {
    topic: String,
    runtime: Arc<Runtime>,
    node: String,
    hearing: Hearing,
    shared: Shared,
    /// Per partition, the offset the consumer reads next.
    at: Vec<i64>,
    /// Per partition, the adopted queries reading it again, until they caught up.
    catching: Vec<Vec<String>>,
    log: Throttled,
}

impl Reading {
    /// Assigns every partition at the offset it is to be read from next.
    fn assign(&self, consumer: &BaseConsumer<Quiet>) -> Result<(), KafkaError> {
        let mut list = TopicPartitionList::new();
        for (p, &offset) in (0..).zip(&self.at) {
            list.add_partition_offset(&self.topic, p, Offset::Offset(offset))
                .map_err(|e| KafkaError::client(format!("assigning topic {}", self.topic), e))?;
        }
        consumer
            .assign(&list)
            .map_err(|e| KafkaError::client(format!("assigning topic {}", self.topic), e))
    }

    /// Goes back on a partition for an adopted query (see [`Rewind`]).
    fn rewind(&mut self, consumer: &BaseConsumer<Quiet>, rewind: Rewind) {
        let Some(slot) = usize::try_from(rewind.partition).ok().filter(|&p| p < self.at.len())
        else {
            return;
        };
        // never before the oldest message kept (the consumer would jump to the end instead)
        let low = match consumer.fetch_watermarks(&self.topic, rewind.partition, CONNECT_TIMEOUT) {
            Ok((low, _)) => low,
            Err(e) => {
                self.log.say(format_args!("reading the start of {}: {e}", self.topic));
                0
            }
        };
        let from = rewind.from.unwrap_or(low).max(low);
        // this node's from now: partials at or after `from` are handed on, each once
        self.shared.mine.insert(&rewind.id, from);
        self.catching[slot].push(rewind.id);
        if from < self.at[slot] {
            self.at[slot] = from;
            if let Err(e) = self.assign(consumer) {
                self.log.say(format_args!("going back on the results topic: {e}"));
            }
        }
    }

    /// Tells the runtime which adopted queries have been handed everything sent before.
    fn release_caught_up(&mut self) {
        for (p, catching) in (0..).zip(self.catching.iter_mut()) {
            if !catching.is_empty() && self.at[p as usize] >= self.shared.positions.get(p) {
                for id in catching.drain(..) {
                    self.runtime.caught_up(&id);
                }
            }
        }
    }

    fn take(&mut self, message: &BorrowedMessage<'_>) {
        let (partition, offset) = (message.partition(), message.offset());
        let Some(slot) = usize::try_from(partition).ok().filter(|&p| p < self.at.len()) else {
            return;
        };
        self.at[slot] = offset + 1;
        // messages before the position were handed on once already: only the partials of the
        // queries reading the partition again go on, with the time they were sent
        let live = offset >= self.shared.positions.get(partition);
        if live {
            self.shared.positions.set(partition, offset + 1);
            if !self.catching[slot].is_empty() {
                for id in self.catching[slot].drain(..) {
                    self.runtime.caught_up(&id);
                }
            }
        }
        let sent_ms = message.timestamp().to_millis();
        let node = self.node.as_str();
        match ResultsMessage::decode(message.payload().unwrap_or_default()) {
            Ok(ResultsMessage::Partial { id, partial, .. }) => {
                if self.shared.mine.take(id, offset) {
                    let at_ms = if live { None } else { sent_ms };
                    let sent = Sent { offset: Some(offset), at_ms };
                    self.runtime.remote_partial(id, partial.to_vec(), sent);
                }
            }
            // where the query's first api node cut an emission, for a query catching up
            Ok(ResultsMessage::Cut { id, emission, through, at_ms }) => {
                if !live
                    && self.catching[slot].iter().any(|c| c == id)
                    && self.shared.mine.take(id, offset)
                {
                    self.runtime.remote_cut(id, Cut { emission, through, at_ms });
                }
            }
            // what the workers read after a query catching up started and before it was
            // adopted: its Records Seen go on from there
            Ok(ResultsMessage::Progress { records }) if !live => {
                for id in self.catching[slot].iter() {
                    if records > 0 && self.shared.mine.take(id, offset) {
                        let sent = Sent { offset: Some(offset), at_ms: sent_ms };
                        self.runtime.remote_seen(id, records, sent);
                    }
                }
            }
            // a worker node's read of its stored past, for a query this node merges: addressed
            // to it, or to the api node it adopted the query from (read again as it catches
            // up, or sent before the worker learned of the adoption)
            Ok(ResultsMessage::History { owner, id, worker, event })
                if match live {
                    true => owner == node || self.shared.mine.contains(id),
                    false => self.catching[slot].iter().any(|c| c == id),
                } =>
            {
                if self.shared.mine.take(id, offset) {
                    self.hearing.workers.heard(worker, true);
                    match history_event(event) {
                        Ok(event) => self.runtime.remote_history(id, worker, event),
                        Err(e) => self.log.say(format_args!(
                            "skipped message {offset} of the results topic: {e}"
                        )),
                    }
                }
            }
            Ok(_) if !live => {}
            // every partition has each progress (a fence); it is counted once, on the first
            Ok(ResultsMessage::Progress { records }) if partition == FIRST => {
                self.runtime.remote_progress(records)
            }
            Ok(ResultsMessage::Progress { .. }) => {}
            Ok(ResultsMessage::Worker { name, history }) => {
                self.hearing.workers.heard(name, history)
            }
            Ok(ResultsMessage::Api { name }) => self.hearing.apis.heard(name, false),
            Ok(ResultsMessage::Report { json }) => match serde_json::from_slice(json) {
                Ok(report) => self.hearing.reports.heard(report, now_ms()),
                Err(e) => self.log.say(format_args!(
                    "skipped message {offset} of the results topic: not a node's report: {e}"
                )),
            },
            Ok(ResultsMessage::History { .. }) => {} // another api node's
            Err(e) => {
                self.log.say(format_args!("skipped message {offset} of the results topic: {e}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::partition_of;

    #[test]
    fn a_query_id_always_hashes_to_the_same_partition_and_ids_spread() {
        assert_eq!(partition_of("api-1-ab-7", 1), 0);
        assert_eq!(partition_of("anything", 0), 0, "no partitions counts as one");
        let ids: Vec<String> = (0..400).map(|n| format!("api7-19c2f-{n}")).collect();
        let mut used = [0u32; 6];
        for id in &ids {
            let p = partition_of(id, 6);
            assert_eq!(p, partition_of(id, 6));
            used[usize::try_from(p).unwrap()] += 1;
        }
        assert!(used.iter().all(|&n| n > 30), "spread over every partition: {used:?}");
    }
}
