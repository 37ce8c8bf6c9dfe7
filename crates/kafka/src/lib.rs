//! needle on Kafka: the Kafka source (`kafka://HOST:PORT/TOPIC`), and the distributed mode, in
//! which Kafka is the engine between processes: worker nodes share the data topic as one consumer
//! group (Kafka assigns and rebalances the partitions), api nodes publish queries on a query
//! topic every worker reads, and workers send partials on a results topic to the api node that
//! owns each query, which merges them exactly as the in-process joiner does. Membership and
//! partition assignment are Kafka's; an api node that dies has its queries adopted by another
//! from what the topics keep ([`failover`]).
//!
//! Layering: this crate depends on the runtime (whose [`needle_runtime::remote`] traits it
//! implements) and is used by the `needle` binary; the runtime knows nothing of Kafka.
//!
//! | module | what it owns |
//! |---|---|
//! | [`background`] | the threads that poll the query and results topics |
//! | [`client`] | librdkafka clients from `[kafka]`: brokers, pass-through properties, start-up checks, topic creation, quiet logs |
//! | [`spec`] | the `kafka://` spec |
//! | [`source`] | the Kafka source: consumer group, batches, pause on backpressure, rebalances |
//! | [`offsets`] | which offsets may be committed (records whose results went out) |
//! | [`wire`] | the query topic's notices and the results topic's messages |
//! | [`queries`] | the query topic: api nodes publish, worker nodes follow |
//! | [`results`] | the results topic: worker nodes send partials, api nodes read theirs |
//! | [`peers`] | what a node knows of the others: who owns each query, which workers and api nodes are up, which queries an api node merges |
//! | [`failover`] | api nodes' heartbeats, and the adoption of a dead api node's queries |
//! | [`node`] | a worker or api node, wired |
//! | [`produce`] | producing, and `needle gen --to kafka://` |
//! | [`testing`] | a real broker for tests and benchmarks (`scripts/kafka/broker.sh`), a bare consumer |

pub mod background;
pub mod client;
pub mod error;
pub mod failover;
pub mod node;
pub mod offsets;
pub mod peers;
pub mod produce;
pub mod queries;
pub mod results;
pub mod source;
pub mod spec;
pub mod testing;
pub mod wire;

pub use error::KafkaError;
pub use node::Node;
pub use source::KafkaSource;
pub use spec::Endpoint;

use needle_runtime::config::KafkaConfig;
use needle_runtime::metrics::Metrics;
use needle_runtime::source::SourceRegistry;
use needle_runtime::RuntimeError;
use std::sync::Arc;

/// Registers the `kafka` source scheme: `kafka://HOST:PORT/TOPIC?group=G&start=earliest`, or a
/// bare `kafka` for the `[kafka]` section's data topic. The section's properties apply to every
/// source made; `metrics` receives the partitions-assigned gauge.
pub fn register(registry: &mut SourceRegistry, kafka: &KafkaConfig, metrics: Arc<Metrics>) {
    let kafka = kafka.clone();
    registry.register("kafka", move |rest, options| {
        let spec = format!("kafka:{rest}");
        let endpoint = Endpoint::parse(rest, &kafka)
            .map_err(|e| RuntimeError::bad_source(&spec, e.to_string()))?;
        let source = KafkaSource::open(endpoint, &kafka.properties, options, metrics.clone())
            .map_err(|e| RuntimeError::bad_source(&spec, e.to_string()))?;
        Ok(Box::new(source))
    });
}
