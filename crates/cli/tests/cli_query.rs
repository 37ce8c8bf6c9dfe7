//! `needle query` end to end: the binary run on small NDJSON inputs (files and stdin), both
//! output formats, malformed input lines, query errors and exit codes.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// A file of `text` in a directory of its own, removed when the returned guard is dropped.
fn input_file(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new().prefix("needle-cli-query-").tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn needle(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_needle"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

const EVENTS: &str = r#"{"id":1,"city":"oslo","v":10}
{"id":2,"city":"rome","v":20}
{"id":3,"city":"oslo","v":30}
"#;

#[test]
fn json_format_prints_one_line_per_emission() {
    let (_dir, path) = input_file("events.ndjson", EVENTS);
    let source = format!("file:{}", path.display());
    let out = needle(
        &[
            "query",
            "--source",
            &source,
            "--format",
            "json",
            "SELECT city, SUM(v) AS s FROM STREAM() GROUP BY city ORDER BY city",
        ],
        "",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1);
    assert_eq!(
        lines[0]["records"],
        serde_json::json!([{"city":"oslo","s":40.0},{"city":"rome","s":20.0}])
    );
    assert_eq!(lines[0]["meta"]["Window"]["Final"], true);
    assert_eq!(lines[0]["meta"]["Stats"]["Records Seen"], 3);
    assert!(lines[0]["meta"]["Query"]["Finish Time"].is_i64());
}

#[test]
fn table_format_prints_a_table_and_a_summary() {
    let (_dir, path) = input_file("table.ndjson", EVENTS);
    let source = format!("file:{}", path.display());
    let out =
        needle(&["query", "--source", &source, "SELECT id, city FROM STREAM() WHERE v > 15"], "");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("city") && text.contains("rome") && !text.contains("10"), "{text}");
    assert!(
        text.contains("final window 1 (Windowless): 2 record(s), 2 matched of 3 seen"),
        "{text}"
    );
}

#[test]
fn malformed_lines_are_skipped_counted_and_sampled() {
    let input = "{\"id\":1}\nnot json\n\n[1,2]\n{\"id\":2}\n   \n{\"id\":\n";
    let (_dir, path) = input_file("bad.ndjson", input);
    let source = format!("file:{}", path.display());
    let out = needle(
        &["query", "--source", &source, "--format", "json", "SELECT COUNT(*) AS n FROM STREAM()"],
        "",
    );
    assert!(out.status.success());
    assert_eq!(json_lines(&out)[0]["records"][0]["n"], 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("skipped 3 malformed input line(s)"), "{err}");
    for line in ["line 2:", "line 4:", "line 7:"] {
        assert!(err.contains(line), "{line} in {err}");
    }
}

#[test]
fn stdin_source_and_raw_limit_end_early() {
    let out = needle(
        &[
            "query",
            "--source",
            "stdin",
            "--format",
            "json",
            "SELECT id FROM STREAM() WHERE city = 'oslo' LIMIT 1",
        ],
        EVENTS,
    );
    assert!(out.status.success());
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["records"], serde_json::json!([{"id": 1}]));
}

#[test]
fn the_query_can_come_from_stdin_with_a_file_source() {
    let (_dir, path) = input_file("q.ndjson", EVENTS);
    let source = format!("file:{}", path.display());
    let out = needle(
        &["query", "--source", &source, "--format", "json", "-"],
        "SELECT COUNT(*) FROM STREAM();\n",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json_lines(&out)[0]["records"][0]["COUNT(*)"], 3);
    let both = needle(&["query", "--source", "stdin", "-"], "");
    assert_eq!(both.status.code(), Some(2));
}

#[test]
fn a_bad_query_or_source_exits_2_with_the_rendered_error() {
    let out = needle(&["query", "--source", "stdin", "SELECT COUNT(*) FROM STREAM() WHERE"], "");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: ") && err.contains("line 1"), "{err}");
    assert!(out.stdout.is_empty());
    let out = needle(&["query", "--source", "kafka:x", "SELECT * FROM STREAM()"], "");
    assert_eq!(out.status.code(), Some(2));
    let out =
        needle(&["query", "--source", "file:/nonexistent/x.ndjson", "SELECT * FROM STREAM()"], "");
    assert_eq!(out.status.code(), Some(1));
}
