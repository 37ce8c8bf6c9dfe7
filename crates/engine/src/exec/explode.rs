//! EXPLODE: one record in, zero or more out, before the filter (LATERAL VIEW and table functions
//! in SELECT).
//!
//! - A list explodes into one record per element, the element in the single alias.
//! - A map explodes into one record per entry, the key (a STRING) and the value in the two
//!   aliases.
//! - `lateral: true` (LATERAL VIEW) keeps the record's fields and adds the aliases (an alias
//!   that names an existing field replaces its value); `lateral: false` (EXPLODE in SELECT)
//!   replaces the record by the alias fields alone.
//! - With nothing to explode (NULL or missing, not a list or map, an empty one, or a shape that
//!   does not fit the aliases: a map with one alias, a list with two) the record produces no
//!   record, or with `OUTER` exactly one, with the aliases NULL.
//! - Several steps apply in order, each to every record the previous one produced (a cross
//!   product, as in Hive and Bullet).

use crate::eval::{CompiledExpr, EvalContext};
use crate::EngineError;
use needle_query::plan::Explode;
use needle_record::{Record, Value};

/// One compiled EXPLODE.
#[derive(Debug)]
pub struct CompiledExplode {
    lateral: bool,
    outer: bool,
    expr: CompiledExpr,
    aliases: Vec<String>,
}

impl CompiledExplode {
    pub fn compile(explode: &Explode) -> Result<Self, EngineError> {
        if !(1..=2).contains(&explode.aliases.len()) {
            return Err(EngineError::Unsupported(format!(
                "EXPLODE with {} aliases (one for a list, two for a map)",
                explode.aliases.len()
            )));
        }
        Ok(Self {
            lateral: explode.lateral,
            outer: explode.outer,
            expr: CompiledExpr::compile(&explode.expr)?,
            aliases: explode.aliases.clone(),
        })
    }

    /// Appends to `out` the records `record` explodes into.
    pub fn apply(&self, record: &Record, ctx: &EvalContext, out: &mut Vec<Record>) {
        let value = self.expr.eval(record, ctx);
        let before = out.len();
        match (&value, self.aliases.as_slice()) {
            (Value::List(items), [alias]) => {
                for item in items {
                    out.push(self.make(record, &[(alias, item.clone())]));
                }
            }
            (Value::Map(map), [key, val]) => {
                for (k, v) in map {
                    out.push(
                        self.make(record, &[(key, Value::String(k.clone())), (val, v.clone())]),
                    );
                }
            }
            _ => {}
        }
        if out.len() == before && self.outer {
            let nulls: Vec<_> = self.aliases.iter().map(|a| (a, Value::Null)).collect();
            out.push(self.make(record, &nulls));
        }
    }

    fn make(&self, record: &Record, fields: &[(&String, Value)]) -> Record {
        let mut out = if self.lateral { record.clone() } else { Record::new() };
        for (name, value) in fields {
            out.insert((*name).clone(), value.clone());
        }
        out
    }
}

/// Applies every step in order; the records `record` becomes.
pub fn explode_all(steps: &[CompiledExplode], record: &Record, ctx: &EvalContext) -> Vec<Record> {
    let mut current = vec![record.clone()];
    for step in steps {
        let mut next = Vec::with_capacity(current.len());
        for r in &current {
            step.apply(r, ctx, &mut next);
        }
        current = next;
        if current.is_empty() {
            break;
        }
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;
    use needle_query::ast::{Expr, ExprKind, Field, Span};

    fn field(name: &str) -> Expr {
        Expr::new(
            ExprKind::Field(Field { name: name.into(), path: vec![], hint: None }),
            Span::default(),
        )
    }

    fn step(name: &str, lateral: bool, outer: bool, aliases: &[&str]) -> CompiledExplode {
        CompiledExplode::compile(&Explode {
            lateral,
            outer,
            expr: field(name),
            aliases: aliases.iter().map(|s| s.to_string()).collect(),
        })
        .unwrap()
    }

    fn rec(json: &str) -> Record {
        needle_record::decode_record(json.as_bytes()).unwrap()
    }

    fn run(steps: &[CompiledExplode], json: &str) -> Vec<String> {
        explode_all(steps, &rec(json), &EvalContext { now_ms: 0 })
            .iter()
            .map(Record::to_json)
            .collect()
    }

    #[test]
    fn lists_explode_laterally_or_replace_the_record() {
        let j = r#"{"id":1,"tags":["a","b"]}"#;
        assert_eq!(
            run(&[step("tags", true, false, &["t"])], j),
            [r#"{"id":1,"tags":["a","b"],"t":"a"}"#, r#"{"id":1,"tags":["a","b"],"t":"b"}"#]
        );
        assert_eq!(run(&[step("tags", false, false, &["t"])], j), [r#"{"t":"a"}"#, r#"{"t":"b"}"#]);
    }

    #[test]
    fn maps_explode_into_key_and_value() {
        let j = r#"{"m":{"x":1,"y":null}}"#;
        assert_eq!(
            run(&[step("m", false, false, &["k", "v"])], j),
            [r#"{"k":"x","v":1}"#, r#"{"k":"y","v":null}"#]
        );
        // a map with one alias does not fit: nothing, or NULL with OUTER
        assert!(run(&[step("m", false, false, &["k"])], j).is_empty());
    }

    #[test]
    fn outer_keeps_a_null_row_for_empty_missing_or_wrong_types() {
        for j in [r#"{"id":1,"tags":[]}"#, r#"{"id":1}"#, r#"{"id":1,"tags":5}"#] {
            assert!(run(&[step("tags", true, false, &["t"])], j).is_empty(), "{j}");
            let out = run(&[step("tags", true, true, &["t"])], j);
            assert_eq!(out.len(), 1, "{j}");
            assert!(out[0].contains(r#""t":null"#), "{j}");
        }
        assert_eq!(run(&[step("m", false, true, &["k", "v"])], "{}"), [r#"{"k":null,"v":null}"#]);
    }

    #[test]
    fn steps_apply_as_a_cross_product() {
        let j = r#"{"a":[1,2],"b":["x","y","z"]}"#;
        let out = run(&[step("a", true, false, &["i"]), step("b", false, false, &["s"])], j);
        assert_eq!(out.len(), 6);
        assert_eq!(out[5], r#"{"s":"z"}"#);
    }
}
