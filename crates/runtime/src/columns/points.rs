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
use needle_protocols::{Format, Names, Point, PointValue, ProtocolError};
use needle_record::Record;
use std::sync::Arc;

/// Shapes of point gathered as columns in one batch; points of more shapes go as records.
pub const MAX_SHAPES: usize = 16;
/// Parts of a point gathered as columns (a point with more goes as a record).
const MAX_COLUMNS: usize = 256;

/// Lines of one protocol gathered into batches (see the module doc).
pub struct PointBatches {
    format: Format,
    point: Point,
    columns: PointColumns,
    records: Vec<Record>,
    capacity: usize,
}

impl PointBatches {
    pub fn new(format: Format) -> Self {
        Self {
            format,
            point: Point::new(),
            columns: PointColumns::default(),
            records: Vec::new(),
            capacity: 1024,
        }
    }

    /// Says about how many points the next batch will hold (the columns' first room).
    pub fn expect(&mut self, points: usize) {
        self.capacity = points.max(1);
    }

    /// Adds the point of one line (without its newline); a line that holds none (a comment, a
    /// blank line, Graphite's NaN) adds nothing. `now_ms` stands for a missing timestamp. A
    /// malformed line adds nothing and says why.
    pub fn push_line(&mut self, line: &[u8], now_ms: i64) -> Result<(), ProtocolError> {
        if !self.format.parse_point(line, now_ms, &mut self.point)? {
            return Ok(());
        }
        match self.point.check()? {
            Names::AsGiven if self.columns.add(&self.point, self.capacity) => Ok(()),
            _ => {
                self.records.push(self.point.to_record()?);
                Ok(())
            }
        }
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
    fn finish(&mut self) -> Vec<ColumnBatch> {
        self.last = 0;
        self.shapes.drain(..).map(Shape::finish).collect()
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
