//! [`WorkloadSpec`]: which workload, with which seed, count, rate and needle; and
//! [`parse_spec`], the one-string form the runtime's generator source and the CLI share.
//!
//! # Spec syntax
//! ```text
//! [gen:]KIND[?PARAM=VALUE(&PARAM=VALUE)*]
//! KIND   = bullet | iot | small
//! PARAM  = seed          u64, default 0
//!        | count         u64, how many records in all (default: no end)
//!        | rate          records per second, a positive number (default: as fast as possible)
//!        | sensors       iot only: number of sensors, default 100
//!        | needle        bullet only: FIELD=VALUE (the first `=` splits); may repeat, one per field
//!        | needle_count  bullet only: how many needle records, default 1
//!        | needle_at     bullet only: index of the first needle record; default the middle of
//!                        `count` ((count - needle_count) / 2), or 0 when there is no count
//! ```
//! Values are percent-decoded (`%20` is a space, `%26` an `&`, `%3D` a `=`), so any needle value
//! can be written. Example: `bullet?rate=20000&seed=3&needle=id=abc&needle_count=5`.

use crate::WorkloadError;

/// One of the workloads (docs/workloads.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkloadKind {
    Bullet,
    Iot,
    Small,
}

impl WorkloadKind {
    pub const ALL: [WorkloadKind; 3] =
        [WorkloadKind::Bullet, WorkloadKind::Iot, WorkloadKind::Small];

    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Bullet => "bullet",
            WorkloadKind::Iot => "iot",
            WorkloadKind::Small => "small",
        }
    }
}

impl std::str::FromStr for WorkloadKind {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self, WorkloadError> {
        WorkloadKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| WorkloadError::UnknownKind(s.to_owned()))
    }
}

impl std::fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The needle records to inject into a bullet workload: `count` consecutive records starting at
/// record `at`, each a normal record except that every `(field, value)` in `fields` is set.
/// A field is a top-level string or long field (`id`, `timespent`), or `MAP.KEY` for an entry of
/// one of the map fields (`demographics.country`); the value is a string, or an integer for a
/// long field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeedleSpec {
    pub fields: Vec<(String, String)>,
    pub count: u64,
    /// `None`: the middle of the spec's `count`, or 0 for an endless stream.
    pub at: Option<u64>,
}

/// Everything that determines a generated stream (and, with `rate`, its pace).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadSpec {
    pub kind: WorkloadKind,
    pub seed: u64,
    /// How many records in all; `None` for an endless stream.
    pub count: Option<u64>,
    /// Target records per second; `None` for as fast as possible. The generator itself ignores
    /// it: drivers pace with [`crate::Pacer`].
    pub rate: Option<f64>,
    /// iot: the number of sensors S (`sensor_0 .. sensor_{S-1}`).
    pub sensors: u64,
    pub needle: Option<NeedleSpec>,
}

/// The default number of iot sensors.
pub const DEFAULT_SENSORS: u64 = 100;

impl WorkloadSpec {
    /// A spec with defaults: seed 0, endless, unpaced, 100 sensors, no needle.
    pub fn new(kind: WorkloadKind) -> Self {
        Self { kind, seed: 0, count: None, rate: None, sensors: DEFAULT_SENSORS, needle: None }
    }

    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    pub fn with_count(mut self, count: u64) -> Self {
        self.count = Some(count);
        self
    }

    /// Checks what can be checked without building a generator: options that do not apply to
    /// the kind, an empty needle, a needle placement outside `count`. (Needle fields and values
    /// are checked by the bullet generator; [`crate::Generator::new`] runs both.)
    pub fn validate(&self) -> Result<(), WorkloadError> {
        if let Some(rate) = self.rate {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(WorkloadError::Spec(format!(
                    "rate must be a positive number, not {rate}"
                )));
            }
        }
        if self.sensors == 0 {
            return Err(WorkloadError::Spec("sensors must be at least 1".into()));
        }
        if self.kind != WorkloadKind::Iot && self.sensors != DEFAULT_SENSORS {
            return Err(WorkloadError::Spec(format!("sensors applies to iot, not {}", self.kind)));
        }
        if let Some(needle) = &self.needle {
            if self.kind != WorkloadKind::Bullet {
                return Err(WorkloadError::Needle(format!(
                    "needles can be injected into bullet only, not {} (iot's outlier sensors are its needles)",
                    self.kind
                )));
            }
            if needle.fields.is_empty() {
                return Err(WorkloadError::Needle("no FIELD=VALUE given".into()));
            }
            if needle.count == 0 {
                return Err(WorkloadError::Needle("needle count must be at least 1".into()));
            }
            self.needle_start()?;
        }
        Ok(())
    }

    /// The index of the first needle record: `needle.at`, or the middle of `count`
    /// (`(count - needle_count) / 2`), or 0 without a count; checked to fit inside `count`.
    pub fn needle_start(&self) -> Result<Option<u64>, WorkloadError> {
        let Some(needle) = &self.needle else { return Ok(None) };
        let at = match (needle.at, self.count) {
            (Some(at), _) => at,
            (None, Some(count)) => count.saturating_sub(needle.count) / 2,
            (None, None) => 0,
        };
        if let Some(count) = self.count {
            if at.checked_add(needle.count).is_none_or(|end| end > count) {
                return Err(WorkloadError::Needle(format!(
                    "{} needle record(s) from record {at} do not fit in {count} records",
                    needle.count
                )));
            }
        }
        Ok(Some(at))
    }
}

/// Splits `FIELD=VALUE` (at the first `=`), as `--needle` and the spec's `needle=` take it.
pub fn parse_needle_field(s: &str) -> Result<(String, String), WorkloadError> {
    match s.split_once('=') {
        Some((field, value)) if !field.is_empty() => Ok((field.to_owned(), value.to_owned())),
        _ => Err(WorkloadError::Needle(format!("expected FIELD=VALUE, got `{s}`"))),
    }
}

/// Parses a spec string and validates it.
///
/// ```text
/// [gen:]KIND[?PARAM=VALUE(&PARAM=VALUE)*]
/// KIND   = bullet | iot | small
/// PARAM  = seed | count | rate | sensors (iot) | needle=FIELD=VALUE (bullet; repeatable)
///        | needle_count (bullet, default 1) | needle_at (bullet, default the middle of count, or 0)
/// ```
/// Values are percent-decoded. Example: `bullet?rate=20000&seed=3&needle=id=abc&needle_count=5`.
/// Unknown or repeated parameters, and options that do not apply to the kind, are errors.
pub fn parse_spec(s: &str) -> Result<WorkloadSpec, WorkloadError> {
    let s = s.strip_prefix("gen:").unwrap_or(s);
    let (kind, query) = s.split_once('?').unwrap_or((s, ""));
    let mut spec = WorkloadSpec::new(kind.parse()?);
    let mut seen: Vec<&str> = Vec::new();
    let (mut fields, mut needle_count, mut needle_at) = (Vec::new(), None, None);
    for param in query.split('&').filter(|p| !p.is_empty()) {
        let (key, raw) = param
            .split_once('=')
            .ok_or_else(|| WorkloadError::Spec(format!("expected PARAM=VALUE, got `{param}`")))?;
        let value = percent_decode(raw)?;
        if key != "needle" {
            if seen.contains(&key) {
                return Err(WorkloadError::Spec(format!("`{key}` is given twice")));
            }
            seen.push(key);
        }
        match key {
            "seed" => spec.seed = number(key, &value)?,
            "count" => spec.count = Some(number(key, &value)?),
            "sensors" => spec.sensors = number(key, &value)?,
            "rate" => {
                spec.rate = Some(value.parse().map_err(|_| {
                    WorkloadError::Spec(format!("rate must be a number, not `{value}`"))
                })?)
            }
            "needle" => fields.push(parse_needle_field(&value)?),
            "needle_count" => needle_count = Some(number(key, &value)?),
            "needle_at" => needle_at = Some(number(key, &value)?),
            _ => {
                return Err(WorkloadError::Spec(format!(
                    "unknown parameter `{key}` (expected seed, count, rate, sensors, needle, needle_count, needle_at)"
                )))
            }
        }
    }
    if fields.is_empty() {
        if needle_count.is_some() || needle_at.is_some() {
            return Err(WorkloadError::Needle(
                "needle_count/needle_at without needle=FIELD=VALUE".into(),
            ));
        }
    } else {
        spec.needle = Some(NeedleSpec { fields, count: needle_count.unwrap_or(1), at: needle_at });
    }
    spec.validate()?;
    Ok(spec)
}

fn number(key: &str, value: &str) -> Result<u64, WorkloadError> {
    value.parse().map_err(|_| {
        WorkloadError::Spec(format!("{key} must be a non-negative integer, not `{value}`"))
    })
}

fn percent_decode(s: &str) -> Result<String, WorkloadError> {
    if !s.contains('%') {
        return Ok(s.to_owned());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            let byte = hex
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| WorkloadError::Spec(format!("bad percent escape in `{s}`")))?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| WorkloadError::Spec(format!("`{s}` decodes to invalid UTF-8")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let spec = parse_spec("bullet?rate=20000&seed=3&needle=id=abc&needle_count=5").unwrap();
        assert_eq!(spec.kind, WorkloadKind::Bullet);
        assert_eq!(spec.seed, 3);
        assert_eq!(spec.rate, Some(20000.0));
        assert_eq!(spec.count, None);
        let needle = spec.needle.clone().unwrap();
        assert_eq!(needle.fields, vec![("id".to_owned(), "abc".to_owned())]);
        assert_eq!((needle.count, needle.at), (5, None));
        assert_eq!(spec.needle_start(), Ok(Some(0)));
    }

    #[test]
    fn defaults_prefix_and_percent_decoding() {
        assert_eq!(parse_spec("gen:small").unwrap(), WorkloadSpec::new(WorkloadKind::Small));
        let spec = parse_spec("iot?sensors=1000&count=10").unwrap();
        assert_eq!((spec.kind, spec.sensors, spec.count), (WorkloadKind::Iot, 1000, Some(10)));
        let spec = parse_spec(
            "bullet?count=100&needle=demographics.country=New%20York%26Co&needle=timespent=7",
        )
        .unwrap();
        let needle = spec.needle.as_ref().unwrap();
        assert_eq!(needle.fields[0], ("demographics.country".to_owned(), "New York&Co".to_owned()));
        assert_eq!(needle.fields[1], ("timespent".to_owned(), "7".to_owned()));
        assert_eq!(spec.needle_start(), Ok(Some(49)));
    }

    #[test]
    fn rejects_what_it_cannot_use() {
        for (spec, want) in [
            ("flood", "unknown workload"),
            ("bullet?speed=3", "unknown parameter `speed`"),
            ("bullet?seed=-1", "seed must be"),
            ("bullet?seed=1&seed=2", "given twice"),
            ("bullet?rate=0", "rate must be a positive"),
            ("bullet?rate=fast", "rate must be a number"),
            ("bullet?needle=id", "expected FIELD=VALUE"),
            ("bullet?needle_count=3", "without needle"),
            ("bullet?needle=id=x&needle_count=0", "at least 1"),
            ("small?needle=id=x&count=10", "bullet only"),
            ("small?sensors=3", "sensors applies to iot"),
            ("iot?sensors=0", "at least 1"),
            ("bullet?count=10&needle=id=x&needle_at=8&needle_count=3", "do not fit"),
            ("bullet?needle=id=%zz", "percent escape"),
            ("bullet?seed", "expected PARAM=VALUE"),
        ] {
            let err = parse_spec(spec).unwrap_err().to_string();
            assert!(err.contains(want), "{spec}: {err}");
        }
    }
}
