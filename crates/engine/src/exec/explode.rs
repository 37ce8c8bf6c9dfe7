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

    /// Calls `f` with each record `record` explodes into. One scratch record is reused: for a
    /// LATERAL VIEW the record is copied once and only the alias fields change between calls.
    pub fn for_each(&self, record: &Record, ctx: &EvalContext, f: &mut dyn FnMut(&Record)) {
        let value = self.expr.eval_cow(record, ctx);
        let mut scratch: Option<Record> = None;
        let mut emit = |fields: [(&String, Value); 2], n: usize| {
            let out = scratch.get_or_insert_with(|| {
                if self.lateral {
                    record.clone()
                } else {
                    Record::new()
                }
            });
            for (name, value) in fields.into_iter().take(n) {
                out.insert(name.as_str(), value);
            }
            f(out);
        };
        let mut any = false;
        match (&*value, self.aliases.as_slice()) {
            (Value::List(items), [alias]) => {
                for item in items {
                    emit([(alias, item.clone()), (alias, Value::Null)], 1);
                    any = true;
                }
            }
            (Value::Map(map), [key, val]) => {
                for (k, v) in map {
                    emit([(key, Value::String(k.clone())), (val, v.clone())], 2);
                    any = true;
                }
            }
            _ => {}
        }
        if !any && self.outer {
            let last = &self.aliases[self.aliases.len() - 1];
            emit([(&self.aliases[0], Value::Null), (last, Value::Null)], self.aliases.len());
        }
    }
}

/// Calls `f` with each record `record` becomes after every step, in order.
pub fn for_each_exploded(
    steps: &[CompiledExplode],
    record: &Record,
    ctx: &EvalContext,
    f: &mut dyn FnMut(&Record),
) {
    match steps {
        [] => f(record),
        [step, rest @ ..] => {
            step.for_each(record, ctx, &mut |r| for_each_exploded(rest, r, ctx, f))
        }
    }
}

/// Applies every step in order; the records `record` becomes.
pub fn explode_all(steps: &[CompiledExplode], record: &Record, ctx: &EvalContext) -> Vec<Record> {
    let mut out = Vec::new();
    for_each_exploded(steps, record, ctx, &mut |r| out.push(r.clone()));
    out
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
