//! `needle validate` and `needle explain` run as a user runs them: the real binary, its exit code,
//! stdout and stderr; the query as an argument or on stdin (`-`).

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn needle(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_needle"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run needle");
    {
        let mut input = child.stdin.take().expect("stdin");
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).expect("write stdin");
        }
    }
    child.wait_with_output().expect("needle output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

#[test]
fn validate_prints_the_plan_as_json() {
    let out =
        needle(&["validate", "SELECT a, COUNT(*) AS n FROM STREAM(5000, TIME) GROUP BY a"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON plan");
    assert_eq!(plan["duration_ms"], 5000);
    assert_eq!(plan["stage"]["aggregation"]["type"], "GROUP_BY");
    assert_eq!(plan["stage"]["aggregation"]["aggregates"][0]["name"], "n");
    assert!(out.stderr.is_empty());
}

#[test]
fn validate_reports_errors_with_position_caret_and_hint() {
    let query = "SELECT a,\n       b,\n       COUNT(*)\nFROM STREAM()\nGROUP BY a";
    let out = needle(&["validate", query], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = text(&out.stderr);
    assert_eq!(
        err,
        "error: 'b' is neither grouped nor aggregated\nat line 2, column 8\n         b,\n         ^\n\
         hint: add it to GROUP BY (now: a) or put it inside an aggregate\n"
    );
}

#[test]
fn validate_reads_stdin_and_json_queries() {
    let json = r#"{"filters": [{"field": "id", "operation": "==", "values": ["x"]}],
                  "aggregation": {"type": "LIMIT", "size": 10}, "duration": 20000}"#;
    let out = needle(&["validate", "-"], Some(json));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON plan");
    assert_eq!(plan["stage"]["filter"], "id = 'x'");
    assert_eq!(plan["stage"]["aggregation"]["size"], 10);
    assert_eq!(plan["duration_ms"], 20000);

    let out = needle(&["validate", "-"], Some("SELECT * FROM STREAM() LIMIT 501\n"));
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.starts_with(
            "error: LIMIT 501 is more than the maximum of 500 records\nat line 1, column 30\n"
        ),
        "{err}"
    );
    let caret = format!("\n{}^^^\nhint: ask for at most 500 records\n", " ".repeat(31));
    assert!(err.contains(&caret), "{err}");

    let out = needle(
        &["validate", r#"{"filters": [{"field": "a", "operation": "=~", "values": ["x"]}]}"#],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("error: filters[0].operation: unknown operation '=~'\n"));
}

#[test]
fn explain_describes_the_plan_and_its_sketch_error() {
    let out = needle(&["explain", "SELECT COUNT(DISTINCT user) AS users FROM STREAM(MAX, TIME) WHERE x > 1 WINDOWING EVERY(10000, TIME, ALL)"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let words = text(&out.stdout);
    assert!(words.contains("Runs for 600000 ms (the maximum duration)"), "{words}");
    assert!(words.contains("every 10000 ms over everything since the query started"), "{words}");
    assert!(words.contains("x > 1"), "{words}");
    assert!(words.contains("Theta sketch of 16384 nominal entries"), "{words}");
    assert!(words.contains("0.78%"), "{words}");

    let out = needle(&["explain", "-"], Some("SELECT QUANTILE(d, LINEAR, 11) FROM STREAM()"));
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("KLL sketch with k = 200"));
    assert!(text(&out.stdout).contains("1.65%"));

    let out = needle(&["explain", "SELECT TOP(3, page) FROM STREAM()"], None);
    assert!(text(&out.stdout).contains("3.5/1024 = 0.34%"));

    let out = needle(&["explain", "SELECT * FROM STREAM() WHERE COUNT(*) > 1"], None);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("at line 1, column 30\n") && err.contains("^^^^^^^^\nhint: "), "{err}");
}
