//! What a process knows of the cluster it is part of, as `GET /api/v1/cluster` shows it:
//! - [`NodeReport`]: one node as it describes itself (role, name, URL, version, up since, the
//!   queries it runs, the data partitions it reads with their consumer lag, its history's parts
//!   and bytes, its recent events). In the distributed mode every node sends its report on the
//!   results topic once a second; an api node keeps the last one of each node
//!   ([`QueryAnnouncer::cluster`](crate::remote::QueryAnnouncer::cluster)).
//! - [`Local`]: what the source and the node wiring tell the runtime about this process (its
//!   partitions and their lag, rebalances and adoptions), shared through [`crate::metrics::Metrics`].
//! - [`ClusterView`]: the whole, made by [`crate::Runtime::cluster`]: this node, the others
//!   heard from, the data topic's partitions and who reads them, recent events of every node.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

/// How many recent events a node keeps (and reports).
pub const RECENT_EVENTS: usize = 20;

/// One node as it describes itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct NodeReport {
    /// Its name (`kafka.node_id`, or one made up per process; `local` for a single process).
    pub name: String,
    /// `all`, `api` or `worker`.
    pub role: String,
    /// The base URL its HTTP API answers at.
    pub url: String,
    /// The needle version it runs.
    pub version: String,
    /// When it started (ms since the epoch).
    pub up_since_ms: i64,
    /// When it was last heard from (ms since the epoch; now for the node answering).
    pub last_heard_ms: i64,
    /// Heard from within the last few seconds (6 s in the distributed mode).
    pub alive: bool,
    /// Queries running on it now (a worker: the queries it runs for the api nodes).
    pub queries: u64,
    /// Records it read (workers and a single process).
    pub records_read: u64,
    /// The data partitions it reads now, with their consumer lag.
    pub partitions: Vec<PartitionReport>,
    /// Its history store, when it keeps one.
    pub history: Option<HistoryReport>,
    /// Its recent events, newest last.
    pub events: Vec<ClusterEvent>,
}

/// A data partition a node reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct PartitionReport {
    pub topic: String,
    pub partition: i32,
    /// Messages of the partition the group has not committed yet (its high watermark minus
    /// the committed offset: needle commits a record's offset once its results went out,
    /// every second), as librdkafka last reported it; `None` until it has.
    pub lag: Option<i64>,
}

/// A history store's size.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct HistoryReport {
    pub parts: u64,
    pub bytes: u64,
    pub records: u64,
}

/// Something that happened to a node: partitions assigned or handed back (`rebalance`), a
/// query adopted (`adoption`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ClusterEvent {
    pub at_ms: i64,
    /// The node it happened to.
    pub node: String,
    /// `rebalance` or `adoption`.
    pub kind: String,
    pub text: String,
}

/// A data partition and who reads it, in the [`ClusterView`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PartitionView {
    pub topic: String,
    pub partition: i32,
    /// The worker node that reads it.
    pub worker: String,
    /// False when that node is gone and no live node reads the partition yet (until the
    /// group moves it, `session.timeout.ms` after the death).
    pub worker_alive: bool,
    pub lag: Option<i64>,
}

/// The cluster as the answering node knows it (`GET /api/v1/cluster`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ClusterView {
    /// The node answering.
    pub node: String,
    /// Every node it knows of, itself first, then api nodes and workers by name; nodes not
    /// heard from lately stay listed (not alive) for ten minutes.
    pub nodes: Vec<NodeReport>,
    /// The data partitions read by live nodes, by topic and number; and those a node that is
    /// gone read last, while no live node reads them.
    pub partitions: Vec<PartitionView>,
    /// Recent events of every node, newest first.
    pub events: Vec<ClusterEvent>,
}

impl ClusterView {
    /// The view from `me` (filled in by the caller) and the other nodes' last reports.
    pub fn assemble(me: NodeReport, others: Vec<NodeReport>) -> Self {
        let mut others: Vec<NodeReport> =
            others.into_iter().filter(|n| n.name != me.name).collect();
        others.sort_by(|a, b| (role_rank(&a.role), &a.name).cmp(&(role_rank(&b.role), &b.name)));
        let node = me.name.clone();
        let nodes: Vec<NodeReport> = std::iter::once(me).chain(others).collect();
        let read = |alive: bool| {
            nodes.iter().filter(move |n| n.alive == alive).flat_map(|n| {
                n.partitions.iter().map(|p| PartitionView {
                    topic: p.topic.clone(),
                    partition: p.partition,
                    worker: n.name.clone(),
                    worker_alive: n.alive,
                    lag: p.lag,
                })
            })
        };
        let mut partitions: Vec<PartitionView> = read(true).collect();
        let mut orphans: Vec<PartitionView> = read(false)
            .filter(|o| {
                !partitions.iter().any(|p| (&p.topic, p.partition) == (&o.topic, o.partition))
            })
            .collect();
        // (two dead nodes that read the same partition: the one heard from last)
        orphans.sort_by_key(|o| {
            let heard = nodes.iter().find(|n| n.name == o.worker).map_or(0, |n| n.last_heard_ms);
            std::cmp::Reverse(heard)
        });
        for orphan in orphans {
            let key = (&orphan.topic, orphan.partition);
            if !partitions.iter().any(|p| (&p.topic, p.partition) == key) {
                partitions.push(orphan);
            }
        }
        partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        let mut events: Vec<ClusterEvent> =
            nodes.iter().flat_map(|n| n.events.iter().cloned()).collect();
        events.sort_by_key(|e| std::cmp::Reverse(e.at_ms));
        events.truncate(RECENT_EVENTS * 2);
        Self { node, nodes, partitions, events }
    }
}

fn role_rank(role: &str) -> u8 {
    match role {
        "all" => 0,
        "api" => 1,
        _ => 2,
    }
}

/// What the source and the node wiring tell the runtime about this process (see the module
/// doc).
#[derive(Debug, Default)]
pub struct Local {
    state: Mutex<LocalState>,
}

#[derive(Debug, Default)]
struct LocalState {
    /// (topic, partition) → lag, for the partitions read now.
    partitions: BTreeMap<(String, i32), Option<i64>>,
    events: VecDeque<ClusterEvent>,
}

impl Local {
    /// Partitions of `topic` were assigned to this process: it reads these now.
    pub fn assigned(&self, topic: &str, partitions: &[i32]) {
        let mut state = self.lock();
        state.partitions.retain(|(t, _), _| t != topic);
        for &p in partitions {
            state.partitions.insert((topic.to_owned(), p), None);
        }
    }

    /// This process reads no partition of `topic` now.
    pub fn released(&self, topic: &str) {
        self.lock().partitions.retain(|(t, _), _| t != topic);
    }

    /// The consumer lag of a partition read now (ignored for others).
    pub fn lag(&self, topic: &str, partition: i32, lag: i64) {
        if let Some(slot) = self.lock().partitions.get_mut(&(topic.to_owned(), partition)) {
            *slot = Some(lag);
        }
    }

    /// Something happened to this node (its name filled in when reported).
    pub fn event(&self, at_ms: i64, kind: &str, text: String) {
        let mut state = self.lock();
        if state.events.len() == RECENT_EVENTS {
            state.events.pop_front();
        }
        state.events.push_back(ClusterEvent {
            at_ms,
            node: String::new(),
            kind: kind.into(),
            text,
        });
    }

    pub fn partitions(&self) -> Vec<PartitionReport> {
        let state = self.lock();
        let read = state.partitions.iter();
        read.map(|((topic, partition), lag)| PartitionReport {
            topic: topic.clone(),
            partition: *partition,
            lag: *lag,
        })
        .collect()
    }

    pub fn events(&self) -> Vec<ClusterEvent> {
        self.lock().events.iter().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LocalState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, role: &str, alive: bool, partitions: &[i32]) -> NodeReport {
        NodeReport {
            name: name.into(),
            role: role.into(),
            alive,
            partitions: partitions
                .iter()
                .map(|&partition| PartitionReport { topic: "t".into(), partition, lag: Some(1) })
                .collect(),
            events: vec![ClusterEvent { at_ms: partitions.len() as i64, ..Default::default() }],
            ..NodeReport::default()
        }
    }

    #[test]
    fn the_view_lists_this_node_first_and_partitions_of_live_nodes_only() {
        let me = node("api-2", "api", true, &[]);
        let others = vec![
            node("w-2", "worker", true, &[1, 3]),
            node("api-2", "api", true, &[]),
            node("w-1", "worker", false, &[0]),
            node("api-1", "api", false, &[]),
            node("w-3", "worker", true, &[2, 0]),
        ];
        let view = ClusterView::assemble(me, others);
        let names: Vec<&str> = view.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["api-2", "api-1", "w-1", "w-2", "w-3"]);
        let read: Vec<(i32, &str, bool)> = view
            .partitions
            .iter()
            .map(|p| (p.partition, p.worker.as_str(), p.worker_alive))
            .collect();
        assert_eq!(read, [(0, "w-3", true), (1, "w-2", true), (2, "w-3", true), (3, "w-2", true)]);
        let others = vec![node("w-1", "worker", false, &[0, 1]), node("w-2", "worker", true, &[2])];
        let view = ClusterView::assemble(node("api-1", "api", true, &[]), others);
        let read: Vec<(i32, &str, bool)> = view
            .partitions
            .iter()
            .map(|p| (p.partition, p.worker.as_str(), p.worker_alive))
            .collect();
        assert_eq!(read, [(0, "w-1", false), (1, "w-1", false), (2, "w-2", true)], "not moved yet");
        assert_eq!(view.events.first().map(|e| e.at_ms), Some(2), "newest first");
    }

    #[test]
    fn local_keeps_the_lag_of_assigned_partitions_and_the_last_events() {
        let local = Local::default();
        local.assigned("t", &[0, 2]);
        local.lag("t", 2, 7);
        local.lag("t", 5, 9);
        let lags: Vec<_> = local.partitions().iter().map(|p| (p.partition, p.lag)).collect();
        assert_eq!(lags, [(0, None), (2, Some(7))]);
        local.released("t");
        assert!(local.partitions().is_empty());
        for i in 0..RECENT_EVENTS + 5 {
            local.event(i as i64, "rebalance", format!("{i}"));
        }
        let events = local.events();
        assert_eq!(events.len(), RECENT_EVENTS);
        assert_eq!(events[0].at_ms, 5);
    }
}
