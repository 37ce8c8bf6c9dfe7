//! Canonical keys for tuples of values: what GROUP BY groups on, what COUNT DISTINCT hashes and
//! what TOP K counts, plus the ordering helpers that keep outputs deterministic.
//!
//! A tuple's key is the compact JSON text of the list of its values. So two values are the same
//! key exactly when they print the same: INTEGER `1` and LONG `1` are one key, LONG `1` and
//! DOUBLE `1.0` are two; FLOAT `0.5` and DOUBLE `0.5` are one; NaN and the infinities print as
//! `null` and so group with NULL (JSON cannot tell them apart). The typed values reported for a
//! key are [`canonical`]: INTEGER widened to LONG, FLOAT to the DOUBLE it prints as, non-finite
//! numbers to NULL — exactly what [`decode_key`] recovers from the text, so the result does not
//! depend on which worker saw a group first.

use crate::compare::total_cmp;
use needle_record::{Map, Value};
use std::borrow::Borrow;
use std::cmp::Ordering;

/// The canonical key text of a tuple.
pub fn key_of<V: Borrow<Value>>(values: &[V]) -> String {
    let mut out = String::with_capacity(16 * values.len() + 2);
    write_key(&mut out, values.iter().map(|v| v.borrow()));
    out
}

/// Writes the canonical key of the values into `out` (cleared first): the per-record path,
/// which reuses one buffer instead of allocating a key per record.
pub fn write_key<V: Borrow<Value>>(out: &mut String, values: impl Iterator<Item = V>) {
    out.clear();
    out.push('[');
    for (i, v) in values.enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json(out, v.borrow());
    }
    out.push(']');
}

fn push_json(out: &mut String, v: &Value) {
    match v {
        // The common scalars by hand (this is on the per-record path); the rest through serde.
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Long(x) => {
            use std::fmt::Write;
            let _ = write!(out, "{x}");
        }
        Value::String(s) if !s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) => {
            out.push('"');
            out.push_str(s);
            out.push('"');
        }
        Value::Int(x) => {
            use std::fmt::Write;
            let _ = write!(out, "{x}");
        }
        // serde prints FLOATs with `f32` formatting (`1e+13` where a DOUBLE prints
        // `10000000000000.0`): key them as the DOUBLE they canonically are.
        Value::Float(_) => push_json(out, &canonical(v)),
        Value::List(_) | Value::Map(_) => out.push_str(&canonical(v).to_json()),
        other => out.push_str(&other.to_json()),
    }
}

/// The value a key reports for `v` (see the module doc).
pub fn canonical(v: &Value) -> Value {
    match v {
        Value::Int(x) => Value::Long(i64::from(*x)),
        Value::Float(x) if x.is_finite() => {
            // The DOUBLE with the same shortest decimal text as the FLOAT.
            Value::Double(x.to_string().parse().unwrap_or(f64::from(*x)))
        }
        Value::Float(_) => Value::Null,
        Value::Double(x) if !x.is_finite() => Value::Null,
        Value::List(items) => Value::List(items.iter().map(canonical).collect()),
        Value::Map(map) => Value::Map(map.iter().map(|(k, v)| (k.clone(), canonical(v))).collect()),
        other => other.clone(),
    }
}

/// The typed values of a key made by [`key_of`]; `None` when the text is not such a key.
pub fn decode_key(key: &str) -> Option<Vec<Value>> {
    match serde_json::from_str::<serde_json::Value>(key).ok()? {
        serde_json::Value::Array(items) => Some(items.into_iter().map(from_json).collect()),
        _ => None,
    }
}

fn from_json(json: serde_json::Value) -> Value {
    match json {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Long(i),
            None => Value::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Value::String(s),
        serde_json::Value::Array(items) => Value::List(items.into_iter().map(from_json).collect()),
        serde_json::Value::Object(map) => {
            Value::Map(map.into_iter().map(|(k, v)| (k, from_json(v))).collect::<Map>())
        }
    }
}

/// Lexicographic [`total_cmp`] of two tuples: the output order of groups and ties.
pub fn cmp_tuples(a: &[Value], b: &[Value]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match total_cmp(x, y) {
            Ordering::Equal => continue,
            other => return other,
        }
    }
    a.len().cmp(&b.len())
}

/// A total order that also separates values [`total_cmp`] calls equal but that differ (LONG `1`
/// and DOUBLE `1.0`, `0.0` and `-0.0`), so MIN and MAX pick the same value in any merge order.
pub fn strict_cmp(a: &Value, b: &Value) -> Ordering {
    match total_cmp(a, b) {
        Ordering::Equal if a != b => format!("{a:?}").cmp(&format!("{b:?}")),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_separate_long_from_double_and_join_int_with_long() {
        assert_ne!(key_of(&[Value::Long(1)]), key_of(&[Value::Double(1.0)]));
        assert_eq!(key_of(&[Value::Int(1)]), key_of(&[Value::Long(1)]));
        assert_eq!(key_of(&[Value::Float(0.5)]), key_of(&[Value::Double(0.5)]));
        assert_eq!(key_of(&[Value::Double(f64::NAN)]), key_of(&[Value::Null]));
        assert_eq!(key_of(&[Value::from("a\"b"), Value::Null]), r#"["a\"b",null]"#);
    }

    #[test]
    fn decoding_a_key_gives_the_canonical_values() {
        let mut m = Map::default();
        m.insert("z".into(), Value::Float(0.1));
        let values = vec![
            Value::Int(3),
            Value::Double(2.0),
            Value::Float(0.1),
            Value::from("x"),
            Value::Bool(false),
            Value::Null,
            Value::Double(f64::INFINITY),
            Value::List(vec![Value::Long(-1), Value::Map(m)]),
        ];
        let canon: Vec<Value> = values.iter().map(canonical).collect();
        assert_eq!(canon[2], Value::Double(0.1));
        assert_eq!(decode_key(&key_of(&values)).unwrap(), canon);
        assert_eq!(key_of(&canon), key_of(&values));
        assert!(decode_key("{").is_none());
    }

    #[test]
    fn strict_order_breaks_numeric_ties_by_type() {
        let (l, d) = (Value::Long(1), Value::Double(1.0));
        assert_ne!(strict_cmp(&l, &d), Ordering::Equal);
        assert_eq!(strict_cmp(&l, &d), strict_cmp(&d, &l).reverse());
        assert_eq!(strict_cmp(&Value::Long(1), &Value::Long(2)), Ordering::Less);
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The typed value reported for a key depends only on the key, whichever value made it.
        #[test]
        fn canonical_values_have_the_same_key(bits in any::<u32>(), d in any::<f64>(), i in any::<i32>()) {
            let f = f32::from_bits(bits);
            for v in [Value::Float(f), Value::Double(d), Value::Int(i), Value::Double(f64::from(f))] {
                let c = canonical(&v);
                prop_assert_eq!(key_of(std::slice::from_ref(&c)), key_of(std::slice::from_ref(&v)));
                prop_assert_eq!(decode_key(&key_of(&[v])).unwrap(), vec![c]);
            }
        }
    }
}
