//! An api node's runtime adopting a query from one that died (`Runtime::adopt_remote`): the
//! partials sent before the adoption are merged at the times they were sent, so the windows the
//! dead node had already closed come out as they did there, numbered as there; then the query
//! runs on this node's clock, ends by its first start's duration, and its end is announced.
//! No Kafka here: the announcer is a stand-in that records what it is told.

use needle_engine::exec::Emission;
use needle_engine::{CompiledQuery, EvalContext};
use needle_query::QueryConfig;
use needle_runtime::history::{ReplayReport, WorkerHistory};
use needle_runtime::metrics::Metrics;
use needle_runtime::remote::Cut;
use needle_runtime::remote::{Announcement, QueryAnnouncer};
use needle_runtime::{AdoptedPast, Adoption, NeedleConfig, ResultQueue, Role, Runtime, Sent};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Records the ends and the cuts it is told of.
#[derive(Default)]
struct Announcer {
    ended: Mutex<Vec<String>>,
    cuts: Mutex<Vec<Cut>>,
    /// The worker nodes that keep history (none: a query that looks back is refused).
    history_workers: Vec<String>,
    /// Where its cuts are written, in order with the rest of the query's results partition.
    partition: Option<Arc<Partition>>,
}

/// A query's results partition, as an api node adopting it reads it back (an offset is an
/// index).
#[derive(Default)]
struct Partition(Mutex<Vec<OnTopic>>);

#[derive(Clone, Debug)]
enum OnTopic {
    Planned(Option<(i64, i64)>),
    Piece {
        at_ms: i64,
        partial: Vec<u8>,
    },
    Done,
    /// A live partial and when it was sent.
    Partial {
        at_ms: i64,
        partial: Vec<u8>,
    },
    Cut(Cut),
}

impl OnTopic {
    /// A worker node's read of the past, as the worker named `w1` sent it.
    fn history(&self) -> Option<WorkerHistory<Vec<u8>>> {
        match self.clone() {
            OnTopic::Planned(data) => Some(WorkerHistory::Planned { data }),
            OnTopic::Piece { at_ms, partial } => Some(WorkerHistory::Piece { at_ms, partial }),
            OnTopic::Done => Some(WorkerHistory::Done { report: ReplayReport::default() }),
            OnTopic::Partial { .. } | OnTopic::Cut(_) => None,
        }
    }
}

impl Partition {
    /// Writes `item` to the partition, then hands it to `runtime` as its results reader does
    /// for the query's api node.
    fn send(&self, runtime: &Runtime, id: &str, item: OnTopic) {
        let offset = {
            let mut items = self.0.lock().unwrap();
            items.push(item.clone());
            items.len() as i64 - 1
        };
        match (item.history(), item) {
            (Some(event), _) => runtime.remote_history(id, "w1", event),
            (None, OnTopic::Partial { partial, .. }) => {
                runtime.remote_partial(id, partial, Sent { offset: Some(offset), at_ms: None })
            }
            (None, _) => unreachable!("cuts are written by the api node"),
        }
    }

    /// Hands everything on the partition to an api node adopting query `id`, in order.
    fn read_back(items: &[OnTopic], runtime: &Runtime, id: &str) {
        for (offset, item) in items.iter().enumerate() {
            match (item.history(), item) {
                (Some(event), _) => runtime.remote_history(id, "w1", event),
                (None, OnTopic::Partial { at_ms, partial }) => {
                    runtime.remote_partial(id, partial.clone(), sent(offset as i64, *at_ms))
                }
                (None, OnTopic::Cut(cut)) => runtime.remote_cut(id, *cut),
                (None, _) => unreachable!(),
            }
        }
    }
}

impl QueryAnnouncer for Announcer {
    fn started(&self, _: &Announcement<'_>) -> Result<(), String> {
        Ok(())
    }

    fn ended(&self, id: &str) {
        self.ended.lock().unwrap().push(id.to_owned());
    }

    fn history_workers(&self) -> Result<Vec<String>, String> {
        match self.history_workers.is_empty() {
            true => Err("none".into()),
            false => Ok(self.history_workers.clone()),
        }
    }

    fn worker_alive(&self, worker: &str) -> bool {
        self.history_workers.iter().any(|w| w == worker)
    }

    fn cut(&self, _: &str, cut: Cut, deliver: Box<dyn FnOnce() + Send>) {
        self.cuts.lock().unwrap().push(cut);
        if let Some(partition) = &self.partition {
            partition.0.lock().unwrap().push(OnTopic::Cut(cut));
        }
        deliver();
    }
}

/// A partial read back at `offset`, sent at `at_ms`.
fn sent(offset: i64, at_ms: i64) -> Sent {
    Sent { offset: Some(offset), at_ms: Some(at_ms) }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

fn api_node(announcer: &Arc<Announcer>) -> Arc<Runtime> {
    let mut config = NeedleConfig::default();
    config.runtime.tick_ms = 20;
    let role = Role::Api { announcer: announcer.clone(), node: "api_b".into() };
    Runtime::start_role(config, role, Arc::new(Metrics::new())).unwrap()
}

const QUERY: &str = "SELECT COUNT(*) AS n FROM STREAM(3000, TIME) WINDOWING TUMBLING(1000, TIME)";

fn compile() -> CompiledQuery {
    compile_text(QUERY)
}

fn compile_text(text: &str) -> CompiledQuery {
    let plan = needle_query::compile(text, &QueryConfig::default()).unwrap();
    CompiledQuery::compile(&plan).unwrap()
}

/// A worker's encoded partial of [`QUERY`] over `records` records.
fn partial(records: usize) -> Vec<u8> {
    partial_of(QUERY, records)
}

/// A worker's encoded partial of query `text` over `records` records.
fn partial_of(text: &str, records: usize) -> Vec<u8> {
    let query = compile_text(text);
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
    let announcer = Arc::new(Announcer::default());
    let runtime = api_node(&announcer);
    // admitted 2.5 s ago by an api node that died since: two windows closed, one open
    let received_ms = now_ms() - 2_500;
    let id = "api_a-1a2b-7";
    let adoption = Adoption { id, query: compile(), client: "10.0.0.9", received_ms, past: None };
    runtime.adopt_remote(adoption).unwrap();
    // no cuts recorded (its first node died before recording any): by the times they were sent
    runtime.remote_partial(id, partial(2), sent(10, received_ms + 400));
    runtime.remote_partial(id, partial(3), sent(11, received_ms + 1_200));
    runtime.remote_partial(id, partial(4), sent(12, received_ms + 1_900));
    // a partial sent after the adoption is merged live
    runtime.caught_up(id);
    runtime.remote_partial(id, partial(5), Sent { offset: Some(13), at_ms: None });
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
    // its first node recorded no cut: this one records where it cut them, for the next one
    let cuts = announcer.cuts.lock().unwrap().clone();
    let cuts: Vec<(u64, i64)> = cuts.iter().map(|c| (c.emission, c.through)).collect();
    assert_eq!(cuts, [(1, 10), (2, 12), (3, 13)]);
    runtime.shutdown();
}

#[test]
fn an_adopted_query_cuts_its_past_emissions_where_its_first_node_did() {
    let announcer = Arc::new(Announcer::default());
    let runtime = api_node(&announcer);
    let received_ms = now_ms() - 2_500;
    let id = "api_a-1a2b-8";
    let adoption = Adoption { id, query: compile(), client: "c", received_ms, past: None };
    runtime.adopt_remote(adoption).unwrap();
    // The dead node merged the partial at offset 11, sent just before the first window's end,
    // after it had cut that window (it arrived late): it is in the second emission there.
    runtime.remote_partial(id, partial(2), sent(10, received_ms + 400));
    runtime.remote_partial(id, partial(3), sent(11, received_ms + 990));
    runtime.remote_cut(id, Cut { emission: 1, through: 10, at_ms: received_ms + 1_001 });
    runtime.remote_partial(id, partial(4), sent(12, received_ms + 1_500));
    runtime.remote_cut(id, Cut { emission: 2, through: 12, at_ms: received_ms + 2_003 });
    // sent before the second cut, but read after it: in the third emission there too
    runtime.remote_partial(id, partial(1), sent(14, received_ms + 1_999));
    runtime.caught_up(id);
    let results = runtime.claim_adopted(id).unwrap();
    let got: Vec<(u64, i64)> = (0..3)
        .map(|_| next(&results, Duration::from_secs(5)).unwrap())
        .map(|(n, e)| (n, count(&e)))
        .collect();
    assert_eq!(got, [(1, 2), (2, 7), (3, 1)], "cut where they were cut");
    runtime.shutdown();
}

/// A windowed query that reads the past then goes on live (`SINCE`), adopted: its past is
/// gathered again from the worker's read on its results partition, and it goes live where its
/// first api node did, not at the adopter's now — the live partials that came while the past
/// was read, and those after, land in the windows they landed in there. Every emission its
/// first node made comes out the same, numbered the same.
#[test]
fn an_adopted_since_query_goes_live_where_its_first_node_did() {
    const SINCE: &str = "SELECT COUNT(*) AS n FROM STREAM(20000, TIME) SINCE '-10s' \
                         WINDOWING TUMBLING(1000, TIME)";
    let part = |records| partial_of(SINCE, records);
    let partition = Arc::new(Partition::default());
    let first_announcer = Arc::new(Announcer {
        history_workers: vec!["w1".into()],
        partition: Some(partition.clone()),
        ..Announcer::default()
    });
    let first = api_node(&first_announcer);
    let handle = first.submit(SINCE, "c").unwrap();
    let id = handle.id.clone();
    let received_ms = first.query(&id).unwrap().received_ms;
    let now = now_ms();
    let pause = || std::thread::sleep(Duration::from_millis(250));
    partition.send(&first, &id, OnTopic::Planned(Some((now - 5_000, now - 1_500))));
    partition.send(&first, &id, OnTopic::Piece { at_ms: now - 4_500, partial: part(2) });
    partition.send(&first, &id, OnTopic::Piece { at_ms: now - 3_200, partial: part(3) });
    // live partials sent while the past is read: held until it is
    partition.send(&first, &id, OnTopic::Partial { at_ms: now_ms(), partial: part(50) });
    partition.send(&first, &id, OnTopic::Piece { at_ms: now - 1_500, partial: part(4) });
    pause();
    partition.send(&first, &id, OnTopic::Partial { at_ms: now_ms(), partial: part(60) });
    partition.send(&first, &id, OnTopic::Done);
    for records in 1..=10 {
        pause();
        partition.send(&first, &id, OnTopic::Partial { at_ms: now_ms(), partial: part(records) });
    }
    pause();
    // the first node dies here: what it wrote is on the partition, cuts included
    let written = partition.0.lock().unwrap().clone();
    let cut = |item: &OnTopic| match item {
        OnTopic::Cut(cut) => Some(cut.emission),
        _ => None,
    };
    let emitted = written.iter().filter_map(cut).max().expect("cuts of live windows");
    let before: Vec<(u64, i64)> = (0..emitted)
        .map(|_| next(&handle.results, Duration::from_secs(5)).unwrap())
        .map(|(n, e)| (n, count(&e)))
        .collect();
    // the two held partials are in one live window there (with the past's last records)
    assert!(before.iter().any(|(_, n)| *n >= 110), "{before:?}");

    // adopted well after the first node went live
    std::thread::sleep(Duration::from_millis(1_500));
    let announcer =
        Arc::new(Announcer { history_workers: vec!["w1".into()], ..Announcer::default() });
    let adopter = api_node(&announcer);
    let range = needle_query::compile(SINCE, &QueryConfig::default()).unwrap().history.unwrap();
    let past = Some(AdoptedPast { range, workers: vec!["w1".into()] });
    let query = compile_text(SINCE);
    adopter.adopt_remote(Adoption { id: &id, query, client: "c", received_ms, past }).unwrap();
    Partition::read_back(&written, &adopter, &id);
    adopter.caught_up(&id);
    let results = adopter.claim_adopted(&id).unwrap();
    let after: Vec<(u64, i64)> = (0..emitted)
        .map(|_| next(&results, Duration::from_secs(5)).unwrap())
        .map(|(n, e)| (n, count(&e)))
        .collect();
    assert_eq!(after, before, "cut as its first node cut them");
    first.shutdown();
    adopter.shutdown();
}
