//! `CAST(e AS t)` and field type hints (`a : t`): converting a value to a named type. A value
//! that cannot be converted is NULL; NULL stays NULL.
//!
//! | to \ from | INTEGER/LONG | FLOAT/DOUBLE | BOOLEAN | STRING |
//! |---|---|---|---|---|
//! | INTEGER, LONG | the value; NULL if out of range | truncated toward zero; NULL if NaN, infinite or out of range | TRUE → 1, FALSE → 0 | an integer literal (`'42'`, `' -7 '`: surrounding whitespace ignored), else a decimal number truncated (`'5.7'` → 5), else NULL |
//! | FLOAT, DOUBLE | nearest value | converted (DOUBLE → FLOAT may round or overflow to infinity, as in Java) | 1.0 / 0.0 | a decimal number (`'1e3'`, `'NaN'`, `'inf'` accepted), else NULL |
//! | BOOLEAN | `x != 0` | `x != 0`; NaN → NULL | itself | `'true'` / `'false'` in any case, else NULL |
//! | STRING | decimal digits | Rust's shortest round-trip form with a `.0` for whole numbers (`5.0`, `0.1`, `1e20`); `NaN`, `Infinity`, `-Infinity` | `true` / `false` | itself |
//!
//! Lists and maps: `LIST[t]` casts each element of a list and `MAP[t]` each value of a map (an
//! element that cannot be cast becomes NULL, the container keeps its shape); a container cast to
//! a primitive type, or a primitive cast to a container type, is NULL.

use needle_record::{Type, Value};

/// True when `v` already has type `t` (NULL conforms to every type; containers are checked
/// element by element), so a cast would return it unchanged.
pub fn conforms(v: &Value, t: &Type) -> bool {
    match (v, t) {
        (Value::Null, _) => true,
        (Value::Int(_), Type::Integer)
        | (Value::Long(_), Type::Long)
        | (Value::Float(_), Type::Float)
        | (Value::Double(_), Type::Double)
        | (Value::Bool(_), Type::Boolean)
        | (Value::String(_), Type::String) => true,
        (Value::List(items), Type::List(e)) => items.iter().all(|i| conforms(i, e)),
        (Value::Map(map), Type::Map(e)) => map.values().all(|i| conforms(i, e)),
        _ => false,
    }
}

/// `v` converted to type `t` per the table in the module doc; NULL when impossible.
pub fn cast(v: &Value, t: &Type) -> Value {
    match t {
        Type::Integer => {
            to_i64(v).and_then(|x| i32::try_from(x).ok()).map_or(Value::Null, Value::Int)
        }
        Type::Long => to_i64(v).map_or(Value::Null, Value::Long),
        Type::Float => to_f64(v).map_or(Value::Null, |x| match v {
            Value::Float(f) => Value::Float(*f),
            _ => Value::Float(x as f32),
        }),
        Type::Double => to_f64(v).map_or(Value::Null, Value::Double),
        Type::Boolean => to_bool(v).map_or(Value::Null, Value::Bool),
        Type::String => to_string(v).map_or(Value::Null, Value::String),
        Type::List(e) => match v {
            Value::List(items) => Value::List(items.iter().map(|i| cast(i, e)).collect()),
            _ => Value::Null,
        },
        Type::Map(e) => match v {
            Value::Map(map) => {
                Value::Map(map.iter().map(|(k, i)| (k.clone(), cast(i, e))).collect())
            }
            _ => Value::Null,
        },
    }
}

/// A float truncated toward zero to a long, when it fits.
fn truncate(x: f64) -> Option<i64> {
    // 2^63 is exactly representable; every finite double in (-2^63 - 1, 2^63) truncates in range.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    let t = x.trunc();
    (-LIMIT..LIMIT).contains(&t).then_some(t as i64)
}

fn to_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Int(x) => Some(*x as i64),
        Value::Long(x) => Some(*x),
        Value::Float(x) => truncate(*x as f64),
        Value::Double(x) => truncate(*x),
        Value::Bool(b) => Some(*b as i64),
        Value::String(s) => {
            let s = s.trim();
            s.parse::<i64>().ok().or_else(|| truncate(parse_f64(s)?))
        }
        _ => None,
    }
}

/// A decimal number as Rust parses it (which accepts `NaN`, `inf`, `infinity` in any case);
/// Java's spellings `Infinity` and `-Infinity` are among these.
fn parse_f64(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok()
}

fn to_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Int(_) | Value::Long(_) | Value::Float(_) | Value::Double(_) => v.as_f64(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::String(s) => parse_f64(s),
        _ => None,
    }
}

fn to_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Int(x) => Some(*x != 0),
        Value::Long(x) => Some(*x != 0),
        Value::Float(_) | Value::Double(_) => {
            let x = v.as_f64()?;
            (!x.is_nan()).then_some(x != 0.0)
        }
        Value::String(s) if s.eq_ignore_ascii_case("true") => Some(true),
        Value::String(s) if s.eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

/// A float as text: shortest round-trip digits, `.0` on whole numbers, Java's names for the
/// non-finite values.
pub fn float_text(x: f64, single: bool) -> String {
    if x.is_nan() {
        "NaN".to_owned()
    } else if x.is_infinite() {
        if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned()
    } else if single {
        format!("{:?}", x as f32)
    } else {
        format!("{x:?}")
    }
}

fn to_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Int(x) => Some(x.to_string()),
        Value::Long(x) => Some(x.to_string()),
        Value::Float(x) => Some(float_text(*x as f64, true)),
        Value::Double(x) => Some(float_text(*x, false)),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Value {
        Value::from(x)
    }

    #[test]
    fn numbers_from_strings_follow_java_parsing_with_truncation() {
        assert_eq!(cast(&s("5"), &Type::Integer), Value::Int(5));
        assert_eq!(cast(&s(" -7 "), &Type::Long), Value::Long(-7));
        assert_eq!(cast(&s("5.7"), &Type::Integer), Value::Int(5));
        assert_eq!(cast(&s("-5.7"), &Type::Long), Value::Long(-5));
        assert_eq!(cast(&s("abc"), &Type::Integer), Value::Null);
        assert_eq!(cast(&s(""), &Type::Double), Value::Null);
        assert_eq!(cast(&s("1e3"), &Type::Double), Value::Double(1000.0));
        assert_eq!(cast(&s("2.5"), &Type::Float), Value::Float(2.5));
        assert_eq!(cast(&s("NaN"), &Type::Integer), Value::Null);
    }

    #[test]
    fn numbers_narrow_by_truncation_and_null_when_out_of_range() {
        assert_eq!(cast(&Value::Double(5.7), &Type::Integer), Value::Int(5));
        assert_eq!(cast(&Value::Double(-5.7), &Type::Integer), Value::Int(-5));
        assert_eq!(cast(&Value::Long(1 << 40), &Type::Integer), Value::Null);
        assert_eq!(cast(&Value::Double(1e19), &Type::Long), Value::Null);
        assert_eq!(cast(&Value::Double(i64::MIN as f64), &Type::Long), Value::Long(i64::MIN));
        assert_eq!(cast(&Value::Double(f64::INFINITY), &Type::Long), Value::Null);
        assert_eq!(cast(&Value::Int(3), &Type::Double), Value::Double(3.0));
        assert_eq!(cast(&Value::Double(1e300), &Type::Float), Value::Float(f32::INFINITY));
        assert_eq!(cast(&Value::Float(1.5), &Type::Long), Value::Long(1));
    }

    #[test]
    fn booleans_convert_to_and_from_numbers_and_strings() {
        assert_eq!(cast(&Value::Bool(true), &Type::Integer), Value::Int(1));
        assert_eq!(cast(&Value::Bool(false), &Type::Double), Value::Double(0.0));
        assert_eq!(cast(&Value::Int(0), &Type::Boolean), Value::Bool(false));
        assert_eq!(cast(&Value::Long(-3), &Type::Boolean), Value::Bool(true));
        assert_eq!(cast(&Value::Double(f64::NAN), &Type::Boolean), Value::Null);
        assert_eq!(cast(&s("TRUE"), &Type::Boolean), Value::Bool(true));
        assert_eq!(cast(&s("False"), &Type::Boolean), Value::Bool(false));
        assert_eq!(cast(&s("yes"), &Type::Boolean), Value::Null);
    }

    #[test]
    fn strings_from_everything_primitive() {
        assert_eq!(cast(&Value::Int(-5), &Type::String), s("-5"));
        assert_eq!(cast(&Value::Double(5.0), &Type::String), s("5.0"));
        assert_eq!(cast(&Value::Float(0.1), &Type::String), s("0.1"));
        assert_eq!(cast(&Value::Double(f64::NEG_INFINITY), &Type::String), s("-Infinity"));
        assert_eq!(cast(&Value::Bool(true), &Type::String), s("true"));
        assert_eq!(cast(&Value::List(vec![]), &Type::String), Value::Null);
    }

    #[test]
    fn containers_cast_element_wise_and_keep_their_shape() {
        let list = Value::List(vec![s("1"), s("x"), Value::Null, Value::Double(2.9)]);
        let t = Type::List(Box::new(Type::Integer));
        assert_eq!(
            cast(&list, &t),
            Value::List(vec![Value::Int(1), Value::Null, Value::Null, Value::Int(2)])
        );
        let mut m = needle_record::Map::default();
        m.insert("a".into(), Value::Int(1));
        let out = cast(&Value::Map(m), &Type::Map(Box::new(Type::String)));
        assert_eq!(out.as_map().unwrap()["a"], s("1"));
        assert_eq!(cast(&s("x"), &t), Value::Null);
        assert_eq!(cast(&Value::Null, &t), Value::Null);
        assert!(conforms(&Value::List(vec![Value::Int(1), Value::Null]), &t));
        assert!(!conforms(&Value::List(vec![Value::Long(1)]), &t));
    }
}
