//! Prometheus remote write 1.0: a request body (a snappy block holding a protobuf
//! `prometheus.WriteRequest`) turned into needle [`Record`]s, one per sample:
//! `{"__name__": ..., <labels>..., "value": f64, "timestamp": ms}`.
//!
//! - **Decoding**: `snap` for the snappy block (Prometheus sends the raw block format, not the
//!   framed one) and `prost` for the protobuf, with the messages declared here (the four of
//!   remote write 1.0 that carry samples; a field needle does not read, such as the metadata,
//!   is skipped as protobuf skips unknown fields), so no `protoc` is needed to build.
//! - **Bounds**: a body whose snappy header says it would decompress past
//!   [`MAX_DECODED_BYTES`] is refused before anything is allocated.
//! - **Labels** are STRINGs named as Prometheus names them; a label named `value` or
//!   `timestamp` is kept as `_value` / `_timestamp` (the crate's rule for the shape's own names);
//!   the same label twice in one series is malformed.
//! - **Stale markers**: Prometheus marks a series gone with a NaN sample (and any sample may be
//!   NaN or infinite). A record's JSON cannot hold those, so such samples are skipped and
//!   counted apart ([`Decoded::non_finite`]), not refused: they are not errors of the writer.
//! - **Errors**: a body that is not snappy, or not a `WriteRequest`, is an error for the whole
//!   body (the HTTP answer is 400: Prometheus does not retry a 4xx). A series with a malformed
//!   label set loses its samples alone, counted in [`Decoded::malformed`].

use crate::point::{Point, PointValue};
use crate::ProtocolError;
use needle_record::Record;
use prost::Message;

/// The largest decompressed body accepted (Prometheus sends at most a few MB a request).
pub const MAX_DECODED_BYTES: usize = 64 << 20;

const PROTOCOL: &str = "remote write";

/// `prometheus.WriteRequest`: field 1, the time series (3, the metadata, is not read).
#[derive(Clone, PartialEq, Message)]
pub struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

/// `prometheus.TimeSeries`: its labels (1) and samples (2); exemplars and histograms (3, 4)
/// are not read.
#[derive(Clone, PartialEq, Message)]
pub struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
}

impl TimeSeries {
    /// A series of `labels` (name, value) and `samples` (value, timestamp in ms).
    pub fn of(labels: &[(&str, &str)], samples: &[(f64, i64)]) -> TimeSeries {
        TimeSeries {
            labels: labels
                .iter()
                .map(|(name, value)| Label { name: (*name).into(), value: (*value).into() })
                .collect(),
            samples: samples
                .iter()
                .map(|(value, timestamp)| Sample { value: *value, timestamp: *timestamp })
                .collect(),
        }
    }
}

/// `prometheus.Label`.
#[derive(Clone, PartialEq, Message)]
pub struct Label {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `prometheus.Sample`: a value and its time in ms.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    #[prost(double, tag = "1")]
    pub value: f64,
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// What a request body held.
#[derive(Debug, Default, PartialEq)]
pub struct Decoded {
    /// One record per finite sample, series by series, in the body's order.
    pub records: Vec<Record>,
    /// Samples of series whose labels are malformed (no `__name__`, a label twice).
    pub malformed: u64,
    /// NaN and infinite samples (Prometheus's stale markers among them), skipped.
    pub non_finite: u64,
}

/// Decodes a remote write request body (see the module doc).
pub fn decode(body: &[u8]) -> Result<Decoded, ProtocolError> {
    let mut records = Vec::new();
    let counts = decode_points(body, |point| {
        // the series' names were checked: a record is made of every point
        if let Ok(record) = point.to_record() {
            records.push(record);
        }
    })?;
    Ok(Decoded { records, malformed: counts.malformed, non_finite: counts.non_finite })
}

/// What [`decode_points`] counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Points handed on.
    pub points: u64,
    /// Samples of series whose labels are malformed (no `__name__`, a label twice).
    pub malformed: u64,
    /// NaN and infinite samples, skipped.
    pub non_finite: u64,
}

/// Decodes a remote write request body into points, handing each finite sample's to `each`,
/// series by series, in the body's order: a point's names are checked once per series (a
/// series whose labels are malformed hands on nothing), so [`Point::check`] need not be asked
/// again.
pub fn decode_points(body: &[u8], mut each: impl FnMut(&Point)) -> Result<Counts, ProtocolError> {
    let request = decode_request(body)?;
    let mut counts = Counts::default();
    let mut point = Point::new();
    for series in &request.timeseries {
        let Some(name) = series.labels.iter().find(|l| l.name == "__name__") else {
            counts.malformed += series.samples.len() as u64;
            continue;
        };
        point.start(PROTOCOL);
        point.set_lead("__name__", &name.value);
        for label in series.labels.iter().filter(|l| l.name != "__name__") {
            point.push_user(&label.name, PointValue::Text(&label.value));
        }
        point.end_series();
        // the series' trailing parts, for the check (their names are all it reads)
        point.push_trail("value", PointValue::Double(0.0));
        point.push_trail("timestamp", PointValue::Long(0));
        if point.check().is_err() {
            counts.malformed += series.samples.len() as u64;
            continue;
        }
        for sample in &series.samples {
            if !sample.value.is_finite() {
                counts.non_finite += 1;
                continue;
            }
            point.clear_trail();
            point.push_trail("value", PointValue::Double(sample.value));
            point.push_trail("timestamp", PointValue::Long(sample.timestamp));
            each(&point);
            counts.points += 1;
        }
    }
    Ok(counts)
}

/// The `WriteRequest` a body holds: the snappy block decompressed and the protobuf decoded,
/// no record built (what [`decode`] reads records from; on its own, the bare cost of the wire
/// format).
pub fn decode_request(body: &[u8]) -> Result<WriteRequest, ProtocolError> {
    let length = snap::raw::decompress_len(body)
        .map_err(|e| ProtocolError::malformed(PROTOCOL, format!("not a snappy block: {e}")))?;
    if length > MAX_DECODED_BYTES {
        return Err(ProtocolError::malformed(
            PROTOCOL,
            format!("the body would decompress to {length} bytes, past {MAX_DECODED_BYTES}"),
        ));
    }
    let bytes = snap::raw::Decoder::new()
        .decompress_vec(body)
        .map_err(|e| ProtocolError::malformed(PROTOCOL, format!("not a snappy block: {e}")))?;
    WriteRequest::decode(bytes.as_slice())
        .map_err(|e| ProtocolError::malformed(PROTOCOL, format!("not a remote write request: {e}")))
}

/// A request body of `request`, as Prometheus sends it (for tests, benchmarks and fuzzing).
pub fn encode(request: &WriteRequest) -> Vec<u8> {
    snap::raw::Encoder::new()
        .compress_vec(&request.encode_to_vec())
        .expect("snappy compresses any input")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(labels: &[(&str, &str)], samples: &[(f64, i64)]) -> TimeSeries {
        TimeSeries::of(labels, samples)
    }

    fn json(records: &[Record]) -> Vec<String> {
        records.iter().map(Record::to_json).collect()
    }

    #[test]
    fn each_sample_is_a_record_of_its_series_labels() {
        let request = WriteRequest {
            timeseries: vec![
                series(
                    &[("__name__", "up"), ("job", "node"), ("instance", "a:9100")],
                    &[(1.0, 1_700_000_000_000), (0.0, 1_700_000_015_000)],
                ),
                series(
                    &[("instance", "b"), ("__name__", "http_requests_total"), ("value", "x")],
                    &[(42.5, 1_700_000_000_123)],
                ),
            ],
        };
        let decoded = decode(&encode(&request)).unwrap();
        assert_eq!(
            json(&decoded.records),
            vec![
                r#"{"__name__":"up","job":"node","instance":"a:9100","value":1.0,"timestamp":1700000000000}"#,
                r#"{"__name__":"up","job":"node","instance":"a:9100","value":0.0,"timestamp":1700000015000}"#,
                r#"{"__name__":"http_requests_total","instance":"b","_value":"x","value":42.5,"timestamp":1700000000123}"#,
            ]
        );
        assert_eq!((decoded.malformed, decoded.non_finite), (0, 0));
    }

    #[test]
    fn stale_markers_are_skipped_and_bad_series_counted_the_rest_kept() {
        let request = WriteRequest {
            timeseries: vec![
                series(&[("__name__", "up")], &[(f64::NAN, 1), (1.0, 2), (f64::INFINITY, 3)]),
                series(&[("job", "no name")], &[(1.0, 1), (2.0, 2)]),
                series(&[("__name__", "x"), ("a", "1"), ("a", "2")], &[(1.0, 1)]),
            ],
        };
        let decoded = decode(&encode(&request)).unwrap();
        assert_eq!(json(&decoded.records), vec![r#"{"__name__":"up","value":1.0,"timestamp":2}"#]);
        assert_eq!((decoded.malformed, decoded.non_finite), (3, 2));
    }

    #[test]
    fn a_body_that_is_not_snappy_protobuf_is_refused_whole() {
        for bad in [&b"hello"[..], b"", &[0xff; 12]] {
            let error = decode(bad).unwrap_err().to_string();
            assert!(error.contains("remote write"), "{error}");
        }
        // snappy, but of something that is not a WriteRequest
        let not_protobuf = snap::raw::Encoder::new().compress_vec(&[0x0a, 0xff, 0xff]).unwrap();
        let error = decode(&not_protobuf).unwrap_err().to_string();
        assert!(error.contains("not a remote write request"), "{error}");
        // a header claiming more than the bound is refused before decompressing
        let mut huge = Vec::new();
        let mut n = (MAX_DECODED_BYTES + 1) as u64;
        while n >= 0x80 {
            huge.push((n as u8) | 0x80);
            n >>= 7;
        }
        huge.push(n as u8);
        let error = decode(&huge).unwrap_err().to_string();
        assert!(error.contains("past"), "{error}");
    }
}
