//! [`PointBatches`]: the points of a metrics protocol's lines (parsed by `needle_protocols`)
//! gathered as batches of events as columns, with no record and no JSON in between. A batch
//! holds the points of one shape — the names of their parts in order, and each part's type,
//! which most lines of an agent share (`cpu,host=...,region=... usage=... <time>`) — so a shape's
//! points fill a column per part, every row whole. A point whose names the protocol renames (a
//! tag called `timestamp`), or of a shape past [`MAX_SHAPES`] in one batch, is kept as a record,
//! after the columns in the same [`Batch`].
//!
//! The text of a series' parts (the name and the tags, which the point says are its series)
//! goes into a dictionary column: a row is a key into the batch's distinct values, so a name a
//! batch holds a thousand times is held once. The shapes outlive a batch, and so do their
//! dictionaries' values and the ids of the values of each series the point kept
//! ([`Point::series_id`]): a series' next points, in this batch or a later one, add their keys
//! with no text read or looked up at all. What is kept between batches is bounded (about
//! 1 MiB of values a connection, 65,536 series' ids a shape), and starts again past that.

use super::ColumnBatch;
use crate::framing::Batch;
use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Int32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
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
    /// Batches for a connection's points, one batch after another: a series' name and tags as
    /// dictionaries kept from batch to batch (see the module doc).
    pub fn new() -> Self {
        Self { capacity: 1024, columns: PointColumns::keyed(), ..Self::default() }
    }

    /// One batch, of one request's points: their text as it is. A dictionary made for one
    /// batch costs more than it saves when the batch's series come once each (an agent's
    /// write request: every value new to it, looked up, kept and dropped).
    pub fn for_one_request() -> Self {
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

    /// The points added since the last call, as one batch: a batch of columns per shape that
    /// had points, in the order the shapes were first seen, then the records; `None` when
    /// there were none.
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
    if columns.add_to_known(point, capacity) {
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

/// Points gathered as columns, one set of columns per shape (see the module doc). The shapes
/// outlive a batch: a connection's points are of a few shapes, found again batch after batch,
/// with their dictionaries and their series' keys.
#[derive(Default)]
struct PointColumns {
    shapes: Vec<Shape>,
    /// The shape the last point had: tried first.
    last: usize,
    /// The shape a kept series' last point had, by the series' slot: (the series' generation,
    /// the shape's place, the shape's number); a series' points, all of one shape most often,
    /// need only their parts past the series' compared.
    shape_of_series: Vec<(u64, u32, u64)>,
    /// The number the next shape made gets (a place's shape may be replaced).
    shapes_made: u64,
    /// Whether a series' text parts go into dictionaries.
    keyed: bool,
}

/// The bytes the shapes' dictionaries may hold between batches, all told (their values, and
/// [`VALUE_OVERHEAD`] each); past them they start again empty (a connection's series' names
/// and tags are a few kilobytes; one that sends a new tag value every point gains nothing from
/// keeping them).
const MAX_KEPT_TEXT_BYTES: usize = 1 << 20;
/// The bytes a dictionary holds for a value beside its text, about (its two copies' headers,
/// the map's entry, its key in the batch).
const VALUE_OVERHEAD: usize = 64;

impl PointColumns {
    /// Columns whose series' text parts go into dictionaries.
    fn keyed() -> Self {
        Self { keyed: true, ..Self::default() }
    }

    /// Adds `point` to the columns of its shape, if one of the shapes seen; false otherwise.
    #[inline]
    fn add_to_known(&mut self, point: &Point, capacity: usize) -> bool {
        if let Some(at) = self.shape_of_kept_series(point) {
            self.shapes[at].push(point, capacity);
            self.last = at;
            return true;
        }
        let found = match self.shapes.get(self.last) {
            Some(shape) if point.has_shape(&shape.parts) => Some(self.last),
            _ => self.shapes.iter().position(|shape| point.has_shape(&shape.parts)),
        };
        let Some(at) = found else { return false };
        self.shapes[at].push(point, capacity);
        self.last = at;
        self.remember_series_shape(point, at);
        true
    }

    /// The place of the shape `point` has, if a point of its kept series had it.
    #[inline]
    fn shape_of_kept_series(&self, point: &Point) -> Option<usize> {
        let id = point.series_id()?;
        let &(generation, at, made) = self.shape_of_series.get(id.slot as usize)?;
        let shape = self.shapes.get(at as usize)?;
        let same = generation == id.generation && shape.made == made;
        (same && point.has_shape_past(&shape.parts, point.series_parts())).then_some(at as usize)
    }

    /// Notes that `point`'s kept series, if it is one, has the shape at `at`.
    fn remember_series_shape(&mut self, point: &Point, at: usize) {
        let Some(id) = point.series_id() else { return };
        let slot = id.slot as usize;
        if self.shape_of_series.len() <= slot {
            self.shape_of_series.resize(slot + 1, (0, 0, 0));
        }
        self.shape_of_series[slot] = (id.generation, at as u32, self.shapes[at].made);
    }

    /// Adds `point` (whose names are the record's, checked) to the columns of a new shape (for
    /// about `capacity` points), in the place of a shape with no point in this batch when
    /// there are [`MAX_SHAPES`]; false when none can be made or a row cannot hold it.
    fn add_new(&mut self, point: &Point, capacity: usize) -> bool {
        let at = match self.shapes.len() < MAX_SHAPES {
            true => self.shapes.len(),
            false => match self.shapes.iter().position(|shape| shape.rows == 0) {
                Some(unused) => unused,
                None => return false,
            },
        };
        let Some(mut shape) = Shape::of(point, self.keyed) else { return false };
        self.shapes_made += 1;
        shape.made = self.shapes_made;
        shape.push(point, capacity);
        match at == self.shapes.len() {
            true => self.shapes.push(shape),
            false => self.shapes[at] = shape,
        }
        self.last = at;
        self.remember_series_shape(point, at);
        true
    }

    fn rows(&self) -> usize {
        self.shapes.iter().map(|shape| shape.rows).sum()
    }

    /// A batch per shape that has points, in the order the shapes were first seen; the shapes
    /// stay, empty, for the next batch's points.
    fn finish(&mut self) -> Vec<ColumnBatch> {
        let batches = self.shapes.iter_mut().filter_map(Shape::finish).collect();
        let kept: usize = self.shapes.iter().map(Shape::text_bytes).sum();
        if kept > MAX_KEPT_TEXT_BYTES {
            self.shapes.iter_mut().for_each(Shape::forget_text);
        }
        batches
    }
}

/// The points of one shape: the names of their parts, in order, and the kind of each; a column
/// each — the first ones, the text of a series' parts, as dictionaries (see the module doc).
struct Shape {
    parts: Vec<(String, PointKind)>,
    /// The columns of the first `dictionaries.len()` parts.
    dictionaries: Vec<TextDictionary>,
    /// The columns of the other parts (made with room for a batch when its first point comes).
    columns: Vec<ColumnBuilder>,
    /// The room a text column gets a point, by column.
    text_bytes: Vec<usize>,
    /// A kept series' text, by its slot: (its generation, where its ids start in
    /// `series_ids`); generation 0 is no series.
    by_series: Vec<(u64, u32)>,
    /// The ids, in the dictionaries, of the series in `by_series`: `dictionaries.len()` each.
    series_ids: Vec<u32>,
    /// Points in this batch.
    rows: usize,
    /// The shape's number among those its connection made (from 1).
    made: u64,
}

/// Ids of kept series' text a shape holds at most; past them it starts again.
const MAX_SERIES_IDS: usize = 1 << 16;

/// A column of text as keys into its distinct values. The values outlive a batch, each with
/// an id; a batch's column is the keys of its rows into the values it holds, each given its
/// key in the batch when its first row comes.
#[derive(Default)]
struct TextDictionary {
    /// This batch's rows.
    keys: Vec<i32>,
    /// The ids of this batch's values, by key.
    batch_values: Vec<u32>,
    /// Every value kept, by id, and its key in this batch: (the batch, the key).
    values: Vec<(Box<str>, u32, i32)>,
    id_of: hashbrown::HashMap<Box<str>, u32, foldhash::fast::FixedState>,
    /// Bytes of the values kept, about (see [`VALUE_OVERHEAD`]).
    text_bytes: usize,
    /// The batch being gathered (counted from 1).
    batch: u32,
}

impl TextDictionary {
    /// Adds a row of `text`; returns its id.
    #[inline]
    fn push_text(&mut self, text: &str) -> u32 {
        let id = match self.id_of.get(text) {
            Some(&id) => id,
            None => {
                let id = self.values.len() as u32;
                self.values.push((text.into(), 0, 0));
                self.id_of.insert(text.into(), id);
                self.text_bytes += text.len() + VALUE_OVERHEAD;
                id
            }
        };
        self.push_id(id);
        id
    }

    /// Adds a row of the value with id `id`.
    #[inline]
    fn push_id(&mut self, id: u32) {
        let (_, batch, key) = &mut self.values[id as usize];
        if *batch != self.batch {
            // at most a key a row, and a batch's rows fit an i32
            *key = self.batch_values.len() as i32;
            *batch = self.batch;
            self.batch_values.push(id);
        }
        self.keys.push(*key);
    }

    /// This batch's column; the next batch starts.
    fn finish(&mut self) -> ArrayRef {
        let keys = Int32Array::from(std::mem::take(&mut self.keys));
        let values = StringArray::from_iter_values(
            self.batch_values.iter().map(|&id| &*self.values[id as usize].0),
        );
        self.batch_values.clear();
        if self.batch == u32::MAX {
            // (after four billion batches: no value is in the next one)
            self.values.iter_mut().for_each(|(_, batch, _)| *batch = 0);
            self.batch = 0;
        }
        self.batch += 1;
        let dictionary = DictionaryArray::<Int32Type>::try_new(keys, Arc::new(values))
            .expect("every key is one of the values");
        Arc::new(dictionary)
    }

    /// Forgets the values kept (between batches).
    fn forget(&mut self) {
        self.values.clear();
        self.id_of.clear();
        self.text_bytes = 0;
    }
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

/// The Arrow type of a text column kept as a dictionary.
fn dictionary_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

impl Shape {
    /// The shape of `point`, its series' text parts as dictionaries if `keyed`; `None` when a
    /// row cannot hold it (a name like needle's own columns', more parts than a batch's
    /// columns).
    fn of(point: &Point, keyed: bool) -> Option<Shape> {
        let parts: Vec<(String, PointKind)> =
            point.fields().map(|(name, value)| (name.to_owned(), value.kind())).collect();
        if parts.len() > MAX_COLUMNS || parts.iter().any(|(n, _)| n.starts_with(RESERVED)) {
            return None;
        }
        // the series' parts that are text (all of them, in every protocol) as dictionaries
        let dictionaries = parts
            .iter()
            .take(if keyed { point.series_parts() } else { 0 })
            .take_while(|(_, kind)| *kind == PointKind::Text)
            .map(|_| TextDictionary { batch: 1, ..TextDictionary::default() })
            .collect::<Vec<_>>();
        // a text column with room for its first value's length a point, a quarter more (the
        // values of a part are mostly alike), not grown doubling by doubling
        let text_bytes = point
            .fields()
            .skip(dictionaries.len())
            .map(|(_, value)| match value {
                PointValue::Text(text) => (text.len() + text.len() / 4).max(8),
                _ => 0,
            })
            .collect();
        let columns = parts[dictionaries.len()..]
            .iter()
            .map(|(_, kind)| ColumnBuilder::with_capacity(column_kind(*kind), 0, 0))
            .collect();
        Some(Shape {
            parts,
            dictionaries,
            columns,
            text_bytes,
            by_series: Vec::new(),
            series_ids: Vec::new(),
            rows: 0,
            made: 0,
        })
    }

    /// Appends a point of this shape; the batch's first is given room for about `capacity`.
    #[inline]
    fn push(&mut self, point: &Point, capacity: usize) {
        if self.rows == 0 {
            self.make_room(capacity);
        }
        let series = self.dictionaries.len();
        match self.kept_ids(point) {
            Some(start) => {
                let ids = &self.series_ids[start..start + series];
                for (dictionary, &id) in self.dictionaries.iter_mut().zip(ids) {
                    dictionary.push_id(id);
                }
            }
            None => {
                let keep = self.keeps(point);
                for (dictionary, (_, value)) in self.dictionaries.iter_mut().zip(point.fields()) {
                    let PointValue::Text(text) = value else {
                        unreachable!("a point is pushed to the shape it matches")
                    };
                    let id = dictionary.push_text(text);
                    if keep.is_some() {
                        self.series_ids.push(id);
                    }
                }
                if let Some((slot, generation, start)) = keep {
                    self.by_series[slot] = (generation, start);
                }
            }
        }
        for (column, (_, value)) in self.columns.iter_mut().zip(point.fields().skip(series)) {
            match (column, value) {
                (ColumnBuilder::Text(b), PointValue::Text(text)) => b.append_value(text),
                (ColumnBuilder::Double(b), PointValue::Double(d)) => b.append_value(d),
                (ColumnBuilder::Long(b), PointValue::Long(l)) => b.append_value(l),
                (ColumnBuilder::Bool(b), PointValue::Bool(v)) => b.append_value(v),
                _ => unreachable!("a point is pushed to the shape it matches"),
            }
        }
        self.rows += 1;
    }

    /// Columns with room for about `capacity` points (a batch's first point is coming).
    fn make_room(&mut self, capacity: usize) {
        for ((column, (_, kind)), text_bytes) in self
            .columns
            .iter_mut()
            .zip(&self.parts[self.dictionaries.len()..])
            .zip(&self.text_bytes)
        {
            *column =
                ColumnBuilder::with_capacity(column_kind(*kind), capacity, capacity * text_bytes);
        }
        for dictionary in &mut self.dictionaries {
            dictionary.keys.reserve(capacity);
        }
    }

    /// Where the ids of `point`'s series start in `series_ids`, if they were kept: the
    /// point's dictionary parts are all its series' (a series always parses the same).
    #[inline]
    fn kept_ids(&self, point: &Point) -> Option<usize> {
        let id = point.series_id()?;
        if self.dictionaries.is_empty() || point.series_parts() < self.dictionaries.len() {
            return None;
        }
        match self.by_series.get(id.slot as usize) {
            Some(&(generation, start)) if generation == id.generation => Some(start as usize),
            _ => None,
        }
    }

    /// Whether the ids of `point`'s text are to be kept for its series: its slot, generation
    /// and where its ids will start, with room made for them.
    fn keeps(&mut self, point: &Point) -> Option<(usize, u64, u32)> {
        let id = point.series_id()?;
        if self.dictionaries.is_empty() || point.series_parts() < self.dictionaries.len() {
            return None;
        }
        if self.series_ids.len() >= MAX_SERIES_IDS {
            self.by_series.clear();
            self.series_ids.clear();
        }
        let slot = id.slot as usize;
        if self.by_series.len() <= slot {
            self.by_series.resize(slot + 1, (0, 0));
        }
        Some((slot, id.generation, self.series_ids.len() as u32))
    }

    /// The batch's points as columns, if it had any; the shape is empty for the next.
    fn finish(&mut self) -> Option<ColumnBatch> {
        if self.rows == 0 {
            return None;
        }
        self.rows = 0;
        let dictionaries = self.dictionaries.len();
        let fields: Vec<Field> = self
            .parts
            .iter()
            .enumerate()
            .map(|(i, (name, kind))| match i < dictionaries {
                true => Field::new(name, dictionary_type(), true),
                false => Field::new(name, column_kind(*kind).data_type(), true),
            })
            .collect();
        let arrays: Vec<ArrayRef> = (self.dictionaries.iter_mut().map(TextDictionary::finish))
            .chain(self.columns.iter_mut().map(|c| c.finish()))
            .collect();
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
            .expect("a value in every column for every point");
        Some(ColumnBatch::new(batch))
    }

    /// Bytes of text the shape's dictionaries keep.
    fn text_bytes(&self) -> usize {
        self.dictionaries.iter().map(|d| d.text_bytes).sum()
    }

    /// Forgets the text kept, and so the series' ids in it (between batches).
    fn forget_text(&mut self) {
        self.dictionaries.iter_mut().for_each(TextDictionary::forget);
        self.by_series.clear();
        self.series_ids.clear();
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

    /// The records in `batches`' next batch, as JSON lines, sorted; and the batch's column
    /// batches' fields that are text keyed into dictionaries.
    fn finish_sorted(batches: &mut PointBatches) -> (Vec<String>, Vec<String>) {
        let Some(batch) = batches.finish() else { return (Vec::new(), Vec::new()) };
        assert!(batch.columns().len() <= MAX_SHAPES);
        let keyed = batch
            .columns()
            .iter()
            .flat_map(|c| c.record_batch().schema().fields().iter().cloned().collect::<Vec<_>>())
            .filter(|f| f.data_type() == &dictionary_type())
            .map(|f| f.name().clone())
            .collect();
        let text = String::from_utf8(batch.to_ndjson()).unwrap();
        let mut got: Vec<String> = text.lines().map(str::to_owned).collect();
        got.sort();
        (got, keyed)
    }

    proptest! {
        /// The points gathered as columns (and records) are the records the lines parse to,
        /// each once, however the lines are cut into batches (the shapes, their dictionaries
        /// and their series' ids kept from batch to batch; a shape with no point in a batch
        /// making room for a new one); the lines that are not points are refused alike; a
        /// series' name and tags are text keyed into dictionaries, but for one request's.
        #[test]
        fn batches_hold_the_records_the_lines_are(
            lines in prop::collection::vec(line(), 0..240),
            every in 1usize..60,
            keyed in any::<bool>(),
        ) {
            let format = Format::Influx(Precision::Seconds);
            let mut batches =
                if keyed { PointBatches::new() } else { PointBatches::for_one_request() };
            let mut want = Vec::new();
            // a batch every `every` lines, and one after the last
            for i in 0..=lines.len() {
                if i % every == 0 || i == lines.len() {
                    prop_assert_eq!(batches.points(), want.len());
                    want.sort();
                    let (records, keyed_fields) = finish_sorted(&mut batches);
                    let series = ["measurement", "host", "dc"];
                    prop_assert!(keyed_fields.iter().all(|f| keyed && series.contains(&f.as_str())));
                    prop_assert_eq!(&records, &want);
                    want.clear();
                }
                let Some(line) = lines.get(i) else { break };
                let parsed = format.parse_line(line.as_bytes(), 7);
                let pushed = batches.push_line(format, line.as_bytes(), 7);
                prop_assert_eq!(parsed.is_err(), pushed.is_err(), "{}", line);
                if let Ok(Some(record)) = parsed {
                    want.push(record.to_json());
                }
            }
        }
    }

    /// A connection sending more series than its point keeps (which then starts its kept
    /// series again, their numbers reused), and points of two connections' points in one batch:
    /// each row keeps its own series' name and tags.
    #[test]
    fn series_kept_again_or_by_another_point_keep_their_own_text() {
        let format = Format::Graphite;
        let line =
            |i: usize| format!("s{i};host=h{};dc=d{} 1.5 {}", i % 7, i % 3, 1_700_000_000 + i);
        let mut batches = PointBatches::new();
        batches.expect(20_000);
        let mut want = Vec::new();
        // 5,000 series, twice over (more than the 4,096 a point keeps), then in reverse
        let order = (0..5_000).chain(0..5_000).chain((0..5_000).rev());
        for i in order {
            let line = line(i);
            batches.push_line(format, line.as_bytes(), 7).unwrap();
            want.push(format.parse_line(line.as_bytes(), 7).unwrap().unwrap().to_json());
        }
        // and a second connection's point, whose first series has the slot the first's had
        let mut other = Point::new();
        for i in [4_999, 4_998, 4_999] {
            let line = format!("t{i};host=x{i};dc=y 2.5 1700000000");
            assert!(format.parse_point(line.as_bytes(), 7, &mut other).unwrap());
            batches.push_point(&other).unwrap();
            want.push(other.to_record().unwrap().to_json());
        }
        want.sort();
        let (got, keyed) = finish_sorted(&mut batches);
        assert_eq!(got.len(), want.len());
        assert!(got == want, "the rows differ from their lines' records");
        assert_eq!(keyed, ["path", "host", "dc"]);
        // line protocol's string field is no part of the series: text, not keyed
        let format = Format::Influx(Precision::Seconds);
        for line in ["cpu,host=a,dc=x v=1,s=\"up\" 1", "cpu,host=b,dc=x v=2,s=\"up\" 2"] {
            batches.push_line(format, line.as_bytes(), 7).unwrap();
        }
        assert_eq!(finish_sorted(&mut batches).1, ["measurement", "host", "dc"]);
    }

    /// A connection that sends a new tag value every point: its dictionaries start again
    /// whenever they hold more than they may between batches, and every batch's rows stay
    /// right.
    #[test]
    fn the_text_kept_between_batches_stays_bounded() {
        let format = Format::Graphite;
        let mut batches = PointBatches::new();
        for batch in 0..60 {
            let mut want = Vec::new();
            for i in 0..1_000 {
                let line = format!("m;host=h{batch}-{i};dc=d{} 1.5 1700000000", i % 3);
                batches.push_line(format, line.as_bytes(), 7).unwrap();
                want.push(format.parse_line(line.as_bytes(), 7).unwrap().unwrap().to_json());
            }
            want.sort();
            assert!(finish_sorted(&mut batches).0 == want, "batch {batch}");
            let kept: usize = batches.columns.shapes.iter().map(Shape::text_bytes).sum();
            assert!(kept <= MAX_KEPT_TEXT_BYTES, "{kept} bytes kept after batch {batch}");
        }
    }
}
