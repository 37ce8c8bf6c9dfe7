//! Runs the real `needle gen` binary: output shape and count, determinism, needles, errors,
//! pacing, and a reader that stops early.

use needle_record::{decode_record, Value};
use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

fn gen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_needle")).arg("gen").args(args).output().unwrap()
}

fn ok_lines(args: &[&str]) -> Vec<String> {
    let out = gen(args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty());
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect()
}

#[test]
fn writes_count_records_of_each_workload() {
    for (workload, fields) in [("bullet", 92), ("iot", 15), ("small", 4)] {
        let lines = ok_lines(&[workload, "--count", "25", "--seed", "3"]);
        assert_eq!(lines.len(), 25, "{workload}");
        for line in &lines {
            assert_eq!(decode_record(line.as_bytes()).unwrap().len(), fields, "{workload}");
        }
    }
    let iot = ok_lines(&["iot", "--count", "6", "--sensors", "3"]);
    let sensors: Vec<String> = iot
        .iter()
        .map(|l| {
            let r = decode_record(l.as_bytes()).unwrap();
            r.get("sensor").and_then(Value::as_str).unwrap().to_owned()
        })
        .collect();
    assert_eq!(sensors, ["sensor_0", "sensor_1", "sensor_2", "sensor_0", "sensor_1", "sensor_2"]);
}

#[test]
fn same_seed_same_bytes() {
    let a = gen(&["bullet", "--count", "50", "--seed", "9"]).stdout;
    let b = gen(&["bullet", "--count", "50", "--seed", "9"]).stdout;
    let c = gen(&["bullet", "--count", "50", "--seed", "10"]).stdout;
    assert_eq!(a.iter().filter(|b| **b == b'\n').count(), 50);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn needles_land_where_asked() {
    let lines = ok_lines(&[
        "bullet",
        "--count",
        "40",
        "--needle",
        "demographics.country=Atlantis",
        "--needle",
        "timespent=99999",
        "--needle-count",
        "3",
        "--needle-at",
        "10",
    ]);
    let hits: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            let r = decode_record(l.as_bytes()).unwrap();
            let country = r.get("demographics").and_then(Value::as_map).unwrap()["country"].clone();
            country == Value::from("Atlantis") && r.get("timespent") == Some(&Value::Long(99999))
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(hits, [10, 11, 12]);
    // Without --needle-at, the needle is in the middle.
    let lines = ok_lines(&["bullet", "--count", "9", "--needle", "id=abc"]);
    let at: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains(r#""id":"abc""#))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(at, [4]);
}

#[test]
fn bad_needles_and_flags_fail_with_exit_2() {
    for (args, want) in [
        (
            &["bullet", "--count", "5", "--needle", "nosuch=1"][..],
            "bad needle: bullet has no field `nosuch`",
        ),
        (&["bullet", "--count", "5", "--needle", "noequals"], "expected FIELD=VALUE"),
        (&["bullet", "--count", "5", "--needle", "timespent=abc"], "not an integer"),
        (&["bullet", "--count", "5", "--needle", "id=x", "--needle-at", "5"], "do not fit"),
        (&["small", "--count", "5", "--needle", "id=x"], "bullet only"),
        (&["bullet", "--needle-count", "2"], "need --needle"),
        (&["small", "--sensors", "5"], "sensors applies to iot"),
        (&["bullet", "--rate", "0"], "rate must be a positive"),
        (&["flood"], "invalid value 'flood'"),
        (&["bullet", "--count", "many"], "invalid value 'many'"),
        (&["bullet", "--bogus"], "unexpected argument '--bogus'"),
    ] {
        let out = gen(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn a_reader_that_stops_early_ends_an_endless_stream_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_needle"))
        .args(["gen", "small"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    for _ in 0..3 {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(decode_record(line.trim_end().as_bytes()).is_ok(), "{line}");
    }
    drop(reader);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn rate_paces_the_output() {
    let start = std::time::Instant::now();
    let lines = ok_lines(&["small", "--count", "21", "--rate", "100"]);
    assert_eq!(lines.len(), 21);
    // Record 20 is due 0.2 s after the start.
    assert!(start.elapsed() >= std::time::Duration::from_millis(190), "{:?}", start.elapsed());
}
