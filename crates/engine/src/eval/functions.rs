//! The scalar functions of BQL. Every function is NULL when an argument it needs is NULL or of the
//! wrong type, unless said otherwise.
//!
//! | function | result |
//! |---|---|
//! | `SIZEOF(x)` | INTEGER: a string's length in characters (Unicode scalar values), a list's or map's number of entries |
//! | `ABS(x)` | same numeric type; `ABS` of the minimum INTEGER or LONG is NULL (no such value) |
//! | `TRIM(s)` | Java's `String.trim`: strips characters up to U+0020 (spaces, tabs, newlines, controls) at both ends |
//! | `LOWER(s)`, `UPPER(s)` | Unicode case mapping, independent of any locale |
//! | `HASH(x)` | LONG, see [`super::hash`] |
//! | `SIZEIS(x, n)` | BOOLEAN: `SIZEOF(x) = n`, `n` an INTEGER or LONG |
//! | `CONTAINSKEY(m, k)` | BOOLEAN, `k` a string: a map has `k` as a key, or one of its values is a map with that key; a list: one of its elements is a map with that key (Bullet) |
//! | `CONTAINSVALUE(x, v)` | BOOLEAN: a list has an element equal to `v`, or an element that is a map with a value equal to `v`; a map likewise over its values (equality is structural, numbers by value) |
//! | `FILTER(list, flags)` | the list's elements whose flag at the same position is TRUE (missing, NULL or FALSE flags drop the element) |
//! | `IF(c, a, b)` | `a` when `c` is TRUE, `b` when it is FALSE or NULL (only the chosen branch is evaluated); NULL when `c` is not a BOOLEAN |
//! | `SUBSTRING(s, start[, len])` | Bullet's rule, in characters: `start` counts from 1, or from the end when negative (`-1` is the last character); `start` 0 or beyond the length gives `''`; `len` ≤ 0 gives `''`, and the result stops at the end of the string; `start`, `len` must be INTEGER or LONG |
//! | `UNIXTIMESTAMP()` | LONG: the current time in whole seconds (`floor(now_ms / 1000)`) |
//! | `UNIXTIMESTAMP(s)`, `UNIXTIMESTAMP(s, pattern)` | LONG seconds, see [`super::time`] |

use super::ops::deep_eq;
use super::{hash, time};
use needle_query::ast::Function;
use needle_record::Value;
use std::borrow::Cow;

/// How many arguments each function takes (inclusive range).
pub fn arity(f: Function) -> (usize, usize) {
    match f {
        Function::SizeOf
        | Function::Abs
        | Function::Trim
        | Function::Lower
        | Function::Upper
        | Function::Hash => (1, 1),
        Function::SizeIs | Function::ContainsKey | Function::ContainsValue | Function::Filter => {
            (2, 2)
        }
        Function::If => (3, 3),
        Function::Substring => (2, 3),
        Function::UnixTimestamp => (0, 2),
    }
}

/// True when the function's value depends on nothing but its arguments (it can be folded).
pub fn is_pure(f: Function, args: usize) -> bool {
    !(f == Function::UnixTimestamp && args == 0)
}

/// A function applied to argument values (`IF` included, with both branches already evaluated).
pub fn apply(f: Function, args: &[&Value]) -> Value {
    apply_opt(f, args).unwrap_or(Value::Null)
}

fn string(v: &Value) -> Option<&str> {
    v.as_str()
}

fn size(v: &Value) -> Option<i64> {
    match v {
        Value::String(s) => Some(s.chars().count() as i64),
        Value::List(items) => Some(items.len() as i64),
        Value::Map(map) => Some(map.len() as i64),
        _ => None,
    }
}

fn apply_opt(f: Function, args: &[&Value]) -> Option<Value> {
    Some(match f {
        Function::SizeOf => Value::Int(i32::try_from(size(args[0])?).ok()?),
        Function::Abs => match args[0] {
            Value::Int(x) => Value::Int(x.checked_abs()?),
            Value::Long(x) => Value::Long(x.checked_abs()?),
            Value::Float(x) => Value::Float(x.abs()),
            Value::Double(x) => Value::Double(x.abs()),
            _ => return None,
        },
        Function::Trim => Value::from(string(args[0])?.trim_matches(|c: char| c <= ' ')),
        Function::Lower => Value::from(string(args[0])?.to_lowercase()),
        Function::Upper => Value::from(string(args[0])?.to_uppercase()),
        Function::Hash => Value::Long(hash::hash(args[0])?),
        Function::SizeIs => Value::Bool(size(args[0])? == args[1].as_i64()?),
        Function::ContainsKey => {
            let key = string(args[1])?;
            let has = |v: &Value| v.as_map().is_some_and(|m| m.contains_key(key));
            Value::Bool(match args[0] {
                Value::Map(m) => m.contains_key(key) || m.values().any(has),
                Value::List(items) => items.iter().any(has),
                _ => return None,
            })
        }
        Function::ContainsValue => {
            let target = args[1];
            if target.is_null() {
                return None;
            }
            let has = |v: &Value| match v {
                Value::Map(m) => m.values().any(|x| deep_eq(x, target)),
                other => deep_eq(other, target),
            };
            Value::Bool(match args[0] {
                Value::Map(m) => m.values().any(has),
                Value::List(items) => items.iter().any(has),
                _ => return None,
            })
        }
        Function::Filter => {
            let (items, flags) = (args[0].as_list()?, args[1].as_list()?);
            Value::List(
                items
                    .iter()
                    .zip(flags)
                    .filter(|(_, flag)| matches!(flag, Value::Bool(true)))
                    .map(|(item, _)| item.clone())
                    .collect(),
            )
        }
        Function::If => match args[0] {
            Value::Bool(true) => args[1].clone(),
            Value::Bool(false) | Value::Null => args[2].clone(),
            _ => return None,
        },
        Function::Substring => {
            let s = string(args[0])?;
            let start = args[1].as_i64()?;
            let len = match args.get(2) {
                Some(l) => Some(l.as_i64()?),
                None => None,
            };
            Value::from(substring(s, start, len))
        }
        Function::UnixTimestamp => match args {
            [] => return None,
            [s] => Value::Long(time::parse_jdbc_timestamp(string(s)?)?),
            [s, pattern, ..] => {
                let pattern = string(pattern)?;
                let text = match s {
                    Value::String(s) => Cow::Borrowed(s.as_str()),
                    Value::Int(_) | Value::Long(_) | Value::Float(_) | Value::Double(_) => {
                        Cow::Owned(long_value(s)?.to_string())
                    }
                    _ => return None,
                };
                Value::Long(time::parse_with_pattern(&text, pattern)?)
            }
        },
    })
}

/// Java's `Number.longValue` for a numeric value (floats truncate; NaN and out of range: None).
fn long_value(v: &Value) -> Option<i64> {
    match v {
        Value::Int(_) | Value::Long(_) => v.as_i64(),
        _ => match super::cast::cast(v, &needle_record::Type::Long) {
            Value::Long(x) => Some(x),
            _ => None,
        },
    }
}

/// Bullet's SUBSTRING over characters (see the module doc).
pub fn substring(s: &str, start: i64, len: Option<i64>) -> String {
    let n = s.chars().count() as i64;
    if n == 0 || start == 0 || start.unsigned_abs() > n as u64 {
        return String::new();
    }
    let from = if start > 0 { start - 1 } else { start + n };
    let to = match len {
        None => n,
        Some(l) if l <= 0 => return String::new(),
        Some(l) => from.saturating_add(l).min(n),
    };
    s.chars().skip(from as usize).take((to - from) as usize).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use needle_record::Map;

    fn s(x: &str) -> Value {
        Value::from(x)
    }
    fn list(items: Vec<Value>) -> Value {
        Value::List(items)
    }
    fn map(pairs: &[(&str, Value)]) -> Value {
        Value::Map(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<Map>())
    }

    #[test]
    fn sizeof_counts_characters_and_entries() {
        assert_eq!(apply(Function::SizeOf, &[&s("héllo")]), Value::Int(5));
        assert_eq!(apply(Function::SizeOf, &[&list(vec![Value::Null; 3])]), Value::Int(3));
        assert_eq!(apply(Function::SizeOf, &[&map(&[("a", Value::Int(1))])]), Value::Int(1));
        assert_eq!(apply(Function::SizeOf, &[&Value::Int(5)]), Value::Null);
        assert_eq!(apply(Function::SizeOf, &[&Value::Null]), Value::Null);
    }

    #[test]
    fn abs_keeps_the_type_and_is_null_without_a_result() {
        assert_eq!(apply(Function::Abs, &[&Value::Int(-3)]), Value::Int(3));
        assert_eq!(apply(Function::Abs, &[&Value::Long(i64::MIN)]), Value::Null);
        assert_eq!(apply(Function::Abs, &[&Value::Int(i32::MIN)]), Value::Null);
        assert_eq!(apply(Function::Abs, &[&Value::Float(-1.5)]), Value::Float(1.5));
        assert_eq!(apply(Function::Abs, &[&Value::Double(-0.0)]), Value::Double(0.0));
        assert_eq!(apply(Function::Abs, &[&s("-1")]), Value::Null);
    }

    #[test]
    fn string_functions() {
        assert_eq!(apply(Function::Trim, &[&s("\t a b \n\u{1}")]), s("a b"));
        assert_eq!(apply(Function::Trim, &[&s("\u{a0}x")]), s("\u{a0}x"), "Java trim");
        assert_eq!(apply(Function::Lower, &[&s("ÀB")]), s("àb"));
        assert_eq!(apply(Function::Upper, &[&s("straße")]), s("STRASSE"));
        assert_eq!(apply(Function::Upper, &[&Value::Int(1)]), Value::Null);
    }

    #[test]
    fn sizeis_compares_sizes() {
        assert_eq!(apply(Function::SizeIs, &[&s("abc"), &Value::Int(3)]), Value::Bool(true));
        assert_eq!(apply(Function::SizeIs, &[&s("abc"), &Value::Long(2)]), Value::Bool(false));
        assert_eq!(apply(Function::SizeIs, &[&s("abc"), &Value::Double(3.0)]), Value::Null);
        assert_eq!(apply(Function::SizeIs, &[&Value::Int(3), &Value::Int(3)]), Value::Null);
    }

    #[test]
    fn containskey_looks_one_level_into_maps_and_lists_of_maps() {
        let m = map(&[("a", Value::Int(1)), ("n", map(&[("deep", Value::Null)]))]);
        assert_eq!(apply(Function::ContainsKey, &[&m, &s("a")]), Value::Bool(true));
        assert_eq!(apply(Function::ContainsKey, &[&m, &s("deep")]), Value::Bool(true));
        assert_eq!(apply(Function::ContainsKey, &[&m, &s("zz")]), Value::Bool(false));
        let l = list(vec![Value::Int(1), map(&[("k", Value::Null)])]);
        assert_eq!(apply(Function::ContainsKey, &[&l, &s("k")]), Value::Bool(true));
        assert_eq!(apply(Function::ContainsKey, &[&l, &s("j")]), Value::Bool(false));
        assert_eq!(apply(Function::ContainsKey, &[&m, &Value::Int(1)]), Value::Null);
        assert_eq!(apply(Function::ContainsKey, &[&s("a"), &s("a")]), Value::Null);
    }

    #[test]
    fn containsvalue_uses_structural_equality() {
        let l = list(vec![Value::Int(1), s("x"), map(&[("k", Value::Double(2.0))])]);
        assert_eq!(apply(Function::ContainsValue, &[&l, &Value::Long(1)]), Value::Bool(true));
        assert_eq!(apply(Function::ContainsValue, &[&l, &Value::Int(2)]), Value::Bool(true));
        assert_eq!(apply(Function::ContainsValue, &[&l, &s("y")]), Value::Bool(false));
        assert_eq!(apply(Function::ContainsValue, &[&l, &Value::Null]), Value::Null);
        let m = map(&[("a", list(vec![Value::Int(1)]))]);
        assert_eq!(
            apply(Function::ContainsValue, &[&m, &list(vec![Value::Long(1)])]),
            Value::Bool(true)
        );
        assert_eq!(apply(Function::ContainsValue, &[&s("abc"), &s("a")]), Value::Null);
    }

    #[test]
    fn filter_keeps_elements_flagged_true() {
        let items = list(vec![Value::Int(1), Value::Int(2), Value::Int(3), Value::Int(4)]);
        let flags = list(vec![Value::Bool(true), Value::Null, Value::Bool(false)]);
        assert_eq!(apply(Function::Filter, &[&items, &flags]), list(vec![Value::Int(1)]));
        assert_eq!(apply(Function::Filter, &[&items, &Value::Bool(true)]), Value::Null);
        assert_eq!(apply(Function::Filter, &[&Value::Null, &flags]), Value::Null);
    }

    #[test]
    fn substring_follows_bullet() {
        let sub = |st, len| substring("hello", st, len);
        assert_eq!(sub(1, None), "hello");
        assert_eq!(sub(2, Some(3)), "ell");
        assert_eq!(sub(-3, None), "llo");
        assert_eq!(sub(-3, Some(2)), "ll");
        assert_eq!(sub(0, None), "");
        assert_eq!(sub(6, None), "");
        assert_eq!(sub(-6, None), "");
        assert_eq!(sub(4, Some(100)), "lo");
        assert_eq!(sub(2, Some(0)), "");
        assert_eq!(sub(2, Some(i64::MAX)), "ello");
        assert_eq!(sub(i64::MIN, None), "");
        assert_eq!(substring("héllo", 2, Some(1)), "é");
        let v = apply(Function::Substring, &[&s("abc"), &Value::Int(2)]);
        assert_eq!(v, s("bc"));
        assert_eq!(apply(Function::Substring, &[&s("abc"), &Value::Double(2.0)]), Value::Null);
        assert_eq!(
            apply(Function::Substring, &[&s("abc"), &Value::Int(1), &Value::Null]),
            Value::Null
        );
    }

    #[test]
    fn unixtimestamp_parses_strings_and_numbers() {
        let ts = |args: &[&Value]| apply(Function::UnixTimestamp, args);
        assert_eq!(ts(&[&s("2009-02-13 23:31:30")]), Value::Long(1_234_567_890));
        assert_eq!(ts(&[&Value::Long(20090213), &s("yyyyMMdd")]), Value::Long(1_234_483_200));
        assert_eq!(ts(&[&Value::Double(20090213.9), &s("yyyyMMdd")]), Value::Long(1_234_483_200));
        assert_eq!(ts(&[&s("13.02.2009"), &s("dd.MM.yyyy")]), Value::Long(1_234_483_200));
        assert_eq!(ts(&[&Value::Long(5)]), Value::Null);
        assert_eq!(ts(&[&s("garbage")]), Value::Null);
        assert_eq!(ts(&[&s("2009"), &Value::Null]), Value::Null);
    }

    #[test]
    fn if_chooses_by_a_boolean() {
        let (a, b) = (s("a"), s("b"));
        assert_eq!(apply(Function::If, &[&Value::Bool(true), &a, &b]), a);
        assert_eq!(apply(Function::If, &[&Value::Bool(false), &a, &b]), b);
        assert_eq!(apply(Function::If, &[&Value::Null, &a, &b]), b);
        assert_eq!(apply(Function::If, &[&Value::Int(1), &a, &b]), Value::Null);
    }
}
