//! `needle serve` as a user runs it: the real binary on free loopback ports, talked to over real
//! HTTP and with the `needle queries` / `needle kill` / `needle config` commands.

mod common;

use common::{Serve, NEEDLE};
use std::io::Write;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `needle serve` with two workers reading `source`.
fn serve(source: &str) -> Serve {
    Serve::start(&["--workers", "2", "--source", source])
}

fn post(url: &str, body: &str) -> (u16, serde_json::Value) {
    let r = reqwest::blocking::Client::new().post(url).body(body.to_owned()).send().unwrap();
    (r.status().as_u16(), r.json().unwrap())
}

fn needle(args: &[&str]) -> std::process::Output {
    Command::new(NEEDLE).args(args).env_remove("NEEDLE_SERVER").output().unwrap()
}

#[test]
fn needle_records_from_the_generator_are_found_over_http() {
    // 2,000 records/s; the needles are records 4,000..4,004, two seconds in.
    let server =
        serve("gen:bullet?rate=2000&seed=3&needle=id=c39ba8cfe8&needle_count=5&needle_at=4000");
    assert!(server.source.contains("generated bullet workload"), "{}", server.source);
    let started = Instant::now();
    let (status, body) = post(
        &format!("{}/api/v1/query", server.url),
        "SELECT id, event_ts FROM STREAM(20000, TIME) WHERE id = 'c39ba8cfe8' LIMIT 5",
    );
    assert_eq!(status, 200, "{body}");
    let records = body["records"].as_array().unwrap();
    assert_eq!(records.len(), 5, "{body}");
    assert!(records.iter().all(|r| r["id"] == "c39ba8cfe8"));
    assert!(started.elapsed() < Duration::from_secs(15), "LIMIT 5 reached ends the query early");
}

#[test]
fn queries_can_be_listed_and_killed_from_the_command_line() {
    let mut server = serve("gen:small?rate=1000");
    let (status, started) = post(
        &format!("{}/api/v1/queries", server.url),
        "SELECT COUNT(*) AS n FROM STREAM(60000, TIME)",
    );
    assert_eq!(status, 201, "{started}");
    let id = started["id"].as_str().unwrap();

    let listed = needle(&["queries", "--server", &server.url]);
    assert!(listed.status.success());
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(text.contains(id) && text.contains("COUNT(*)"), "{text}");

    let killed = needle(&["kill", id, "--server", &server.url]);
    assert!(killed.status.success(), "{}", String::from_utf8_lossy(&killed.stderr));
    let again = needle(&["kill", id, "--server", &server.url]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("no running query"));

    let json = needle(&["queries", "--server", &server.url, "--format", "json"]);
    let body: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(body["queries"].as_array().unwrap().len(), 0, "{body}");

    let unreachable = needle(&["queries", "--server", "http://127.0.0.1:9"]);
    assert_eq!(unreachable.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unreachable.stderr).contains("cannot reach"));
    assert!(server.terminate(Duration::from_secs(15)).success());
}

#[test]
fn malformed_records_are_counted_while_queries_go_on_and_shutdown_ends_them() {
    let mut server = serve("tcp:127.0.0.1:0");
    let data = server.source.rsplit(' ').next().unwrap().to_owned();
    let url = server.url.clone();
    let waiting = std::thread::spawn(move || {
        post(&format!("{url}/api/v1/query"), "SELECT COUNT(*) AS n FROM STREAM(60000, TIME)")
    });
    std::thread::sleep(Duration::from_millis(300));
    let mut s = TcpStream::connect(&data).unwrap();
    for i in 0..50 {
        if i % 5 == 0 {
            writeln!(s, "this is not json {i}").unwrap();
        } else {
            writeln!(s, "{{\"i\":{i}}}").unwrap();
        }
    }
    drop(s);
    let metrics_url = format!("{}/metrics", server.url);
    let deadline = Instant::now() + Duration::from_secs(10);
    let metrics = loop {
        let text = reqwest::blocking::get(&metrics_url).unwrap().text().unwrap();
        if text.contains("needle_records_read_total 50") || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(metrics.contains("needle_records_malformed_total 10"), "{metrics}");
    std::thread::sleep(Duration::from_millis(200));

    assert!(server.terminate(Duration::from_secs(15)).success(), "a clean exit on SIGTERM");
    let (status, body) = waiting.join().unwrap();
    assert_eq!(status, 200);
    assert_eq!(body["records"][0]["n"], 40, "{body}");
    assert!(body.to_string().contains("shut down"), "{body}");
}

#[test]
fn bad_sources_and_configs_are_refused_at_start() {
    let out = needle(&["serve", "--listen", "127.0.0.1:0", "--source", "gen:bulet"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad source 'gen:bulet'"));

    let out = needle(&["serve", "--listen", "127.0.0.1:0", "--source", "file:/no/such.ndjson"]);
    assert_eq!(out.status.code(), Some(1));

    let config = Command::new(NEEDLE)
        .args(["config"])
        .env("NEEDLE_QUERY__MAX_DURATION_MS", "1234")
        .output()
        .unwrap();
    assert!(config.status.success());
    let text = String::from_utf8_lossy(&config.stdout);
    assert!(
        text.contains("max_duration_ms = 1234") && text.contains("listen = \"127.0.0.1:9900\""),
        "{text}"
    );

    let bad =
        Command::new(NEEDLE).args(["config"]).env("NEEDLE_SERVER__LISTN", "x").output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("listn"));
}

#[test]
fn a_needle_variable_that_is_no_setting_is_named_and_the_client_variables_are_left_alone() {
    // a variable a script once read: every command stopped with a bare "unknown field"
    for command in [&["config"][..], &["serve", "--listen", "127.0.0.1:0"]] {
        let out = Command::new(NEEDLE)
            .args(command)
            .env_remove("NEEDLE_SERVER")
            .env("NEEDLE_KAFKA_LIB", "/opt/kafka/lib")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{command:?}: {stderr}");
        assert!(
            stderr
                .contains("the environment variable NEEDLE_KAFKA_LIB names no setting (kafka.lib)")
                && stderr.contains("NEEDLE_<SECTION>__<KEY>")
                && !stderr.contains("unknown field"),
            "{command:?}: {stderr}"
        );
    }
    // `needle queries` and `needle kill` read these two; a server started beside them must not
    let out = Command::new(NEEDLE)
        .args(["config"])
        .env("NEEDLE_SERVER", "http://127.0.0.1:9901")
        .env("NEEDLE_TOKEN", "secret")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("listen = \"127.0.0.1:9900\""));
}

/// The `NEEDLE_*` names the repository's scripts and UI tests read or set.
fn needle_names_in(dir: &std::path::Path, names: &mut std::collections::BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if !path.ends_with("node_modules") && !path.ends_with("out") {
                needle_names_in(&path, names);
            }
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        for (at, _) in text.match_indices("NEEDLE_") {
            let name: String = text[at..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            // a placeholder in a comment (NEEDLE_<SECTION>__<KEY>, NEEDLE_*) is no name
            if name.len() > "NEEDLE_".len() && !name.ends_with('_') {
                names.insert(name);
            }
        }
    }
}

#[test]
fn every_needle_variable_the_scripts_use_is_a_setting_or_a_client_variable() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut names = std::collections::BTreeSet::new();
    needle_names_in(&root.join("scripts"), &mut names);
    needle_names_in(&root.join("ui/e2e"), &mut names);
    for name in &names {
        let out = Command::new(NEEDLE)
            .args(["config"])
            .env_remove("NEEDLE_SERVER")
            .env(name, "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("names no setting"), "{name}: {stderr}");
    }
}

#[test]
fn the_query_command_runs_on_a_server_and_ctrl_c_kills_it_there() {
    let server = serve("gen:small?rate=2000");
    let out = needle(&[
        "query",
        "--server",
        &server.url,
        "--format",
        "json",
        "SELECT COUNT(*) AS n FROM STREAM(1500, TIME) WINDOWING TUMBLING(1000, TIME)",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "a tumbling window and the final one: {lines:?}");
    assert!(lines[0]["records"][0]["n"].as_i64().unwrap() > 500, "{lines:?}");

    let refused = needle(&["query", "--server", &server.url, "SELECT * FORM STREAM()"]);
    assert_eq!(refused.status.code(), Some(2));
    let text = String::from_utf8_lossy(&refused.stderr);
    assert!(text.contains("at line 1, column 10") && text.contains("         ^"), "{text}");

    let child = Command::new(NEEDLE)
        .args(["query", "--server", &server.url, "SELECT COUNT(*) AS n FROM STREAM(60000, TIME)"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let body: serde_json::Value =
            reqwest::blocking::get(format!("{}/api/v1/queries", server.url))
                .unwrap()
                .json()
                .unwrap();
        if !body["queries"].as_array().unwrap().is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "the query never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("killed"), "the final result says so: {text}");
    let body: serde_json::Value =
        reqwest::blocking::get(format!("{}/api/v1/queries", server.url)).unwrap().json().unwrap();
    assert!(
        body["queries"].as_array().unwrap().is_empty(),
        "the query ended on the server: {body}"
    );
}

fn running_queries(url: &str) -> usize {
    let body: serde_json::Value =
        reqwest::blocking::get(format!("{url}/api/v1/queries")).unwrap().json().unwrap();
    body["queries"].as_array().unwrap().len()
}

fn wait_for_queries(url: &str, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while running_queries(url) != count {
        assert!(Instant::now() < deadline, "expected {count} running queries");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_websocket_client_runs_queries_and_a_client_that_leaves_ends_its_queries() {
    let server =
        serve("gen:bullet?rate=1000&seed=5&needle=id=c39ba8cfe8&needle_count=3&needle_at=1500");
    let ws_url = format!("{}/api/v1/ws", server.url.replace("http://", "ws://"));
    let (mut ws, _) = tungstenite::connect(ws_url.as_str()).unwrap();
    let start = |q: &str| {
        tungstenite::Message::Text(
            serde_json::json!({"type": "start", "query": q}).to_string().into(),
        )
    };
    ws.send(start("SELECT id FROM STREAM(20000, TIME) WHERE id = 'c39ba8cfe8' LIMIT 3")).unwrap();
    ws.send(start("SELECT COUNT(*) AS n FROM STREAM(60000, TIME)")).unwrap();
    let mut found = 0;
    while found < 3 {
        let message = ws.read().unwrap();
        let v: serde_json::Value = serde_json::from_str(message.to_text().unwrap()).unwrap();
        if v["type"] == "result" {
            found += v["result"]["records"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["id"] == "c39ba8cfe8")
                .count();
        }
        assert_ne!(v["type"], "error", "{v}");
    }
    // the LIMIT query ends (its last result can reach the client a moment before it leaves the
    // list of running queries); the COUNT runs on
    wait_for_queries(&server.url, 1);
    drop(ws); // the client goes away without a word
    wait_for_queries(&server.url, 0);

    // The same for a client waiting on POST /api/v1/query that disconnects.
    let mut raw = TcpStream::connect(server.url.trim_start_matches("http://")).unwrap();
    let body = "SELECT COUNT(*) FROM STREAM(60000, TIME)";
    write!(
        raw,
        "POST /api/v1/query HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    wait_for_queries(&server.url, 1);
    drop(raw);
    wait_for_queries(&server.url, 0);
}

#[test]
fn results_nobody_reads_are_held_within_the_configured_bytes() {
    // 50 queries keeping up to 500 records of ~1.8 KB a second each (~8 MB an emission, as
    // decoded records), started and never read: without a bound in bytes their results grow by
    // up to 400 MB a second. The bounds let one query hold an emission or so, and all of them a
    // few.
    let mut config = tempfile::NamedTempFile::new().unwrap();
    let bound: u64 = 24 << 20;
    write!(
        config,
        "[runtime]\nmax_result_bytes = {bound}\nmax_result_bytes_per_query = {}\n",
        bound / 2
    )
    .unwrap();
    let server = Serve::start(&[
        "--workers",
        "2",
        "--config",
        config.path().to_str().unwrap(),
        "--source",
        "gen:bullet?rate=5000&seed=9",
    ]);
    let query = "SELECT * FROM STREAM(30000, TIME) WINDOWING TUMBLING(1000, TIME) LIMIT 500";
    let before = resident_bytes(server.child.id());
    let mut ids = Vec::new();
    for _ in 0..50 {
        let (status, body) = post(&format!("{}/api/v1/queries", server.url), query);
        assert_eq!(status, 201, "{body}");
        ids.push(body["id"].as_str().unwrap().to_owned());
    }
    let mut peak: f64 = 0.0;
    let mut peak_resident = 0;
    for _ in 0..16 {
        std::thread::sleep(Duration::from_millis(500));
        peak = peak.max(server.metric("needle_result_bytes"));
        peak_resident = peak_resident.max(resident_bytes(server.child.id()));
    }
    eprintln!("resident: {before} before the queries, {peak_resident} at most while they ran");
    // the results (in queues and in the joiner's windows) stay under the bound; what else grows
    // with the queries — records in flight to the joiner (16 MiB at most), records being
    // decoded and emitted, the allocator's slack — is of the same order (it grew by 740 MB
    // before windows and partials in flight were bounded in bytes, and by 4.5 × the bound
    // while records were counted at two thirds of the heap they hold; 3.3–3.4 × since)
    let grown = peak_resident.saturating_sub(before);
    assert!(grown < 4 * bound, "resident size grew by {grown} bytes, past 4 × {bound}");
    assert!(peak > 0.0, "results were held");
    assert!(peak <= bound as f64, "{peak} bytes waiting, past the bound of {bound}");
    assert!(server.metric("needle_results_dropped_total") > 0.0, "the oldest were dropped");
    // the allocator's own figures: the results held are live heap, within what it keeps
    let held = server.metric("needle_result_bytes");
    let allocated = server.metric("needle_heap_allocated_bytes");
    let resident = server.metric("needle_heap_resident_bytes");
    assert!(allocated > held / 2.0, "{allocated} bytes allocated, {held} of results held");
    assert!(resident >= allocated, "{resident} bytes resident, {allocated} allocated");

    // a subscriber that comes late gets what was kept, told how much it missed
    let events = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
        .get(format!("{}/api/v1/queries/{}/events", server.url, ids[0]))
        .send()
        .unwrap();
    let mut first = String::new();
    for line in std::io::BufRead::lines(std::io::BufReader::new(events)) {
        let line = line.unwrap();
        if let Some(data) = line.strip_prefix("data:") {
            first = data.trim().to_owned();
            break;
        }
    }
    let first: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert!(first["meta"]["Dropped Emissions"].as_u64().is_some_and(|n| n > 0), "{first}");
}

#[test]
fn https_serves_the_api_with_the_configured_certificate_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.key_pair.serialize_pem()).unwrap();
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    // the needles two seconds in (records 4,000..4,004 at 2,000 a second): after the TLS
    // handshakes and the health check below, however slow the machine
    let server = Serve::start(&[
        "--source",
        "gen:bullet?rate=2000&seed=3&needle=id=c39ba8cfe8&needle_count=5&needle_at=4000",
        "--tls-cert",
        cert,
        "--tls-key",
        key,
    ]);
    assert!(server.url.starts_with("https://127.0.0.1:"), "{}", server.url);
    let trusting = reqwest::blocking::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(made.cert.pem().as_bytes()).unwrap())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();

    // a client that connects and never says a word holds up no one
    let address = server.url.trim_start_matches("https://").to_owned();
    let _silent = TcpStream::connect(&address).unwrap();

    let health = trusting.get(format!("{}/healthz", server.url)).send().unwrap();
    assert_eq!(health.status(), 200);
    let answer = trusting
        .post(format!("{}/api/v1/query", server.url))
        .body("SELECT id FROM STREAM(20000, TIME) WHERE id = 'c39ba8cfe8' LIMIT 5")
        .send()
        .unwrap();
    assert_eq!(answer.status(), 200);
    let body: serde_json::Value = answer.json().unwrap();
    assert_eq!(body["records"].as_array().map(Vec::len), Some(5), "{body}");

    // a client that does not trust the certificate, and plain HTTP, get nothing
    let untrusting = reqwest::blocking::Client::builder().timeout(Duration::from_secs(10));
    let untrusting = untrusting.build().unwrap();
    assert!(untrusting.get(format!("{}/healthz", server.url)).send().is_err());
    let plain = format!("http://{address}/healthz");
    assert!(untrusting.get(plain).send().is_err());
    assert_eq!(trusting.get(format!("{}/healthz", server.url)).send().unwrap().status(), 200);

    // half a configuration, or files that are not what they should be, stop it at start
    let out = needle(&["serve", "--listen", "127.0.0.1:0", "--tls-cert", cert]);
    assert_eq!(out.status.code(), Some(2), "clap names the missing --tls-key");
    let out = needle(&["serve", "--listen", "127.0.0.1:0", "--tls-cert", key, "--tls-key", key]);
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("no certificate") && said.contains("key.pem"), "{said}");
    let out = Command::new(NEEDLE)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("NEEDLE_SERVER__TLS_CERT", cert)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("both server.tls_cert and"));
}

/// Good records (`"good": true`) between every kind of bad line a source may meet, and how many
/// of each: good, counted as malformed, ignored (blank lines).
fn abusive_input() -> (Vec<u8>, u64, u64) {
    let bad: Vec<Vec<u8>> = vec![
        [&b"{\"big\":\""[..], &vec![b'x'; 10 << 20], b"\"}"].concat(), // past max_line_bytes
        [&b"{\"a\":"[..], &vec![b'['; 200_000], &vec![b']'; 200_000], b"}"].concat(),
        b"{\"s\":\"\xff\xfe not UTF-8\"}".to_vec(),
        b"\xef\xbb\xbf{\"after a BOM\":1}".to_vec(),
        b"{\"n\x00ul\":1}".to_vec(),
        b"{\"x\":1}\x00".to_vec(),
        b"{\"past f64\":1e400}".to_vec(),
        b"[1,2]".to_vec(),
        b"{\"unterminated\":".to_vec(),
    ];
    let blank: Vec<&[u8]> = vec![b"", b"   ", b"\r"];
    let mut out = Vec::new();
    let mut good = 0;
    for line in bad.iter().map(Vec::as_slice).chain(blank.iter().copied()) {
        good += 1;
        writeln!(out, "{{\"good\":true,\"i\":{good}}}").unwrap();
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    // duplicate keys: the last one wins, as in JavaScript's JSON.parse
    writeln!(out, "{{\"good\":false,\"good\":true}}").unwrap();
    (out, good + 1, bad.len() as u64)
}

#[test]
fn every_kind_of_bad_line_is_counted_and_skipped_and_every_good_record_counted() {
    let (input, good, malformed) = abusive_input();
    let count = "SELECT COUNT(*) AS n FROM STREAM(60000, TIME) WHERE good = true";

    // the local query, from a file and from stdin
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("abuse.ndjson");
    std::fs::write(&file, &input).unwrap();
    let source = format!("file:{}", file.display());
    let out = needle(&["query", "--source", &source, "--format", "json", count]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["records"][0]["n"], good, "{answer}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&format!("skipped {malformed} malformed")), "{said}");
    assert!(said.contains("longer than runtime.max_line_bytes"), "{said}");
    let mut child = Command::new(NEEDLE)
        .args(["query", "--source", "stdin", "--format", "json", count])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["records"][0]["n"], good, "{answer}");

    // the server, over TCP: it stays up, counts the bad lines, and counts every good record
    let server = serve("tcp:127.0.0.1:0");
    let data = server.source.rsplit(' ').next().unwrap().to_owned();
    let url = server.url.clone();
    let waiting = std::thread::spawn(move || post(&format!("{url}/api/v1/query"), count));
    wait_for_queries(&server.url, 1);
    let mut s = TcpStream::connect(&data).unwrap();
    s.write_all(&input).unwrap();
    drop(s);
    // every good record counted by the query (its partials reach the joiner each tick)
    let listed = || {
        let r = reqwest::blocking::get(format!("{}/api/v1/queries", server.url)).unwrap();
        r.json::<serde_json::Value>().unwrap()["queries"][0].clone()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while listed()["records_matched"].as_u64() < Some(good) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        server.metric("needle_records_malformed_total"),
        malformed as f64,
        "{}",
        server.log()
    );
    assert_eq!(server.get("/healthz").status(), 200);
    let id = listed()["id"].as_str().unwrap().to_owned();
    let kill = format!("{}/api/v1/queries/{id}", server.url);
    reqwest::blocking::Client::new().delete(kill).send().unwrap();
    let (status, body) = waiting.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["records"][0]["n"], good, "{body}");
}

/// The resident size of a process, in bytes (Linux).
fn resident_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap();
    kb.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap() * 1024
}

#[test]
fn ten_thousand_idle_websockets_leave_the_server_answering() {
    const IDLE: usize = 10_000;
    // this process holds one end of each connection: let it have the files
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
    // (a machine that allows fewer files gets fewer connections, and says so)
    let idle_count = IDLE.min(usize::try_from(limit.rlim_max).unwrap_or(IDLE).saturating_sub(500));
    if idle_count < IDLE {
        eprintln!("this machine allows {} open files: {idle_count} connections", limit.rlim_max);
    }
    assert!(idle_count >= 500, "this machine allows {} open files", limit.rlim_max);
    let server = serve("tcp:127.0.0.1:0");
    let data = server.source.rsplit(' ').next().unwrap().to_owned();
    let before = resident_bytes(server.child.id());
    let ws_url = format!("{}/api/v1/ws", server.url.replace("http://", "ws://"));
    let idle: Vec<_> = (0..idle_count)
        .map(|i| match tungstenite::connect(ws_url.as_str()) {
            Ok((socket, _)) => socket,
            Err(e) => panic!("connection {i}: {e}\n{}", server.log()),
        })
        .collect();
    let held = resident_bytes(server.child.id()).saturating_sub(before);
    // every one of them still open, and a query finds its records beside them
    let url = server.url.clone();
    let query = "SELECT id FROM STREAM(30000, TIME) WHERE id = 'needle' LIMIT 5";
    let waiting = std::thread::spawn(move || post(&format!("{url}/api/v1/query"), query));
    wait_for_queries(&server.url, 1);
    let mut s = TcpStream::connect(&data).unwrap();
    for i in 0..10 {
        writeln!(s, "{{\"id\":\"{}\",\"i\":{i}}}", if i % 2 == 0 { "needle" } else { "hay" })
            .unwrap();
    }
    drop(s);
    let (status, body) = waiting.join().unwrap();
    assert_eq!((status, body["records"].as_array().map(Vec::len)), (200, Some(5)), "{body}");
    let per_connection = held / idle_count as u64;
    assert!(per_connection < 32 << 10, "{per_connection} bytes per idle WebSocket");
    eprintln!("{idle_count} idle WebSockets: {per_connection} bytes of resident size each");
    drop(idle);
    assert_eq!(server.get("/healthz").status(), 200);
}

#[test]
fn influx_lines_sent_over_tcp_are_records_bql_reads_and_bad_lines_are_counted() {
    let server = serve("tcp:127.0.0.1:0?format=influx&precision=s");
    assert!(server.source.contains("for influx lines (s) on"), "{}", server.source);
    let data = server.source.rsplit(' ').next().unwrap().to_owned();
    let url = server.url.clone();
    let waiting = std::thread::spawn(move || {
        let query =
            "SELECT measurement, COUNT(*) AS n, SUM(used) AS used, MIN(timestamp) AS first \
                     FROM STREAM(4000, TIME) WHERE region = 'west' GROUP BY measurement";
        post(&format!("{url}/api/v1/query"), query)
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.get("/api/v1/queries").json::<serde_json::Value>().unwrap()["queries"]
        .as_array()
        .is_none_or(Vec::is_empty)
    {
        assert!(Instant::now() < deadline, "the query never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut s = TcpStream::connect(&data).unwrap();
    for i in 0..60 {
        let region = if i % 2 == 0 { "west" } else { "east" };
        let (measurement, field) =
            if i % 3 == 0 { ("mem", "used=2i") } else { ("disk", "used=1.5") };
        writeln!(
            s,
            "{measurement},region={region},host=h{i} {field},ok=true {}",
            1_700_000_000 + i
        )
        .unwrap();
        if i % 20 == 0 {
            writeln!(s, "{measurement},region={region} used=broken").unwrap();
        }
    }
    drop(s);
    let (status, body) = waiting.join().unwrap();
    assert_eq!(status, 200, "{body}");
    let mut records = body["records"].as_array().expect("records").clone();
    records.sort_by_key(|r| r["measurement"].as_str().unwrap().to_owned());
    // of 60 points, 30 in the west: i even; mem where i % 3 == 0 (i = 0, 6, ..., 54)
    assert_eq!(
        serde_json::Value::Array(records),
        serde_json::json!([
            {"measurement": "disk", "n": 20, "used": 30.0, "first": 1_700_000_002_000i64},
            {"measurement": "mem", "n": 10, "used": 20.0, "first": 1_700_000_000_000i64},
        ]),
        "{body}"
    );
    let malformed = "needle_protocol_lines_malformed_total{protocol=\"influx\"}";
    assert_eq!(server.metric(malformed), 3.0);
    assert_eq!(server.metric("needle_records_malformed_total"), 3.0);
    assert!(server.log().contains("skipped malformed line #1"), "{}", server.log());
}

#[test]
fn an_unknown_tcp_format_is_refused_at_start_naming_the_known_ones() {
    let source = "tcp:127.0.0.1:0?format=statsd";
    let out = needle(&["serve", "--listen", "127.0.0.1:0", "--source", source]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown format 'statsd' (known: json, influx, opentsdb, graphite)"),
        "{stderr}"
    );
}
