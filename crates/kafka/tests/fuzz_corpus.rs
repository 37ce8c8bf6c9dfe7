//! The fuzz target `kafka_wire` on its committed inputs (`fuzz/corpus/kafka_wire/`, and
//! `fuzz/regressions/kafka_wire/` for inputs that once failed): the same checking body the
//! fuzzer runs (`fuzz/checks/kafka_wire.rs`: the results and query topics' messages, read
//! reports and engine partials), here on stable in the normal test run, without a broker.
//! `make fuzz` runs the fuzzer.

#[path = "../../../fuzz/checks/kafka_wire.rs"]
mod kafka_wire;
#[path = "../../../fuzz/checks/replay.rs"]
mod replay;

#[test]
fn the_kafka_wire_corpus_and_regressions_pass_its_fuzz_check() {
    replay::replay("kafka_wire", kafka_wire::check);
}

/// Writes the seeds of `fuzz/corpus/kafka_wire/` (each file: the mode byte, then its input):
/// `cargo test -p needle-kafka --test fuzz_corpus -- --ignored`.
#[test]
#[ignore = "writes the committed seeds"]
fn write_the_kafka_wire_seeds() {
    use needle_engine::{CompiledQuery, EvalContext};
    use needle_kafka::wire::{HistoryWire, QueryNotice, ReadReport, ResultsMessage};
    use needle_query::QueryConfig;
    use needle_runtime::history::ReplayReport;

    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/kafka_wire");
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, mode: u8, bytes: &[u8]| {
        std::fs::write(dir.join(name), [&[mode][..], bytes].concat()).unwrap();
    };
    let lines = [
        r#"{"x": 1.5, "y": 2, "g": "a", "user": "u1", "page": "/a"}"#,
        r#"{"x": -3, "y": 7.25, "g": "b", "user": "u2", "page": "/b"}"#,
        r#"{"x": 4, "y": null, "g": "a", "user": "u1", "page": "/a", "z": [1, {"k": "v"}]}"#,
    ];
    let mut some_partial = Vec::new();
    for (i, text) in kafka_wire::QUERIES.iter().enumerate() {
        let plan = needle_query::compile(text, &QueryConfig::default()).unwrap();
        let query = CompiledQuery::compile(&plan).unwrap();
        let mut worker = query.new_worker();
        for line in lines {
            let record = needle_record::decode_record(line.as_bytes()).unwrap();
            query.process(&mut worker, &record, &EvalContext::new(0));
        }
        let bytes = query.encode_partial(&query.flush(&mut worker).unwrap());
        let pick = u8::try_from(i).unwrap() << 1;
        // sealed: seen and matched, then the payload without its 26-byte envelope header
        let sealed = [&[pick][..], &bytes[..16], &bytes[16 + 26..]].concat();
        write(&format!("partial-{i}-sealed"), 3, &sealed);
        write(&format!("partial-{i}-raw"), 3, &[&[pick | 1][..], &bytes].concat());
        if i == 2 {
            some_partial = bytes;
        }
    }
    let report = ReadReport::to_bytes(&ReplayReport {
        records_read: 9,
        seen_after: 4,
        blocks_failed: 1,
        seconds: 0.25,
        workers: 2,
        workers_missing: vec!["w2".into()],
        ..ReplayReport::default()
    });
    write("report", 2, &report);
    let messages = [
        (
            "results-partial",
            ResultsMessage::Partial { owner: "api-1", id: "api-1-5f-3", partial: &some_partial },
        ),
        ("results-progress", ResultsMessage::Progress { records: 123_456_789 }),
        ("results-worker", ResultsMessage::Worker { name: "w1", history: true }),
        (
            "results-planned",
            ResultsMessage::History {
                owner: "api",
                id: "q",
                worker: "w1",
                event: HistoryWire::Planned { data: Some((-5, 1_700_000_000_000)) },
            },
        ),
        (
            "results-piece",
            ResultsMessage::History {
                owner: "api",
                id: "q",
                worker: "w1",
                event: HistoryWire::Piece { at_ms: 1_700_000_000_000, partial: &some_partial },
            },
        ),
        (
            "results-done",
            ResultsMessage::History {
                owner: "api",
                id: "q",
                worker: "w1",
                event: HistoryWire::Done { report: &report },
            },
        ),
    ];
    let cut = ResultsMessage::Cut { id: "api_b-1f-3", emission: 4, through: 1_234, at_ms: 1 << 40 };
    let messages = messages
        .into_iter()
        .chain([("results-api", ResultsMessage::Api { name: "api_b" }), ("results-cut", cut)]);
    for (name, message) in messages {
        write(name, 0, &message.encode());
    }
    let notice = QueryNotice {
        v: 1,
        id: "n-1".into(),
        owner: "n".into(),
        query: "SELECT g, COUNT(*) FROM STREAM(1000, TIME) WHERE x > 1 GROUP BY g".into(),
        config: QueryConfig::default(),
        plan: "00".into(),
        received_ms: 1,
        ends_ms: 1001,
        history: Some((-3_600_000, None)),
        client: "token-ab12".into(),
        results_from: Some(42),
        url: String::new(),
        history_workers: Vec::new(),
        history_version: None,
    };
    write("notice", 1, &notice.to_bytes());
    let notice = QueryNotice {
        query: "SELECT * FROM STREAM(1000, TIME) LIMIT 1".into(),
        history: None,
        ..notice
    };
    write("notice-raw", 1, &notice.to_bytes());
}
