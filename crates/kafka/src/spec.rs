//! The `kafka:` source spec and `needle gen --to` target:
//! `kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?group=GROUP&start=latest|earliest]`, or a bare
//! `kafka` for everything from the `[kafka]` section (brokers, data topic, group, start). What the
//! spec gives overrides the section; the section's `properties` always apply.

use crate::KafkaError;
use needle_runtime::config::{KafkaConfig, StartFrom};
use needle_runtime::source::split_query;

/// Where a Kafka source reads, resolved against the `[kafka]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub brokers: String,
    pub topic: String,
    pub group: String,
    pub start: StartFrom,
}

impl Endpoint {
    /// Parses the part of a spec after `kafka:` (`//HOST:PORT/TOPIC?...`, or nothing).
    pub fn parse(rest: &str, defaults: &KafkaConfig) -> Result<Self, KafkaError> {
        let bad = |reason: String| {
            KafkaError::Config(format!(
                "{reason} (the form is kafka://HOST:PORT/TOPIC?group=GROUP&start=latest|earliest)"
            ))
        };
        let mut endpoint = Self {
            brokers: defaults.brokers.clone(),
            topic: defaults.data_topic.clone(),
            group: defaults.group.clone(),
            start: defaults.start,
        };
        let (target, options) = split_query(rest);
        if !target.is_empty() {
            let Some(address) = target.strip_prefix("//") else {
                return Err(bad("it should start with kafka://".into()));
            };
            let (brokers, topic) = address
                .split_once('/')
                .ok_or_else(|| bad("name the topic after the brokers: /TOPIC".into()))?;
            if brokers.is_empty() || brokers.split(',').any(|b| !is_host_port(b)) {
                return Err(bad(format!("'{brokers}' is not a list of HOST:PORT")));
            }
            endpoint.brokers = brokers.to_owned();
            endpoint.topic = topic.to_owned();
        }
        check_topic(&endpoint.topic).map_err(bad)?;
        for (key, value) in options {
            match key {
                "group" if !value.is_empty() => endpoint.group = value.to_owned(),
                "start" => endpoint.start = value.parse().map_err(bad)?,
                other => {
                    return Err(bad(format!("unknown option '{other}' (known: group, start)")))
                }
            }
        }
        Ok(endpoint)
    }
}

/// A topic to write to: `kafka://HOST:PORT/TOPIC`, nothing else.
pub fn parse_target(spec: &str) -> Result<(String, String), KafkaError> {
    let rest = spec.strip_prefix("kafka:").ok_or_else(|| {
        KafkaError::Config(format!("'{spec}' is not a Kafka target: kafka://HOST:PORT/TOPIC"))
    })?;
    if rest.contains('?') || !rest.starts_with("//") {
        return Err(KafkaError::Config(format!(
            "'{spec}' is not a Kafka target: kafka://HOST:PORT/TOPIC (no options)"
        )));
    }
    let endpoint = Endpoint::parse(rest, &KafkaConfig::default())?;
    Ok((endpoint.brokers, endpoint.topic))
}

fn is_host_port(text: &str) -> bool {
    match text.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0),
        None => false,
    }
}

/// Kafka's rule for topic names: 1 to 249 of `[a-zA-Z0-9._-]`.
pub fn check_topic(topic: &str) -> Result<(), String> {
    let legal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if topic.is_empty() || topic.len() > 249 || !topic.chars().all(legal) {
        return Err(format!(
            "'{topic}' is not a Kafka topic name (1 to 249 letters, digits, '.', '_', '-')"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_spec_overrides_the_section() {
        let e = Endpoint::parse(
            "//10.0.0.1:9092,10.0.0.2:9092/clicks?group=g1&start=earliest",
            &KafkaConfig::default(),
        )
        .unwrap();
        assert_eq!(e.brokers, "10.0.0.1:9092,10.0.0.2:9092");
        assert_eq!(e.topic, "clicks");
        assert_eq!(e.group, "g1");
        assert_eq!(e.start, StartFrom::Earliest);
    }

    #[test]
    fn a_bare_spec_takes_everything_from_the_section() {
        let section = KafkaConfig { data_topic: "events".into(), ..KafkaConfig::default() };
        let e = Endpoint::parse("", &section).unwrap();
        assert_eq!((e.brokers.as_str(), e.topic.as_str()), ("127.0.0.1:9092", "events"));
        assert_eq!(e.start, StartFrom::Latest);
        let e = Endpoint::parse("?start=earliest", &section).unwrap();
        assert_eq!(e.start, StartFrom::Earliest);
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let d = KafkaConfig::default();
        for (spec, needle) in [
            ("localhost:9092/t", "kafka://"),
            ("//localhost:9092", "/TOPIC"),
            ("//localhost/t", "HOST:PORT"),
            ("//h:99999/t", "HOST:PORT"),
            ("//h:1/bad topic", "topic name"),
            ("//h:1/t?strat=earliest", "unknown option 'strat'"),
            ("//h:1/t?start=middle", "latest or earliest"),
        ] {
            let e = Endpoint::parse(spec, &d).unwrap_err().to_string();
            assert!(e.contains(needle), "{spec}: {e}");
        }
        assert!(parse_target("kafka://h:1/t?group=x").is_err());
        assert!(parse_target("file:/x").is_err());
        assert_eq!(parse_target("kafka://h:1/t").unwrap(), ("h:1".into(), "t".into()));
    }
}
