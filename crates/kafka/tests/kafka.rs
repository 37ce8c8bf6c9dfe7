//! needle on a real Kafka broker, in one test process: the Kafka source under a whole runtime,
//! and api and worker nodes wired as `needle serve --role ...` wires them. One broker is shared
//! by the tests of this file (each uses topics of its own) and stopped when the process exits.
//! The tests of separate processes (a killed worker, a broker restart) are the CLI's
//! (`crates/cli/tests/cli_kafka.rs`).

use needle_engine::exec::Emission;
use needle_kafka::testing::{Broker, Partitions};
use needle_kafka::Node;
use needle_runtime::metrics::Metrics;
use needle_runtime::source::{SourceOptions, SourceRegistry};
use needle_runtime::{NeedleConfig, ResultQueue, Role, Runtime};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A configuration whose `[kafka]` section points at the shared broker, with topics and a group
/// named after `name`, and quick failure detection.
fn config(name: &str) -> NeedleConfig {
    let mut c = NeedleConfig::default();
    c.runtime.workers = 2;
    c.runtime.tick_ms = 20;
    c.kafka.brokers = Broker::shared().bootstrap.clone();
    c.kafka.data_topic = format!("{name}-data");
    c.kafka.query_topic = format!("{name}-queries");
    c.kafka.results_topic = format!("{name}-results");
    c.kafka.group = format!("{name}-workers");
    c.kafka.properties = BTreeMap::from([
        ("session.timeout.ms".to_owned(), "6000".to_owned()),
        ("heartbeat.interval.ms".to_owned(), "500".to_owned()),
    ]);
    c
}

fn source(
    config: &NeedleConfig,
    spec: &str,
    metrics: &Arc<Metrics>,
) -> Box<dyn needle_runtime::source::Source> {
    let mut registry = SourceRegistry::default();
    needle_kafka::register(&mut registry, &config.kafka, metrics.clone());
    registry.open(spec, &SourceOptions::default()).expect("the kafka source opens")
}

fn worker(config: &NeedleConfig) -> Node {
    let metrics = Arc::new(Metrics::new());
    let source = source(config, "kafka", &metrics);
    Node::start_worker(config.clone(), metrics, source).expect("a worker node starts")
}

fn api(config: &NeedleConfig) -> Node {
    Node::start_api(config.clone(), Arc::new(Metrics::new())).expect("an api node starts")
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn partitions(runtime: &Runtime) -> i64 {
    runtime.metrics().source_partitions.get()
}

/// The query's final emission (waiting up to `timeout`).
fn last(results: &ResultQueue, timeout: Duration) -> Emission {
    let deadline = Instant::now() + timeout;
    loop {
        match results.try_next() {
            Some(Some(e)) if e.is_final => return e,
            Some(Some(_)) => {}
            Some(None) => panic!("the query ended without a final emission"),
            None => {
                assert!(Instant::now() < deadline, "no final emission in time");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

fn record(kind: &str, id: &str) -> Vec<u8> {
    format!(r#"{{"kind":"{kind}","id":"{id}","v":1}}"#).into_bytes()
}

/// `n` records of kind `noise`.
fn noise(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| record("noise", &format!("x{i}"))).collect()
}

/// GROUP BY id results as id → count.
fn counts(e: &Emission) -> BTreeMap<String, i64> {
    let json = e.to_json();
    json["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap().to_owned(), r["n"].as_i64().unwrap()))
        .collect()
}

fn produce(topic: &str, values: &[Vec<u8>]) {
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    Broker::shared().produce(topic, Partitions::Spread(4), &refs).expect("produced");
}

const NEEDLES: &str =
    "SELECT id, COUNT(*) AS n FROM STREAM(60000, TIME) WHERE kind = 'needle' GROUP BY id";

#[test]
fn one_runtime_reads_every_partition_from_the_earliest_counts_garbage_and_loses_nothing_when_full()
{
    let mut c = config("single");
    let broker = Broker::shared();
    broker.create_topic(&c.kafka.data_topic, 4).unwrap();
    // Before the source starts: 1,000 records with 10 needles, and garbage.
    let mut before = noise(990);
    before.extend((0..10).map(|i| record("needle", &format!("early{i}"))));
    before.extend([b"not json".to_vec(), b"{\"broken\":".to_vec(), vec![0xff, 0xfe, 0x00]]);
    produce(&c.kafka.data_topic, &before);

    // A queue of one batch and one worker: the consumer must pause rather than drop.
    c.runtime.queue_batches = 1;
    c.runtime.workers = 1;
    let metrics = Arc::new(Metrics::new());
    let spec = format!(
        "kafka://{}/{}?start=earliest&group=single-a",
        broker.bootstrap, c.kafka.data_topic
    );
    let source = source(&c, &spec, &metrics);
    assert!(source.describe().contains("group single-a"), "{}", source.describe());
    let runtime = Runtime::start_role(c, Role::All, metrics).unwrap();
    let needles = runtime.submit(NEEDLES, "t").unwrap();
    let all = runtime.submit("SELECT COUNT(*) AS n FROM STREAM(60000, TIME)", "t").unwrap();
    runtime.run_source(source).unwrap();
    wait_until("4 partitions", Duration::from_secs(30), || partitions(&runtime) == 4);

    // While it runs: 20,000 more in one go (the queue of one batch fills), 10 needles among them.
    let mut during = noise(19_990);
    for i in 0..10 {
        during.insert(i * 1_999, record("needle", &format!("late{i}")));
    }
    produce(&runtime.config().kafka.data_topic, &during);
    wait_until("every record read", Duration::from_secs(60), || {
        runtime.metrics().records_read.get() >= 21_003
    });
    std::thread::sleep(Duration::from_millis(200));
    runtime.kill(&needles.id);
    runtime.kill(&all.id);
    let found = counts(&last(&needles.results, Duration::from_secs(10)));
    assert_eq!(found.len(), 20, "{found:?}");
    assert!(found.values().all(|&n| n == 1), "each needle exactly once: {found:?}");
    let total = last(&all.results, Duration::from_secs(10)).to_json();
    assert_eq!(total["records"][0]["n"], 21_000, "{total}");
    assert_eq!(runtime.metrics().records_read.get(), 21_003);
    assert_eq!(runtime.metrics().records_malformed.get(), 3, "garbage is counted and skipped");
    runtime.shutdown();
}

#[test]
fn workers_find_each_needle_once_over_a_late_join_and_a_clean_leave() {
    let c = config("nodes");
    Broker::shared().create_topic(&c.kafka.data_topic, 4).unwrap();
    let api = api(&c);
    let first = worker(&c);
    wait_until("the first worker's partitions", Duration::from_secs(30), || {
        partitions(first.runtime()) == 4
    });
    let query = api.runtime().submit(NEEDLES, "t").unwrap();
    assert!(query.id.starts_with("api"), "query ids carry the api node: {}", query.id);
    wait_until("the first worker adopting the query", Duration::from_secs(10), || {
        first.runtime().query(&query.id).is_some()
    });

    // Needles keep arriving, each with its own id, through two rebalances.
    let topic = c.kafka.data_topic.clone();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let producing = stop.clone();
    let producer = std::thread::spawn(move || {
        let mut sent: u64 = 0;
        while !producing.load(std::sync::atomic::Ordering::Relaxed) {
            // (the index in the batch is the partition, round-robin: needles visit all four)
            let mut batch = noise(50);
            batch.insert(sent as usize % 4, record("needle", &format!("n{sent}")));
            produce(&topic, &batch);
            sent += 1;
            std::thread::sleep(Duration::from_millis(30));
        }
        sent
    });
    std::thread::sleep(Duration::from_millis(500));

    // A worker joins late: it runs the query already running, and takes half the partitions.
    let second = worker(&c);
    assert!(
        second.runtime().query(&query.id).is_some(),
        "a worker that starts late runs the queries already running"
    );
    wait_until("two partitions each", Duration::from_secs(30), || {
        partitions(first.runtime()) == 2 && partitions(second.runtime()) == 2
    });
    wait_until("the late worker finding its share", Duration::from_secs(30), || {
        second.runtime().query(&query.id).is_some_and(|s| s.records_matched > 0)
    });

    // The first leaves cleanly: the second takes every partition.
    first.shutdown();
    wait_until("the second worker taking every partition", Duration::from_secs(30), || {
        partitions(second.runtime()) == 4
    });
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = producer.join().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while api.runtime().query(&query.id).is_none_or(|s| s.records_matched < sent) {
        if Instant::now() > deadline {
            api.runtime().kill(&query.id);
            let found = counts(&last(&query.results, Duration::from_secs(10)));
            let missing: Vec<u64> =
                (0..sent).filter(|i| !found.contains_key(&format!("n{i}"))).collect();
            panic!("{sent} needles sent, missing {missing:?}: {found:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(api.runtime().kill(&query.id));
    let found = counts(&last(&query.results, Duration::from_secs(10)));
    assert_eq!(found.len() as u64, sent, "{found:?}");
    assert!(found.values().all(|&n| n == 1), "each needle exactly once over rebalances: {found:?}");

    // The end is announced: the worker forgets the query.
    wait_until("the worker releasing the query", Duration::from_secs(10), || {
        second.runtime().query(&query.id).is_none()
    });
    // Workers take no queries of their own.
    let refused = second.runtime().submit(NEEDLES, "t").unwrap_err().to_string();
    assert!(refused.contains("worker node"), "{refused}");
    api.shutdown();
    second.shutdown();
}

#[test]
fn two_api_nodes_share_the_topics_and_each_merges_its_own_queries() {
    let mut c = config("two-apis");
    Broker::shared().create_topic(&c.kafka.data_topic, 4).unwrap();
    c.kafka.node_id = "east".into();
    let east = api(&c);
    c.kafka.node_id = "west".into();
    let west = api(&c);
    // Garbage on the topics between the nodes is skipped (and logged), not fatal.
    let broker = Broker::shared();
    let notices: [(Option<&str>, &[u8]); 2] =
        [(Some("q1"), b"not a notice"), (Some("q2"), br#"{"v": 9, "id": "q2"}"#)];
    broker.produce_keyed(&c.kafka.query_topic, Partitions::One(0), &notices).unwrap();
    broker
        .produce(&c.kafka.results_topic, Partitions::One(0), &[b"NDLM\x01\x01\xff", b"junk"])
        .unwrap();
    let worker = worker(&c);
    wait_until("partitions", Duration::from_secs(30), || partitions(worker.runtime()) == 4);
    let count = "SELECT COUNT(*) AS n FROM STREAM(60000, TIME) WHERE kind = 'noise'";
    let a = east.runtime().submit(count, "t").unwrap();
    let b = west.runtime().submit(count, "t").unwrap();
    assert!(a.id.starts_with("east-") && b.id.starts_with("west-"));
    wait_until("the worker adopting both", Duration::from_secs(10), || {
        worker.runtime().queries().len() == 2
    });
    produce(&c.kafka.data_topic, &noise(1_000));
    broker.produce(&c.kafka.results_topic, Partitions::One(0), &[b"more junk"]).unwrap();
    wait_until("both merged", Duration::from_secs(30), || {
        [(&east, &a.id), (&west, &b.id)]
            .iter()
            .all(|(node, id)| node.runtime().query(id).is_some_and(|s| s.records_matched >= 1_000))
    });
    assert!(east.runtime().query(&b.id).is_none(), "east knows nothing of west's query");
    east.runtime().kill(&a.id);
    west.runtime().kill(&b.id);
    for q in [&a, &b] {
        let e = last(&q.results, Duration::from_secs(10)).to_json();
        assert_eq!(e["records"][0]["n"], 1_000, "{e}");
        assert!(e["meta"]["Stats"]["Records Seen"].as_u64().unwrap() >= 1_000, "{e}");
    }
    east.shutdown();
    west.shutdown();
    worker.shutdown();
}

#[test]
fn a_missing_topic_a_bad_property_and_an_unreachable_broker_are_clear_errors() {
    let c = config("errors");
    let metrics = Arc::new(Metrics::new());
    let mut registry = SourceRegistry::default();
    needle_kafka::register(&mut registry, &c.kafka, metrics.clone());
    let open = |spec: &str| {
        registry.open(spec, &SourceOptions::default()).err().expect("refused").to_string()
    };
    let e = open("kafka");
    assert!(e.contains("'errors-data' does not exist") && e.contains("needle gen"), "{e}");
    let e = open("kafka://127.0.0.1:1/t");
    assert!(e.contains("cannot reach Kafka at 127.0.0.1:1"), "{e}");
    let e = open("kafka:/oops");
    assert!(e.contains("kafka://"), "{e}");

    let mut bad = c.clone();
    bad.kafka.properties.insert("fetch.max.bytez".into(), "1".into());
    let e = Node::start_api(bad, metrics.clone()).err().expect("refused").to_string();
    assert!(e.contains("fetch.max.bytez"), "{e}");
    let mut bad = c;
    bad.kafka.properties.insert("enable.auto.offset.store".into(), "true".into());
    let e = Node::start_api(bad, metrics).err().expect("refused").to_string();
    assert!(e.contains("needle stores"), "{e}");
}
