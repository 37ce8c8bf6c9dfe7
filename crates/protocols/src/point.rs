//! [`Point`]: one point as a parser reads it, before it is a record — the protocol's lead part
//! (its name), the line's tags and fields in line order, then the protocol's trailing parts
//! (value, timestamp) — held in one reusable buffer, so reading a line allocates nothing once
//! the buffer has grown. A caller makes it a [`Record`] ([`Point::to_record`]), or reads its
//! parts in record order ([`Point::fields`]) to put them straight into columns, after
//! [`Point::check`] said their names need no renaming.
//!
//! A point also keeps the series it has read (`SeriesCache`): the lead and tags parsed
//! from a line's series part, found again by the part's bytes, so that a parser reads a series
//! an agent sends again and again once. It says which of its parts are its series'
//! ([`Point::series_parts`]) and, for a series it kept, which one ([`Point::series_id`]), so
//! that a caller can also keep what it made of a series' parts.

use crate::shape::build;
use crate::ProtocolError;
use needle_record::{Record, Value};
use std::ops::Range;

/// A part's value, as the record will hold it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PointValue<'a> {
    Text(&'a str),
    Double(f64),
    Long(i64),
    Bool(bool),
}

/// The type of a part's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointKind {
    Text,
    Double,
    Long,
    Bool,
}

impl PointValue<'_> {
    pub fn kind(self) -> PointKind {
        match self {
            PointValue::Text(_) => PointKind::Text,
            PointValue::Double(_) => PointKind::Double,
            PointValue::Long(_) => PointKind::Long,
            PointValue::Bool(_) => PointKind::Bool,
        }
    }

    fn to_value(self) -> Value {
        match self {
            PointValue::Text(s) => Value::String(s.to_owned()),
            PointValue::Double(d) => Value::Double(d),
            PointValue::Long(l) => Value::Long(l),
            PointValue::Bool(b) => Value::Bool(b),
        }
    }
}

/// A value held in the point's buffer: text as its place in the buffer's text.
#[derive(Debug, Clone, PartialEq)]
enum Held {
    Text(Range<u32>),
    Double(f64),
    Long(i64),
    Bool(bool),
}

fn held_kind(held: &Held) -> PointKind {
    match held {
        Held::Text(_) => PointKind::Text,
        Held::Double(_) => PointKind::Double,
        Held::Long(_) => PointKind::Long,
        Held::Bool(_) => PointKind::Bool,
    }
}

/// What a point's names ask of whoever makes it a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// Every name as given: [`Point::fields`] are the record's.
    AsGiven,
    /// A tag or field uses one of the protocol's own names: only [`Point::to_record`] renames
    /// it as the crate doc says.
    Renamed,
}

/// One point (see the module doc).
#[derive(Debug, Default)]
pub struct Point {
    protocol: &'static str,
    lead: Option<(&'static str, Range<u32>)>,
    /// Tags and fields: name, value.
    user: Vec<(Range<u32>, Held)>,
    trail: Vec<(&'static str, Held)>,
    text: String,
    series: SeriesCache,
    /// The leading parts (the lead and the tags) that are the series' ([`Point::series_parts`]).
    series_parts: u32,
    /// The kept series the point's series is ([`Point::series_id`]).
    series_id: Option<SeriesId>,
}

/// A series a point kept: the same id, the same lead and tags (the same text, kinds and
/// names), in the whole process. A slot is a small number, reused once the point starts its
/// kept series again; the generation, never 0, is the process's count of such starts, so it
/// tells apart the series of one slot at different times and in different points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SeriesId {
    pub generation: u64,
    /// The series' number among those kept in its generation, below 4,096.
    pub slot: u32,
}

/// The next [`SeriesId::generation`].
fn next_generation() -> u64 {
    static GENERATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    GENERATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Series parsed before, by the bytes of their lines' series part (see [`Point::series_from`]).
#[derive(Debug, Default)]
struct SeriesCache {
    by_bytes: std::collections::HashMap<Box<[u8]>, Series, foldhash::fast::FixedState>,
    /// The bytes the series kept hold, about (keys, text, parts).
    bytes: usize,
    /// The series' generation (see [`SeriesId`]); 0 before the first is kept.
    generation: u64,
}

/// A series' lead and tags as a point holds them at the start of its buffer.
#[derive(Debug)]
struct Series {
    protocol: &'static str,
    lead: (&'static str, Range<u32>),
    user: Vec<(Range<u32>, Held)>,
    text: Box<str>,
    slot: u32,
}

impl SeriesCache {
    /// Series kept at most, and the bytes they may hold: past either the cache starts again
    /// (an agent sends fewer series a connection, so the ones it sends stay), and a
    /// connection's cache stays under about 512 KiB whatever it is sent.
    const MAX_SERIES: usize = 4096;
    const MAX_HELD: usize = 512 * 1024;
    /// The longest series part kept (a longer one is parsed every time).
    const MAX_BYTES: usize = 256;
}

impl Point {
    pub fn new() -> Self {
        Self::default()
    }

    /// Empties the point for a line of `protocol`.
    pub(crate) fn start(&mut self, protocol: &'static str) {
        self.protocol = protocol;
        self.lead = None;
        self.user.clear();
        self.trail.clear();
        self.text.clear();
        self.series_parts = 0;
        self.series_id = None;
    }

    fn keep(&mut self, text: &str) -> Range<u32> {
        let start = self.text.len() as u32;
        self.text.push_str(text);
        start..self.text.len() as u32
    }

    fn hold(&mut self, value: PointValue<'_>) -> Held {
        match value {
            PointValue::Text(s) => Held::Text(self.keep(s)),
            PointValue::Double(d) => Held::Double(d),
            PointValue::Long(l) => Held::Long(l),
            PointValue::Bool(b) => Held::Bool(b),
        }
    }

    /// Whether `bytes`, a line's series part, was kept by [`Point::keep_series`]; if so the
    /// point now holds that series' lead and tags, as parsing those bytes gives them (the
    /// point just started).
    #[inline]
    pub(crate) fn series_from(&mut self, bytes: &[u8]) -> bool {
        let Some(series) = self.series.by_bytes.get(bytes) else { return false };
        if series.protocol != self.protocol {
            return false;
        }
        self.text.push_str(&series.text);
        self.lead = Some(series.lead.clone());
        self.user.extend(series.user.iter().cloned());
        self.series_id = Some(SeriesId { generation: self.series.generation, slot: series.slot });
        self.end_series();
        true
    }

    /// Keeps the point's lead and tags (all of its parts so far, parsed from `bytes`, the line's
    /// series part) for the next line whose series part has those bytes.
    pub(crate) fn keep_series(&mut self, bytes: &[u8]) {
        self.end_series();
        let Some(lead) = self.lead.clone() else { return };
        if bytes.len() > SeriesCache::MAX_BYTES || !self.trail.is_empty() {
            return;
        }
        let held = bytes.len()
            + self.text.len()
            + std::mem::size_of::<Series>()
            + self.user.len() * std::mem::size_of::<(Range<u32>, Held)>();
        if self.series.by_bytes.len() >= SeriesCache::MAX_SERIES
            || self.series.bytes + held > SeriesCache::MAX_HELD
        {
            self.series.by_bytes.clear();
            self.series.bytes = 0;
            self.series.generation = next_generation();
        }
        let cache = &mut self.series;
        if cache.generation == 0 {
            cache.generation = next_generation();
        }
        // a series kept for another protocol under the same bytes is replaced, in its slot
        let slot = match cache.by_bytes.get(bytes) {
            Some(old) => old.slot,
            None => {
                cache.bytes += held;
                cache.by_bytes.len() as u32
            }
        };
        let series = Series {
            protocol: self.protocol,
            lead,
            user: self.user.clone(),
            text: self.text.as_str().into(),
            slot,
        };
        cache.by_bytes.insert(bytes.into(), series);
        self.series_id = Some(SeriesId { generation: cache.generation, slot });
    }

    /// Says that the parts so far (the lead and the tags) are the point's series
    /// ([`Point::series_parts`]).
    pub(crate) fn end_series(&mut self) {
        self.series_parts = u32::from(self.lead.is_some()) + self.user.len() as u32;
    }

    /// How many of the point's first parts ([`Point::fields`]) are its series: the lead and
    /// the tags, which every point of the series has the same (0 when the parser did not
    /// say).
    pub fn series_parts(&self) -> usize {
        self.series_parts as usize
    }

    /// The kept series this point's is, if the point kept it: every point with this id has the
    /// same first [`Point::series_parts`] parts, names, kinds and values.
    pub fn series_id(&self) -> Option<SeriesId> {
        self.series_id
    }

    /// Sets the protocol's lead part (`measurement`, `metric`, `path`).
    pub(crate) fn set_lead(&mut self, name: &'static str, text: &str) {
        let text = self.keep(text);
        self.lead = Some((name, text));
    }

    /// Adds a tag or field, after those before it.
    pub(crate) fn push_user(&mut self, name: &str, value: PointValue<'_>) {
        let name = self.keep(name);
        let value = self.hold(value);
        self.user.push((name, value));
    }

    /// Adds tags written `key=value` (OpenTSDB's and Graphite's), after the parts before them;
    /// one without a key or a value is malformed.
    pub(crate) fn push_tags<'a>(
        &mut self,
        tags: impl Iterator<Item = &'a str>,
    ) -> Result<(), ProtocolError> {
        for tag in tags {
            match tag.split_once('=') {
                Some((key, value)) if !key.is_empty() && !value.is_empty() => {
                    self.push_user(key, PointValue::Text(value));
                }
                _ => {
                    let reason = format!("'{tag}' is not a tag (key=value)");
                    return Err(ProtocolError::malformed(self.protocol, reason));
                }
            }
        }
        Ok(())
    }

    /// Forgets the trailing parts, keeping the lead and the tags: for the next sample of one
    /// series.
    pub(crate) fn clear_trail(&mut self) {
        self.trail.clear();
    }

    /// Adds one of the protocol's trailing parts (`value`, `timestamp`).
    pub(crate) fn push_trail(&mut self, name: &'static str, value: PointValue<'_>) {
        let value = self.hold(value);
        self.trail.push((name, value));
    }

    fn text(&self, range: &Range<u32>) -> &str {
        &self.text[range.start as usize..range.end as usize]
    }

    fn value(&self, held: &Held) -> PointValue<'_> {
        match held {
            Held::Text(range) => PointValue::Text(self.text(range)),
            Held::Double(d) => PointValue::Double(*d),
            Held::Long(l) => PointValue::Long(*l),
            Held::Bool(b) => PointValue::Bool(*b),
        }
    }

    /// The tags' and fields' names, in line order.
    fn user_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.user.iter().map(|(name, _)| self.text(name))
    }

    /// Whether a name is the protocol's own (its lead's or a trailing part's).
    fn is_reserved(&self, name: &str) -> bool {
        self.lead.as_ref().is_some_and(|(lead, _)| *lead == name)
            || self.trail.iter().any(|(own, _)| *own == name)
    }

    /// A tag or field name given twice is an error ([`ProtocolError::DuplicateKey`]); else
    /// whether the names are the record's as given.
    pub fn check(&self) -> Result<Names, ProtocolError> {
        let name = |i: usize| self.text(&self.user[i].0);
        let count = self.user.len();
        let duplicate = if count <= 16 {
            (1..count).find(|&i| (0..i).any(|j| name(j) == name(i))).map(name)
        } else {
            let mut seen = std::collections::HashSet::with_capacity(count);
            (0..count).map(name).find(|n| !seen.insert(*n))
        };
        if let Some(key) = duplicate {
            return Err(ProtocolError::DuplicateKey { protocol: self.protocol, key: key.into() });
        }
        let renamed = self.user_names().any(|n| self.is_reserved(n));
        Ok(if renamed { Names::Renamed } else { Names::AsGiven })
    }

    /// Whether the point's parts are `shape`'s: its names and kinds, in order (a comparison per
    /// part, for a caller that keeps points of one shape together).
    #[inline]
    pub fn has_shape(&self, shape: &[(String, PointKind)]) -> bool {
        let Some((lead, _)) = &self.lead else { return false };
        matches!(shape.first(), Some((name, PointKind::Text)) if name == lead)
            && self.has_shape_past(shape, 1)
    }

    /// [`Point::has_shape`] for a point whose first `known` parts are known to be `shape`'s (a
    /// point of the same kept series had the shape: [`Point::series_id`]): the number of
    /// parts and the others are compared.
    #[inline]
    pub fn has_shape_past(&self, shape: &[(String, PointKind)], known: usize) -> bool {
        if known == 0 {
            return self.has_shape(shape);
        }
        if self.lead.is_none() {
            return false;
        }
        let parts = 1 + self.user.len() + self.trail.len();
        if shape.len() != parts || known > 1 + self.user.len() {
            return false;
        }
        let from = known - 1;
        let user = &shape[known..1 + self.user.len()];
        let trail = &shape[1 + self.user.len()..];
        user.iter()
            .zip(&self.user[from..])
            .all(|((name, kind), (n, v))| *kind == held_kind(v) && name == self.text(n))
            && trail
                .iter()
                .zip(&self.trail)
                .all(|((name, kind), (n, v))| *kind == held_kind(v) && name == n)
    }

    /// The parts in record order, names as given: the record's fields when [`Point::check`]
    /// says [`Names::AsGiven`].
    pub fn fields(&self) -> impl Iterator<Item = (&str, PointValue<'_>)> + '_ {
        let lead = self.lead.iter().map(|(name, text)| (*name, PointValue::Text(self.text(text))));
        let user = self.user.iter().map(|(name, value)| (self.text(name), self.value(value)));
        let trail = self.trail.iter().map(|(name, value)| (*name, self.value(value)));
        lead.chain(user).chain(trail)
    }

    /// The point as a record (names renamed where they must be; a duplicate is an error).
    pub fn to_record(&self) -> Result<Record, ProtocolError> {
        let (lead_name, lead_text) = self.lead.clone().unwrap_or(("", 0..0));
        let lead = (lead_name, Value::String(self.text(&lead_text).to_owned()));
        let user = self
            .user
            .iter()
            .map(|(name, value)| (self.text(name).to_owned(), self.value(value).to_value()))
            .collect();
        let trail: Vec<(&'static str, Value)> =
            self.trail.iter().map(|(name, value)| (*name, self.value(value).to_value())).collect();
        build(self.protocol, lead, user, &trail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(user: &[&str]) -> Point {
        let mut point = Point::new();
        point.start("p");
        point.set_lead("metric", "cpu");
        for (i, name) in user.iter().enumerate() {
            point.push_user(name, PointValue::Long(i as i64));
        }
        point.push_trail("value", PointValue::Double(1.5));
        point.push_trail("timestamp", PointValue::Long(7));
        point
    }

    #[test]
    fn fields_come_in_record_order_and_equal_the_record_made_of_them() {
        let point = point(&["host", "dc"]);
        assert_eq!(point.check(), Ok(Names::AsGiven));
        let fields: Vec<(&str, PointValue<'_>)> = point.fields().collect();
        assert_eq!(
            fields,
            [
                ("metric", PointValue::Text("cpu")),
                ("host", PointValue::Long(0)),
                ("dc", PointValue::Long(1)),
                ("value", PointValue::Double(1.5)),
                ("timestamp", PointValue::Long(7)),
            ]
        );
        let record = point.to_record().unwrap();
        let names: Vec<&str> = record.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["metric", "host", "dc", "value", "timestamp"]);
    }

    #[test]
    fn a_name_twice_is_an_error_and_a_reserved_one_asks_for_renaming() {
        let error = ProtocolError::DuplicateKey { protocol: "p", key: "a".into() };
        assert_eq!(point(&["a", "b", "a"]).check(), Err(error.clone()));
        let many: Vec<String> =
            (0..20).map(|i| format!("k{i}")).chain(["a".into(), "a".into()]).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(point(&many).check(), Err(error));
        assert_eq!(point(&["value"]).check(), Ok(Names::Renamed));
        let record = point(&["value"]).to_record().unwrap();
        assert_eq!(record.get("_value"), Some(&Value::Long(0)));
    }

    #[test]
    fn the_series_a_point_keeps_stay_within_their_bounds_and_parse_as_alone() {
        let mut point = Point::new();
        let long_tag = "v".repeat(100);
        for i in 0..20_000 {
            // series of every length up to past the longest kept, many more than are kept
            let tag = &long_tag[..i % 101];
            let line = format!("m{},host=h{i},t=x{tag} f={i}i {i}", i % 7);
            let alone = crate::influx::parse(&line, crate::Precision::Nanoseconds, 0).unwrap();
            crate::influx::parse_into(&line, crate::Precision::Nanoseconds, 0, &mut point).unwrap();
            assert_eq!(point.to_record().ok(), alone, "{line}");
            assert!(point.series.by_bytes.len() <= SeriesCache::MAX_SERIES);
            assert!(point.series.bytes <= SeriesCache::MAX_HELD, "{}", point.series.bytes);
        }
        // and a series seen comes from the kept ones
        let line = "m1,host=h1,t=x f=2i 3";
        crate::influx::parse_into(line, crate::Precision::Nanoseconds, 0, &mut point).unwrap();
        point.start("influx");
        assert!(point.series_from(b"m1,host=h1,t=x"));
    }

    #[test]
    fn a_point_has_the_shape_of_its_names_and_kinds_in_order() {
        let shape_of = |point: &Point| -> Vec<(String, PointKind)> {
            point.fields().map(|(n, v)| (n.to_owned(), v.kind())).collect()
        };
        let a = point(&["host", "dc"]);
        assert!(a.has_shape(&shape_of(&a)));
        assert!(!a.has_shape(&shape_of(&point(&["dc", "host"]))));
        assert!(!a.has_shape(&shape_of(&point(&["host"]))));
        let mut text = point(&["host"]);
        text.push_user("dc", PointValue::Text("x"));
        assert!(!a.has_shape(&shape_of(&text)), "the same names, another kind");
        // past the parts known to be the shape's, the same answers
        let shapes = [shape_of(&a), shape_of(&text), shape_of(&point(&["host", "dc", "x"]))];
        for shape in &shapes {
            for known in 0..=3 {
                let agree = (0..known).all(|i| shape.get(i) == shape_of(&a).get(i));
                if agree {
                    assert_eq!(a.has_shape_past(shape, known), a.has_shape(shape), "{known}");
                }
            }
        }
        let mut other = shape_of(&a);
        other[4].0 = "time".into();
        assert!(!a.has_shape_past(&other, 3), "a trailing part's name");
        other = shape_of(&a);
        other[3].1 = PointKind::Long;
        assert!(!a.has_shape_past(&other, 3), "a trailing part's kind");
    }
}
