//! [`PointBatches`]: the points of a metrics protocol's lines (parsed by `needle_protocols`)
//! gathered as batches of events as columns, with no record and no JSON in between. A batch
//! holds the points of one shape — the names of their parts in order, and each part's type,
//! which most lines of an agent share (`cpu,host=...,region=... usage=... <time>`) — so a shape's
//! points fill a column per part, every row whole. A point whose names the protocol renames (a
//! tag called `timestamp`), or of a shape past [`MAX_SHAPES`] in one batch, is kept as a record,
//! after the columns in the same [`Batch`].

use super::ColumnBatch;
use crate::framing::Batch;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{Field, Schema};
use needle_engine::columnar::layout::{Kind, RESERVED};
use needle_engine::columnar::ColumnBuilder;
use needle_protocols::{Format, Names, Point, PointKind, PointValue, ProtocolError};
use needle_record::Record;
use std::sync::Arc;

/// Shapes of point gathered as columns in one batch; points of more shapes go as records.
pub const MAX_SHAPES: usize = 16;
/// Parts of a point gathered as columns (a point with more goes as a record).
const MAX_COLUMNS: usize = 256;

/// Points gathered into batches (see the module doc).
#[derive(Default)]
pub struct PointBatches {
    point: Point,
    columns: PointColumns,
    records: Vec<Record>,
    capacity: usize,
}

impl PointBatches {
    pub fn new() -> Self {
        Self { capacity: 1024, ..Self::default() }
    }

    /// Says about how many points the next batch will hold (the columns' first room).
    pub fn expect(&mut self, points: usize) {
        self.capacity = points.max(1);
    }

    /// Adds the point of one line of `format` (without its newline); a line that holds none (a
    /// comment, a blank line, Graphite's NaN) adds nothing. `now_ms` stands for a missing
    /// timestamp. A malformed line adds nothing and says why.
    pub fn push_line(
        &mut self,
        format: Format,
        line: &[u8],
        now_ms: i64,
    ) -> Result<(), ProtocolError> {
        let parsed = format.parse_point(line, now_ms, &mut self.point);
        self.push_parsed(parsed)
    }

    /// [`PointBatches::push_line`] of a line known to be UTF-8.
    pub fn push_text(
        &mut self,
        format: Format,
        line: &str,
        now_ms: i64,
    ) -> Result<(), ProtocolError> {
        let parsed = format.parse_point_text(line, now_ms, &mut self.point);
        self.push_parsed(parsed)
    }

    /// Adds the point a line was just parsed into (`parsed`: whether it held one).
    #[inline]
    fn push_parsed(&mut self, parsed: Result<bool, ProtocolError>) -> Result<(), ProtocolError> {
        if !parsed? {
            return Ok(());
        }
        // the point is read where it is (not taken out and put back: two moves a line)
        add_point(&mut self.columns, &mut self.records, self.capacity, &self.point)
    }

    /// Adds a point (a protocol's decoder filled it); a malformed one (a name given twice)
    /// adds nothing and says why.
    pub fn push_point(&mut self, point: &Point) -> Result<(), ProtocolError> {
        add_point(&mut self.columns, &mut self.records, self.capacity, point)
    }

    /// Points added since the last [`PointBatches::finish`].
    pub fn points(&self) -> usize {
        self.columns.rows() + self.records.len()
    }

    /// The points added since the last call, as one batch: a batch of columns per shape, in
    /// the order the shapes came, then the records; `None` when there were none.
    pub fn finish(&mut self) -> Option<Batch> {
        let columns = self.columns.finish();
        if columns.is_empty() && self.records.is_empty() {
            return None;
        }
        Some(Batch::of_events(columns, std::mem::take(&mut self.records)))
    }
}

/// Adds `point` to the columns of its shape (a new shape's when there is room), or as a record
/// (a name the protocol renames, a shape past the room); a malformed one (a name given twice)
/// adds nothing and says why.
#[inline]
fn add_point(
    columns: &mut PointColumns,
    records: &mut Vec<Record>,
    capacity: usize,
    point: &Point,
) -> Result<(), ProtocolError> {
    // a point of a shape seen: its names were checked when the shape was made
    if columns.add_to_known(point) {
        return Ok(());
    }
    match point.check()? {
        Names::AsGiven if columns.add_new(point, capacity) => Ok(()),
        _ => {
            records.push(point.to_record()?);
            Ok(())
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
    /// Adds `point` to the columns of its shape, if one of the shapes seen; false otherwise.
    #[inline]
    fn add_to_known(&mut self, point: &Point) -> bool {
        let found = match self.shapes.get(self.last) {
            Some(shape) if point.has_shape(&shape.parts) => Some(self.last),
            _ => self.shapes.iter().position(|shape| point.has_shape(&shape.parts)),
        };
        let Some(at) = found else { return false };
        self.shapes[at].push(point);
        self.last = at;
        true
    }

    /// Adds `point` (whose names are the record's, checked) to the columns of a new shape (for
    /// about `capacity` points); false when no more can be made or a row cannot hold it.
    fn add_new(&mut self, point: &Point, capacity: usize) -> bool {
        if self.shapes.len() >= MAX_SHAPES {
            return false;
        }
        let Some(mut shape) = Shape::of(point, capacity) else { return false };
        shape.push(point);
        self.shapes.push(shape);
        self.last = self.shapes.len() - 1;
        true
    }

    fn rows(&self) -> usize {
        self.shapes.iter().map(|shape| shape.columns.first().map_or(0, ColumnBuilder::len)).sum()
    }

    /// A batch per shape, in the order the shapes came; the shapes are forgotten (the next
    /// batch's start anew).
    fn finish(&mut self) -> Vec<ColumnBatch> {
        self.last = 0;
        self.shapes.drain(..).map(Shape::finish).collect()
    }
}

/// The points of one shape: the names of their parts, in order, and the kind of each; a column
/// each.
struct Shape {
    parts: Vec<(String, PointKind)>,
    columns: Vec<ColumnBuilder>,
}

/// The kind of column that holds a part's value.
fn column_kind(kind: PointKind) -> Kind {
    match kind {
        PointKind::Text => Kind::Text,
        PointKind::Double => Kind::Double,
        PointKind::Long => Kind::Long,
        PointKind::Bool => Kind::Bool,
    }
}

impl Shape {
    /// The shape of `point`, with room for about `capacity` points; `None` when a row cannot
    /// hold it (a name like needle's own columns', more parts than a batch's columns).
    fn of(point: &Point, capacity: usize) -> Option<Shape> {
        let parts: Vec<(String, PointKind)> =
            point.fields().map(|(name, value)| (name.to_owned(), value.kind())).collect();
        if parts.len() > MAX_COLUMNS || parts.iter().any(|(n, _)| n.starts_with(RESERVED)) {
            return None;
        }
        // a text column with room for its first value's length a point, a quarter more (the
        // values of a part are mostly alike: a series' names), not grown doubling by doubling
        let columns = point.fields().map(|(_, value)| {
            let text_bytes = match value {
                PointValue::Text(text) => (text.len() + text.len() / 4).max(8),
                _ => 0,
            };
            ColumnBuilder::with_capacity(column_kind(value.kind()), capacity, capacity * text_bytes)
        });
        Some(Shape { columns: columns.collect(), parts })
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
            .parts
            .iter()
            .map(|(name, kind)| Field::new(name, column_kind(*kind).data_type(), true))
            .collect();
        let arrays: Vec<ArrayRef> = self.columns.iter_mut().map(|c| c.finish()).collect();
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
            .expect("a value in every column for every point");
        ColumnBatch::new(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use needle_protocols::Precision;
    use proptest::prelude::*;

    /// A line of line protocol from a small grammar: many measurements (more shapes than a
    /// batch keeps as columns), tags and fields of every type, a tag named like the protocol's
    /// own part, a field given twice, and lines that are not points.
    fn line() -> impl Strategy<Value = String> {
        let measurement =
            prop::sample::select((0..24).map(|i| format!("m{i}")).collect::<Vec<_>>());
        let tag = prop::sample::select(vec!["host=a", "host=b", "dc=x", "timestamp=t", ""]);
        let field = prop::sample::select(vec![
            "v=1.5",
            "v=2i",
            "v=true",
            "v=\"s\"",
            "w=3u",
            "v=1,v=2",
            "v=-0.5,w=4i",
        ]);
        let kind = 0u8..10;
        (measurement, tag, field, kind, 0i64..5).prop_map(|(m, tag, field, kind, t)| match kind {
            0 => "not a point".to_owned(),
            1 => "# a comment".to_owned(),
            _ if tag.is_empty() => format!("{m} {field} {t}"),
            _ => format!("{m},{tag} {field} {t}"),
        })
    }

    proptest! {
        /// The points gathered as columns (and records) are the records the lines parse to,
        /// each once; the lines that are not points are refused alike.
        #[test]
        fn batches_hold_the_records_the_lines_are(lines in prop::collection::vec(line(), 0..120)) {
            let format = Format::Influx(Precision::Seconds);
            let mut batches = PointBatches::new();
            let mut want = Vec::new();
            for line in &lines {
                let parsed = format.parse_line(line.as_bytes(), 7);
                let pushed = batches.push_line(format, line.as_bytes(), 7);
                prop_assert_eq!(parsed.is_err(), pushed.is_err(), "{}", line);
                if let Ok(Some(record)) = parsed {
                    want.push(record.to_json());
                }
            }
            prop_assert_eq!(batches.points(), want.len());
            let batch = batches.finish();
            prop_assert!(batch.as_ref().is_none_or(|b| b.columns().len() <= MAX_SHAPES));
            let mut got: Vec<String> = batch
                .map(|b| String::from_utf8(b.to_ndjson()).unwrap())
                .unwrap_or_default()
                .lines()
                .map(str::to_owned)
                .collect();
            got.sort();
            want.sort();
            prop_assert_eq!(got, want);
        }
    }
}
