//! DISTRIBUTION (QUANTILE, FREQ, CUMFREQ): a KLL sketch of doubles (Apache DataSketches,
//! `datasketches::kll`) over the numeric values of one expression.
//!
//! - Input: any numeric value, as a double. NULL is skipped; NaN and non-numeric values are
//!   skipped and counted (`"Ignored Values": {expr: n}` in the metadata).
//! - `k` is the plan's, raised to the sketch's minimum of 8.
//! - Points. QUANTILE: fractions in `[0, 1]` — `LINEAR n`: n evenly spaced from 0 to 1 inclusive
//!   (n = 1 gives just 0); `REGION start, end, step`: start, start + step, ... up to end;
//!   `MANUAL`: the given fractions, sorted, duplicates removed. FREQ/CUMFREQ: split points over
//!   the values — `LINEAR n`: n evenly spaced from the observed minimum to the maximum (one point
//!   when they are equal); `REGION`/`MANUAL` as given. Generated points are rounded to 6 decimal
//!   places, as Bullet does. Fractions outside `[0, 1]`, non-finite points, a non-positive step
//!   or more than [`MAX_POINTS`] points make [`Distribution::new`] fail (the validator should
//!   have refused them).
//! - QUANTILE records: `{"Quantile": fraction, "Value": v}` (inclusive rank: the smallest retained
//!   value whose rank reaches the fraction; 0 and 1 are the exact minimum and maximum).
//! - FREQ records, one per interval including the open-ended ones, with Bullet's range strings:
//!   `(-∞ to p0)`, `[p0 to p1)`, ..., `[pn to +∞)`; CUMFREQ: `(-∞ to p0)`, `(-∞ to p1)`, ...,
//!   `(-∞ to +∞)`. Each has `"Count"` (DOUBLE: the sketch's weight of values `>= start` and
//!   `< end`, a whole number since KLL weights are integers) and `"Probability"` (DOUBLE:
//!   count / items seen). Points print like Java's
//!   `Double.toString` (`1.0`, `0.25`, `1.0E7`).
//! - An empty sketch gives no records (its metadata still says `"Items Seen": 0`).
//! - Metadata `"Sketch"`: `"Was Estimated"`, `"Normalized Rank Error"`, `"Items Seen"`,
//!   `"Minimum Value"`, `"Maximum Value"`, `"Family": "KLL"`, `"Size"` (serialized bytes).
//! - Merge is the sketch's merge; the encoded payload is the sketch's own serialization.

use super::codec::{corrupt, Reader, Writer};
use super::sketch_error;
use crate::eval::{CompiledExpr, EvalContext};
use crate::EngineError;
use datasketches::common::SearchCriteria;
use datasketches::kll::{KllFloat, KllSketch};
use needle_query::ast::{DistributionKind, Expr, Points};
use needle_record::{Record, Value};
use serde_json::json;

/// The most points one distribution may ask for.
pub const MAX_POINTS: usize = 10_000;
/// Generated points are rounded to this many decimal places.
const ROUNDING: i32 = 6;

type Kll = KllSketch<KllFloat<f64>>;

#[derive(Debug)]
pub struct Distribution {
    kind: DistributionKind,
    value: CompiledExpr,
    value_text: String,
    points: PointSpec,
    k: u16,
}

#[derive(Debug, Clone, PartialEq)]
enum PointSpec {
    /// Known when the query starts.
    Fixed(Vec<f64>),
    /// FREQ/CUMFREQ `LINEAR n`: spread over the observed range when the result is made.
    OverData(u64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct DistributionState {
    pub sketch: Kll,
    pub ignored: u64,
}

fn round(x: f64) -> f64 {
    let scale = 10f64.powi(ROUNDING);
    if x.abs() >= 1e15 {
        return x;
    }
    let r = (x * scale).round() / scale;
    if r == 0.0 {
        0.0
    } else {
        r
    }
}

/// n evenly spaced points from start to end inclusive, rounded, strictly increasing.
fn linear(start: f64, end: f64, n: u64) -> Vec<f64> {
    if n <= 1 || start >= end {
        return vec![round(start)];
    }
    let step = (end - start) / (n - 1) as f64;
    let mut out: Vec<f64> =
        (0..n).map(|i| if i == n - 1 { end } else { start + i as f64 * step }).map(round).collect();
    out.dedup();
    out
}

fn unsupported(what: String) -> EngineError {
    EngineError::Unsupported(what)
}

fn fixed_points(points: &Points, quantile: bool) -> Result<PointSpec, EngineError> {
    let mut out = match points {
        Points::Linear { count } if quantile => {
            if *count as usize > MAX_POINTS {
                return Err(unsupported(format!("{count} points (at most {MAX_POINTS})")));
            }
            linear(0.0, 1.0, *count)
        }
        Points::Linear { count } => {
            if *count as usize > MAX_POINTS {
                return Err(unsupported(format!("{count} points (at most {MAX_POINTS})")));
            }
            return Ok(PointSpec::OverData(*count));
        }
        Points::Region { start, end, step } => {
            if !(start.is_finite() && end.is_finite() && step.is_finite()) || *step <= 0.0 {
                return Err(unsupported(format!("REGION {start}, {end}, {step}")));
            }
            if start > end {
                return Err(unsupported(format!("REGION from {start} down to {end}")));
            }
            let count = ((end - start) / step + 1e-9).floor() + 1.0;
            if count > MAX_POINTS as f64 {
                return Err(unsupported(format!("{count} points (at most {MAX_POINTS})")));
            }
            (0..count as u64).map(|i| round(start + i as f64 * step)).collect()
        }
        Points::Manual { points } => {
            if points.len() > MAX_POINTS {
                return Err(unsupported(format!("{} points (at most {MAX_POINTS})", points.len())));
            }
            if let Some(p) = points.iter().find(|p| !p.is_finite()) {
                return Err(unsupported(format!("point {p}")));
            }
            points.clone()
        }
    };
    out.sort_by(f64::total_cmp);
    out.dedup();
    if quantile {
        if let Some(p) = out.iter().find(|p| !(0.0..=1.0).contains(*p)) {
            return Err(unsupported(format!("quantile fraction {p} outside [0, 1]")));
        }
    }
    Ok(PointSpec::Fixed(out))
}

/// A double as Java's `Double.toString` prints it (what Bullet's range strings hold).
pub fn java_double(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    let a = x.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        let s = format!("{x}");
        return if s.contains('.') { s } else { format!("{s}.0") };
    }
    let s = format!("{x:e}");
    let (mantissa, exponent) = s.split_once('e').expect("exponent format has an e");
    let mantissa =
        if mantissa.contains('.') { mantissa.to_owned() } else { format!("{mantissa}.0") };
    format!("{mantissa}E{exponent}")
}

impl Distribution {
    pub fn new(
        kind: DistributionKind,
        value: &Expr,
        points: &Points,
        k: u16,
    ) -> Result<Self, EngineError> {
        Ok(Self {
            kind,
            value: CompiledExpr::compile(value)?,
            value_text: value.to_string(),
            points: fixed_points(points, kind == DistributionKind::Quantile)?,
            k: k.max(8),
        })
    }

    pub fn new_state(&self) -> DistributionState {
        DistributionState { sketch: Kll::new(self.k).expect("k is at least 8"), ignored: 0 }
    }

    pub fn update(&self, state: &mut DistributionState, record: &Record, ctx: &EvalContext) {
        let value = self.value.eval_cow(record, ctx);
        if value.is_null() {
            return;
        }
        match value.as_f64().map(KllFloat::<f64>::new) {
            Some(Ok(x)) => state.sketch.update(x),
            _ => state.ignored += 1,
        }
    }

    pub fn merge(
        &self,
        into: &mut DistributionState,
        other: &DistributionState,
    ) -> Result<(), EngineError> {
        into.sketch.merge(&other.sketch).map_err(sketch_error)?;
        into.ignored = into.ignored.saturating_add(other.ignored);
        Ok(())
    }

    /// The points to evaluate at for this state.
    fn points(&self, sketch: &Kll) -> Vec<f64> {
        match &self.points {
            PointSpec::Fixed(points) => points.clone(),
            PointSpec::OverData(n) => match (sketch.min_item(), sketch.max_item()) {
                (Some(min), Some(max)) => linear(**min, **max, *n),
                _ => Vec::new(),
            },
        }
    }

    pub fn finish(
        &self,
        state: &DistributionState,
        meta: &mut serde_json::Map<String, serde_json::Value>,
    ) -> Vec<Record> {
        let sketch = &state.sketch;
        let item =
            |v: Option<&KllFloat<f64>>| v.map(|x| json!(**x)).unwrap_or(serde_json::Value::Null);
        meta.insert(
            "Sketch".into(),
            json!({
                "Was Estimated": sketch.is_estimation_mode(),
                "Normalized Rank Error": sketch.normalized_rank_error(),
                "Items Seen": sketch.n(),
                "Minimum Value": item(sketch.min_item()),
                "Maximum Value": item(sketch.max_item()),
                "Family": "KLL",
                "Size": sketch.serialize().len(),
            }),
        );
        if state.ignored > 0 {
            meta.insert("Ignored Values".into(), json!({ &self.value_text: state.ignored }));
        }
        if sketch.is_empty() {
            return Vec::new();
        }
        let points = self.points(sketch);
        let view = sketch.sorted_view();
        match self.kind {
            DistributionKind::Quantile => points
                .iter()
                .filter_map(|&q| {
                    let v = view.quantile(q, SearchCriteria::Inclusive).ok()??;
                    let mut r = Record::new();
                    r.insert("Quantile", Value::Double(q));
                    r.insert("Value", Value::Double(*v));
                    Some(r)
                })
                .collect(),
            DistributionKind::Freq | DistributionKind::CumFreq => {
                let cumulative = self.kind == DistributionKind::CumFreq;
                let splits: Vec<KllFloat<f64>> =
                    points.iter().filter_map(|p| KllFloat::<f64>::new(*p).ok()).collect();
                // KLL weights are integers: recover each split's cumulative weight from its rank,
                // so that counts are whole and probabilities are count / n without the rounding
                // noise of subtracting ranks.
                let Ok(Some(ranks)) = view.cdf(&splits, SearchCriteria::Exclusive) else {
                    return Vec::new();
                };
                let n = sketch.n() as f64;
                let cumulative_counts: Vec<f64> = ranks.iter().map(|r| (r * n).round()).collect();
                let counts: Vec<f64> = if cumulative {
                    cumulative_counts
                } else {
                    let mut previous = 0.0;
                    cumulative_counts
                        .into_iter()
                        .map(|c| {
                            let count = c - previous;
                            previous = c;
                            count
                        })
                        .collect()
                };
                ranges(&points, cumulative)
                    .into_iter()
                    .zip(counts)
                    .map(|(range, count)| {
                        let mut r = Record::new();
                        r.insert("Range", Value::String(range));
                        r.insert("Probability", Value::Double(count / n));
                        r.insert("Count", Value::Double(count));
                        r
                    })
                    .collect()
            }
        }
    }

    pub fn encode(&self, state: &DistributionState, w: &mut Writer) {
        w.varint(state.ignored);
        w.bytes(&state.sketch.serialize());
    }

    pub fn decode(&self, r: &mut Reader<'_>) -> Result<DistributionState, EngineError> {
        let ignored = r.varint()?;
        let bytes = r.bytes()?;
        let sketch = super::guard(|| Kll::deserialize(bytes))?
            .map_err(|e| corrupt(format!("KLL sketch: {e}")))?;
        if sketch.k() != self.k {
            return Err(corrupt(format!("KLL sketch with k {} (expected {})", sketch.k(), self.k)));
        }
        Ok(DistributionState { sketch, ignored })
    }
}

/// Bullet's interval names for split points.
fn ranges(points: &[f64], cumulative: bool) -> Vec<String> {
    const NEG: &str = "(-∞ to ";
    let mut out = Vec::with_capacity(points.len() + 1);
    let mut prefix = NEG.to_owned();
    for p in points {
        out.push(format!("{prefix}{})", java_double(*p)));
        if !cumulative {
            prefix = format!("[{} to ", java_double(*p));
        }
    }
    out.push(format!("{prefix}+∞)"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_like_java() {
        assert_eq!(java_double(1.0), "1.0");
        assert_eq!(java_double(0.25), "0.25");
        assert_eq!(java_double(-3.5), "-3.5");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(java_double(1.5e-4), "1.5E-4");
        assert_eq!(java_double(0.0), "0.0");
    }

    #[test]
    fn range_names_follow_bullet() {
        assert_eq!(ranges(&[1.0, 2.0], false), ["(-∞ to 1.0)", "[1.0 to 2.0)", "[2.0 to +∞)"]);
        assert_eq!(ranges(&[1.0, 2.0], true), ["(-∞ to 1.0)", "(-∞ to 2.0)", "(-∞ to +∞)"]);
    }

    #[test]
    fn points_are_generated_like_bullet() {
        assert_eq!(linear(0.0, 1.0, 5), [0.0, 0.25, 0.5, 0.75, 1.0]);
        assert_eq!(linear(0.0, 1.0, 1), [0.0]);
        assert_eq!(linear(3.0, 3.0, 4), [3.0]);
        assert_eq!(linear(0.0, 1.0, 4), [0.0, 0.333333, 0.666667, 1.0]);
        let region = fixed_points(&Points::Region { start: 0.1, end: 0.5, step: 0.2 }, true);
        assert_eq!(region.unwrap(), PointSpec::Fixed(vec![0.1, 0.3, 0.5]));
        let manual = fixed_points(&Points::Manual { points: vec![0.9, 0.1, 0.9] }, true);
        assert_eq!(manual.unwrap(), PointSpec::Fixed(vec![0.1, 0.9]));
        assert!(fixed_points(&Points::Manual { points: vec![1.5] }, true).is_err());
        assert!(fixed_points(&Points::Manual { points: vec![1.5] }, false).is_ok());
        assert!(fixed_points(&Points::Region { start: 0.0, end: 1.0, step: 0.0 }, true).is_err());
        assert!(fixed_points(&Points::Linear { count: 1 << 40 }, true).is_err());
    }
}

#[cfg(test)]
mod api_tests {
    use super::super::testing::*;
    use needle_query::ast::{DistributionKind, Points};
    use needle_query::plan::Aggregation;
    use needle_record::{Record, Value};

    fn dist(kind: DistributionKind, points: Points) -> Aggregation {
        Aggregation::Distribution { kind, value: field("x"), points, k: 200 }
    }

    /// 1..=100 as LONGs and DOUBLEs, plus values that must be ignored.
    fn records() -> Vec<Record> {
        (1..=100)
            .map(|i| {
                let v = if i % 2 == 0 { Value::Long(i) } else { Value::Double(i as f64) };
                rec(&[("x", v)])
            })
            .chain([rec(&[("x", "no".into())]), rec(&[]), rec(&[("x", Value::Double(f64::NAN))])])
            .collect()
    }

    fn column(out: &[Record], name: &str) -> Vec<Value> {
        out.iter().map(|r| r.get(name).cloned().unwrap_or_default()).collect()
    }

    #[test]
    fn quantiles_are_exact_below_k() {
        let aggregation = dist(DistributionKind::Quantile, Points::Linear { count: 5 });
        for out in [run(&aggregation, &records()), run_split(&aggregation, &records())] {
            let q: Vec<f64> =
                column(&out.records, "Quantile").iter().map(|v| v.as_f64().unwrap()).collect();
            let v: Vec<f64> =
                column(&out.records, "Value").iter().map(|v| v.as_f64().unwrap()).collect();
            assert_eq!(q, [0.0, 0.25, 0.5, 0.75, 1.0]);
            assert_eq!(v, [1.0, 25.0, 50.0, 75.0, 100.0]);
            let sketch = &out.meta["Sketch"];
            assert_eq!(sketch["Items Seen"], 100);
            assert_eq!(sketch["Minimum Value"], 1.0);
            assert_eq!(sketch["Maximum Value"], 100.0);
            assert_eq!(sketch["Was Estimated"], false);
            assert_eq!(sketch["Family"], "KLL");
            assert!(sketch["Normalized Rank Error"].as_f64().unwrap() > 0.0);
            assert_eq!(out.meta["Ignored Values"], serde_json::json!({"x": 2}));
        }
    }

    #[test]
    fn freq_and_cumfreq_cover_the_open_intervals() {
        let points = Points::Manual { points: vec![50.5, 10.5] };
        let out = run(&dist(DistributionKind::Freq, points.clone()), &records());
        assert_eq!(
            column(&out.records, "Range"),
            ["(-∞ to 10.5)", "[10.5 to 50.5)", "[50.5 to +∞)"].map(Value::from)
        );
        assert_eq!(column(&out.records, "Probability"), [0.1, 0.4, 0.5].map(Value::Double));
        assert_eq!(column(&out.records, "Count"), [10.0, 40.0, 50.0].map(Value::Double));

        let out = run(&dist(DistributionKind::CumFreq, points), &records());
        assert_eq!(
            column(&out.records, "Range"),
            ["(-∞ to 10.5)", "(-∞ to 50.5)", "(-∞ to +∞)"].map(Value::from)
        );
        assert_eq!(column(&out.records, "Count"), [10.0, 50.0, 100.0].map(Value::Double));
    }

    #[test]
    fn linear_freq_points_span_the_observed_values() {
        let out = run(&dist(DistributionKind::Freq, Points::Linear { count: 3 }), &records());
        assert_eq!(
            column(&out.records, "Range"),
            ["(-∞ to 1.0)", "[1.0 to 50.5)", "[50.5 to 100.0)", "[100.0 to +∞)"].map(Value::from)
        );
        assert_eq!(column(&out.records, "Count"), [0.0, 50.0, 49.0, 1.0].map(Value::Double));
    }

    #[test]
    fn an_empty_distribution_has_no_records() {
        let out = run(&dist(DistributionKind::Quantile, Points::Linear { count: 3 }), &[]);
        assert!(out.records.is_empty());
        assert_eq!(out.meta["Sketch"]["Items Seen"], 0);
        assert_eq!(out.meta["Sketch"]["Minimum Value"], serde_json::Value::Null);
    }

    #[test]
    fn estimated_quantiles_stay_within_the_rank_error() {
        let rs: Vec<Record> =
            (0..50_000).map(|i| rec(&[("x", Value::Long((i * 7919) % 50_000))])).collect();
        let aggregation = Aggregation::Distribution {
            kind: DistributionKind::Quantile,
            value: field("x"),
            points: Points::Linear { count: 11 },
            k: 64,
        };
        let out = run_split(&aggregation, &rs);
        let eps = out.meta["Sketch"]["Normalized Rank Error"].as_f64().unwrap();
        assert_eq!(out.meta["Sketch"]["Was Estimated"], true);
        for r in &out.records {
            let q = r.get("Quantile").unwrap().as_f64().unwrap();
            let v = r.get("Value").unwrap().as_f64().unwrap();
            // Values are 0..50000 once each, so a value's true rank is v / 50000.
            assert!((v / 50_000.0 - q).abs() <= eps + 1e-9, "q {q} -> {v} (eps {eps})");
        }
    }
}
