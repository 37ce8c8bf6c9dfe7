//! The query topic: how api nodes tell worker nodes what to run.
//!
//! - [`QueryPublisher`] (api node) is the runtime's [`QueryAnnouncer`]: a query it admits is
//!   written as a [`QueryNotice`] keyed by its id (with the offset of its results partition its
//!   partials will come after); its end as a tombstone. A query it adopts from an api node that
//!   died is written again with this node as its owner ([`crate::failover`]).
//! - [`QueryFollower`] (worker node) reads the topic from the beginning at start-up, up to the
//!   end offsets it saw then, and adopts the queries still running (not ended by a tombstone, end
//!   time not passed) *before* the node's source starts: a worker that joins late runs the
//!   queries already running. It then follows the topic: new notices are adopted, tombstones
//!   release, and queries past their end time (plus a grace, for an api node that died before
//!   writing the tombstone) are released on its own clock. A notice for a query it runs
//!   already (another api node adopted it) only changes where its partials are addressed.
//!
//! A notice is compiled with the api node's query configuration, and the plan's fingerprint is
//! checked, so a worker runs exactly the query its api node merges (or says why it cannot).

use crate::background::{stopped, Background};
use crate::client::{Connection, Start, Throttled};
use crate::peers::{Holders, Mine, Owners, Positions, Reports, Roster};
use crate::produce::{Patience, Riders, Writer};
use crate::wire::{plan_hash, QueryNotice, ResultsMessage};
use crate::KafkaError;
use needle_engine::aggregate::codec::fnv1a64;
use needle_engine::CompiledQuery;
use needle_query::QueryConfig;
use needle_runtime::framing::Receipt;
use needle_runtime::history::SharedRead;
use needle_runtime::remote::Cut;
use needle_runtime::remote::{Announcement, Holder, QueryAnnouncer};
use needle_runtime::Runtime;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::BaseRecord;
use rdkafka::Offset;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long after its end time a query is kept by a worker that saw no tombstone for it.
const END_GRACE_MS: i64 = 2_000;
/// How long start-up may take to read the query topic to its end.
const CATCH_UP: Duration = Duration::from_secs(30);

/// An api node's announcer: notices and tombstones on the query topic, and the cuts of its
/// windowed queries' emissions on the results topic.
pub struct QueryPublisher {
    writer: Writer,
    topic: String,
    results_topic: String,
    node: String,
    /// The base URL clients reach this node at (`server.advertised_url`), written in notices.
    url: String,
    config: QueryConfig,
    /// The worker nodes heard from (on the results topic).
    roster: Roster,
    shared: Shared,
}

/// The partition of a results topic of `partitions` partitions that query `id`'s messages go to:
/// FNV-1a of the id, so every node agrees.
pub fn partition_of(id: &str, partitions: i32) -> i32 {
    let n = u64::try_from(partitions.max(1)).unwrap_or(1);
    (fnv1a64(id.as_bytes()) % n) as i32
}

/// What an api node's publisher shares with its results reader and its failover watcher.
#[derive(Debug, Clone)]
pub struct Shared {
    /// The results topic's partitions.
    pub partitions: i32,
    /// Where the results reader is, per partition.
    pub positions: Positions,
    /// The queries this node merges.
    pub mine: Mine,
    /// The queries this process admitted (not to be adopted as a past life's), until their
    /// tombstone is read back.
    pub own: Arc<Mutex<HashSet<String>>>,
    /// Queries of api nodes that stopped answering, about to be adopted (here or elsewhere).
    pub orphans: Arc<Mutex<HashSet<String>>>,
    /// Who holds each running query (from the query topic).
    pub holders: Holders,
    /// The api nodes heard from (on the results topic).
    pub apis: Roster,
    /// The last report of every node heard from (on the results topic).
    pub reports: Reports,
}

impl Shared {
    pub fn new(partitions: i32, apis: Roster) -> Self {
        Self {
            partitions,
            positions: Positions::new(partitions),
            mine: Mine::default(),
            own: Arc::default(),
            orphans: Arc::default(),
            holders: Holders::default(),
            apis,
            reports: Reports::default(),
        }
    }
}

impl QueryPublisher {
    /// `(node, url)`: this api node's name, and the base URL clients reach it at.
    pub fn new(
        connection: &Connection,
        (topic, results_topic): (&str, &str),
        (node, url): (&str, &str),
        config: QueryConfig,
        roster: Roster,
        shared: Shared,
    ) -> Result<Self, KafkaError> {
        // Notices must go out at once (a query waits for its workers) and in order.
        let writer = Writer::new(
            connection,
            "query publisher",
            &[("linger.ms", "0"), ("enable.idempotence", "true")],
        )?;
        Ok(Self {
            writer,
            topic: topic.to_owned(),
            results_topic: results_topic.to_owned(),
            node: node.to_owned(),
            url: url.to_owned(),
            config,
            roster,
            shared,
        })
    }

    /// This api node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The base URL clients reach this api node at (empty: not configured).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Writes `notice` (a query this node adopts, with itself as owner).
    pub fn publish(&self, notice: &QueryNotice) -> Result<(), KafkaError> {
        let value = notice.to_bytes();
        let record = BaseRecord::with_opaque_to(&self.topic, Riders::default())
            .key(notice.id.as_str())
            .payload(value.as_slice());
        self.writer.send(record, Patience::at_most(Duration::from_secs(5)))
    }

    /// Waits (at most `timeout`) for the notices and tombstones sent to be acknowledged.
    pub fn flush(&self, timeout: Duration) -> Result<(), KafkaError> {
        self.writer.flush(timeout)
    }
}

impl QueryAnnouncer for QueryPublisher {
    fn cluster(&self) -> Vec<needle_runtime::cluster::NodeReport> {
        self.shared.reports.at(now_ms())
    }

    fn started(&self, query: &Announcement<'_>) -> Result<(), String> {
        // every partial of the query comes after what the results reader has handed on now
        let partition = partition_of(query.id, self.shared.partitions);
        let from = self.shared.positions.get(partition);
        self.shared.mine.insert(query.id, from);
        self.shared.own.lock().unwrap_or_else(|e| e.into_inner()).insert(query.id.to_owned());
        let notice = QueryNotice {
            v: 1,
            id: query.id.to_owned(),
            owner: self.node.clone(),
            query: query.plan.text.clone(),
            config: self.config.clone(),
            plan: plan_hash(query.plan),
            received_ms: query.received_ms,
            ends_ms: query.ends_ms,
            history: query.plan.history.map(|h| (h.from_ms, h.to_ms)),
            client: query.client.to_owned(),
            results_from: Some(from),
            url: self.url.clone(),
            history_workers: query.history_workers.to_vec(),
            history_version: query.history_version,
        };
        self.publish(&notice).map_err(|e| {
            self.shared.mine.remove(query.id);
            e.to_string()
        })
    }

    fn ended(&self, id: &str) {
        self.shared.mine.remove(id);
        let record =
            BaseRecord::<str, [u8], Riders>::with_opaque_to(&self.topic, Riders::default()).key(id);
        if let Err(e) = self.writer.send(record, Patience::at_most(Duration::from_secs(1))) {
            // The workers still forget it at its end time.
            eprintln!("needle: kafka: the end of query {id} could not be announced: {e}");
        }
    }

    fn history_workers(&self) -> Result<Vec<String>, String> {
        let workers = self.roster.keeping_history();
        if workers.is_empty() {
            return Err(format!(
                "no worker node keeping history has been heard from on topic {}: start the \
                 worker nodes with --history DIR (history.dir)",
                self.topic
            ));
        }
        Ok(workers)
    }

    fn worker_alive(&self, worker: &str) -> bool {
        self.roster.alive(worker)
    }

    fn adopting(&self, id: &str) -> bool {
        if self.shared.orphans.lock().unwrap_or_else(|e| e.into_inner()).contains(id) {
            return true;
        }
        // a holder silent for seconds may have died: within SILENCE it is adopted, or heard again
        self.shared.holders.silent(id, &self.node, &self.shared.apis, now_ms())
    }

    fn holder(&self, id: &str) -> Option<Holder> {
        self.shared.holders.answering(id, &self.node, &self.url, &self.shared.apis)
    }

    fn cut(&self, id: &str, cut: Cut, deliver: Box<dyn FnOnce() + Send>) {
        let Cut { emission, through, at_ms } = cut;
        let value = ResultsMessage::Cut { id, emission, through, at_ms }.encode();
        // delivered when Kafka acknowledges the cut (or gives up on it): the emission is not
        // seen by a client before an api node adopting the query could cut it the same way
        let riders = Riders::new(vec![Receipt::new(OnDrop(Mutex::new(Some(deliver))))]);
        let record = BaseRecord::with_opaque_to(&self.results_topic, riders)
            .partition(partition_of(id, self.shared.partitions))
            .key(self.node.as_str())
            .payload(value.as_slice());
        if let Err(e) = self.writer.send(record, Patience::at_most(Duration::from_secs(5))) {
            eprintln!("needle: kafka: where query {id} cut emission {emission} is not kept: {e}");
        }
    }
}

/// Runs its function when dropped (with the riders of a message, when Kafka reports it).
struct OnDrop(Mutex<Option<Box<dyn FnOnce() + Send>>>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some(f) = self.0.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
            f();
        }
    }
}

/// A worker node's reader of the query topic (see the module doc).
pub struct QueryFollower {
    thread: Background,
}

struct Following {
    runtime: Arc<Runtime>,
    owners: Owners,
    /// Adopted queries and their end times.
    running: HashMap<String, i64>,
    log: Throttled,
}

impl QueryFollower {
    /// Reads the topic to its current end, adopts the running queries, then follows it on a
    /// thread of its own.
    pub fn start(
        connection: &Connection,
        topic: &str,
        runtime: Arc<Runtime>,
        owners: Owners,
    ) -> Result<Self, KafkaError> {
        let consumer = connection.probe("query follower")?;
        let mut ends = connection.assign_whole(&consumer, topic, Start::Beginning)?;

        // Catch up: the last word on each id, before anything runs.
        let mut latest: HashMap<String, Option<QueryNotice>> = HashMap::new();
        let log = Throttled::new("query follower", Duration::from_secs(5));
        let deadline = Instant::now() + CATCH_UP;
        while !ends.is_empty() {
            if Instant::now() > deadline {
                return Err(KafkaError::Unreachable {
                    brokers: connection.brokers.clone(),
                    reason: format!(
                        "could not read the query topic {topic} to its end in {} s",
                        CATCH_UP.as_secs()
                    ),
                });
            }
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => {
                    if let Some((id, notice)) = read_notice(message.key(), message.payload(), &log)
                    {
                        latest.insert(id, notice);
                    }
                }
                Some(Err(e)) => log.say(format_args!("reading {topic}: {e}")),
                None => {}
            }
            // (positions, not the last offset seen: compaction leaves gaps)
            if let Ok(positions) = consumer.position() {
                for p in positions.elements() {
                    if let Offset::Offset(at) = p.offset() {
                        if ends.get(&p.partition()).is_some_and(|&end| at >= end) {
                            ends.remove(&p.partition());
                        }
                    }
                }
            }
        }
        let mut following = Following { runtime, owners, running: HashMap::new(), log };
        let now = now_ms();
        for notice in latest.into_values().flatten() {
            if notice.ends_ms > now {
                following.adopt(&notice);
            }
        }
        let thread = Background::spawn("needle-query-follower", move |stop| {
            following.follow(consumer, stop)
        })?;
        Ok(Self { thread })
    }

    /// Stops following (the adopted queries stay until the runtime stops).
    pub fn stop(&mut self) {
        self.thread.stop();
    }
}

/// A message of the query topic as (id, notice), or (id, None) for a tombstone; `None` (logged)
/// for garbage.
fn read_notice(
    key: Option<&[u8]>,
    payload: Option<&[u8]>,
    log: &Throttled,
) -> Option<(String, Option<QueryNotice>)> {
    let Some(id) = key.and_then(|k| std::str::from_utf8(k).ok()) else {
        log.say("skipped a message of the query topic without a query id as its key");
        return None;
    };
    match payload {
        None => Some((id.to_owned(), None)),
        Some(bytes) => match QueryNotice::from_bytes(bytes) {
            Ok(notice) if notice.id == id => Some((notice.id.clone(), Some(notice))),
            Ok(notice) => {
                log.say(format_args!("skipped a notice for query {} under key {id}", notice.id));
                None
            }
            Err(e) => {
                log.say(format_args!("skipped a message of the query topic: {e}"));
                None
            }
        },
    }
}

impl Following {
    fn follow(mut self, consumer: BaseConsumer<crate::client::Quiet>, stop: &AtomicBool) {
        let mut last_sweep = Instant::now();
        while !stopped(stop) {
            if let Some(result) = consumer.poll(Duration::from_millis(100)) {
                match result {
                    Ok(message) => match read_notice(message.key(), message.payload(), &self.log) {
                        Some((_, Some(notice))) if notice.ends_ms > now_ms() => self.adopt(&notice),
                        Some((_, Some(_))) => {} // it ended while it travelled
                        Some((id, None)) => self.release(&id),
                        None => {}
                    },
                    Err(e) => self.log.say(format_args!("reading the query topic: {e}")),
                }
            }
            if last_sweep.elapsed() >= Duration::from_millis(500) {
                last_sweep = Instant::now();
                let now = now_ms();
                let expired: Vec<String> = self
                    .running
                    .iter()
                    .filter(|(_, &ends)| ends + END_GRACE_MS < now)
                    .map(|(id, _)| id.clone())
                    .collect();
                for id in expired {
                    self.release(&id);
                }
            }
        }
    }

    fn adopt(&mut self, notice: &QueryNotice) {
        if let Some(ends) = self.running.get_mut(&notice.id) {
            // adopted by another api node: its partials go there from now on
            *ends = notice.ends_ms;
            self.owners.insert(&notice.id, &notice.owner);
            return;
        }
        let refuse = |why: String| {
            eprintln!(
                "needle: kafka: not running query {} of api node {}: {why}",
                notice.id, notice.owner
            );
        };
        let mut plan = match needle_query::compile(&notice.query, &notice.config) {
            Ok(plan) => plan,
            Err(e) => return refuse(format!("it does not compile here: {e}")),
        };
        // a range relative to now means the api node's now
        if let (Some(past), Some((from_ms, to_ms))) = (&mut plan.history, notice.history) {
            past.from_ms = from_ms;
            past.to_ms = to_ms;
        }
        if plan_hash(&plan) != notice.plan {
            return refuse(
                "it compiles to a different plan here than on its api node (are the nodes \
                 running different needle versions?)"
                    .into(),
            );
        }
        let compiled = match CompiledQuery::compile(&plan) {
            Ok(compiled) => compiled,
            Err(e) => return refuse(format!("the engine cannot run it here: {e}")),
        };
        self.owners.insert(&notice.id, &notice.owner);
        let (id, owner) = (&notice.id, &notice.owner);
        let (received_ms, ends_ms, compiled) =
            (notice.received_ms, notice.ends_ms, Arc::new(compiled));
        if plan.history.is_some() {
            let shared =
                SharedRead { roster: &notice.history_workers, version: notice.history_version };
            self.runtime.adopt_history(id, &plan, compiled, owner, (received_ms, ends_ms), &shared);
        } else {
            self.runtime.adopt(id, compiled, owner, received_ms, ends_ms);
        }
        self.running.insert(notice.id.clone(), notice.ends_ms);
    }

    fn release(&mut self, id: &str) {
        if self.running.remove(id).is_some() {
            self.runtime.release(id);
            self.owners.remove(id);
        }
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
