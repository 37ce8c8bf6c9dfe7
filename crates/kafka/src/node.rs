//! A node of the distributed mode, wired and ready: `needle serve --role worker` or `--role api`
//! is [`Node::start_worker`] or [`Node::start_api`] and an HTTP server on [`Node::runtime`].
//!
//! A worker node says it is up on the results topic every [`HEARTBEAT`] (and whether it keeps
//! history): an api node's roster of workers tells which reads of the past a query waits for.
//! An api node says so too, and watches the query topic for the queries of api nodes that went
//! silent, to adopt them ([`crate::failover`]).
//!
//! Both check at start-up that the brokers answer and create the query topic (1 partition,
//! compacted) and the results topic (`kafka.results_partitions` partitions, large messages
//! allowed, an hour's retention) when they are missing. [`Node::shutdown`] ends the runtime
//! first (an api node's queries end with a final result and a tombstone; a worker's source
//! commits what its partials covered), then waits for Kafka to acknowledge what was sent.

use crate::background::{stopped, Background};
use crate::client::Connection;
use crate::failover::{Adopting, Watcher};
use crate::peers::{Owners, Roster, HEARTBEAT};
use crate::produce::MAX_MESSAGE_BYTES;
use crate::queries::{QueryFollower, QueryPublisher, Shared};
use crate::results::{Hearing, ResultsOutlet, ResultsReader};
use crate::spec::check_topic;
use crate::KafkaError;
use needle_runtime::config::KafkaConfig;
use needle_runtime::metrics::Metrics;
use needle_runtime::remote::Role;
use needle_runtime::source::Source;
use needle_runtime::{NeedleConfig, Runtime};
use rdkafka::consumer::Consumer;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long shutdown waits for Kafka to acknowledge the last messages.
const FLUSH_WAIT: Duration = Duration::from_secs(10);

/// A running worker or api node.
pub struct Node {
    runtime: Arc<Runtime>,
    parts: Mutex<Parts>,
}

#[derive(Default)]
struct Parts {
    follower: Option<QueryFollower>,
    outlet: Option<Arc<ResultsOutlet>>,
    reader: Option<ResultsReader>,
    publisher: Option<Arc<QueryPublisher>>,
    heartbeat: Option<Background>,
    watcher: Option<Watcher>,
}

impl Node {
    /// A worker node reading `source` (typically the data topic, see [`crate::register`]).
    pub fn start_worker(
        config: NeedleConfig,
        metrics: Arc<Metrics>,
        source: Box<dyn Source>,
    ) -> Result<Self, KafkaError> {
        let (connection, partitions) = connect(&config.kafka)?;
        let owners = Owners::default();
        let name = node_name(&config.kafka.node_id, "worker")?;
        let results_topic = &config.kafka.results_topic;
        let outlet =
            ResultsOutlet::new(&connection, results_topic, partitions, owners.clone(), &name)?;
        let outlet = Arc::new(outlet);
        let query_topic = config.kafka.query_topic.clone();
        let history = config.history.is_on();
        // the node's name is its name as a writer of a history store that workers share
        let mut config = config;
        config.kafka.node_id = name.clone();
        let runtime = Runtime::start_role(config, Role::Worker(outlet.clone()), metrics)?;
        runtime.name_as(name.clone());
        let follower = QueryFollower::start(&connection, &query_topic, runtime.clone(), owners)
            .inspect_err(|_| runtime.shutdown())?;
        runtime.run_source(source).inspect_err(|_| runtime.shutdown())?;
        let heartbeat = {
            let (outlet, reporting) = (outlet.clone(), runtime.clone());
            Background::spawn("needle-heartbeat", move |stop| {
                while !stopped(stop) {
                    outlet.heartbeat(history, &reporting.cluster_report());
                    std::thread::sleep(HEARTBEAT);
                }
            })
            .inspect_err(|_| runtime.shutdown())?
        };
        let parts = Parts {
            follower: Some(follower),
            outlet: Some(outlet),
            heartbeat: Some(heartbeat),
            ..Parts::default()
        };
        Ok(Self { runtime, parts: Mutex::new(parts) })
    }

    /// An api node: queries in over HTTP, out on the query topic; partials in from the results
    /// topic.
    pub fn start_api(config: NeedleConfig, metrics: Arc<Metrics>) -> Result<Self, KafkaError> {
        let (connection, partitions) = connect(&config.kafka)?;
        let node = node_name(&config.kafka.node_id, "api")?;
        let kafka = config.kafka.clone();
        let (workers, apis) = (Roster::default(), Roster::default());
        let shared = Shared::new(partitions, apis.clone());
        let url = config.server.advertised_url.clone();
        let publisher = Arc::new(QueryPublisher::new(
            &connection,
            (&kafka.query_topic, &kafka.results_topic),
            (&node, &url),
            config.query.clone(),
            workers.clone(),
            shared.clone(),
        )?);
        let role = Role::Api { announcer: publisher.clone(), node: node.clone() };
        let runtime = Runtime::start_role(config, role, metrics)?;
        let (rewinds, rewound) = std::sync::mpsc::channel();
        let hearing = Hearing { workers, apis: apis.clone(), reports: shared.reports.clone() };
        let reader = ResultsReader::start(
            &connection,
            &kafka.results_topic,
            runtime.clone(),
            &node,
            hearing,
            shared.clone(),
            rewound,
        )
        .inspect_err(|_| runtime.shutdown())?;
        runtime.name_as(node.clone());
        let heartbeat = crate::failover::heartbeat(&connection, &kafka.results_topic, &runtime)
            .inspect_err(|_| runtime.shutdown())?;
        let adopting =
            Adopting { runtime: runtime.clone(), publisher: publisher.clone(), shared, rewinds };
        let watcher = Watcher::start(&connection, &kafka.query_topic, adopting)
            .inspect_err(|_| runtime.shutdown())?;
        runtime.describe_as(format!(
            "kafka: api node {node}; queries to topic {}, partials from topic {} on {}",
            kafka.query_topic, kafka.results_topic, kafka.brokers
        ));
        let parts = Parts {
            reader: Some(reader),
            publisher: Some(publisher),
            heartbeat: Some(heartbeat),
            watcher: Some(watcher),
            ..Parts::default()
        };
        Ok(Self { runtime, parts: Mutex::new(parts) })
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// Stops the node (see the module doc). Idempotent.
    pub fn shutdown(&self) {
        {
            let mut parts = self.parts.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(outlet) = &parts.outlet {
                outlet.stopping();
            }
            // (no adoption while this node ends its queries)
            if let Some(mut watcher) = parts.watcher.take() {
                watcher.stop();
            }
        }
        self.runtime.shutdown();
        let mut parts = self.parts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mut heartbeat) = parts.heartbeat.take() {
            heartbeat.stop();
        }
        if let Some(mut follower) = parts.follower.take() {
            follower.stop();
        }
        if let Some(mut reader) = parts.reader.take() {
            reader.stop();
        }
        let flushed = match (parts.outlet.take(), parts.publisher.take()) {
            (Some(outlet), _) => outlet.flush(FLUSH_WAIT),
            (_, Some(publisher)) => publisher.flush(FLUSH_WAIT),
            _ => Ok(()),
        };
        if let Err(e) = flushed {
            eprintln!("needle: kafka: {e}");
        }
    }
}

/// Checks the section, that the brokers answer, and that the node's topics exist (creating them);
/// the results topic's partition count.
fn connect(kafka: &KafkaConfig) -> Result<(Connection, i32), KafkaError> {
    for (key, topic) in
        [("query_topic", &kafka.query_topic), ("results_topic", &kafka.results_topic)]
    {
        check_topic(topic).map_err(|e| KafkaError::Config(format!("kafka.{key}: {e}")))?;
    }
    if kafka.query_topic == kafka.results_topic || kafka.query_topic == kafka.data_topic {
        return Err(KafkaError::Config(
            "kafka.query_topic, kafka.results_topic and kafka.data_topic must be three topics"
                .into(),
        ));
    }
    if !(1..=MAX_RESULTS_PARTITIONS).contains(&kafka.results_partitions) {
        return Err(KafkaError::Config(format!(
            "kafka.results_partitions is {}: give 1 to {MAX_RESULTS_PARTITIONS}",
            kafka.results_partitions
        )));
    }
    let connection = Connection::new(&kafka.brokers, &kafka.properties)?;
    let probe = connection.probe("start-up")?;
    connection.check_reachable(probe.client())?;
    connection.ensure_topic(&kafka.query_topic, 1, &[("cleanup.policy", "compact")])?;
    let max = (MAX_MESSAGE_BYTES + 1024).to_string();
    connection.ensure_topic(
        &kafka.results_topic,
        kafka.results_partitions,
        &[("max.message.bytes", &max), ("retention.ms", "3600000")],
    )?;
    let partitions = connection.partitions(probe.client(), &kafka.results_topic, "")?;
    // partitions are numbered from 0; every node hashes query ids over the count it finds
    let found = i32::try_from(partitions.len()).unwrap_or(i32::MAX);
    if found != kafka.results_partitions {
        eprintln!(
            "needle: kafka: topic {} has {found} partition(s), kafka.results_partitions says {}: \
             using {found}",
            kafka.results_topic, kafka.results_partitions
        );
    }
    Ok((connection, found))
}

/// The most partitions `kafka.results_partitions` may ask for.
const MAX_RESULTS_PARTITIONS: i32 = 10_000;

/// The most characters a node name may have.
const MAX_NODE_NAME: usize = 64;

/// The configured node name, or one made up from `role`, the process id and the clock.
///
/// A name is 1 to [`MAX_NODE_NAME`] ASCII letters, digits, `-`, `_` or `.`: it goes as it is
/// into query ids (`<node>-<start>-<n>`, in URLs; the start and the number are hexadecimal and
/// decimal digits, so the last two `-` of an id end its node's name, whatever it holds), into
/// the results topic's message keys and heartbeats (length-prefixed), and the log; no file
/// name, metric label, consumer group or client id is made from it.
fn node_name(configured: &str, role: &str) -> Result<String, KafkaError> {
    if configured.is_empty() {
        let clock = crate::queries::now_ms() as u64 & 0xff_ffff;
        return Ok(format!("{role}{:x}{clock:06x}", std::process::id()));
    }
    if configured.len() > MAX_NODE_NAME || !configured.chars().all(is_node_name_char) {
        return Err(KafkaError::Config(format!(
            "kafka.node_id '{configured}' is not a node name: give 1 to {MAX_NODE_NAME} ASCII \
             letters, digits, '-', '_' or '.' (for example api-1 or eu_west.api-2)"
        )));
    }
    Ok(configured.to_owned())
}

/// Whether `c` may be part of a node name (see [`node_name`]).
fn is_node_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_are_made_up_or_checked() {
        assert!(node_name("", "api").unwrap().starts_with("api"));
        assert!(node_name("", "worker").unwrap().starts_with("worker"));
        assert_eq!(node_name("eu_1", "api").unwrap(), "eu_1");
        assert_eq!(node_name("api-a", "api").unwrap(), "api-a");
        assert_eq!(node_name("eu-west.api-2", "api").unwrap(), "eu-west.api-2");
        for bad in ["a b", "a/b", "é", "a:1", &"x".repeat(65)] {
            let e = node_name(bad, "api").unwrap_err().to_string();
            assert!(e.contains("'-', '_' or '.'") && e.contains("kafka.node_id"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_three_topics_must_differ_and_be_valid_names() {
        let mut k = KafkaConfig::default();
        k.results_topic = k.query_topic.clone();
        assert!(connect(&k).err().unwrap().to_string().contains("three topics"));
        let k = KafkaConfig { query_topic: "bad name".into(), ..KafkaConfig::default() };
        assert!(connect(&k).err().unwrap().to_string().contains("kafka.query_topic"));
        let k = KafkaConfig { results_partitions: 0, ..KafkaConfig::default() };
        assert!(connect(&k).err().unwrap().to_string().contains("kafka.results_partitions"));
    }
}
