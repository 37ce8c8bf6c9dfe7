//! COUNT DISTINCT: a Theta sketch (Apache DataSketches, `datasketches::theta`) over the canonical
//! key ([`super::key::key_of`]) of the tuple of field values.
//!
//! - `lg_k` is `floor(log2(nominal_entries))`, clamped to the sketch's `[5, 26]` (Bullet's default
//!   16384 entries is `lg_k` 14). Below `nominal_entries` distinct tuples the count is exact.
//! - A record whose fields are all NULL is skipped (a record without the fields is not a
//!   value); a tuple with some NULLs counts (NULL is a value of that position). So
//!   `COUNT(DISTINCT a)` does not count NULL, as in SQL.
//! - A worker's state is an update sketch plus, once something was merged in, a Theta union;
//!   `finish` and `encode` combine both into a compact sketch. The encoded payload is the compact
//!   sketch's own serialization (ordered, uncompressed).
//! - Result: one record `{name: LONG}` (the estimate, rounded); metadata `"Sketch"` with Bullet's
//!   names: `"Was Estimated"`, `"Theta"`, `"Standard Deviations"` (`"1"`, `"2"`, `"3"`, each with
//!   `"upperBound"` and `"lowerBound"`), `"Family": "THETA"`, `"Size"` (serialized bytes).

use super::codec::{corrupt, Reader, Writer};
use super::key::write_key;
use super::sketch_error;
use crate::eval::{CompiledExpr, EvalContext};
use crate::EngineError;
use datasketches::common::NumStdDev;
use datasketches::theta::ThetaUnionBuilder;
use datasketches::theta::{CompactThetaSketch, ThetaSketch, ThetaSketchBuilder, ThetaUnion};
use needle_query::ast::Expr;
use needle_record::{Record, Value};
use serde_json::json;

#[derive(Debug)]
pub struct CountDistinct {
    name: String,
    fields: Vec<CompiledExpr>,
    lg_k: u8,
}

#[derive(Debug)]
pub struct CountDistinctState {
    sketch: ThetaSketch,
    union: Option<ThetaUnion>,
    /// Records counted into `sketch` or merged in (all-NULL tuples excluded).
    pub updates: u64,
    /// The key buffer reused by `update`.
    scratch: String,
}

/// `floor(log2(n))` clamped to Theta's supported `[5, 26]`.
pub fn lg_k_for(nominal_entries: u32) -> u8 {
    let lg = 31u32.saturating_sub(nominal_entries.max(1).leading_zeros());
    lg.clamp(5, 26) as u8
}

impl CountDistinct {
    pub fn new(name: &str, fields: &[Expr], nominal_entries: u32) -> Result<Self, EngineError> {
        let fields = fields.iter().map(CompiledExpr::compile).collect::<Result<_, _>>()?;
        Ok(Self { name: name.to_owned(), fields, lg_k: lg_k_for(nominal_entries) })
    }

    fn sketch(&self) -> ThetaSketch {
        ThetaSketchBuilder::default().lg_k(self.lg_k).build().expect("lg_k is clamped to 5..=26")
    }

    fn union(&self) -> ThetaUnion {
        ThetaUnionBuilder::default().lg_k(self.lg_k).build().expect("lg_k is clamped to 5..=26")
    }

    pub fn new_state(&self) -> CountDistinctState {
        CountDistinctState {
            sketch: self.sketch(),
            union: None,
            updates: 0,
            scratch: String::new(),
        }
    }

    pub fn update(&self, state: &mut CountDistinctState, record: &Record, ctx: &EvalContext) {
        let mut all_null = true;
        let values = self.fields.iter().map(|e| {
            let v = e.eval_cow(record, ctx);
            all_null &= v.is_null();
            v
        });
        write_key(&mut state.scratch, values);
        if all_null {
            return;
        }
        state.sketch.update(state.scratch.as_str());
        state.updates += 1;
    }

    /// Everything `state` has seen, as one compact sketch.
    fn combined(&self, state: &CountDistinctState) -> CompactThetaSketch {
        match &state.union {
            None => state.sketch.compact(true),
            Some(union) if state.sketch.is_empty() => union.to_sketch(true),
            Some(union) => {
                let mut all = self.union();
                let merged = union.to_sketch(true);
                all.update(&merged).expect("sketches of one aggregator share a seed");
                all.update(&state.sketch).expect("sketches of one aggregator share a seed");
                all.to_sketch(true)
            }
        }
    }

    pub fn merge(
        &self,
        into: &mut CountDistinctState,
        other: &CountDistinctState,
    ) -> Result<(), EngineError> {
        let union = into.union.get_or_insert_with(|| self.union());
        if !other.sketch.is_empty() {
            union.update(&other.sketch).map_err(sketch_error)?;
        }
        if let Some(theirs) = &other.union {
            union.update(&theirs.to_sketch(true)).map_err(sketch_error)?;
        }
        into.updates = into.updates.saturating_add(other.updates);
        Ok(())
    }

    pub fn finish(
        &self,
        state: &CountDistinctState,
        meta: &mut serde_json::Map<String, serde_json::Value>,
    ) -> Vec<Record> {
        let sketch = self.combined(state);
        let estimate = sketch.estimate();
        let bounds = |n: NumStdDev| json!({"upperBound": sketch.upper_bound(n), "lowerBound": sketch.lower_bound(n)});
        meta.insert(
            "Sketch".into(),
            json!({
                "Was Estimated": sketch.is_estimation_mode(),
                "Theta": sketch.theta(),
                "Standard Deviations": {
                    "1": bounds(NumStdDev::One),
                    "2": bounds(NumStdDev::Two),
                    "3": bounds(NumStdDev::Three),
                },
                "Family": "THETA",
                "Size": sketch.serialize().len(),
            }),
        );
        let mut record = Record::new();
        record.insert(self.name.clone(), Value::Long(estimate.round() as i64));
        vec![record]
    }

    pub fn encode(&self, state: &CountDistinctState, w: &mut Writer) {
        w.varint(state.updates);
        w.bytes(&self.combined(state).serialize());
    }

    pub fn decode(&self, r: &mut Reader<'_>) -> Result<CountDistinctState, EngineError> {
        let updates = r.varint()?;
        let bytes = r.bytes()?;
        let compact = super::guard(|| CompactThetaSketch::deserialize(bytes))?
            .map_err(|e| corrupt(format!("theta sketch: {e}")))?;
        let mut union = self.union();
        union.update(&compact).map_err(|e| corrupt(format!("theta sketch: {e}")))?;
        Ok(CountDistinctState {
            sketch: self.sketch(),
            union: Some(union),
            updates,
            scratch: String::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lg_k_is_the_floor_log2_clamped() {
        assert_eq!(lg_k_for(16384), 14);
        assert_eq!(lg_k_for(16383), 13);
        assert_eq!(lg_k_for(1), 5);
        assert_eq!(lg_k_for(u32::MAX), 26);
    }
}

#[cfg(test)]
mod api_tests {
    use super::super::testing::*;
    use super::super::Aggregator;
    use needle_query::plan::Aggregation;
    use needle_record::{Record, Value};

    fn count_distinct(fields: &[&str], nominal_entries: u32) -> Aggregation {
        Aggregation::CountDistinct {
            name: "n".into(),
            fields: fields.iter().map(|f| field(f)).collect(),
            nominal_entries,
        }
    }

    #[test]
    fn small_counts_are_exact_and_all_null_tuples_are_skipped() {
        let rs: Vec<Record> = (0..100)
            .map(|i| {
                rec(&[("a", Value::Long(i % 7)), ("b", if i % 2 == 0 { "x" } else { "y" }.into())])
            })
            .chain([rec(&[]), rec(&[("a", Value::Null)])])
            .chain([rec(&[("b", "x".into())])])
            .collect();
        for out in [
            run(&count_distinct(&["a", "b"], 16384), &rs),
            run_split(&count_distinct(&["a", "b"], 16384), &rs),
        ] {
            // 14 (a, b) pairs plus (NULL, "x").
            assert_eq!(out.records, vec![rec(&[("n", Value::Long(15))])]);
            let sketch = &out.meta["Sketch"];
            assert_eq!(sketch["Was Estimated"], false);
            assert_eq!(sketch["Theta"], 1.0);
            assert_eq!(sketch["Family"], "THETA");
            assert_eq!(sketch["Standard Deviations"]["3"]["upperBound"], 15.0);
            assert!(sketch["Size"].as_u64().unwrap() > 0);
        }
        let out = run(&count_distinct(&["a"], 16384), &[rec(&[]), rec(&[("a", Value::Null)])]);
        assert_eq!(out.records, vec![rec(&[("n", Value::Long(0))])]);
    }

    #[test]
    fn large_counts_are_estimated_within_the_reported_bounds() {
        let rs: Vec<Record> = (0..20_000).map(|i| rec(&[("a", Value::Long(i))])).collect();
        let a = Aggregator::new(&count_distinct(&["a"], 1024)).unwrap();
        // Two overlapping halves: 0..12000 and 8000..20000.
        let mut s = state_of(&a, &rs[..12_000]);
        let other = a.decode(&a.encode(&state_of(&a, &rs[8_000..]))).unwrap();
        a.merge(&mut s, &other).unwrap();
        let out = a.finish(&s);
        let sketch = &out.meta["Sketch"];
        assert_eq!(sketch["Was Estimated"], true);
        assert!(sketch["Theta"].as_f64().unwrap() < 1.0);
        let lo = sketch["Standard Deviations"]["3"]["lowerBound"].as_f64().unwrap();
        let hi = sketch["Standard Deviations"]["3"]["upperBound"].as_f64().unwrap();
        assert!(lo <= 20_000.0 && 20_000.0 <= hi, "{lo} .. {hi}");
        let n = out.records[0].get("n").unwrap().as_i64().unwrap();
        assert!((n - 20_000).abs() < 20_000 / 10, "{n}");
    }
}
