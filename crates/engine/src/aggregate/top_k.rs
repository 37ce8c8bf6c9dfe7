//! TOP K: a frequent-items sketch (Apache DataSketches, `datasketches::frequencies`) over the
//! canonical key ([`super::key::key_of`]) of the tuple of field values.
//!
//! - `max_map_size` is rounded up to a power of two, at least 8 (the sketch's requirement).
//! - Every record counts, including those whose fields are all NULL (NULL is a valid key, as in
//!   GROUP BY).
//! - Reported items use Bullet's default error type, no false negatives: every item still tracked
//!   by the sketch is a candidate and its count is the estimate (= the upper bound: the true count
//!   lies in `[estimate - "Maximum Count Error", estimate]`). With a `threshold`, items whose
//!   estimate is below it are left out; any item whose true count is at least the threshold and
//!   above the maximum error is reported (up to `k`).
//! - Records: the field columns (typed values recovered from the key: INTEGER as LONG, FLOAT as
//!   DOUBLE, see [`super::key`]) and `count_name` (LONG), at most `k`, sorted by count descending
//!   then by key ascending.
//! - Metadata `"Sketch"`: `"Maximum Count Error"`, `"Active Items"`, `"Items Seen"`,
//!   `"Family": "FREQUENCY"`, `"Was Estimated"` (true once the sketch has had to purge, i.e. the
//!   maximum error is above 0).
//! - Merge is the sketch's merge; the encoded payload is the sketch's own serialization.

use super::codec::{corrupt, Reader, Writer};
use super::key::{cmp_tuples, decode_key, write_key};
use crate::eval::{CompiledExpr, EvalContext};
use crate::EngineError;
use datasketches::frequencies::{ErrorType, FrequentItemsSketch};
use needle_query::plan::NamedExpr;
use needle_record::{Record, Value};
use serde_json::json;

#[derive(Debug)]
pub struct TopK {
    k: usize,
    threshold: Option<u64>,
    fields: Vec<(String, CompiledExpr)>,
    count_name: String,
    max_map_size: usize,
}

#[derive(Debug, Clone)]
pub struct TopKState {
    pub sketch: FrequentItemsSketch<String>,
    /// The key buffer reused by `update`.
    scratch: String,
}

/// `n` rounded up to a power of two in `[8, 2^30]`.
pub fn map_size_for(n: u32) -> usize {
    (n.clamp(8, 1 << 30) as usize).next_power_of_two()
}

/// One reported item: its key, typed values and estimated count.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub key: String,
    pub values: Vec<Value>,
    pub estimate: u64,
}

impl TopK {
    pub fn new(
        k: u64,
        threshold: Option<u64>,
        fields: &[NamedExpr],
        count_name: &str,
        max_map_size: u32,
    ) -> Result<Self, EngineError> {
        let fields = fields
            .iter()
            .map(|f| Ok((f.name.clone(), CompiledExpr::compile(&f.expr)?)))
            .collect::<Result<Vec<_>, EngineError>>()?;
        Ok(Self {
            k: usize::try_from(k).unwrap_or(usize::MAX),
            threshold,
            fields,
            count_name: count_name.to_owned(),
            max_map_size: map_size_for(max_map_size),
        })
    }

    pub fn new_state(&self) -> TopKState {
        TopKState {
            sketch: FrequentItemsSketch::new(self.max_map_size)
                .expect("map size is a power of two"),
            scratch: String::new(),
        }
    }

    pub fn update(&self, state: &mut TopKState, record: &Record, ctx: &EvalContext) {
        write_key(&mut state.scratch, self.fields.iter().map(|(_, e)| e.eval_cow(record, ctx)));
        state.sketch.update_ref(state.scratch.as_str());
    }

    /// Fails, merging nothing, when the two counts of records together pass `u64` (the
    /// sketch would panic): only a corrupt partial's can.
    pub fn merge(&self, into: &mut TopKState, other: &TopKState) -> Result<(), EngineError> {
        if into.sketch.total_weight().checked_add(other.sketch.total_weight()).is_none() {
            return Err(corrupt("frequent items sketches whose weights overflow together"));
        }
        into.sketch.merge(&other.sketch);
        Ok(())
    }

    /// The reported items, in output order.
    pub fn items(&self, state: &TopKState) -> Vec<Item> {
        let threshold = self.threshold.unwrap_or(0);
        let mut items: Vec<Item> = state
            .sketch
            .frequent_items_with_threshold(ErrorType::NoFalseNegatives, 0)
            .into_iter()
            .filter(|row| row.estimate() >= threshold)
            .map(|row| Item {
                values: decode_key(row.item()).unwrap_or_default(),
                key: row.item().clone(),
                estimate: row.estimate(),
            })
            .collect();
        items.sort_by(|a, b| {
            b.estimate
                .cmp(&a.estimate)
                .then_with(|| cmp_tuples(&a.values, &b.values))
                .then_with(|| a.key.cmp(&b.key))
        });
        items.truncate(self.k);
        items
    }

    pub fn finish(
        &self,
        state: &TopKState,
        meta: &mut serde_json::Map<String, serde_json::Value>,
    ) -> Vec<Record> {
        let sketch = &state.sketch;
        meta.insert(
            "Sketch".into(),
            json!({
                "Maximum Count Error": sketch.maximum_error(),
                "Active Items": sketch.num_active_items(),
                "Items Seen": sketch.total_weight(),
                "Family": "FREQUENCY",
                "Was Estimated": sketch.maximum_error() > 0,
            }),
        );
        self.items(state)
            .into_iter()
            .map(|item| {
                let mut r = Record::new();
                let mut values = item.values.into_iter();
                for (name, _) in &self.fields {
                    r.insert(name.clone(), values.next().unwrap_or_default());
                }
                r.insert(self.count_name.clone(), Value::Long(item.estimate as i64));
                r
            })
            .collect()
    }

    pub fn encode(&self, state: &TopKState, w: &mut Writer) {
        w.bytes(&state.sketch.serialize());
    }

    pub fn decode(&self, r: &mut Reader<'_>) -> Result<TopKState, EngineError> {
        let bytes = r.bytes()?;
        let sketch = super::guard(|| FrequentItemsSketch::<String>::deserialize(bytes))?
            .map_err(|e| corrupt(format!("frequent items sketch: {e}")))?;
        if sketch.max_map_size() != self.max_map_size {
            return Err(corrupt(format!(
                "frequent items sketch with map size {} (expected {})",
                sketch.max_map_size(),
                self.max_map_size
            )));
        }
        // the sketch trusts its counts: an item's count and the error offset must lie within the
        // total weight, or merging and reporting overflow (a fuzz find,
        // fuzz/regressions/kafka_wire/); adding them overflows here in a checked build
        let total = sketch.total_weight();
        let consistent = super::guard(|| {
            sketch.maximum_error() <= total
                && sketch
                    .frequent_items(ErrorType::NoFalseNegatives)
                    .iter()
                    .all(|row| row.lower_bound() <= row.upper_bound() && row.upper_bound() <= total)
        });
        if !matches!(consistent, Ok(true)) {
            return Err(corrupt("frequent items sketch with counts past its total weight"));
        }
        Ok(TopKState { sketch, scratch: String::new() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_size_rounds_up_to_a_power_of_two() {
        assert_eq!(map_size_for(0), 8);
        assert_eq!(map_size_for(100), 128);
        assert_eq!(map_size_for(512), 512);
    }
}

#[cfg(test)]
mod api_tests {
    use super::super::testing::*;
    use needle_query::plan::Aggregation;
    use needle_record::{Record, Value};

    fn top(k: u64, threshold: Option<u64>, max_map_size: u32) -> Aggregation {
        Aggregation::TopK {
            k,
            threshold,
            fields: vec![named("a"), named("b")],
            count_name: "Count".into(),
            max_map_size,
        }
    }

    /// ("x", 1) five times, ("y", 2.5) three times, (NULL, NULL) twice, ("z", 1) once.
    fn records() -> Vec<Record> {
        let mut rs = Vec::new();
        rs.extend((0..5).map(|_| rec(&[("a", "x".into()), ("b", Value::Int(1))])));
        rs.extend((0..3).map(|_| rec(&[("a", "y".into()), ("b", Value::Double(2.5))])));
        rs.extend((0..2).map(|_| rec(&[])));
        rs.push(rec(&[("a", "z".into()), ("b", Value::Long(1))]));
        rs
    }

    #[test]
    fn counts_are_exact_while_nothing_was_purged() {
        for out in [run(&top(10, None, 64), &records()), run_split(&top(10, None, 64), &records())]
        {
            let got: Vec<String> = out.records.iter().map(Record::to_json).collect();
            assert_eq!(
                got,
                [
                    r#"{"a":"x","b":1,"Count":5}"#,
                    r#"{"a":"y","b":2.5,"Count":3}"#,
                    r#"{"a":null,"b":null,"Count":2}"#,
                    r#"{"a":"z","b":1,"Count":1}"#,
                ]
            );
            assert_eq!(out.records[0].get("b"), Some(&Value::Long(1)));
            let sketch = &out.meta["Sketch"];
            assert_eq!(sketch["Maximum Count Error"], 0);
            assert_eq!(sketch["Active Items"], 4);
            assert_eq!(sketch["Items Seen"], 11);
            assert_eq!(sketch["Family"], "FREQUENCY");
            assert_eq!(sketch["Was Estimated"], false);
        }
    }

    #[test]
    fn k_and_threshold_cut_the_list() {
        let out = run(&top(2, None, 64), &records());
        assert_eq!(out.records.len(), 2);
        let out = run(&top(10, Some(3), 64), &records());
        let counts: Vec<i64> =
            out.records.iter().map(|r| r.get("Count").unwrap().as_i64().unwrap()).collect();
        assert_eq!(counts, [5, 3]);
    }

    #[test]
    fn heavy_hitters_survive_purges_with_bounded_error() {
        // 8 heavy items (1000 each) among 5000 singletons, in a map of 64.
        let mut rs: Vec<Record> = Vec::new();
        for i in 0..13_000u32 {
            let a = if i % 13 < 8 { format!("heavy{}", i % 13) } else { format!("rare{i}") };
            rs.push(rec(&[("a", a.into())]));
        }
        let out = run_split(&top(8, None, 64), &rs);
        let err = out.meta["Sketch"]["Maximum Count Error"].as_i64().unwrap();
        assert!(err > 0);
        assert_eq!(out.meta["Sketch"]["Was Estimated"], true);
        assert_eq!(out.records.len(), 8);
        for r in &out.records {
            assert!(r.get("a").unwrap().as_str().unwrap().starts_with("heavy"), "{r:?}");
            let estimate = r.get("Count").unwrap().as_i64().unwrap();
            assert!(estimate - err <= 1000 && 1000 <= estimate, "{estimate} ± {err}");
        }
    }
}
