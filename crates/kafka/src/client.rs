//! Building librdkafka clients from needle's configuration, and what every client needs: the
//! brokers and the pass-through properties (`[kafka.properties]`: security settings, tuning),
//! logging that a broker outage cannot turn into a flood, the start-up checks that make a wrong
//! address or a missing topic a clear error instead of a silent wait, and creating the topics
//! needle owns.
//!
//! A few librdkafka properties are needle's to set, because its guarantees depend on them
//! ([`MANAGED`]); setting them in `[kafka.properties]` is refused with the reason.

use crate::KafkaError;
use needle_runtime::secrets;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{Client, ClientContext};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError as RdKafkaError;
use rdkafka::types::{RDKafkaErrorCode, RDKafkaRespErr};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long start-up waits for the brokers before saying they cannot be reached.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Properties needle sets itself, and why they cannot be passed through.
pub const MANAGED: &[(&str, &str)] = &[
    ("bootstrap.servers", "set kafka.brokers (or HOST:PORT in the kafka:// spec)"),
    ("group.id", "set kafka.group (or ?group= in the kafka:// spec)"),
    ("auto.offset.reset", "set kafka.start (or ?start= in the kafka:// spec)"),
    (
        "enable.auto.offset.store",
        "needle stores a record's offset itself, once the results it made have gone out",
    ),
    (
        "partition.assignment.strategy",
        "needle's rebalance handling relies on the eager assignors (range, roundrobin)",
    ),
    ("group.protocol", "needle's rebalance handling relies on the classic group protocol"),
];

/// Where to connect and with which extra properties: the `[kafka]` section's `brokers` and
/// `properties`, or a `kafka://` spec's brokers with the same properties.
#[derive(Clone)]
pub struct Connection {
    pub brokers: String,
    pub properties: BTreeMap<String, String>,
}

/// Shown with its secret properties redacted.
impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("brokers", &self.brokers)
            .field("properties", &secrets::RedactedProperties(&self.properties))
            .finish()
    }
}

impl Connection {
    /// Checks the brokers are named and no managed property is set.
    pub fn new(brokers: &str, properties: &BTreeMap<String, String>) -> Result<Self, KafkaError> {
        if brokers.trim().is_empty() {
            return Err(KafkaError::Config(
                "no Kafka brokers given: set kafka.brokers, or use kafka://HOST:PORT/TOPIC".into(),
            ));
        }
        for key in properties.keys() {
            if let Some((_, why)) = MANAGED.iter().find(|(k, _)| k == key) {
                return Err(KafkaError::Config(format!(
                    "kafka.properties.\"{key}\" cannot be set: {why}"
                )));
            }
        }
        Ok(Self { brokers: brokers.trim().to_owned(), properties: properties.clone() })
    }

    /// A librdkafka configuration with the brokers and the pass-through properties; the caller
    /// adds what its client needs.
    pub fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.brokers);
        for (key, value) in &self.properties {
            config.set(key, value);
        }
        config.set_log_level(RDKafkaLogLevel::Error);
        config
    }

    /// Creates a client, turning librdkafka's refusal of a property into a configuration error
    /// (which shows a secret property's value as redacted).
    pub fn create<T, C>(&self, config: &ClientConfig, context: C) -> Result<T, KafkaError>
    where
        T: rdkafka::config::FromClientConfigAndContext<C>,
        C: ClientContext,
    {
        config.create_with_context(context).map_err(|e| match e {
            RdKafkaError::ClientConfig(_, message, key, value) => {
                let (value, message) = match secrets::is_secret_kafka_property(&key) {
                    true => (secrets::REDACTED, message.replace(&value, secrets::REDACTED)),
                    false => (value.as_str(), message),
                };
                KafkaError::Config(format!(
                    "Kafka refused the property {key} = \"{value}\" (from kafka.properties or \
                     needle's defaults): {}",
                    secrets::scrub(&message)
                ))
            }
            other => {
                KafkaError::client(format!("creating a Kafka client for {}", self.brokers), other)
            }
        })
    }

    /// A consumer for metadata, watermarks and reading assigned partitions: it never subscribes
    /// or commits (librdkafka wants a group id even so; this one is never joined).
    pub fn probe(&self, who: &str) -> Result<BaseConsumer<Quiet>, KafkaError> {
        let mut config = self.config();
        config.set("group.id", "needle-assigned-only");
        config.set("enable.auto.commit", "false");
        config.set("allow.auto.create.topics", "false");
        self.create(&config, Quiet::new(who))
    }

    /// Waits until the brokers answer (at most [`CONNECT_TIMEOUT`]).
    pub fn check_reachable<C: ClientContext>(&self, client: &Client<C>) -> Result<(), KafkaError> {
        client.fetch_metadata(None, CONNECT_TIMEOUT).map(|_| ()).map_err(|e| {
            KafkaError::Unreachable {
                brokers: self.brokers.clone(),
                reason: format!(
                    "{e} (waited up to {} s; is a broker listening there, and do the \
                     security settings in kafka.properties match it?)",
                    CONNECT_TIMEOUT.as_secs()
                ),
            }
        })
    }

    /// Waits (at most `timeout`) until `topic` exists, for example while another process
    /// creates it; its partitions.
    pub fn wait_for_topic(&self, topic: &str, timeout: Duration) -> Result<Vec<i32>, KafkaError> {
        let probe = self.probe("topic check")?;
        let deadline = std::time::Instant::now() + timeout;
        loop {
            match self.partitions(probe.client(), topic, "") {
                Ok(partitions) => return Ok(partitions),
                Err(e) if std::time::Instant::now() > deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    /// The partitions of `topic`, or [`KafkaError::NoTopic`] with `hint`.
    pub fn partitions<C: ClientContext>(
        &self,
        client: &Client<C>,
        topic: &str,
        hint: &str,
    ) -> Result<Vec<i32>, KafkaError> {
        let metadata = client.fetch_metadata(Some(topic), CONNECT_TIMEOUT).map_err(|e| {
            KafkaError::Unreachable { brokers: self.brokers.clone(), reason: e.to_string() }
        })?;
        let missing = || KafkaError::NoTopic {
            topic: topic.to_owned(),
            brokers: self.brokers.clone(),
            hint: hint.to_owned(),
        };
        let found = metadata.topics().iter().find(|t| t.name() == topic).ok_or_else(missing)?;
        match found.error() {
            None => {}
            Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) => return Err(missing()),
            Some(code) => {
                return Err(KafkaError::client(
                    format!("reading the metadata of topic '{topic}'"),
                    RdKafkaError::MetadataFetch(code.into()),
                ))
            }
        }
        let mut partitions: Vec<i32> = found.partitions().iter().map(|p| p.id()).collect();
        partitions.sort_unstable();
        if partitions.is_empty() {
            return Err(missing());
        }
        Ok(partitions)
    }

    /// Assigns every partition of `topic` to `consumer` (which reads without a group), from the
    /// beginning or from the end offsets as they are now. Returns the end offset of each partition
    /// that holds something, as it was at that moment: where "read to the end" stops.
    pub fn assign_whole<C: ConsumerContext>(
        &self,
        consumer: &BaseConsumer<C>,
        topic: &str,
        from: Start,
    ) -> Result<HashMap<i32, i64>, KafkaError> {
        let partitions =
            self.partitions(consumer.client(), topic, "it is created by the first needle node")?;
        let mut list = TopicPartitionList::new();
        let mut ends = HashMap::new();
        for p in partitions {
            let (low, high) = watermarks(consumer, topic, p)?;
            if high > low {
                ends.insert(p, high);
            }
            let offset = match from {
                Start::Beginning => Offset::Beginning,
                Start::End => Offset::Offset(high),
            };
            list.add_partition_offset(topic, p, offset)
                .map_err(|e| KafkaError::client(format!("assigning topic {topic}"), e))?;
        }
        consumer
            .assign(&list)
            .map_err(|e| KafkaError::client(format!("assigning topic {topic}"), e))?;
        Ok(ends)
    }

    /// Creates `topic` with `partitions` partitions and the given topic settings unless it
    /// exists; the replication factor is the brokers' default.
    pub fn ensure_topic(
        &self,
        topic: &str,
        partitions: i32,
        settings: &[(&str, &str)],
    ) -> Result<(), KafkaError> {
        let probe = self.probe("admin")?;
        match self.partitions(probe.client(), topic, "") {
            Ok(_) => return Ok(()),
            Err(KafkaError::NoTopic { .. }) => {}
            Err(other) => return Err(other),
        }
        let admin: AdminClient<Quiet> = self.create(&self.config(), Quiet::new("admin"))?;
        let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(-1));
        for (key, value) in settings {
            new = new.set(key, value);
        }
        let options = AdminOptions::new().operation_timeout(Some(CONNECT_TIMEOUT));
        // On a thread of its own, so that callers inside an async runtime may call this too.
        let created = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_time()
                        .build()
                        .map_err(|e| KafkaError::Config(format!("cannot start a timer: {e}")))?;
                    runtime
                        .block_on(admin.create_topics([&new], &options))
                        .map_err(|e| KafkaError::client(format!("creating topic '{topic}'"), e))
                })
                .join()
                .unwrap_or_else(|_| {
                    Err(KafkaError::Config(format!("creating topic '{topic}' failed")))
                })
        });
        let results = created?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((name, code)) => {
                    return Err(KafkaError::client(
                        format!(
                            "creating topic '{name}' (create it yourself: {partitions} \
                             partition(s), {settings:?})"
                        ),
                        RdKafkaError::AdminOp(code),
                    ))
                }
            }
        }
        // Wait for the metadata to show it, so the next client finds it.
        let deadline = Instant::now() + CONNECT_TIMEOUT;
        while self.partitions(probe.client(), topic, "").is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

/// Where [`Connection::assign_whole`] starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Beginning,
    End,
}

/// Logs at most one line per interval for one client, with how many it held back, so a broker
/// that is down (librdkafka reports every failed reconnect) cannot flood stderr.
pub struct Throttled {
    who: String,
    every: Duration,
    last: Mutex<Option<Instant>>,
    held: AtomicU64,
}

impl Throttled {
    pub fn new(who: impl Into<String>, every: Duration) -> Self {
        Self { who: who.into(), every, last: Mutex::new(None), held: AtomicU64::new(0) }
    }

    /// Prints `needle: kafka WHO: TEXT` unless a line was printed less than an interval ago.
    pub fn say(&self, text: impl std::fmt::Display) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|t| t.elapsed() < self.every) {
            self.held.fetch_add(1, Ordering::Relaxed);
            return;
        }
        *last = Some(Instant::now());
        let held = self.held.swap(0, Ordering::Relaxed);
        let more =
            if held > 0 { format!(" ({held} similar messages held back)") } else { String::new() };
        let line = format!("needle: kafka {}: {text}{more}", self.who);
        eprintln!("{}", secrets::scrub(&line));
    }

    /// A line of librdkafka's log: errors and worse are said (throttled); debug lines, which
    /// librdkafka only writes when asked to (`"debug" = "consumer,fetch"` in kafka.properties),
    /// are all printed; the rest is not.
    pub fn librdkafka_log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        if (level as i32) <= (RDKafkaLogLevel::Error as i32) {
            self.say(format_args!("{facility}: {message}"));
        } else if matches!(level, RDKafkaLogLevel::Debug) {
            let line = format!("needle: kafka {} (debug): {facility}: {message}", self.who);
            eprintln!("{}", secrets::scrub(&line));
        }
    }

    /// An error librdkafka reports (a broker down, a failed authentication).
    pub fn librdkafka_error(&self, error: &RdKafkaError, reason: &str) {
        self.say(format_args!("{error}: {reason}"));
    }
}

/// A client context that sends librdkafka's errors through a [`Throttled`] log.
pub struct Quiet(pub Throttled);

impl Quiet {
    pub fn new(who: &str) -> Self {
        Self(Throttled::new(who, Duration::from_secs(5)))
    }
}

impl ClientContext for Quiet {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        self.0.librdkafka_log(level, facility, message);
    }

    fn error(&self, error: RdKafkaError, reason: &str) {
        self.0.librdkafka_error(&error, reason);
    }
}

impl ConsumerContext for Quiet {}

/// The low and high offsets of a partition of `topic`, asked again (for up to
/// [`CONNECT_TIMEOUT`]) while the partition has no leader: a topic another node has just created
/// has none for a moment, and a node starting beside it must not fail for that.
pub fn watermarks<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    partition: i32,
) -> Result<(i64, i64), KafkaError> {
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    loop {
        match consumer.fetch_watermarks(topic, partition, CONNECT_TIMEOUT) {
            Ok(marks) => return Ok(marks),
            Err(e)
                if Instant::now() < deadline
                    && matches!(
                        e.rdkafka_error_code(),
                        Some(
                            RDKafkaErrorCode::NotLeaderForPartition
                                | RDKafkaErrorCode::LeaderNotAvailable
                                | RDKafkaErrorCode::UnknownTopicOrPartition
                        )
                    ) =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => {
                return Err(KafkaError::client(format!("reading the end of topic {topic}"), e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_properties_and_missing_brokers_are_refused_with_the_setting_to_use() {
        let mut props = BTreeMap::new();
        assert!(Connection::new(" ", &props).unwrap_err().to_string().contains("kafka.brokers"));
        props.insert("group.id".to_owned(), "x".to_owned());
        let e = Connection::new("h:1", &props).unwrap_err().to_string();
        assert!(e.contains("\"group.id\"") && e.contains("kafka.group"), "{e}");
    }

    #[test]
    fn an_unknown_property_is_named_when_the_client_is_made() {
        let mut props = BTreeMap::new();
        props.insert("securty.protocol".to_owned(), "SSL".to_owned());
        let c = Connection::new("127.0.0.1:9", &props).unwrap();
        let e = c.probe("test").err().expect("refused").to_string();
        assert!(e.contains("securty.protocol"), "{e}");
    }

    #[test]
    fn the_log_holds_back_repeats_within_its_interval() {
        let t = Throttled::new("test", Duration::from_secs(60));
        t.say("one");
        t.say("two");
        t.say("three");
        assert_eq!(t.held.load(Ordering::Relaxed), 2);
    }
}
