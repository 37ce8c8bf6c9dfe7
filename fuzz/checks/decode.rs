//! Target `decode`: any bytes, as one NDJSON line, through every JSON reader of
//! needle-record — `decode_record`, `FieldSet::decode` checking the whole line (needle's checker)
//! and checking only the fields read (sonic-rs's lookup), and the checker alone with each
//! stage-1 kernel the CPU runs. Any panic, stack overflow or hang is a bug, and so is any
//! disagreement: the kernels give the same answer; the checker accepts exactly what
//! `decode_value` accepts; a line `decode_record` accepts is accepted by both `FieldSet` modes
//! with the same values; the whole-line mode refuses nothing `decode_record` accepts and, on
//! lines of at most `STREAM_MAX_BYTES`, accepts nothing it refuses; error offsets lie in the line;
//! `FieldSet::whole_record` of a line either mode accepted is `decode_record`'s answer (the
//! same fields, refused when it refuses), kept as the line's text when accepted.
//!
//! One body serves the fuzzer (`fuzz/fuzz_targets/decode.rs`) and the corpus replay test
//! (`crates/record/tests/fuzz_corpus.rs`), which both include this file by path.

use needle_record::check::{check_with, Kernel};
use needle_record::{
    decode_record, decode_value, FieldSet, Record, RecordError, Validation, Value, STREAM_MAX_BYTES,
};

fn offset_in_line(result: &Result<impl Sized, RecordError>, len: usize) {
    if let Err(RecordError::Malformed { offset: Some(at), .. }) = result {
        assert!(*at <= len, "error offset {at} past the line's {len} bytes");
    }
}

/// `record`'s fields of `names`, each restricted to `keys` when asked by key and an object.
fn restricted(record: &Record, wanted: &[(&str, Option<&str>)]) -> Vec<(String, Value)> {
    record
        .iter()
        .filter(|(k, _)| wanted.iter().any(|(name, _)| name == k))
        .map(|(k, v)| {
            let keys: Vec<&str> =
                wanted.iter().filter(|(n, _)| n == k).filter_map(|(_, key)| *key).collect();
            let whole = wanted.iter().any(|(n, key)| n == k && key.is_none());
            let value = match v {
                Value::Map(map) if !whole => Value::Map(
                    map.iter()
                        .filter(|(key, _)| keys.contains(&key.as_str()))
                        .map(|(key, v)| (key.clone(), v.clone()))
                        .collect(),
                ),
                other => other.clone(),
            };
            (k.clone(), value)
        })
        .collect()
}

pub fn check(data: &[u8]) {
    let reference = decode_value(data);
    offset_in_line(&reference, data.len());
    let mut kernels = Kernel::available().into_iter();
    let first = check_with(kernels.next().expect("a kernel"), data);
    for kernel in kernels {
        assert_eq!(check_with(kernel, data), first, "{kernel:?} disagrees");
    }
    offset_in_line(&first, data.len());
    assert_eq!(first.is_ok(), reference.is_ok(), "checker {first:?}, decode_value {reference:?}");

    let full = decode_record(data);
    let wanted = [("a", None), ("b", Some("c")), ("d", None)];
    let line = FieldSet::with_parts(wanted);
    let fields = FieldSet::with_parts(wanted).with_validation(Validation::Fields);
    let by_line = line.decode(data);
    let by_fields = fields.decode(data);
    offset_in_line(&by_line, data.len());
    offset_in_line(&by_fields, data.len());
    match &full {
        Ok(record) => {
            let expected = restricted(record, &wanted);
            let read = by_line.as_ref().expect("the line mode refused a valid record");
            assert_eq!(
                read.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>(),
                expected
            );
            // the fields mode keeps one value of a key met twice: compare the others
            let read = by_fields.as_ref().expect("the fields mode refused a valid record");
            let text = String::from_utf8_lossy(data);
            for (k, v) in read.iter() {
                if text.matches(&format!("\"{k}\"")).count() == 1 {
                    let want = expected.iter().find(|(name, _)| name == k).map(|(_, v)| v);
                    assert_eq!(Some(v), want, "fields mode, field {k}");
                }
            }
        }
        Err(_) if data.len() <= STREAM_MAX_BYTES => {
            assert!(by_line.is_err(), "the line mode accepted a short line decode_record refuses")
        }
        Err(_) => {}
    }
    for (set, read) in [(&line, &by_line), (&fields, &by_fields)] {
        if read.is_err() {
            continue; // a worker asks for the whole record only of a line its set accepted
        }
        match (&full, set.whole_record(data)) {
            (Ok(record), Ok(whole)) => {
                assert_eq!(&whole, record, "whole_record's fields");
                let text = std::str::from_utf8(data).expect("decode_record accepted it");
                let trimmed = text.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r'));
                assert_eq!(whole.json_text(), Some(trimmed), "an accepted line is kept as text");
            }
            (Err(_), Err(_)) => {}
            (full, whole) => panic!("decode_record {full:?} but whole_record {whole:?}"),
        }
    }
}
