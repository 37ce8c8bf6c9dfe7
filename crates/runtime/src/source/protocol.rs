//! A source's lines of a metrics protocol (InfluxDB line protocol, OpenTSDB `put`, Graphite
//! plaintext; parsed by `needle_protocols`) turned into JSON lines before they are handed on, so
//! the workers, the history tap and everything after them read them as any NDJSON source's
//! lines, none of them knowing the protocol. A batch of framed lines becomes a batch of JSON
//! lines, one a point, with the same read time; a malformed line is counted (per protocol, and
//! in the malformed total), a sample of them logged, and the other lines go on.

use super::BatchSink;
use crate::framing::Batch;
use needle_protocols::Format;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Malformed protocol lines seen by this process: the 1st, 2nd, 4th, 8th... are logged.
static MALFORMED_SEEN: AtomicU64 = AtomicU64::new(0);

/// Converts one client's batches of `format` lines (see the module doc).
pub(crate) struct Converter {
    format: Format,
    sink: BatchSink,
    /// Who sent the lines, for the log.
    from: String,
}

impl Converter {
    pub(crate) fn new(format: Format, sink: BatchSink, from: impl Into<String>) -> Self {
        Self { format, sink, from: from.into() }
    }

    /// The batch's points as JSON lines; `None` when it held none (all malformed, comments).
    pub(crate) fn convert(&mut self, batch: Batch) -> Option<Batch> {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let mut out = Vec::with_capacity(batch.byte_len() * 2);
        let mut malformed = 0u64;
        for line in batch.lines() {
            match self.format.parse_line(line, now_ms) {
                Ok(Some(record)) => {
                    record.write_json(&mut out);
                    out.push(b'\n');
                }
                Ok(None) => {}
                Err(error) => {
                    malformed += 1;
                    self.log(line, &error);
                }
            }
        }
        self.sink.count_malformed(self.format.name(), malformed);
        if out.is_empty() {
            return None;
        }
        let mut converted = Batch::new(out);
        converted.read_at = batch.read_at;
        Some(converted)
    }

    fn log(&self, line: &[u8], error: &needle_protocols::ProtocolError) {
        let n = MALFORMED_SEEN.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() {
            let shown = String::from_utf8_lossy(&line[..line.len().min(120)]);
            eprintln!("needle: {}: skipped malformed line #{n} ({error}): {shown}", self.from);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{lines_of, sink};
    use super::*;
    use needle_protocols::Precision;

    #[test]
    fn points_become_json_lines_and_malformed_lines_are_counted_per_protocol() {
        let (sink, _rx, _stop, counters) = sink(4);
        let mut influx = Converter::new(Format::Influx(Precision::Seconds), sink.clone(), "test");
        let batch = Batch::new(
            b"cpu,host=a usage=1.5 1700000000\nnot a point\n# a comment\ncpu v=2i 1\n".to_vec(),
        );
        let lines = lines_of(influx.convert(batch));
        assert_eq!(
            lines,
            [
                r#"{"measurement":"cpu","host":"a","usage":1.5,"timestamp":1700000000000}"#,
                r#"{"measurement":"cpu","v":2,"timestamp":1000}"#,
            ]
        );
        let mut graphite = Converter::new(Format::Graphite, sink, "test");
        assert!(graphite.convert(Batch::new(b"no.value\nalso bad\n".to_vec())).is_none());
        // collectd's first reading of a rate: no point, and not malformed (carbon drops it too)
        let first = b"h.cpu.0.cpu.user nan 1700000000\r\nh.memory.memory.used 5 1700000000\r\n";
        let lines = lines_of(graphite.convert(Batch::new(first.to_vec())));
        assert_eq!(
            lines,
            [r#"{"path":"h.memory.memory.used","value":5.0,"timestamp":1700000000000}"#]
        );
        let count = |protocol: &str| {
            let label = vec![("protocol".to_owned(), protocol.to_owned())];
            counters.protocol_malformed.get_or_create(&label).get()
        };
        assert_eq!((count("influx"), count("graphite"), count("opentsdb")), (1, 2, 0));
        assert_eq!(counters.malformed.get(), 3, "the total counts them too");
    }
}
