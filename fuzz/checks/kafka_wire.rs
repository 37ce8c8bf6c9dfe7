//! Target `kafka_wire`: any bytes through the decoders of the distributed mode's messages, which
//! come off Kafka topics any process may write. The first byte picks the decoder, the rest is
//! its input:
//!
//! - 0: a results-topic message (`ResultsMessage::decode`). Decoding never panics; what decodes
//!   encodes back to the very same bytes (the format has one spelling) and decodes again to
//!   the same message; a history report inside is read as the reader does.
//! - 1: a query-topic notice (`QueryNotice::from_bytes`): what decodes round-trips through
//!   `to_bytes`, and a worker's next steps on it (compile its query with its configuration,
//!   compile the plan for the engine, hash the plan) return.
//! - 2: a history read report (`ReadReport::from_bytes`), which round-trips.
//! - 3: an engine partial (`CompiledQuery::decode_partial`), the payload of a partial or a
//!   history piece, for one of a few queries of each aggregation kind (the next byte picks
//!   it). The rest is sealed in a valid envelope for that query (so that the fuzzer reaches
//!   the payload past the checksum) unless the next byte is odd, then taken as it is. A
//!   partial that decodes re-encodes to one that decodes to the same length of bytes, and the
//!   joiner merges both and emits without a panic.
//!
//! One body serves the fuzzer (`fuzz/fuzz_targets/kafka_wire.rs`) and the corpus replay test
//! (`crates/kafka/tests/fuzz_corpus.rs`), which both include this file by path.

use needle_engine::aggregate::codec;
use needle_engine::{CompiledQuery, QueryRun};
use needle_kafka::wire::{HistoryWire, QueryNotice, ReadReport, ResultsMessage};
use needle_query::QueryConfig;
use std::sync::{Arc, OnceLock};

/// A query of each aggregation kind, whose partials the `partial` mode decodes.
pub const QUERIES: &[&str] = &[
    "SELECT * FROM STREAM(1000, TIME) LIMIT 5",
    "SELECT COUNT(*), SUM(x), AVG(x), MIN(y), MAX(y) FROM STREAM(1000, TIME)",
    "SELECT g, COUNT(*), AVG(x) FROM STREAM(1000, TIME) GROUP BY g",
    "SELECT COUNT(DISTINCT user) FROM STREAM(1000, TIME)",
    "SELECT QUANTILE(x, LINEAR, 11) FROM STREAM(1000, TIME)",
    "SELECT FREQ(x, REGION, -10, 10.5, 0.5) FROM STREAM(1000, TIME)",
    "SELECT TOP(10, page) FROM STREAM(1000, TIME)",
    "SELECT g, COUNT(*) AS n FROM STREAM(1000, TIME) GROUP BY g HAVING COUNT(*) > 1 ORDER BY n DESC LIMIT 3",
];

/// Each query compiled, with its envelope's kind tag and fingerprint.
fn queries() -> &'static [(Arc<CompiledQuery>, u8, u64)] {
    static QUERIES_COMPILED: OnceLock<Vec<(Arc<CompiledQuery>, u8, u64)>> = OnceLock::new();
    QUERIES_COMPILED.get_or_init(|| {
        QUERIES
            .iter()
            .map(|text| {
                let plan = needle_query::compile(text, &QueryConfig::default()).expect(text);
                let query = Arc::new(CompiledQuery::compile(&plan).expect(text));
                let mut worker = query.new_worker();
                query.skip(&mut worker);
                let empty = query.flush(&mut worker).expect("a worker that saw a record");
                let bytes = query.encode_partial(&empty);
                // seen and matched (16 bytes), then the envelope: magic, version, kind, fingerprint
                let envelope = &bytes[16..];
                let fingerprint = u64::from_le_bytes(envelope[6..14].try_into().expect("8 bytes"));
                (query, envelope[5], fingerprint)
            })
            .collect()
    })
}

pub fn check(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else { return };
    match which % 4 {
        0 => results(rest),
        1 => notice(rest),
        2 => report(rest),
        _ => partial(rest),
    }
}

fn results(bytes: &[u8]) {
    let Ok(message) = ResultsMessage::decode(bytes) else { return };
    let encoded = message.encode();
    assert_eq!(encoded, bytes, "{message:?} encodes to other bytes than it was decoded from");
    assert_eq!(ResultsMessage::decode(&encoded).as_ref(), Ok(&message));
    if let ResultsMessage::History { event: HistoryWire::Done { report }, .. } = message {
        let _ = ReadReport::from_bytes(report);
    }
}

fn notice(bytes: &[u8]) {
    let Ok(notice) = QueryNotice::from_bytes(bytes) else { return };
    let again = QueryNotice::from_bytes(&notice.to_bytes());
    assert_eq!(again.as_ref(), Ok(&notice), "a notice does not round-trip");
    if let Ok(plan) = needle_query::compile(&notice.query, &notice.config) {
        let _ = needle_kafka::wire::plan_hash(&plan);
        let _ = CompiledQuery::compile(&plan);
    }
}

fn report(bytes: &[u8]) {
    let Ok(report) = ReadReport::from_bytes(bytes) else { return };
    let again = ReadReport::from_bytes(&ReadReport::to_bytes(&report));
    assert_eq!(again.as_ref(), Ok(&report), "a read report does not round-trip");
}

fn partial(bytes: &[u8]) {
    let Some((&pick, payload)) = bytes.split_first() else { return };
    let queries = queries();
    let (query, kind, fingerprint) = &queries[usize::from(pick >> 1) % queries.len()];
    let bytes = if pick & 1 == 1 {
        payload.to_vec()
    } else {
        // seen and matched, then the payload in its envelope
        let (header, payload) = payload.split_at(payload.len().min(16));
        let mut bytes = header.to_vec();
        bytes.resize(16, 0);
        bytes.extend_from_slice(&codec::seal(*kind, *fingerprint, payload));
        bytes
    };
    let Ok(partial) = query.decode_partial(&bytes) else { return };
    let encoded = query.encode_partial(&partial);
    let again = query
        .decode_partial(&encoded)
        .unwrap_or_else(|e| panic!("a re-encoded partial does not decode: {e}"));
    assert_eq!(query.encode_partial(&again).len(), encoded.len());
    let mut run = QueryRun::new(query.clone(), "fuzz", 0);
    let _ = run.merge(partial, 1);
    let _ = run.merge(again, 2);
    let _ = run.tick(1000);
    let end = run.end_ms();
    let _ = run.finish(end);
}
