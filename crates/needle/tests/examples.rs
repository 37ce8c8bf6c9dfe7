//! The examples in `examples/` run as a user runs them (the binaries `cargo test` builds), and
//! do what their docs say: the typed TOP K prints a window's top products, the axum service
//! passes its self-test, and the Kafka reader finds the needles in a topic of a real broker.

use needle_kafka::testing::{Broker, Partitions};
use std::path::PathBuf;
use std::process::Command;

/// An example's binary, built beside this test's (`cargo test` builds the examples; a run of
/// this test alone builds them here).
fn example(name: &str) -> Command {
    let deps = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();
    let profile = deps.parent().unwrap();
    let path: PathBuf = profile.join("examples").join(name);
    if !path.exists() {
        let mut build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        build.args(["build", "-p", "needle", "--examples"]);
        if profile.file_name().is_some_and(|p| p == "release") {
            build.arg("--release");
        }
        assert!(build.status().unwrap().success(), "building the examples failed");
    }
    Command::new(path)
}

fn run(command: &mut Command) -> String {
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{:?} failed: {stdout}\n{}",
        command,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn typed_top_k_prints_the_most_viewed_products_of_each_window() {
    let out = run(example("typed_top_k").arg("2"));
    let windows: Vec<&str> = out.lines().filter(|l| l.starts_with("window ")).collect();
    assert!(windows.len() >= 2, "{out}");
    for window in &windows {
        // the producer views kettles most, then lamps, then desks
        let at = |s: &str| window.find(s).unwrap_or_else(|| panic!("{s} not in {window}"));
        assert!(at("\"kettle\"") < at("\"lamp\"") && at("\"lamp\"") < at("\"desk\""), "{window}");
    }
    assert!(out.contains("pushed "), "{out}");
}

#[test]
fn the_axum_service_answers_its_own_routes_and_needles() {
    let out = run(example("axum_service").arg("--self-test"));
    assert!(out.contains("self-test passed"), "{out}");
}

#[test]
fn the_kafka_reader_finds_the_needles_of_a_topic() {
    let broker = Broker::shared();
    let topic = "examples-kafka-reader";
    broker.create_topic(topic, 2).unwrap();
    let records: Vec<String> = (0..200)
        .map(|i| format!(r#"{{"i":{i},"kind":"{}"}}"#, if i % 20 == 0 { "needle" } else { "hay" }))
        .collect();
    let values: Vec<&[u8]> = records.iter().map(|r| r.as_bytes()).collect();
    broker.produce(topic, Partitions::Spread(2), &values).unwrap();
    let spec = format!("kafka://{}/{topic}?start=earliest", broker.bootstrap);
    let out = run(example("kafka_reader")
        .arg(spec)
        .arg("SELECT i FROM STREAM(30000, TIME) WHERE kind = 'needle' LIMIT 10"));
    let last: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let mut found: Vec<i64> =
        last["records"].as_array().unwrap().iter().map(|r| r["i"].as_i64().unwrap()).collect();
    found.sort();
    assert_eq!(found, (0..10).map(|n| n * 20).collect::<Vec<_>>(), "{out}");
}
