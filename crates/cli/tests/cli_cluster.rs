//! `needle cluster up --workers 2 --api 2`, as a user runs it (the real binary, a real broker
//! from `scripts/kafka/broker.sh`): a query through each api node answers; a worker and an api
//! node killed with SIGKILL show in `GET /api/v1/cluster` (not alive, the dead worker's
//! partitions moved to the other, the dead api node's query adopted), the queries complete;
//! `needle cluster down` leaves no process behind, checked by process id.

mod common;

use common::NEEDLE;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `needle cluster up` in the foreground; stopped with `needle cluster down` when dropped (a
/// failing test leaves nothing running).
struct Up {
    dir: PathBuf,
    child: Child,
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = Command::new(NEEDLE).args(["cluster", "down", "--dir"]).arg(&self.dir).output();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// True while process `pid` exists and is not a zombie.
fn alive(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit_once(')').unwrap().1.trim_start().starts_with('Z'),
        Err(_) => false,
    }
}

fn state(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("cluster.json")).unwrap()).unwrap()
}

/// (name, pid, url) of the processes of `kind`.
fn processes(state: &Value, kind: &str) -> Vec<(String, u64, String)> {
    let all = state["processes"].as_array().unwrap();
    all.iter()
        .filter(|p| p["kind"] == kind)
        .map(|p| {
            let url = p["url"].as_str().unwrap_or("").to_owned();
            (p["name"].as_str().unwrap().to_owned(), p["pid"].as_u64().unwrap(), url)
        })
        .collect()
}

fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder().timeout(Duration::from_secs(120)).build().unwrap()
}

/// Runs a query to its end through the api node at `url`: its count of records.
fn count(url: &str, millis: u64) -> u64 {
    let text = format!("SELECT COUNT(*) AS n FROM STREAM({millis}, TIME)");
    let body: Value =
        http().post(format!("{url}/api/v1/query")).body(text).send().unwrap().json().unwrap();
    body["records"][0]["n"].as_u64().unwrap_or_else(|| panic!("{body}"))
}

fn cluster(url: &str) -> Value {
    http().get(format!("{url}/api/v1/cluster")).send().unwrap().json().unwrap()
}

fn node<'a>(view: &'a Value, name: &str) -> &'a Value {
    let nodes = view["nodes"].as_array().unwrap();
    nodes.iter().find(|n| n["name"] == name).unwrap_or_else(|| panic!("no {name} in {view}"))
}

#[test]
fn a_cluster_comes_up_in_one_command_shows_its_dead_and_goes_down_leaving_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().join("cluster");
    let child = Command::new(NEEDLE)
        .args(["cluster", "up", "--workers", "2", "--api", "2", "--rate", "100", "--dir"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut up = Up { dir: dir.clone(), child };
    let mut printed = String::new();
    let mut lines = BufReader::new(up.child.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        printed.push_str(&line);
        printed.push('\n');
        if line == "needle cluster: ready" {
            break;
        }
    }
    assert!(printed.contains("needle cluster: ready"), "up ended early: {printed}");
    assert!(printed.contains("[kafka]") && printed.contains("brokers = \"127.0.0.1:"), "{printed}");
    std::thread::spawn(move || lines.for_each(drop));
    let started = state(&dir);
    let apis = processes(&started, "api");
    let workers = processes(&started, "worker");
    assert_eq!((apis.len(), workers.len()), (2, 2), "{started}");
    for (name, _, url) in apis.iter().chain(&workers) {
        assert!(printed.contains(url.as_str()), "{name}'s URL is printed: {printed}");
    }
    let status =
        Command::new(NEEDLE).args(["cluster", "status", "--json", "--dir"]).arg(&dir).output();
    let status: Value = serde_json::from_slice(&status.unwrap().stdout).unwrap();
    let healthy = status["processes"].as_array().unwrap().iter().filter(|p| p["healthz"] == "ok");
    assert_eq!(healthy.count(), 4, "{status}");

    // every node known to both api nodes, every partition read
    for (_, _, url) in &apis {
        wait_until("every node and partition in the cluster view", Duration::from_secs(60), || {
            let view = cluster(url);
            let nodes = view["nodes"].as_array().unwrap();
            let live = nodes.iter().filter(|n| n["alive"] == true).count();
            live == 4 && view["partitions"].as_array().unwrap().len() == 4
        });
    }
    for (name, _, url) in &apis {
        assert!(count(url, 2_000) > 0, "a query through {name} saw records");
    }

    // a query running on each api node; then a worker and an api node killed
    let (api_1, api_2) = (&apis[0], &apis[1]);
    let started: Value = http()
        .post(format!("{}/api/v1/queries", api_2.2))
        .body("SELECT COUNT(*) AS n FROM STREAM(60000, TIME)")
        .send()
        .unwrap()
        .json()
        .unwrap();
    let adopted_id = started["id"].as_str().unwrap().to_owned();
    let survivor_url = api_1.2.clone();
    let running = std::thread::spawn(move || count(&survivor_url, 40_000));
    std::thread::sleep(Duration::from_secs(2));
    let (dead_worker, dead_api) = (&workers[1], api_2);
    for pid in [dead_worker.1, dead_api.1] {
        assert!(Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap().success());
    }
    wait_until("the dead to show in the cluster view", Duration::from_secs(60), || {
        let view = cluster(&api_1.2);
        let everything_to_the_survivor = view["partitions"].as_array().unwrap().len() == 4
            && view["partitions"].as_array().unwrap().iter().all(|p| p["worker"] == workers[0].0);
        node(&view, &dead_worker.0)["alive"] == false
            && node(&view, &dead_api.0)["alive"] == false
            && node(&view, &workers[0].0)["alive"] == true
            && everything_to_the_survivor
    });
    wait_until("the dead api node's query adopted", Duration::from_secs(60), || {
        let view = cluster(&api_1.2);
        view["events"].as_array().unwrap().iter().any(|e| {
            e["kind"] == "adoption"
                && e["node"] == api_1.0
                && e["text"].as_str().unwrap().contains(&adopted_id)
        })
    });
    let view = cluster(&api_1.2);
    assert_eq!(node(&view, &api_1.0)["queries"], 2, "its own and the adopted one: {view}");
    assert!(running.join().unwrap() > 0, "the query on the surviving api node completed");
    assert!(count(&api_1.2, 2_000) > 0, "a query after the kills");

    // down: nothing left, by process id (the broker's watchdog too)
    let recorded = state(&dir);
    let recorded = recorded["processes"].as_array().unwrap();
    let pids: Vec<u64> = recorded.iter().map(|p| p["pid"].as_u64().unwrap()).collect();
    let watchdogs: Vec<u64> = recorded.iter().filter_map(|p| p["watchdog"].as_u64()).collect();
    assert_eq!(watchdogs.len(), 1, "the broker's: {recorded:?}");
    let down = Command::new(NEEDLE).args(["cluster", "down", "--dir"]).arg(&dir).output().unwrap();
    assert!(down.status.success(), "down: {}", String::from_utf8_lossy(&down.stderr));
    let ended = up.child.wait().unwrap();
    assert!(ended.success(), "up ended with {ended}");
    let left: Vec<u64> = pids.into_iter().filter(|pid| alive(*pid)).collect();
    assert!(left.is_empty(), "still running: {left:?}");
    wait_until("the broker's watchdog to end", Duration::from_secs(3), || {
        watchdogs.iter().all(|pid| !alive(*pid))
    });
}
