//! An api node's runtime adopting a query from one that died (`Runtime::adopt_remote`): the
//! partials sent before the adoption are merged at the times they were sent, so the windows the
//! dead node had already closed come out as they did there, numbered as there; then the query
//! runs on this node's clock, ends by its first start's duration, and its end is announced.
//! No Kafka here: the announcer is a stand-in that records what it is told.

use needle_engine::exec::Emission;
use needle_engine::{CompiledQuery, EvalContext};
use needle_query::QueryConfig;
use needle_runtime::metrics::Metrics;
use needle_runtime::remote::{Announcement, QueryAnnouncer};
use needle_runtime::{Adoption, NeedleConfig, ResultQueue, Role, Runtime};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Records the ends it is told of.
#[derive(Default)]
struct Announcer {
    ended: Mutex<Vec<String>>,
}

impl QueryAnnouncer for Announcer {
    fn started(&self, _: &Announcement<'_>) -> Result<(), String> {
        Ok(())
    }

    fn ended(&self, id: &str) {
        self.ended.lock().unwrap().push(id.to_owned());
    }

    fn history_workers(&self) -> Result<Vec<String>, String> {
        Err("none".into())
    }

    fn worker_alive(&self, _: &str) -> bool {
        false
    }
}

const QUERY: &str = "SELECT COUNT(*) AS n FROM STREAM(3000, TIME) WINDOWING TUMBLING(1000, TIME)";

fn compile() -> CompiledQuery {
    let plan = needle_query::compile(QUERY, &QueryConfig::default()).unwrap();
    CompiledQuery::compile(&plan).unwrap()
}

/// A worker's encoded partial of [`QUERY`] over `records` records.
fn partial(records: usize) -> Vec<u8> {
    let query = compile();
    let mut worker = query.new_worker();
    for i in 0..records {
        let record = needle_record::decode_record(format!(r#"{{"i":{i}}}"#).as_bytes()).unwrap();
        query.process(&mut worker, &record, &EvalContext::new(0));
    }
    let partial = query.flush(&mut worker).expect("a partial");
    query.encode_partial(&partial)
}

/// The next emission and its number, waiting up to `timeout`; `None` when the stream ended.
fn next(results: &ResultQueue, timeout: Duration) -> Option<(u64, Emission)> {
    let deadline = Instant::now() + timeout;
    loop {
        match results.try_next_numbered() {
            Some(next) => return next,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            None => panic!("no emission within {timeout:?}"),
        }
    }
}

fn count(emission: &Emission) -> i64 {
    emission.records[0].get("n").and_then(|v| v.as_i64()).unwrap_or(-1)
}

#[test]
fn an_adopted_query_closes_its_past_windows_as_its_first_node_did_then_runs_live() {
    let mut config = NeedleConfig::default();
    config.runtime.tick_ms = 20;
    let announcer = Arc::new(Announcer::default());
    let role = Role::Api { announcer: announcer.clone(), node: "api_b".into() };
    let runtime = Runtime::start_role(config, role, Arc::new(Metrics::new())).unwrap();
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            as i64;
    // admitted 2.5 s ago by an api node that died since: two windows closed, one open
    let received_ms = now - 2_500;
    let id = "api_a-1a2b-7";
    let adoption = Adoption { id, query: compile(), client: "10.0.0.9", received_ms };
    runtime.adopt_remote(adoption).unwrap();
    runtime.remote_partial(id, partial(2), Some(received_ms + 400));
    runtime.remote_partial(id, partial(3), Some(received_ms + 1_200));
    runtime.remote_partial(id, partial(4), Some(received_ms + 1_900));
    // a partial sent after the adoption is merged live
    runtime.caught_up(id);
    runtime.remote_partial(id, partial(5), None);
    let results = runtime.claim_adopted(id).expect("its results wait for a client");
    assert!(runtime.claim_adopted(id).is_none(), "for one client");
    let status = runtime.query(id).unwrap();
    assert_eq!((status.received_ms, status.ends_ms), (received_ms, received_ms + 3_000));
    assert_eq!(&*status.owner, "10.0.0.9", "the same client may follow and kill it");

    let (n, first) = next(&results, Duration::from_secs(5)).unwrap();
    assert_eq!((n, count(&first)), (1, 2), "{first:?}");
    let (n, second) = next(&results, Duration::from_secs(5)).unwrap();
    assert_eq!((n, count(&second)), (2, 7), "{second:?}");
    let (n, last) = next(&results, Duration::from_secs(5)).unwrap();
    assert_eq!((n, count(&last)), (3, 5), "{last:?}");
    assert!(last.is_final, "it ends 3 s after its first start: {last:?}");
    assert!(next(&results, Duration::from_secs(5)).is_none());
    let deadline = Instant::now() + Duration::from_secs(5);
    while announcer.ended.lock().unwrap().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(*announcer.ended.lock().unwrap(), [id], "its end is announced");
    runtime.shutdown();
}
