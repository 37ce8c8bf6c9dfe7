//! The metrics agents people already run, for real, against the real binary: Debian's
//! Prometheus scraping needle's `/metrics` and sending every sample back with `remote_write`
//! (what needle keeps of them must be what Prometheus's own API answers for the same series and
//! range), and Debian's collectd writing its cpu and memory values with `write_graphite` to a
//! Graphite `tcp:` source (a GROUP BY over their paths).
//!
//! Each agent runs from a config written here (the ones docs/protocols.md shows), on free
//! loopback ports, its files in a temporary directory, and is killed when its guard is dropped,
//! a failing test included (its log is shown then). `scripts/agents/install.sh`, which
//! `make test` runs, installs both from Debian; a test fails, naming the script, when one is
//! missing: it never passes without its agent.

mod common;

use common::Serve;
use reqwest::blocking::Client;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PROMETHEUS: &str = "/usr/bin/prometheus";
const COLLECTD: &str = "/usr/sbin/collectd";
const COLLECTD_PLUGINS: &str = "/usr/lib/collectd";

/// `path`, or a failure saying how to install it.
fn installed(path: &str) -> &str {
    assert!(
        Path::new(path).exists(),
        "{path} is missing: run scripts/agents/install.sh (make test runs it), which installs \
         Debian's prometheus and collectd-core"
    );
    path
}

/// A loopback port free a moment ago (for an agent that cannot be told to pick one and say it).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// An agent's process, killed when dropped; what it prints goes to a file shown when a test fails.
struct Agent {
    name: &'static str,
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Agent {
    fn start(name: &'static str, program: &str, args: &[String], dir: tempfile::TempDir) -> Self {
        let log = dir.path().join(format!("{name}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(installed(program))
            .args(args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("{program} does not start: {e}"));
        Self { name, child, log, _dir: dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Fails, with its log, when the agent has exited.
    fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("{} exited ({status}):\n{}", self.name, self.log());
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- log of {} ---\n{}", self.name, self.log());
        }
    }
}

fn wait_until<T>(what: &str, within: Duration, mut ready: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = ready() {
            return value;
        }
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What `needle serve` answers to a query that ends by itself (a `HISTORY` range).
fn query(server: &Serve, text: &str) -> Value {
    let client = Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let r = client.post(format!("{}/api/v1/query", server.url)).body(text.to_owned()).send();
    let r = r.unwrap();
    let status = r.status();
    let body: Value = r.json().unwrap();
    assert_eq!(status, 200, "{text}: {body}");
    body
}

/// Starts a live query on a thread; its answer comes when its duration is over.
fn start_query(server: &Serve, text: &str) -> std::thread::JoinHandle<Value> {
    let url = format!("{}/api/v1/query", server.url);
    let text = text.to_owned();
    std::thread::spawn(move || {
        let r = Client::new().post(url).body(text.clone()).send().unwrap();
        let status = r.status();
        let body: Value = r.json().unwrap();
        assert_eq!(status, 200, "{text}: {body}");
        body
    })
}

fn now_ms() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    now.as_millis() as i64
}

fn records(body: &Value) -> &Vec<Value> {
    body["records"].as_array().unwrap_or_else(|| panic!("no records: {body}"))
}

// ---- Prometheus ----------------------------------------------------------------------------

/// Prometheus's config (docs/protocols.md shows it): needle scraped every second, every sample
/// sent back to it as it is appended. One shard sends the samples in the order they were
/// scraped, so once a sample has arrived every earlier one has.
const PROMETHEUS_YML: &str = "\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: needle
    static_configs:
      - targets: ['@NEEDLE@']
remote_write:
  - url: http://@NEEDLE@/api/v1/write
    queue_config:
      min_shards: 1
      max_shards: 1
      batch_send_deadline: 100ms
      min_backoff: 50ms
";

struct Prometheus {
    agent: Agent,
    url: String,
}

impl Prometheus {
    /// Starts Prometheus scraping and writing to the needle at `needle` (`HOST:PORT`), and waits
    /// until it is ready (on another port if the free one it was given was taken meanwhile).
    fn start(needle: &str) -> Self {
        for _ in 0..3 {
            let dir = tempfile::tempdir().unwrap();
            let config = dir.path().join("prometheus.yml");
            std::fs::write(&config, PROMETHEUS_YML.replace("@NEEDLE@", needle)).unwrap();
            let port = free_port();
            let args = [
                format!("--config.file={}", config.display()),
                format!("--storage.tsdb.path={}", dir.path().join("tsdb").display()),
                format!("--web.listen-address=127.0.0.1:{port}"),
            ];
            let mut agent = Agent::start("prometheus", PROMETHEUS, &args, dir);
            let url = format!("http://127.0.0.1:{port}");
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if agent.child.try_wait().unwrap().is_some() {
                    if agent.log().contains("address already in use") {
                        break;
                    }
                    agent.assert_running();
                }
                let ready = reqwest::blocking::get(format!("{url}/-/ready"));
                if ready.is_ok_and(|r| r.status() == 200) {
                    return Self { agent, url };
                }
                assert!(Instant::now() < deadline, "Prometheus not ready:\n{}", agent.log());
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        panic!("Prometheus found no free port in three tries");
    }

    /// An instant query's result at `time_ms`.
    fn query(&self, promql: &str, time_ms: i64) -> Value {
        let time = format!("{}.{:03}", time_ms / 1000, time_ms % 1000);
        let r = Client::new()
            .get(format!("{}/api/v1/query", self.url))
            .query(&[("query", promql), ("time", &time)])
            .send()
            .unwrap();
        let body: Value = r.json().unwrap();
        assert_eq!(body["status"], "success", "{promql} at {time}: {body}");
        body["data"]["result"].clone()
    }

    /// The sum of a metric of Prometheus's own over its label sets (0 when absent).
    fn own_metric(&self, name: &str) -> f64 {
        let text = reqwest::blocking::get(format!("{}/metrics", self.url)).unwrap().text().unwrap();
        text.lines()
            .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with([' ', '{'])))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum()
    }
}

/// A sample's value, compared bit for bit (both sides hold the f64 Prometheus scraped).
#[derive(Clone, Copy)]
struct Bits(f64);

impl PartialEq for Bits {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}
impl Eq for Bits {}
impl PartialOrd for Bits {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bits {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.to_bits().cmp(&other.0.to_bits())
    }
}
impl std::fmt::Debug for Bits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// A sample: its series' labels (`__name__` among them), its time in ms and its value.
type Sample = (BTreeMap<String, String>, i64, Bits);

/// The samples of a Prometheus range vector (a matrix), sorted.
fn prometheus_samples(matrix: &Value) -> Vec<Sample> {
    let mut samples = Vec::new();
    for series in matrix.as_array().unwrap() {
        let labels: BTreeMap<String, String> = series["metric"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
            .collect();
        for point in series["values"].as_array().unwrap() {
            let ms = (point[0].as_f64().unwrap() * 1000.0).round() as i64;
            let value: f64 = point[1].as_str().unwrap().parse().unwrap();
            samples.push((labels.clone(), ms, Bits(value)));
        }
    }
    samples.sort();
    samples
}

/// The samples of needle's records (`{"__name__", <labels>..., "value", "timestamp"}`), sorted.
fn needle_samples(records: &[Value]) -> Vec<Sample> {
    let mut samples: Vec<Sample> = records
        .iter()
        .map(|record| {
            let record = record.as_object().unwrap();
            let labels = record
                .iter()
                .filter(|(k, _)| *k != "value" && *k != "timestamp")
                .map(|(k, v)| {
                    let v = v.as_str().unwrap_or_else(|| panic!("label {k} is not a STRING: {v}"));
                    (k.clone(), v.to_owned())
                })
                .collect();
            let ms = record["timestamp"].as_i64().expect("timestamp is a LONG");
            (labels, ms, Bits(record["value"].as_f64().expect("value is a DOUBLE")))
        })
        .collect();
    samples.sort();
    samples
}

fn show(samples: &[Sample]) -> String {
    samples.iter().map(|s| format!("  {s:?}\n")).collect()
}

/// Prometheus scrapes needle's `/metrics` every second and writes each sample back to the same
/// needle with `remote_write`; needle keeps them in its history. Over a range of four scrapes,
/// needle's answers equal Prometheus's own: the samples counted per `__name__` (every metric of
/// the scrape, `up` and Prometheus's `scrape_*` among them), and the samples themselves (labels
/// with the `job` and `instance` Prometheus adds, time, value bit for bit) of `up`, of a counter
/// that grows at each scrape (`needle_bytes_read_total`: the writes themselves) and of a
/// histogram's buckets (a label, `le`, per series; the test's own queries move them).
///
/// Exact and not flaky: the range ends half a scrape after the fourth scrape, and is read only
/// once a later scrape's `up` is in needle (one shard sends in scrape order). Remote write sends
/// a sample again only on a retry: with none (Prometheus's own counters say), each sample must
/// be in needle exactly once; with some, at least once.
#[test]
fn prometheus_remote_write_gives_needle_the_samples_prometheus_itself_answers() {
    let store = tempfile::tempdir().unwrap();
    let server = Serve::start(&[
        "--workers",
        "1",
        "--source",
        "http",
        "--history",
        store.path().to_str().unwrap(),
        "--time-field",
        "timestamp",
    ]);
    let needle = server.url.strip_prefix("http://").unwrap();
    let mut prometheus = Prometheus::start(needle);

    // Prometheus's first scrape comes about 5 s after its start (its discovery's first update)
    let ups = wait_until("five scrapes' `up` in needle", Duration::from_secs(25), || {
        prometheus.agent.assert_running();
        let body = query(&server, "SELECT timestamp FROM HISTORY('-5m') WHERE __name__ = 'up'");
        let mut ups: Vec<i64> =
            records(&body).iter().map(|r| r["timestamp"].as_i64().unwrap()).collect();
        ups.sort();
        (ups.len() >= 5).then_some(ups)
    });
    // half a scrape before the first and after the fourth: no sample near either end
    let (from, to) = (ups[0] - 500, ups[3] + 500);
    let range = format!("{}ms", to - from);
    let history = format!("HISTORY({from}, {})", to + 1); // [from, to], as Prometheus's range

    let retried = prometheus.own_metric("prometheus_remote_storage_samples_retried_total");
    let failed = prometheus.own_metric("prometheus_remote_storage_samples_failed_total");
    let dropped = prometheus.own_metric("prometheus_remote_storage_samples_dropped_total");
    assert_eq!((failed, dropped), (0.0, 0.0), "samples Prometheus could not send");
    let malformed =
        server.metric("needle_protocol_lines_malformed_total{protocol=\"remote_write\"}");
    assert_eq!(malformed, 0.0, "series needle refused");

    // every sample of the range, counted per metric name
    let all = prometheus_samples(&prometheus.query(&format!("{{job=\"needle\"}}[{range}]"), to));
    let mut want = BTreeMap::<String, i64>::new();
    for (labels, _, _) in &all {
        *want.entry(labels["__name__"].clone()).or_default() += 1;
    }
    let body =
        query(&server, &format!("SELECT __name__, COUNT(*) AS n FROM {history} GROUP BY __name__"));
    let got: BTreeMap<String, i64> = records(&body)
        .iter()
        .map(|r| (r["__name__"].as_str().unwrap().to_owned(), r["n"].as_i64().unwrap()))
        .collect();
    for name in ["up", "scrape_samples_scraped"] {
        assert_eq!(want.get(name), Some(&4), "{name}: four scrapes in the range: {want:?}");
    }
    assert!(want.contains_key("needle_records_read_total"), "needle's own metrics: {want:?}");
    if retried == 0.0 {
        assert_eq!(got, want, "samples per __name__: needle (left), Prometheus (right)");
    } else {
        assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>());
        for (name, n) in &want {
            assert!(got[name] >= *n, "{name}: {} in needle, {n} in Prometheus", got[name]);
        }
    }

    // the samples themselves
    for name in ["up", "needle_bytes_read_total", "needle_query_first_result_seconds_bucket"] {
        let want = prometheus_samples(&prometheus.query(&format!("{name}[{range}]"), to));
        let body = query(&server, &format!("SELECT * FROM {history} WHERE __name__ = '{name}'"));
        let got = needle_samples(records(&body));
        assert!(want.len() >= 4, "{name}: {}", show(&want));
        let (got_set, want_set): (BTreeSet<_>, BTreeSet<_>) =
            (got.iter().cloned().collect(), want.iter().cloned().collect());
        assert!(
            got_set == want_set && (retried > 0.0 || got.len() == want.len()),
            "{name} over [{from}, {to}] ({retried} samples sent again):\nneedle:\n{}Prometheus:\n{}",
            show(&got),
            show(&want)
        );
    }
    let instance = &all.iter().find(|(l, _, _)| l["__name__"] == "up").unwrap().0["instance"];
    assert_eq!(instance, needle, "Prometheus's instance label is the target it scraped");
}

// ---- collectd ------------------------------------------------------------------------------

/// collectd's config (docs/protocols.md shows it): the cpu and memory plugins every second,
/// written to needle's Graphite source as rates, the plugin and type instances as path parts of
/// their own (`needle-test.cpu.0.cpu.user`, `needle-test.memory.memory.used`).
const COLLECTD_CONF: &str = r#"Hostname "needle-test"
FQDNLookup false
BaseDir "@DIR@"
PIDFile "@DIR@/collectd.pid"
PluginDir "@PLUGINS@"
Interval 1
AutoLoadPlugin false

LoadPlugin logfile
<Plugin logfile>
  LogLevel info
  File STDERR
</Plugin>
LoadPlugin cpu
LoadPlugin memory
LoadPlugin write_graphite
<Plugin write_graphite>
  <Node "needle">
    Host "@HOST@"
    Port "@PORT@"
    Protocol "tcp"
    StoreRates true
    SeparateInstances true
  </Node>
</Plugin>
"#;

/// Starts collectd in the foreground, writing to the Graphite source at `host`:`port`.
fn start_collectd(host: &str, port: &str) -> Agent {
    installed(&format!("{COLLECTD_PLUGINS}/write_graphite.so"));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("collectd.conf");
    let text = COLLECTD_CONF
        .replace("@DIR@", dir.path().to_str().unwrap())
        .replace("@PLUGINS@", COLLECTD_PLUGINS)
        .replace("@HOST@", host)
        .replace("@PORT@", port);
    std::fs::write(&config, text).unwrap();
    let args = ["-f".to_owned(), "-C".to_owned(), config.to_str().unwrap().to_owned()];
    Agent::start("collectd", COLLECTD, &args, dir)
}

/// The plugin of a collectd path, as BQL: `cpu`, `memory`, or the path itself.
const PLUGIN: &str = "IF(path RLIKE 'needle-test[.]cpu[.].*', 'cpu', \
                      IF(path RLIKE 'needle-test[.]memory[.].*', 'memory', path))";

/// collectd's cpu and memory plugins, written with `write_graphite` to a Graphite `tcp:`
/// source, answer GROUP BYs started before collectd: per path (every cpu's eight states, the
/// six kinds of memory, in bytes), and per plugin.
#[test]
fn collectd_writes_cpu_and_memory_over_graphite_and_group_bys_read_them() {
    let server = Serve::start(&["--workers", "1", "--source", "tcp:127.0.0.1:0?format=graphite"]);
    let data = server.source.rsplit(' ').next().unwrap().to_owned();
    let (host, port) = data.rsplit_once(':').unwrap();
    let by_path = start_query(
        &server,
        "SELECT path, COUNT(*) AS n, MIN(value) AS lo, MAX(timestamp) AS last \
         FROM STREAM(6000, TIME) GROUP BY path",
    );
    let by_plugin = start_query(
        &server,
        &format!(
            "SELECT {PLUGIN} AS plugin, COUNT(*) AS n, MIN(value) AS lo \
             FROM STREAM(6000, TIME) GROUP BY {PLUGIN}"
        ),
    );
    wait_until("both queries running", Duration::from_secs(10), || {
        let listed: Value = server.get("/api/v1/queries").json().unwrap();
        (listed["queries"].as_array().unwrap().len() == 2).then_some(())
    });
    let started_ms = now_ms();
    let mut collectd = start_collectd(host, port);
    let by_path = by_path.join().unwrap();
    let by_plugin = by_plugin.join().unwrap();
    collectd.assert_running();
    drop(collectd);
    let stopped_ms = now_ms();

    let paths: BTreeMap<String, (i64, f64, i64)> = records(&by_path)
        .iter()
        .map(|r| {
            let n = r["n"].as_i64().unwrap();
            (
                r["path"].as_str().unwrap().to_owned(),
                (n, r["lo"].as_f64().unwrap(), r["last"].as_i64().unwrap()),
            )
        })
        .collect();
    let memory = ["buffered", "cached", "free", "slab_recl", "slab_unrecl", "used"];
    let states = ["idle", "interrupt", "nice", "softirq", "steal", "system", "user", "wait"];
    let cpus: BTreeSet<&str> = paths
        .keys()
        .filter_map(|p| p.strip_prefix("needle-test.cpu.")?.split('.').next())
        .collect();
    let mut want: BTreeSet<String> =
        memory.iter().map(|m| format!("needle-test.memory.memory.{m}")).collect();
    for cpu in &cpus {
        want.extend(states.iter().map(|s| format!("needle-test.cpu.{cpu}.cpu.{s}")));
    }
    let got: BTreeSet<String> = paths.keys().cloned().collect();
    assert!(cpus.contains("0") && got == want, "paths: {got:#?}\nwanted: {want:#?}");
    for (path, (n, lo, last)) in &paths {
        // memory every second from the first; a cpu rate from the second reading on
        assert!(*n >= 3, "{path}: {n} values: {by_path}");
        assert!(*lo >= 0.0, "{path}: {lo}");
        // collectd's own time, whole seconds: while it ran
        assert!((started_ms / 1000 * 1000..=stopped_ms).contains(last), "{path}: {last}");
    }
    for used in ["used", "free"] {
        let (_, lo, _) = paths[&format!("needle-test.memory.memory.{used}")];
        assert!(lo > 0.0, "memory {used}: {lo}");
    }

    let plugins: BTreeMap<String, (i64, f64)> = records(&by_plugin)
        .iter()
        .map(|r| {
            let plugin = r["plugin"].as_str().unwrap().to_owned();
            (plugin, (r["n"].as_i64().unwrap(), r["lo"].as_f64().unwrap()))
        })
        .collect();
    let count = |prefix: &str| {
        paths.iter().filter(|(p, _)| p.starts_with(prefix)).map(|(_, (n, _, _))| n).sum::<i64>()
    };
    assert_eq!(plugins.keys().collect::<Vec<_>>(), ["cpu", "memory"], "the plugins: {by_plugin}");
    assert_eq!(plugins["cpu"].0, count("needle-test.cpu."), "{by_plugin}\n{by_path}");
    assert_eq!(plugins["memory"].0, count("needle-test.memory."), "{by_plugin}\n{by_path}");
    assert!(plugins["memory"].1 >= 0.0, "{by_plugin}");
    // every line collectd wrote was a point
    let malformed = server.metric("needle_protocol_lines_malformed_total{protocol=\"graphite\"}");
    assert_eq!(malformed, 0.0, "{}", server.log());
}
