//! Ordering values: the SQL comparison used by `<`, `=`, MIN and MAX (numbers compare across
//! numeric types, NULL compares to nothing), and a total order for ORDER BY and stable output.

use needle_record::Value;
use std::cmp::Ordering;

/// SQL comparison of two values: numbers of any numeric type by value, strings by bytes, booleans
/// with FALSE < TRUE, lists element by element. `None` when either is NULL or the types cannot
/// be compared (a string with a number, a map with anything).
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Null, _) | (_, Value::Null) => None,
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::Long(_) | Value::Int(_), Value::Long(_) | Value::Int(_)) => {
            Some(a.as_i64()?.cmp(&b.as_i64()?))
        }
        _ if a.is_numeric() && b.is_numeric() => a.as_f64()?.partial_cmp(&b.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::List(x), Value::List(y)) => {
            for (l, r) in x.iter().zip(y) {
                match compare(l, r)? {
                    Ordering::Equal => continue,
                    other => return Some(other),
                }
            }
            Some(x.len().cmp(&y.len()))
        }
        _ => None,
    }
}

/// A total order over all values for sorting: NULL first, then booleans, numbers (NaN last among
/// them), strings, lists, maps; within a kind as [`compare`].
pub fn total_cmp(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Null => 0,
            Value::Bool(_) => 1,
            Value::Int(_) | Value::Long(_) | Value::Float(_) | Value::Double(_) => 2,
            Value::String(_) => 3,
            Value::List(_) => 4,
            Value::Map(_) => 5,
        }
    }
    match rank(a).cmp(&rank(b)) {
        Ordering::Equal => {}
        other => return other,
    }
    if let Some(o) = compare(a, b) {
        return o;
    }
    match (a, b) {
        (Value::Null, Value::Null) => Ordering::Equal,
        _ if a.is_numeric() => {
            let (x, y) = (a.as_f64().unwrap_or(f64::NAN), b.as_f64().unwrap_or(f64::NAN));
            x.total_cmp(&y)
        }
        (Value::List(x), Value::List(y)) => {
            for (l, r) in x.iter().zip(y) {
                match total_cmp(l, r) {
                    Ordering::Equal => continue,
                    other => return other,
                }
            }
            x.len().cmp(&y.len())
        }
        _ => a.to_json().cmp(&b.to_json()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_compare_across_types_and_null_compares_to_nothing() {
        assert_eq!(compare(&Value::Int(3), &Value::Double(3.0)), Some(Ordering::Equal));
        assert_eq!(
            compare(&Value::Long(i64::MAX), &Value::Long(i64::MAX - 1)),
            Some(Ordering::Greater)
        );
        assert_eq!(compare(&Value::Null, &Value::Null), None);
        assert_eq!(compare(&Value::from("1"), &Value::Long(1)), None);
    }

    #[test]
    fn total_order_puts_null_first_and_nan_last_among_numbers() {
        let mut v = [Value::Double(f64::NAN), Value::from("a"), Value::Long(2), Value::Null];
        v.sort_by(total_cmp);
        assert!(v[0].is_null());
        assert_eq!(v[1], Value::Long(2));
        assert!(matches!(v[2], Value::Double(x) if x.is_nan()));
        assert_eq!(v[3], Value::from("a"));
    }
}
