//! A source's lines of a metrics protocol (InfluxDB line protocol, OpenTSDB `put`, Graphite
//! plaintext; parsed by `needle_protocols`) turned into batches of events as columns before they
//! are handed on ([`PointBatches`]): the workers read them column at a time where the queries
//! allow it (row by row otherwise) and the history tap keeps them as the columns they are, so a
//! point is never written as JSON nor read back from it. The lines a read completes are parsed
//! where they lie in the read buffer ([`pump`]) and become one batch of columns per shape of
//! point in them, with the read's time. A malformed line is counted (per protocol, and in the
//! malformed total), a sample of them logged, and the other lines go on.

use super::{read_until_stopped, BatchSink};
use crate::columns::PointBatches;
use crate::framing::{lines_of, Batch, LineFramer};
use crate::RuntimeError;
use needle_protocols::{Format, ProtocolError};
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Malformed protocol lines seen by this process: the 1st, 2nd, 4th, 8th... are logged.
static MALFORMED_SEEN: AtomicU64 = AtomicU64::new(0);

/// Converts one client's batches of `format` lines (see the module doc).
pub(crate) struct Converter {
    format: Format,
    sink: BatchSink,
    /// Who sent the lines, for the log.
    from: String,
    points: PointBatches,
    /// Bytes of lines added since the last batch.
    bytes: usize,
    /// Malformed lines among them.
    malformed: u64,
}

impl Converter {
    pub(crate) fn new(format: Format, sink: BatchSink, from: impl Into<String>) -> Self {
        Self {
            format,
            sink,
            from: from.into(),
            points: PointBatches::new(),
            bytes: 0,
            malformed: 0,
        }
    }

    /// The batch's points as one batch of events: columns per shape, maybe records after them;
    /// none when it held none (all malformed, comments).
    pub(crate) fn convert(&mut self, batch: Batch) -> Option<Batch> {
        self.expect(batch.byte_len());
        if batch.bytes().len() == batch.byte_len() {
            self.add(batch.bytes());
        } else {
            // (lines read in place: line by line)
            self.bytes += batch.byte_len();
            self.add_lines(batch.lines());
        }
        self.finish(batch.read_at)
    }

    /// Says about how many bytes of lines the next batch will hold: its columns are made with
    /// room for the points they hold (a read's lines come in up to two [`Converter::add`]s, the
    /// first often the one line the last read left unfinished).
    pub(crate) fn expect(&mut self, bytes: usize) {
        self.points.expect(bytes / 48 + 16);
    }

    /// Adds the points of `bytes`, whole lines, to the batch [`Converter::finish`] makes.
    pub(crate) fn add(&mut self, bytes: &[u8]) {
        self.bytes += bytes.len();
        let (format, now_ms) = (self.format, now_ms());
        match std::str::from_utf8(bytes) {
            // every line UTF-8: checked once, not line by line (a blank line holds no point, as
            // `lines` would have skipped it); the newlines found by memchr, many bytes a step
            Ok(text) => {
                let mut start = 0;
                for end in memchr::memchr_iter(b'\n', bytes).chain([bytes.len()]) {
                    // (split at ASCII newlines, so at characters' boundaries)
                    let line = &text[start..end];
                    start = end + 1;
                    if !line.bytes().all(|b| b.is_ascii_whitespace()) {
                        let pushed = self.points.push_text(format, line, now_ms);
                        self.count(line.as_bytes(), pushed);
                    }
                }
            }
            Err(_) => self.add_lines(lines_of(bytes)),
        }
    }

    /// Adds the points of `lines`, each checked as UTF-8 on its own (a line that is not is
    /// malformed, the others go on).
    fn add_lines<'a>(&mut self, lines: impl Iterator<Item = &'a [u8]>) {
        let now_ms = now_ms();
        for line in lines {
            let pushed = self.points.push_line(self.format, line, now_ms);
            self.count(line, pushed);
        }
    }

    /// The points added since the last batch, as one batch read at `read_at` (see
    /// [`Converter::convert`]); the malformed lines among them counted.
    pub(crate) fn finish(&mut self, read_at: Instant) -> Option<Batch> {
        self.sink.count_malformed(self.format.name(), std::mem::take(&mut self.malformed));
        let bytes = std::mem::take(&mut self.bytes);
        let mut converted = self.points.finish()?.with_source_bytes(bytes);
        converted.read_at = read_at;
        Some(converted)
    }

    fn count(&mut self, line: &[u8], pushed: Result<(), ProtocolError>) {
        if let Err(error) = pushed {
            self.malformed += 1;
            log(&self.from, line, &error);
        }
    }
}

/// The most a protocol client's reads grow to: a read that fills the buffer doubles it, up to
/// this. Lines waiting in the socket are then parsed and handed on a few thousand at a time:
/// each read's batch has its costs beside its points (the read itself, the batch's columns and
/// schema, the workers and the history tap woken for it), which at 64 KiB a read were a sixth
/// of a line protocol source's thread and most of the workers'. (1 MiB saved no more; a client
/// that sends little keeps its 64 KiB.)
const PROTOCOL_READ_MAX_BYTES: usize = 256 << 10;

/// Reads a client's stream of lines to its end into the sink, each read's complete lines parsed
/// where they lie in the read buffer ([`LineFramer::push_lines`]) and sent as one batch of
/// points. `Ok(true)` at the end of the input (the last line, if it had no newline, still in the
/// framer), `Ok(false)` when the sink said stop.
pub(crate) fn pump(
    reader: &mut dyn Read,
    framer: &mut LineFramer,
    converter: &mut Converter,
    read_bytes: usize,
    context: &str,
) -> Result<bool, RuntimeError> {
    read_until_stopped(reader, read_bytes, PROTOCOL_READ_MAX_BYTES, context, |read| {
        let (before, read_at) = (framer.oversized_lines(), Instant::now());
        converter.expect(read.len());
        framer.push_lines(read, |lines| converter.add(lines));
        converter.sink.count_oversized(framer.oversized_lines() - before);
        converter.finish(read_at).is_none_or(|batch| converter.sink.send(batch))
    })
}

/// Now, in epoch milliseconds: what a point without a timestamp gets.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Logs a malformed line from `from` (the 1st, 2nd, 4th, 8th... of the process).
fn log(from: &str, line: &[u8], error: &ProtocolError) {
    let n = MALFORMED_SEEN.fetch_add(1, Ordering::Relaxed) + 1;
    if n.is_power_of_two() {
        let shown = String::from_utf8_lossy(&line[..line.len().min(120)]);
        eprintln!("needle: {from}: skipped malformed line #{n} ({error}): {shown}");
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{lines_of, sink};
    use super::*;
    use needle_protocols::Precision;

    #[test]
    fn points_become_records_and_malformed_lines_are_counted_per_protocol() {
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

    /// A batch whose bytes are all UTF-8 is checked once and split as text; one with a line
    /// that is not goes line by line. Both give the same points and count the same lines
    /// malformed (a line of only whitespace, a form feed among it, is no point either way).
    #[test]
    fn a_batch_checked_as_text_at_once_gives_what_it_gives_line_by_line() {
        let text: &[u8] = b"cpu,host=a usage=1.5 1\r\n\x0c \t\nbad\n\ncpu,host=b usage=2 2\n";
        let mut not_utf8 = text.to_vec();
        not_utf8.extend_from_slice(b"cpu,host=\xff usage=3 3\n");
        let (sink, _rx, _stop, counters) = sink(4);
        let mut influx = Converter::new(Format::Influx(Precision::Seconds), sink, "test");
        let as_text = lines_of(influx.convert(Batch::new(text.to_vec())));
        assert_eq!(counters.malformed.get(), 1, "only 'bad'");
        let line_by_line = lines_of(influx.convert(Batch::new(not_utf8)));
        assert_eq!(counters.malformed.get(), 3, "'bad' and the line that is not UTF-8");
        assert_eq!(as_text, line_by_line);
        assert_eq!(as_text.len(), 2);
    }

    #[test]
    fn points_of_each_shape_go_as_columns_and_those_renamed_as_records_every_point_once() {
        let (sink, _rx, _stop, _counters) = sink(4);
        let format = Format::Influx(Precision::Seconds);
        let mut influx = Converter::new(format, sink, "test");
        let text = "cpu,host=a usage=1.5 1\nmem,host=a used=7i 2\ncpu,host=b usage=2.5 3\n\
                    cpu,host=c usage=3i 4\ncpu,timestamp=x usage=1 5\nmem,host=b used=8i 6\n\
                    cpu,host=a,host=b usage=1 7\ncpu,host=d usage=4.5 8\n";
        let batch = influx.convert(Batch::new(text.as_bytes().to_vec())).unwrap();
        // cpu with a DOUBLE usage, mem, cpu with a LONG usage; then the renamed one as a record
        let shapes: Vec<usize> = batch.columns().iter().map(|c| c.rows()).collect();
        assert_eq!((shapes, batch.records().len()), (vec![3, 2, 1], 1));
        let mut got = lines_of([batch]);
        let mut want: Vec<String> = text
            .lines()
            .filter_map(|line| format.parse_line(line.as_bytes(), 0).ok().flatten())
            .map(|record| record.to_json())
            .collect();
        assert_eq!(want.len(), 7, "the line with a tag twice is malformed");
        got.sort();
        want.sort();
        assert_eq!(got, want);
    }
}
