//! What a node knows of the others, shared between the query topic and the results topic:
//! - [`Owners`] (worker node): which api node owns each query, learned from the query topic's
//!   notices and read to address each partial on the results topic;
//! - [`Roster`] (api node): the worker nodes heard from on the results topic, each saying it is
//!   up every [`HEARTBEAT`], read to tell which reads of the past a query announced on the query
//!   topic waits for; and, in a roster of their own, the api nodes, which say they are up the
//!   same way: one silent for [`SILENCE`] is taken for dead, and its queries are adopted;
//! - [`Mine`] (api node): the queries it merges, and from which offset of its results partition
//!   each one's partials are still to be handed on;
//! - [`Holders`] (api node): which api node holds each running query, and the URL clients
//!   reach it at, learned from the query topic's notices: a client asking another api node for
//!   the query is sent there;
//! - [`Reports`] (api node): the last report of every node heard from on the results topic
//!   (role, URL, version, partitions and their lag, history, recent events), for the cluster
//!   view (`GET /api/v1/cluster`);
//! - [`Positions`] (api node): per partition of the results topic, the offset its reader has
//!   handed everything before on (a query admitted now has all its partials at or after it).

use needle_runtime::cluster::NodeReport;
use needle_runtime::remote::Holder;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// How often a worker node says it is up.
pub const HEARTBEAT: Duration = Duration::from_secs(1);
/// A node not heard from for this long is taken for gone.
pub const SILENCE: Duration = Duration::from_secs(6);
/// An api node heard from within this long is answering: clients are sent to it. One silent
/// for longer (but less than [`SILENCE`]) may have died: a client waits to see.
pub const ANSWERING: Duration = Duration::from_secs(3);

/// Which api node owns each query a worker runs (its partials are addressed to it).
#[derive(Debug, Clone, Default)]
pub struct Owners(Arc<RwLock<HashMap<String, Arc<str>>>>);

impl Owners {
    pub fn get(&self, id: &str) -> Option<Arc<str>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).get(id).cloned()
    }

    pub(crate) fn insert(&self, id: &str, owner: &str) {
        self.0.write().unwrap_or_else(|e| e.into_inner()).insert(id.to_owned(), owner.into());
    }

    pub(crate) fn remove(&self, id: &str) {
        self.0.write().unwrap_or_else(|e| e.into_inner()).remove(id);
    }
}

/// The worker nodes an api node has heard from, when last, and whether each keeps history.
#[derive(Debug, Clone)]
pub struct Roster {
    seen: Arc<Mutex<HashMap<String, (Instant, bool)>>>,
    since: Instant,
}

impl Default for Roster {
    fn default() -> Self {
        Self { seen: Arc::default(), since: Instant::now() }
    }
}

impl Roster {
    pub fn heard(&self, worker: &str, history: bool) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.insert(worker.to_owned(), (Instant::now(), history));
    }

    /// The worker nodes keeping history heard from lately. Just after start-up, waits for a
    /// heartbeat's time first (the roster starts empty).
    pub fn keeping_history(&self) -> Vec<String> {
        let settled = HEARTBEAT * 2;
        if let Some(wait) = settled.checked_sub(self.since.elapsed()) {
            std::thread::sleep(wait);
        }
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let mut names: Vec<String> = seen
            .iter()
            .filter(|(_, (at, history))| *history && at.elapsed() < SILENCE)
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
    }

    /// False once `worker` has not been heard from for a while.
    pub fn alive(&self, worker: &str) -> bool {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(worker).is_some_and(|(at, _)| at.elapsed() < SILENCE)
    }

    /// True when `node` was heard from within `within`.
    pub fn heard_within(&self, node: &str, within: Duration) -> bool {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(node).is_some_and(|(at, _)| at.elapsed() < within)
    }

    /// Every node heard from lately.
    pub fn alive_names(&self) -> Vec<String> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.iter().filter(|(_, (at, _))| at.elapsed() < SILENCE).map(|(n, _)| n.clone()).collect()
    }

    /// True once the roster has listened long enough that a node it has not heard from is gone.
    pub fn settled(&self) -> bool {
        self.since.elapsed() >= SILENCE
    }
}

/// How long a node not heard from stays in the cluster view (shown as not alive).
pub const FORGOTTEN: Duration = Duration::from_secs(600);

/// The last report of every node heard from, with when it was heard (ms since the epoch).
#[derive(Debug, Clone, Default)]
pub struct Reports(Arc<Mutex<HashMap<String, NodeReport>>>);

impl Reports {
    /// `report` was heard at `now_ms`.
    pub fn heard(&self, mut report: NodeReport, now_ms: i64) {
        report.last_heard_ms = now_ms;
        let mut reports = self.0.lock().unwrap_or_else(|e| e.into_inner());
        reports.insert(report.name.clone(), report);
    }

    /// Every node heard from within [`FORGOTTEN`], each alive when heard from within
    /// [`SILENCE`] of `now_ms`.
    pub fn at(&self, now_ms: i64) -> Vec<NodeReport> {
        let mut reports = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let age = |r: &NodeReport| now_ms.saturating_sub(r.last_heard_ms);
        reports.retain(|_, r| age(r) < FORGOTTEN.as_millis() as i64);
        let silence = SILENCE.as_millis() as i64;
        reports.values().map(|r| NodeReport { alive: age(r) < silence, ..r.clone() }).collect()
    }
}

/// Who holds each running query, as the last notice of its id says (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct Holders(Arc<RwLock<HashMap<String, Holding>>>);

/// What the last notice of a running query says of its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holding {
    /// The api node that holds it.
    pub owner: String,
    /// The base URL clients reach that node at (empty: the notice does not say).
    pub url: String,
    /// Until when another api node adopts it should its holder die (ms since the epoch; a
    /// while after its end); `None`: never (a query that looks back).
    pub adoptable_until_ms: Option<i64>,
}

impl Holders {
    pub fn get(&self, id: &str) -> Option<Holding> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).get(id).cloned()
    }

    pub(crate) fn insert(&self, id: &str, holding: Holding) {
        self.0.write().unwrap_or_else(|e| e.into_inner()).insert(id.to_owned(), holding);
    }

    pub(crate) fn remove(&self, id: &str) {
        self.0.write().unwrap_or_else(|e| e.into_inner()).remove(id);
    }

    /// The api node other than `me` (whose URL is `my_url`) that holds query `id`, when it says
    /// where clients reach it and `apis` heard from it within [`ANSWERING`].
    pub fn answering(&self, id: &str, me: &str, my_url: &str, apis: &Roster) -> Option<Holder> {
        let h = self.get(id)?;
        let answering = h.owner != me
            && !h.url.is_empty()
            && h.url != my_url
            && apis.heard_within(&h.owner, ANSWERING);
        answering.then_some(Holder { node: h.owner, url: h.url })
    }

    /// True when query `id` is held by an api node other than `me` that `apis` has not heard
    /// from within [`ANSWERING`] and the query would be adopted were that node dead (at
    /// `now_ms`): within [`SILENCE`] it is heard again or taken for dead.
    pub fn silent(&self, id: &str, me: &str, apis: &Roster, now_ms: i64) -> bool {
        self.get(id).is_some_and(|h| {
            h.owner != me
                && h.adoptable_until_ms.is_some_and(|until| now_ms <= until)
                && !apis.heard_within(&h.owner, ANSWERING)
        })
    }
}

/// The queries an api node merges, each with the offset of its results partition from which
/// its partials are still to be handed on (so a partial read twice, when the reader goes back
/// for an adopted query, is handed on once).
#[derive(Debug, Clone, Default)]
pub struct Mine(Arc<Mutex<HashMap<String, i64>>>);

impl Mine {
    pub fn insert(&self, id: &str, from: i64) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(id.to_owned(), from);
    }

    pub fn remove(&self, id: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
    }

    pub fn contains(&self, id: &str) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).contains_key(id)
    }

    /// True when the partial of query `id` at `offset` is this node's to merge and was not
    /// handed on before; it then counts as handed on.
    pub fn take(&self, id: &str, offset: i64) -> bool {
        let mut mine = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match mine.get_mut(id) {
            Some(next) if offset >= *next => {
                *next = offset + 1;
                true
            }
            _ => false,
        }
    }
}

/// Per partition of the results topic, the offset before which the api node's reader has
/// handed every message on (see the module doc).
#[derive(Debug, Clone)]
pub struct Positions(Arc<Vec<AtomicI64>>);

impl Positions {
    pub fn new(partitions: i32) -> Self {
        Self(Arc::new((0..partitions.max(1)).map(|_| AtomicI64::new(0)).collect()))
    }

    pub fn get(&self, partition: i32) -> i64 {
        self.slot(partition).map_or(0, |p| p.load(Ordering::Acquire))
    }

    pub fn set(&self, partition: i32, offset: i64) {
        if let Some(p) = self.slot(partition) {
            p.store(offset, Ordering::Release);
        }
    }

    fn slot(&self, partition: i32) -> Option<&AtomicI64> {
        usize::try_from(partition).ok().and_then(|p| self.0.get(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_is_handed_on_once_and_only_for_queries_of_this_node() {
        let mine = Mine::default();
        mine.insert("q1", 10);
        assert!(!mine.take("q1", 9), "before the query started");
        assert!(mine.take("q1", 10));
        assert!(mine.take("q1", 12));
        assert!(!mine.take("q1", 11), "read again after a rewind: handed on already");
        assert!(!mine.take("q2", 50), "not this node's");
        mine.remove("q1");
        assert!(!mine.take("q1", 13));
    }

    #[test]
    fn a_query_is_sent_to_its_holder_only_while_that_one_answers() {
        let (apis, holders) = (Roster::default(), Holders::default());
        let holding = |owner: &str, url: &str, until: Option<i64>| Holding {
            owner: owner.into(),
            url: url.into(),
            adoptable_until_ms: until,
        };
        holders.insert("b-1", holding("api_b", "http://b:9900", Some(2_000)));
        holders.insert("a-1", holding("api_a", "http://a:9900", Some(2_000)));
        holders.insert("old-1", holding("api_o", "", Some(2_000)));
        holders.insert("past-1", holding("api_p", "http://p:9900", None));
        let at = |id: &str| holders.answering(id, "api_a", "http://a:9900", &apis);
        // not heard from yet: not sent there, but waited for while it may be adopted
        assert_eq!(at("b-1"), None);
        assert!(holders.silent("b-1", "api_a", &apis, 1_000));
        assert!(!holders.silent("b-1", "api_a", &apis, 2_001), "too long after its end");
        assert!(!holders.silent("past-1", "api_a", &apis, 1_000), "never adopted");
        for node in ["api_a", "api_b", "api_o", "api_p"] {
            apis.heard(node, false);
        }
        let b = Holder { node: "api_b".into(), url: "http://b:9900".into() };
        assert_eq!(at("b-1"), Some(b));
        assert!(!holders.silent("b-1", "api_a", &apis, 1_000), "it answers");
        assert_eq!(at("a-1"), None, "held here");
        assert_eq!(at("old-1"), None, "a notice without a URL");
        assert_eq!(at("nobody-1"), None);
        assert_eq!(holders.answering("b-1", "api_c", "http://b:9900", &apis), None, "my URL");
        holders.remove("b-1");
        assert_eq!(at("b-1"), None);
    }

    #[test]
    fn a_node_silent_for_a_while_is_not_alive_and_then_forgotten() {
        let reports = Reports::default();
        let report = |name: &str| NodeReport { name: name.into(), ..NodeReport::default() };
        reports.heard(report("w-1"), 1_000);
        reports.heard(report("w-2"), 5_000);
        let alive = |now| {
            let mut nodes: Vec<_> =
                reports.at(now).into_iter().map(|r| (r.name, r.alive)).collect();
            nodes.sort();
            nodes
        };
        assert_eq!(alive(6_000), [("w-1".into(), true), ("w-2".into(), true)]);
        assert_eq!(alive(8_000), [("w-1".into(), false), ("w-2".into(), true)]);
        assert_eq!(alive(1_000 + 600_000), [("w-2".into(), false)]);
    }

    #[test]
    fn positions_outside_the_topic_are_ignored() {
        let positions = Positions::new(2);
        positions.set(1, 7);
        positions.set(5, 9);
        positions.set(-1, 9);
        assert_eq!((positions.get(0), positions.get(1), positions.get(5)), (0, 7, 0));
    }
}
