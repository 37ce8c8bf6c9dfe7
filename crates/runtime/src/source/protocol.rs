//! A source's lines of a metrics protocol (InfluxDB line protocol, OpenTSDB `put`, Graphite
//! plaintext; parsed by `needle_protocols`) turned into batches of events as columns before they
//! are handed on: the workers read them column at a time where the queries allow it (row by
//! row otherwise) and the history tap keeps them as the columns they are, so a point is never
//! written as JSON nor read back from it. A batch of framed lines becomes one batch of columns
//! per shape of point in it (a shape: the names of its parts in order, and their types, which
//! most lines of an agent share), with the same read time; a point whose names the protocol
//! renames (a tag called `timestamp`), or past [`MAX_SHAPES`] shapes, goes in a batch of records
//! after them. A malformed line is counted (per protocol, and in the malformed total), a
//! sample of them logged, and the other lines go on.

use super::BatchSink;
use crate::columns::ColumnBatch;
use crate::framing::Batch;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{Field, Schema};
use needle_engine::columnar::layout::{Kind, RESERVED};
use needle_engine::columnar::ColumnBuilder;
use needle_protocols::{Format, Names, Point, PointValue};
use needle_record::Record;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Malformed protocol lines seen by this process: the 1st, 2nd, 4th, 8th... are logged.
static MALFORMED_SEEN: AtomicU64 = AtomicU64::new(0);
/// Shapes of point gathered as columns in one batch; points of more shapes go as records.
const MAX_SHAPES: usize = 16;
/// Parts of a point gathered as columns (a point with more goes as a record).
const MAX_COLUMNS: usize = 256;

/// Converts one client's batches of `format` lines (see the module doc).
pub(crate) struct Converter {
    format: Format,
    sink: BatchSink,
    /// Who sent the lines, for the log.
    from: String,
    point: Point,
    columns: PointColumns,
}

impl Converter {
    pub(crate) fn new(format: Format, sink: BatchSink, from: impl Into<String>) -> Self {
        Self {
            format,
            sink,
            from: from.into(),
            point: Point::new(),
            columns: PointColumns::default(),
        }
    }

    /// The batch's points as batches of columns (and maybe one of records); none when it held
    /// none (all malformed, comments).
    pub(crate) fn convert(&mut self, batch: Batch) -> Vec<Batch> {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let mut records: Vec<Record> = Vec::new();
        let mut malformed = 0u64;
        let capacity = batch.byte_len() / 48 + 16;
        for line in batch.lines() {
            let parsed = self.format.parse_point(line, now_ms, &mut self.point);
            let kept = parsed.and_then(|has_point| {
                if !has_point {
                    return Ok(());
                }
                match self.point.check()? {
                    Names::AsGiven if self.columns.add(&self.point, capacity) => Ok(()),
                    _ => self.point.to_record().map(|record| records.push(record)),
                }
            });
            if let Err(error) = kept {
                malformed += 1;
                self.log(line, &error);
            }
        }
        self.sink.count_malformed(self.format.name(), malformed);
        let mut out = self.columns.finish();
        if !records.is_empty() {
            out.push(Batch::of_records(records, None));
        }
        for converted in &mut out {
            converted.read_at = batch.read_at;
        }
        out
    }

    fn log(&self, line: &[u8], error: &needle_protocols::ProtocolError) {
        let n = MALFORMED_SEEN.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() {
            let shown = String::from_utf8_lossy(&line[..line.len().min(120)]);
            eprintln!("needle: {}: skipped malformed line #{n} ({error}): {shown}", self.from);
        }
    }
}

/// Points gathered as columns, one set of columns per shape (see the module doc).
#[derive(Default)]
struct PointColumns {
    shapes: Vec<Shape>,
    /// The shape the last point had: tried first.
    last: usize,
}

impl PointColumns {
    /// Adds `point` (whose names are the record's) to the columns of its shape, made when new
    /// (for about `capacity` points); false when it has none and no more can be made.
    fn add(&mut self, point: &Point, capacity: usize) -> bool {
        let found = match self.shapes.get(self.last) {
            Some(shape) if shape.matches(point) => Some(self.last),
            _ => self.shapes.iter().position(|shape| shape.matches(point)),
        };
        let at = match found {
            Some(at) => at,
            None => {
                if self.shapes.len() >= MAX_SHAPES {
                    return false;
                }
                let Some(shape) = Shape::of(point, capacity) else { return false };
                self.shapes.push(shape);
                self.shapes.len() - 1
            }
        };
        self.shapes[at].push(point);
        self.last = at;
        true
    }

    /// A batch per shape, in the order the shapes came; the shapes are forgotten (the next
    /// batch's start anew).
    fn finish(&mut self) -> Vec<Batch> {
        self.last = 0;
        self.shapes.drain(..).map(|shape| Batch::of_columns(shape.finish())).collect()
    }
}

/// The points of one shape: the names of their parts, in order, and the kind of each; a column
/// each.
struct Shape {
    names: Vec<String>,
    kinds: Vec<Kind>,
    columns: Vec<ColumnBuilder>,
}

/// The kind of column that holds a part's value.
fn kind_of(value: PointValue<'_>) -> Kind {
    match value {
        PointValue::Text(_) => Kind::Text,
        PointValue::Double(_) => Kind::Double,
        PointValue::Long(_) => Kind::Long,
        PointValue::Bool(_) => Kind::Bool,
    }
}

impl Shape {
    /// The shape of `point`, with room for about `capacity` points; `None` when a row cannot
    /// hold it (a name like needle's own columns', more parts than a batch's columns).
    fn of(point: &Point, capacity: usize) -> Option<Shape> {
        let (names, kinds): (Vec<String>, Vec<Kind>) =
            point.fields().map(|(name, value)| (name.to_owned(), kind_of(value))).unzip();
        if names.len() > MAX_COLUMNS || names.iter().any(|n| n.starts_with(RESERVED)) {
            return None;
        }
        let columns =
            kinds.iter().map(|&kind| ColumnBuilder::with_capacity(kind, capacity, capacity * 8));
        Some(Shape { columns: columns.collect(), names, kinds })
    }

    /// Whether `point`'s parts have this shape's names and kinds, in order.
    #[inline]
    fn matches(&self, point: &Point) -> bool {
        let mut fields = point.fields();
        for (name, kind) in self.names.iter().zip(&self.kinds) {
            match fields.next() {
                Some((n, value)) if n == name && kind_of(value) == *kind => {}
                _ => return false,
            }
        }
        fields.next().is_none()
    }

    /// Appends a point of this shape.
    #[inline]
    fn push(&mut self, point: &Point) {
        for (column, (_, value)) in self.columns.iter_mut().zip(point.fields()) {
            match (column, value) {
                (ColumnBuilder::Text(b), PointValue::Text(text)) => b.append_value(text),
                (ColumnBuilder::Double(b), PointValue::Double(d)) => b.append_value(d),
                (ColumnBuilder::Long(b), PointValue::Long(l)) => b.append_value(l),
                (ColumnBuilder::Bool(b), PointValue::Bool(v)) => b.append_value(v),
                _ => unreachable!("a point is pushed to the shape it matches"),
            }
        }
    }

    fn finish(mut self) -> ColumnBatch {
        let fields: Vec<Field> = self
            .names
            .iter()
            .zip(&self.kinds)
            .map(|(name, kind)| Field::new(name, kind.data_type(), true))
            .collect();
        let arrays: Vec<ArrayRef> = self.columns.iter_mut().map(|c| c.finish()).collect();
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
            .expect("a value in every column for every point");
        ColumnBatch::new(batch)
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
        assert!(graphite.convert(Batch::new(b"no.value\nalso bad\n".to_vec())).is_empty());
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

    #[test]
    fn points_of_each_shape_go_as_columns_and_those_renamed_as_records_every_point_once() {
        let (sink, _rx, _stop, _counters) = sink(4);
        let format = Format::Influx(Precision::Seconds);
        let mut influx = Converter::new(format, sink, "test");
        let text = "cpu,host=a usage=1.5 1\nmem,host=a used=7i 2\ncpu,host=b usage=2.5 3\n\
                    cpu,host=c usage=3i 4\ncpu,timestamp=x usage=1 5\nmem,host=b used=8i 6\n\
                    cpu,host=a,host=b usage=1 7\ncpu,host=d usage=4.5 8\n";
        let batches = influx.convert(Batch::new(text.as_bytes().to_vec()));
        // cpu with a DOUBLE usage, mem, cpu with a LONG usage; then the renamed one as a record
        let shapes: Vec<(bool, usize)> = batches
            .iter()
            .map(|b| match b.columns() {
                Some(columns) => (true, columns.rows()),
                None => (false, b.records().len()),
            })
            .collect();
        assert_eq!(shapes, [(true, 3), (true, 2), (true, 1), (false, 1)]);
        let mut got = lines_of(batches);
        let mut want: Vec<String> = text
            .lines()
            .filter_map(|line| format.parse_line(line.as_bytes(), 0).ok().flatten())
            .map(|record| {
                let mut json = Vec::new();
                record.write_json(&mut json);
                String::from_utf8(json).unwrap()
            })
            .collect();
        assert_eq!(want.len(), 7, "the line with a tag twice is malformed");
        got.sort();
        want.sort();
        assert_eq!(got, want);
    }
}
