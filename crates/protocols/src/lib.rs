//! Lines of the metrics agents' protocols turned into needle [`Record`]s: InfluxDB line
//! protocol ([`influx`]), OpenTSDB's telnet `put` ([`opentsdb`]) and Graphite's plaintext
//! protocol ([`graphite`]); and Prometheus remote write's request bodies ([`remote_write`],
//! one record per sample: `{"__name__": ..., <labels>..., "value": ..., "timestamp": ms}`). One line in, at most one record out, no I/O: the `tcp:` source
//! (`needle-runtime`) frames the lines and hands each to [`Format::parse_line`].
//!
//! Every protocol gives records of one shape, so BQL reads them alike:
//!
//! | protocol | record |
//! |---|---|
//! | line protocol | `{"measurement": ..., <tags>..., <fields>..., "timestamp": ms}` |
//! | OpenTSDB | `{"metric": ..., <tags>..., "value": ..., "timestamp": ms}` |
//! | Graphite | `{"path": ..., <tags from ;k=v>..., "value": ..., "timestamp": ms}` |
//!
//! `timestamp` is always a LONG of epoch milliseconds (a line without one, or Graphite's `-1`,
//! gets the arrival time the caller passes); tags are STRINGs; values are DOUBLEs, or LONGs where
//! the protocol says integer (line protocol's `i` and `u` fields, an OpenTSDB value written
//! without a point or exponent), or BOOLEANs and STRINGs for line protocol's fields of those
//! types. Non-finite numbers (`NaN`, `inf`) are refused: a record's JSON cannot hold them (they
//! would read as null). Graphite's `nan` alone is no point rather than an error (`Ok(None)`), as
//! carbon drops it: collectd writes one for every rate's first reading.
//!
//! Names the record's shape uses (`measurement` and `timestamp` for line protocol; `metric`,
//! `value`, `timestamp` for OpenTSDB; `path`, `value`, `timestamp` for Graphite) always mean the
//! protocol's own part: a tag or field of the same name is kept under that name with a `_` before
//! it (`_timestamp`; more `_` until the name is free), so nothing is lost and a query never reads
//! a user's tag where it meant the point's time. Only the names a protocol's own shape uses are
//! taken: a line protocol field named `value` stays `value`. The same tag or field name twice on
//! one line (two tags, two fields, or a tag and a field) is a malformed line
//! ([`ProtocolError::DuplicateKey`]): there is no right value to keep.
//!
//! The parsers are needle's own. The one line protocol crate published (`influxdb-line-protocol`,
//! from InfluxDB IOx) has had no release since December 2023; it brings `nom` 7 and `snafu` 0.7,
//! which nothing else here uses, says of itself that it likely differs from the Go reference in
//! small ways, and leaves precisions, the record shape and the names to its caller anyway. The whole syntax is a page of
//! code here, fuzzed (`fuzz/checks/protocols.rs`) and checked against the documented examples
//! (`tests/golden/`). No crate for OpenTSDB's or Graphite's lines is worth a dependency.

pub mod error;
pub mod graphite;
pub mod influx;
pub mod opentsdb;
pub mod point;
pub mod remote_write;
mod shape;

pub use error::ProtocolError;
use needle_record::Record;
pub use point::{Names, Point, PointKind, PointValue, SeriesId};

/// Line protocol's timestamp unit (`precision=` of InfluxDB's write API); nanoseconds unless
/// said otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    #[default]
    Nanoseconds,
    Microseconds,
    Milliseconds,
    Seconds,
}

impl Precision {
    /// `ns`, `us`, `ms` or `s`, as InfluxDB's write API names them.
    pub fn parse(text: &str) -> Result<Self, ProtocolError> {
        match text {
            "ns" => Ok(Self::Nanoseconds),
            "us" => Ok(Self::Microseconds),
            "ms" => Ok(Self::Milliseconds),
            "s" => Ok(Self::Seconds),
            other => Err(ProtocolError::UnknownOption {
                what: "precision",
                given: other.to_owned(),
                known: "ns, us, ms, s",
            }),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Nanoseconds => "ns",
            Self::Microseconds => "us",
            Self::Milliseconds => "ms",
            Self::Seconds => "s",
        }
    }
}

/// A metrics protocol, as a source reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// InfluxDB line protocol, its timestamps in the given unit.
    Influx(Precision),
    /// OpenTSDB's telnet `put` lines.
    OpenTsdb,
    /// Graphite's plaintext lines (`path value timestamp`, tags after `;`).
    Graphite,
}

impl Format {
    /// The names `format=` takes, for errors and help.
    pub const NAMES: &'static str = "influx, opentsdb, graphite";

    /// `influx`, `opentsdb` or `graphite` (line protocol's precision is nanoseconds; see
    /// [`Format::Influx`]).
    pub fn parse(name: &str) -> Result<Self, ProtocolError> {
        match name {
            "influx" => Ok(Self::Influx(Precision::default())),
            "opentsdb" => Ok(Self::OpenTsdb),
            "graphite" => Ok(Self::Graphite),
            other => Err(ProtocolError::UnknownOption {
                what: "format",
                given: other.to_owned(),
                known: Self::NAMES,
            }),
        }
    }

    /// The protocol's name, as `format=` and the metrics' `protocol` label give it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Influx(_) => "influx",
            Self::OpenTsdb => "opentsdb",
            Self::Graphite => "graphite",
        }
    }

    /// One line (without its newline) as a record; `Ok(None)` for a line that holds no point
    /// (a line protocol comment, a blank line). `now_ms` stands for a missing timestamp.
    pub fn parse_line(self, line: &[u8], now_ms: i64) -> Result<Option<Record>, ProtocolError> {
        let mut point = Point::new();
        if !self.parse_point(line, now_ms, &mut point)? {
            return Ok(None);
        }
        point.to_record().map(Some)
    }

    /// [`Format::parse_line`] into a reusable [`Point`] rather than a record: false for a line
    /// that holds no point. The point's names are not checked yet ([`Point::check`]).
    pub fn parse_point(
        self,
        line: &[u8],
        now_ms: i64,
        point: &mut Point,
    ) -> Result<bool, ProtocolError> {
        let text = std::str::from_utf8(line)
            .map_err(|e| ProtocolError::malformed(self.name(), format!("not UTF-8 ({e})")))?;
        self.parse_point_text(text, now_ms, point)
    }

    /// [`Format::parse_point`] of a line already known to be UTF-8 (a caller that checked a
    /// whole read of lines at once: one check of 256 KiB costs less than a check a line).
    pub fn parse_point_text(
        self,
        line: &str,
        now_ms: i64,
        point: &mut Point,
    ) -> Result<bool, ProtocolError> {
        let text = line.trim_matches([' ', '\t', '\r', '\n']);
        if text.is_empty() {
            return Ok(false);
        }
        match self {
            Self::Influx(precision) => influx::parse_into(text, precision, now_ms, point),
            Self::OpenTsdb => opentsdb::parse_into(text, point).map(|()| true),
            Self::Graphite => graphite::parse_into(text, now_ms, point),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_formats_and_precisions_name_the_known_ones() {
        let err = Format::parse("statsd").unwrap_err().to_string();
        assert_eq!(err, "unknown format 'statsd' (known: influx, opentsdb, graphite)");
        let err = Precision::parse("m").unwrap_err().to_string();
        assert_eq!(err, "unknown precision 'm' (known: ns, us, ms, s)");
        for name in ["influx", "opentsdb", "graphite"] {
            assert_eq!(Format::parse(name).unwrap().name(), name);
        }
        assert_eq!(Format::parse("influx").unwrap(), Format::Influx(Precision::Nanoseconds));
    }

    #[test]
    fn a_line_that_is_not_utf8_is_malformed_and_blank_lines_hold_no_point() {
        for format in [Format::Influx(Precision::Seconds), Format::OpenTsdb, Format::Graphite] {
            let err = format.parse_line(b"m\xff f=1 1", 0).unwrap_err().to_string();
            assert!(err.contains("not UTF-8"), "{err}");
            assert_eq!(format.parse_line(b" \t\r", 0), Ok(None));
        }
    }
}
