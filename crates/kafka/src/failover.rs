//! Failover between api nodes: a query outlives the api node that admitted it.
//!
//! Every api node says it is up on the results topic once a second ([`HEARTBEAT`], partition 0)
//! and follows the whole query topic ([`Watcher`]), so it knows every running query and its
//! owner. A query whose owner has not been heard from for [`SILENCE`](crate::peers::SILENCE)
//! is an *orphan*; of the api nodes heard from lately, the one whose name scores highest for
//! the query id (rendezvous hashing: every node computes the same choice from the same roster)
//! adopts it:
//!
//! 1. it starts the query in its runtime as it was admitted ([`needle_runtime::Adoption`]): the
//!    original start time (windows and the duration count from it), the client, the text
//!    compiled with the original node's configuration and checked against the plan's
//!    fingerprint;
//! 2. its results reader goes back on the query's partition of the results topic to the offset
//!    the notice gives (where the query's partials start) and hands every partial of it again,
//!    each with the time it was sent, so what the dead node had merged, and what the workers
//!    sent while no api node merged it, is merged once — a windowed query's emissions cut where
//!    the dead node recorded it cut them before delivering them — then the query runs live
//!    ([`crate::results::Rewind`], [`needle_runtime::remote::QueryAnnouncer::cut`]);
//! 3. it writes the notice again with itself as the owner, and its own URL: workers address the
//!    query's partials to it from then on (the last notice of an id says who owns it, which
//!    compaction keeps), and the other api nodes send a client asking for the query there.
//!
//! A restarted api node with the same `kafka.node_id` adopts its past life's queries at once.
//! A query that ended by its duration while no api node was alive is adopted too, for ten
//! minutes after its end, so its final result still reaches a client that comes back for it.
//! A query that looks back (history) is adopted too: the worker nodes' reads of their stores
//! are on the query's partition of the results topic, and the adopter gathers them again, from
//! the workers its first api node waited for (named in the notice), as it catches up; a
//! windowed one that goes on live after the past (`SINCE`) goes live where its first api node
//! did: that node cut the windows due when its past was read before merging the live partials
//! that came meanwhile, and its cuts say which of those each live window holds.
//! A query its adopter cannot run
//! (it does not compile there, or compiles to another plan: nodes of different versions) is
//! ended by it: its end is announced, so the workers let it go and a client asking any api node
//! for it is answered at once (404) rather than after waiting for an adoption that will not come.

use crate::background::{stopped, Background};
use crate::client::{Connection, Quiet, Start, Throttled};
use crate::peers::{Holding, HEARTBEAT};
use crate::produce::{Riders, Writer};
use crate::queries::partition_of;
use crate::queries::{now_ms, QueryPublisher, Shared};
use crate::results::Rewind;
use crate::wire::{plan_hash, QueryNotice, ResultsMessage};
use crate::KafkaError;
use needle_engine::aggregate::codec::fnv1a64;
use needle_engine::CompiledQuery;
use needle_runtime::remote::QueryAnnouncer;
use needle_runtime::{AdoptedPast, Adoption, Runtime};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::BaseRecord;
use rdkafka::Offset;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long after its end a query whose api node died is still adopted (for its final result):
/// as long as a started query's results wait for a client.
const ADOPT_AFTER_END_MS: i64 = 600_000;
/// How often the orphans are looked for.
const CHECK: Duration = Duration::from_millis(500);

/// Says once a second on the results topic that this api node (`runtime`, named already) is
/// up, followed by its report for the cluster view.
pub fn heartbeat(
    connection: &Connection,
    topic: &str,
    runtime: &Arc<Runtime>,
) -> Result<Background, KafkaError> {
    let writer = Writer::new(connection, "api heartbeat", &[("linger.ms", "0")])?;
    let (topic, runtime) = (topic.to_owned(), runtime.clone());
    let log = Throttled::new("api heartbeat", Duration::from_secs(30));
    Background::spawn("needle-api-heartbeat", move |stop| {
        let node = runtime.cluster_report().name;
        let value = ResultsMessage::Api { name: &node }.encode();
        while !stopped(stop) {
            let json = serde_json::to_vec(&runtime.cluster_report()).unwrap_or_default();
            let report = ResultsMessage::Report { json: &json }.encode();
            for value in [value.as_slice(), report.as_slice()] {
                let record = BaseRecord::with_opaque_to(&topic, Riders::default())
                    .partition(0)
                    .payload(value);
                if let Err(e) = writer.send(record, |_| false) {
                    log.say(format_args!("saying this api node is up: {e}"));
                }
            }
            std::thread::sleep(HEARTBEAT);
        }
    })
}

/// An api node's watch over the query topic (see the module doc).
pub struct Watcher {
    thread: Background,
}

/// What the watcher needs to adopt a query.
pub struct Adopting {
    pub runtime: Arc<Runtime>,
    pub publisher: Arc<QueryPublisher>,
    /// (with the api nodes heard from, `shared.apis`)
    pub shared: Shared,
    /// To the results reader.
    pub rewinds: Sender<Rewind>,
}

struct Watching {
    adopting: Adopting,
    /// The last notice of every running query.
    running: HashMap<String, QueryNotice>,
    /// Queries adopted (or found impossible to adopt) by this process.
    handled: HashSet<String>,
    log: Throttled,
}

impl Watcher {
    /// Follows the query topic from its beginning on a thread of its own, adopting orphans once
    /// it has read to the end it found at start-up.
    pub fn start(
        connection: &Connection,
        topic: &str,
        adopting: Adopting,
    ) -> Result<Self, KafkaError> {
        let consumer = connection.probe("failover watcher")?;
        let ends = connection.assign_whole(&consumer, topic, Start::Beginning)?;
        let mut watching = Watching {
            adopting,
            running: HashMap::new(),
            handled: HashSet::new(),
            log: Throttled::new("failover watcher", Duration::from_secs(5)),
        };
        let thread =
            Background::spawn("needle-failover", move |stop| watching.watch(consumer, ends, stop))?;
        Ok(Self { thread })
    }

    pub fn stop(&mut self) {
        self.thread.stop();
    }
}

impl Watching {
    fn watch(
        &mut self,
        consumer: BaseConsumer<Quiet>,
        mut ends: HashMap<i32, i64>,
        stop: &AtomicBool,
    ) {
        let mut last_check = Instant::now();
        while !stopped(stop) {
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => self.read(message.key(), message.payload()),
                Some(Err(e)) => self.log.say(format_args!("reading the query topic: {e}")),
                None => {}
            }
            if !ends.is_empty() {
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
                continue;
            }
            if last_check.elapsed() >= CHECK {
                last_check = Instant::now();
                self.check();
            }
        }
    }

    fn read(&mut self, key: Option<&[u8]>, payload: Option<&[u8]>) {
        let Some(id) = key.and_then(|k| std::str::from_utf8(k).ok()) else { return };
        match payload.map(QueryNotice::from_bytes) {
            None => {
                self.running.remove(id);
                self.handled.remove(id);
                self.adopting.shared.holders.remove(id);
                self.adopting.shared.own.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
            }
            Some(Ok(notice)) if notice.id == id => {
                let me = self.adopting.publisher.node();
                let merged_here =
                    self.adopting.shared.mine.contains(id) || self.handled.contains(id);
                if notice.owner != me && merged_here {
                    // adopted by another api node while this one was taken for dead (or by
                    // two at once: the last notice wins, as compaction keeps it)
                    eprintln!(
                        "needle: kafka: query {id} was adopted by api node {}: this node no \
                         longer merges it",
                        notice.owner
                    );
                    self.adopting.shared.mine.remove(id);
                    self.adopting.runtime.forget(id);
                }
                let adoptable_until_ms = notice
                    .history
                    .is_none()
                    .then(|| notice.ends_ms.saturating_add(ADOPT_AFTER_END_MS));
                let holding = Holding {
                    owner: notice.owner.clone(),
                    url: notice.url.clone(),
                    adoptable_until_ms,
                };
                self.adopting.shared.holders.insert(id, holding);
                self.running.insert(notice.id.clone(), notice);
            }
            Some(_) => {} // the query follower of the workers logs garbage
        }
    }

    /// Adopts the orphans this node is the choice for.
    fn check(&mut self) {
        let me = self.adopting.publisher.node().to_owned();
        let apis = &self.adopting.shared.apis;
        let settled = apis.settled();
        let now = now_ms();
        let mut alive = apis.alive_names();
        if !alive.contains(&me) {
            alive.push(me.clone());
        }
        let mut orphans = HashSet::new();
        let mut chosen = Vec::new();
        for (id, notice) in &self.running {
            // (a notice of an older build that looks back names no workers: not adopted)
            if (notice.history.is_some() && notice.history_workers.is_empty())
                || notice.ends_ms.saturating_add(ADOPT_AFTER_END_MS) < now
                || self.handled.contains(id)
                || self.adopting.shared.mine.contains(id)
            {
                continue;
            }
            let gone = if notice.owner == me {
                // this node's name, not this process's query: a past life's
                !self.adopting.shared.own.lock().unwrap_or_else(|e| e.into_inner()).contains(id)
            } else {
                settled && !apis.alive(&notice.owner)
            };
            if !gone {
                continue;
            }
            orphans.insert(id.clone());
            if notice.owner == me || adopter(id, &alive) == me {
                chosen.push(notice.clone());
            }
        }
        *self.adopting.shared.orphans.lock().unwrap_or_else(|e| e.into_inner()) = orphans;
        for notice in chosen {
            self.handled.insert(notice.id.clone());
            match self.adopt(&notice, &me) {
                Ok(()) => {}
                Err(Unadoptable::Here(why)) => {
                    eprintln!(
                        "needle: kafka: query {} of api node {} could not be adopted: {why}; it \
                         ends (its end is announced)",
                        notice.id, notice.owner
                    );
                    // no other node adopts it while this one lives: end it everywhere, so that
                    // the workers let it go and clients asking for it are answered at once
                    self.adopting.publisher.ended(&notice.id);
                }
                Err(Unadoptable::Now(why)) => eprintln!(
                    "needle: kafka: query {} of api node {} could not be adopted: {why}",
                    notice.id, notice.owner
                ),
            }
        }
    }

    fn adopt(&self, notice: &QueryNotice, me: &str) -> Result<(), Unadoptable> {
        let mut plan = needle_query::compile(&notice.query, &notice.config)
            .map_err(|e| Unadoptable::Here(format!("it does not compile here: {e}")))?;
        // a range relative to now means its first api node's now
        if let (Some(past), Some((from_ms, to_ms))) = (&mut plan.history, notice.history) {
            past.from_ms = from_ms;
            past.to_ms = to_ms;
        }
        if plan_hash(&plan) != notice.plan {
            return Err(Unadoptable::Here(
                "it compiles to a different plan here than on its api node (are the nodes \
                 running different needle versions?)"
                    .into(),
            ));
        }
        let query = CompiledQuery::compile(&plan).map_err(|e| Unadoptable::Here(e.to_string()))?;
        let id = notice.id.as_str();
        let past = plan
            .history
            .map(|range| AdoptedPast { range, workers: notice.history_workers.clone() });
        let received_ms = notice.received_ms;
        let adoption = Adoption { id, query, client: &notice.client, received_ms, past };
        self.adopting
            .runtime
            .adopt_remote(adoption)
            .map_err(|e| Unadoptable::Now(e.to_string()))?;
        // (the reader makes it one of this node's queries when it goes back for it: were it
        // one before, a live partial taken first would make the older ones count as handed on)
        let partition = partition_of(id, self.adopting.shared.partitions);
        let rewind = Rewind { id: id.to_owned(), partition, from: notice.results_from };
        if self.adopting.rewinds.send(rewind).is_err() {
            return Err(Unadoptable::Now("the results reader has stopped".into()));
        }
        // (clients asking another api node for the query are sent here from now on)
        let url = self.adopting.publisher.url().to_owned();
        let adopted = QueryNotice { owner: me.to_owned(), url, ..notice.clone() };
        self.adopting.publisher.publish(&adopted).map_err(|e| Unadoptable::Now(e.to_string()))?;
        eprintln!(
            "needle: kafka: adopted query {id} of api node {}, which stopped answering",
            notice.owner
        );
        let event = format!("adopted query {id} of api node {}", notice.owner);
        self.adopting.runtime.metrics().cluster.event(now_ms(), "adoption", event);
        Ok(())
    }
}

/// Why a query was not adopted.
enum Unadoptable {
    /// This node cannot run it, now or later (it does not compile here, or compiles to
    /// another plan): it is ended.
    Here(String),
    /// Not now (this node is stopping, Kafka refused a write): it stays an orphan.
    Now(String),
}

/// The api node of `alive` (names) that adopts query `id` when its own dies: the highest score
/// of the id and the name, the same on every node.
pub fn adopter<'a>(id: &str, alive: &'a [String]) -> &'a str {
    let score = |name: &str| fnv1a64(format!("{id}\u{0}{name}").as_bytes());
    alive.iter().max_by_key(|name| (score(name), name.as_str())).map_or("", String::as_str)
}

#[cfg(test)]
mod tests {
    use super::adopter as choice;

    #[test]
    fn every_node_chooses_the_same_adopter_and_queries_spread() {
        let nodes: Vec<String> = ["api_a", "api_b", "api_c"].map(String::from).to_vec();
        let mut reversed = nodes.clone();
        reversed.reverse();
        let mut chosen = std::collections::HashMap::new();
        for n in 0..300 {
            let id = format!("api_d-19c2f-{n}");
            assert_eq!(choice(&id, &nodes), choice(&id, &reversed), "the order does not matter");
            *chosen.entry(choice(&id, &nodes).to_owned()).or_insert(0) += 1;
        }
        assert_eq!(chosen.len(), 3, "each node adopts some: {chosen:?}");
        assert_eq!(choice("q", &[]), "");
    }
}
