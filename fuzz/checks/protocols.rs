//! Target `protocols`: any bytes as lines of a metrics protocol, each through
//! `needle_protocols::Format::parse_line` (what a `tcp:...?format=` source does with every line
//! a client sends). A line parses to a record or to an error, never a panic; a record has the
//! protocol's shape (its name part first, a non-empty STRING; `value` a finite number next to
//! last for OpenTSDB and Graphite, a DOUBLE for Graphite; `timestamp` last, a LONG; tags
//! STRINGs; no DOUBLE that is not finite); and its JSON text, what the source hands to the
//! workers, decodes back to the same record. The lines parsed one after another into one
//! reused point (as a source parses a connection's lines, the series it saw kept) give what
//! each gives parsed alone.
//!
//! Input: byte 0 (mod 6) picks the protocol: line protocol in ns, us, ms, s, then OpenTSDB,
//! then Graphite; the rest is the lines, split at `\n`. Byte 0 = 0xff instead makes the rest
//! a Prometheus remote write body (snappy, protobuf), through
//! `needle_protocols::remote_write::decode`.
//!
//! One body serves the fuzzer (`fuzz/fuzz_targets/protocols.rs`) and the corpus replay test
//! (`crates/protocols/tests/fuzz_corpus.rs`), which both include this file by path.

use needle_protocols::{Format, Precision};
use needle_record::Value;

const NOW_MS: i64 = 1_700_000_000_000;
/// Byte 0 that makes the rest a Prometheus remote write request body.
const REMOTE_WRITE: u8 = 0xff;

/// A remote write body decodes to records or to an error, never a panic; each record is
/// `__name__` (a STRING) first, its labels (STRINGs), then `value` (a finite DOUBLE) and
/// `timestamp` (a LONG); and its JSON decodes back to the same record.
fn check_remote_write(body: &[u8]) {
    let Ok(decoded) = needle_protocols::remote_write::decode(body) else { return };
    for record in &decoded.records {
        let fields: Vec<(&String, &Value)> = record.iter().collect();
        assert!(fields.len() >= 3, "{fields:?}");
        assert_eq!(fields[0].0, "__name__", "{fields:?}");
        assert!(matches!(fields[0].1, Value::String(_)), "{fields:?}");
        let n = fields.len();
        assert_eq!(fields[n - 2].0, "value", "{fields:?}");
        assert!(matches!(fields[n - 2].1, Value::Double(v) if v.is_finite()), "{fields:?}");
        assert_eq!(fields[n - 1].0, "timestamp", "{fields:?}");
        assert!(matches!(fields[n - 1].1, Value::Long(_)), "{fields:?}");
        for (_, label) in &fields[1..n - 2] {
            assert!(matches!(label, Value::String(_)), "{fields:?}");
        }
        let back = needle_record::decode_record(record.to_json().as_bytes()).expect("its JSON");
        assert_eq!(&back, record);
    }
}

/// A parsed point says which of its first parts are its series (the lead and the tags: at least
/// the lead, all text), and every point of one kept series has the same ones: what a caller
/// keeps of a series by its id is what a line of it would give. `series`: the parts each id
/// had first.
pub fn check_series(
    point: &needle_protocols::Point,
    series: &mut std::collections::HashMap<needle_protocols::SeriesId, String>,
) {
    use needle_protocols::PointValue;
    let parts: Vec<(&str, PointValue<'_>)> = point.fields().take(point.series_parts()).collect();
    assert!(
        !parts.is_empty() && parts.len() == point.series_parts(),
        "a point says its series: {parts:?}"
    );
    assert!(parts.iter().all(|(_, v)| matches!(v, PointValue::Text(_))), "{parts:?}");
    if let Some(id) = point.series_id() {
        let parts = format!("{parts:?}");
        let first = series.entry(id).or_insert_with(|| parts.clone());
        assert_eq!(*first, parts, "the points of series {id:?} differ");
    }
}

pub fn check(data: &[u8]) {
    let [choice, text @ ..] = data else { return };
    if *choice == REMOTE_WRITE {
        return check_remote_write(text);
    }
    let format = match choice % 6 {
        0 => Format::Influx(Precision::Nanoseconds),
        1 => Format::Influx(Precision::Microseconds),
        2 => Format::Influx(Precision::Milliseconds),
        3 => Format::Influx(Precision::Seconds),
        4 => Format::OpenTsdb,
        _ => Format::Graphite,
    };
    let mut reused = needle_protocols::Point::new();
    let mut series = std::collections::HashMap::new();
    for line in text.split(|&b| b == b'\n') {
        let alone = format.parse_line(line, NOW_MS);
        let parsed = format.parse_point(line, NOW_MS, &mut reused);
        if let Ok(true) = parsed {
            check_series(&reused, &mut series);
        }
        let in_turn = parsed.and_then(|some| some.then(|| reused.to_record()).transpose());
        assert_eq!(alone, in_turn, "{:?}", String::from_utf8_lossy(line));
        let record = match alone {
            Ok(Some(record)) => record,
            Ok(None) => continue,
            Err(error) => {
                assert!(!error.to_string().is_empty());
                continue;
            }
        };
        let fields: Vec<(&String, &Value)> = record.iter().collect();
        let (name, trail) = match format {
            Format::Influx(_) => ("measurement", &["timestamp"][..]),
            Format::OpenTsdb => ("metric", &["value", "timestamp"][..]),
            Format::Graphite => ("path", &["value", "timestamp"][..]),
        };
        assert!(fields.len() > trail.len(), "{fields:?}");
        assert_eq!(fields[0].0, name, "{fields:?}");
        assert!(matches!(fields[0].1, Value::String(s) if !s.is_empty()), "{fields:?}");
        let (last, ts) = fields[fields.len() - 1];
        assert_eq!(last, "timestamp", "{fields:?}");
        assert!(matches!(ts, Value::Long(_)), "{fields:?}");
        if trail.len() == 2 {
            let (value_name, value) = fields[fields.len() - 2];
            assert_eq!(value_name, "value", "{fields:?}");
            match (format, value) {
                (Format::Graphite, Value::Double(v)) | (Format::OpenTsdb, Value::Double(v)) => {
                    assert!(v.is_finite(), "{fields:?}")
                }
                (Format::OpenTsdb, Value::Long(_)) => {}
                _ => panic!("not a value of {}: {fields:?}", format.name()),
            }
        }
        for (key, value) in &fields[1..fields.len() - trail.len()] {
            assert!(!key.is_empty() && *key != name && !trail.contains(&key.as_str()), "{key}");
            match (format, value) {
                (_, Value::String(_)) => {}
                (Format::Influx(_), Value::Long(_) | Value::Bool(_)) => {}
                (Format::Influx(_), Value::Double(v)) => assert!(v.is_finite(), "{key}: {v}"),
                _ => panic!("'{key}' is not a tag or field of {}: {value:?}", format.name()),
            }
        }
        let json = record.to_json();
        let back = needle_record::decode_record(json.as_bytes())
            .unwrap_or_else(|e| panic!("the record's JSON {json} does not decode: {e}"));
        assert_eq!(back, record, "{json}");
    }
}
