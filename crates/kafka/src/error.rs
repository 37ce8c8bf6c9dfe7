//! The Kafka crate's one error type: what went wrong, in words that name the setting, broker or
//! topic to look at.

use needle_runtime::RuntimeError;

#[derive(Debug, thiserror::Error)]
pub enum KafkaError {
    /// A `kafka://` spec or a `[kafka]` setting that cannot be used.
    #[error("{0}")]
    Config(String),
    /// The brokers could not be reached (or refused us) in time.
    #[error("cannot reach Kafka at {brokers}: {reason}")]
    Unreachable { brokers: String, reason: String },
    /// A topic needle must read does not exist.
    #[error("the topic '{topic}' does not exist on {brokers}: {hint}")]
    NoTopic { topic: String, brokers: String, hint: String },
    /// Any other client failure, with what needle was doing.
    #[error("{context}: {source}")]
    Client {
        context: String,
        #[source]
        source: rdkafka::error::KafkaError,
    },
    /// Starting part of the runtime failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

impl KafkaError {
    pub fn client(context: impl Into<String>, source: rdkafka::error::KafkaError) -> Self {
        Self::Client { context: context.into(), source }
    }
}
