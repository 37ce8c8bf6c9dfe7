//! The operators on values: arithmetic with numeric promotion, SQL comparison and equality
//! (three-valued), ANY/ALL quantifiers, and the map/list accessors used by field paths. Each is
//! a plain function of values so that the evaluator, the tests and other engine code share one
//! definition. `Option<bool>` is three-valued logic: `None` is NULL.

use crate::compare::compare;
use needle_query::ast::{CompareOp, Quantifier};
use needle_record::Value;
use std::cmp::Ordering;

/// Arithmetic operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

/// The numeric rank for promotion: INTEGER < LONG < FLOAT < DOUBLE; `None` for non-numbers.
fn rank(v: &Value) -> Option<u8> {
    match v {
        Value::Int(_) => Some(0),
        Value::Long(_) => Some(1),
        Value::Float(_) => Some(2),
        Value::Double(_) => Some(3),
        _ => None,
    }
}

fn as_f32(v: &Value) -> f32 {
    match v {
        Value::Int(x) => *x as f32,
        Value::Long(x) => *x as f32,
        Value::Float(x) => *x,
        Value::Double(x) => *x as f32,
        _ => f32::NAN,
    }
}

/// `a op b` for numbers: promoted to the wider type, checked integer arithmetic (overflow is
/// NULL), division and remainder by zero NULL; NULL for anything that is not a number.
pub fn arith(op: ArithOp, a: &Value, b: &Value) -> Value {
    let (Some(ra), Some(rb)) = (rank(a), rank(b)) else {
        return Value::Null;
    };
    match ra.max(rb) {
        0 => {
            let (Value::Int(x), Value::Int(y)) = (a, b) else { unreachable!("both INTEGER") };
            let r = match op {
                ArithOp::Add => x.checked_add(*y),
                ArithOp::Sub => x.checked_sub(*y),
                ArithOp::Mul => x.checked_mul(*y),
                ArithOp::Div => x.checked_div(*y),
                // MIN % -1 is 0 (representable), unlike MIN / -1.
                ArithOp::Rem => (*y != 0).then(|| x.wrapping_rem(*y)),
            };
            r.map_or(Value::Null, Value::Int)
        }
        1 => {
            let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) else {
                unreachable!("both INTEGER or LONG")
            };
            let r = match op {
                ArithOp::Add => x.checked_add(y),
                ArithOp::Sub => x.checked_sub(y),
                ArithOp::Mul => x.checked_mul(y),
                ArithOp::Div => x.checked_div(y),
                ArithOp::Rem => (y != 0).then(|| x.wrapping_rem(y)),
            };
            r.map_or(Value::Null, Value::Long)
        }
        2 => {
            let (x, y) = (as_f32(a), as_f32(b));
            match op {
                ArithOp::Add => Value::Float(x + y),
                ArithOp::Sub => Value::Float(x - y),
                ArithOp::Mul => Value::Float(x * y),
                ArithOp::Div | ArithOp::Rem if y == 0.0 => Value::Null,
                ArithOp::Div => Value::Float(x / y),
                ArithOp::Rem => Value::Float(x % y),
            }
        }
        _ => {
            let (Some(x), Some(y)) = (a.as_f64(), b.as_f64()) else { unreachable!("both numbers") };
            match op {
                ArithOp::Add => Value::Double(x + y),
                ArithOp::Sub => Value::Double(x - y),
                ArithOp::Mul => Value::Double(x * y),
                ArithOp::Div | ArithOp::Rem if y == 0.0 => Value::Null,
                ArithOp::Div => Value::Double(x / y),
                ArithOp::Rem => Value::Double(x % y),
            }
        }
    }
}

/// Unary minus: same type; the minimum INTEGER or LONG has no negation (NULL).
pub fn negate(v: &Value) -> Value {
    match v {
        Value::Int(x) => x.checked_neg().map_or(Value::Null, Value::Int),
        Value::Long(x) => x.checked_neg().map_or(Value::Null, Value::Long),
        Value::Float(x) => Value::Float(-x),
        Value::Double(x) => Value::Double(-x),
        _ => Value::Null,
    }
}

/// Structural equality used inside containers and by CONTAINSVALUE: NULL equals NULL, numbers
/// compare by value across types (NaN equals nothing), maps ignore key order.
pub fn deep_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        _ if a.is_numeric() && b.is_numeric() => compare(a, b) == Some(Ordering::Equal),
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(l, r)| deep_eq(l, r))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| deep_eq(v, w)))
        }
        _ => false,
    }
}

/// SQL `a = b`: NULL when either is NULL or they cannot be compared (a number and a string, NaN);
/// lists and maps by [`deep_eq`].
pub fn equal(a: &Value, b: &Value) -> Option<bool> {
    match (a, b) {
        (Value::Null, _) | (_, Value::Null) => None,
        (Value::String(x), Value::String(y)) => Some(x == y),
        (Value::List(_), Value::List(_)) | (Value::Map(_), Value::Map(_)) => Some(deep_eq(a, b)),
        _ => compare(a, b).map(|o| o == Ordering::Equal),
    }
}

/// `a op b` in three-valued logic.
pub fn compare_op(op: CompareOp, a: &Value, b: &Value) -> Option<bool> {
    match op {
        CompareOp::Eq => equal(a, b),
        CompareOp::Ne => equal(a, b).map(|e| !e),
        CompareOp::Lt => compare(a, b).map(Ordering::is_lt),
        CompareOp::Le => compare(a, b).map(Ordering::is_le),
        CompareOp::Gt => compare(a, b).map(Ordering::is_gt),
        CompareOp::Ge => compare(a, b).map(Ordering::is_ge),
    }
}

/// SQL's ANY over three-valued results: TRUE if one is TRUE, else NULL if one is NULL, else
/// FALSE (FALSE when empty).
pub fn any3(results: impl Iterator<Item = Option<bool>>) -> Option<bool> {
    let mut saw_null = false;
    for r in results {
        match r {
            Some(true) => return Some(true),
            Some(false) => {}
            None => saw_null = true,
        }
    }
    if saw_null {
        None
    } else {
        Some(false)
    }
}

/// SQL's ALL over three-valued results: FALSE if one is FALSE, else NULL if one is NULL, else
/// TRUE (TRUE when empty).
pub fn all3(results: impl Iterator<Item = Option<bool>>) -> Option<bool> {
    let mut saw_null = false;
    for r in results {
        match r {
            Some(false) => return Some(false),
            Some(true) => {}
            None => saw_null = true,
        }
    }
    if saw_null {
        None
    } else {
        Some(true)
    }
}

/// `a op ANY|ALL list`; NULL when `list` is not a list.
pub fn quantified(op: CompareOp, q: Quantifier, a: &Value, list: &Value) -> Option<bool> {
    let items = list.as_list()?;
    let results = items.iter().map(|item| compare_op(op, a, item));
    match q {
        Quantifier::Any => any3(results),
        Quantifier::All => all3(results),
    }
}

/// A map's value by key; `None` when `v` is not a map or lacks the key.
pub fn get_key<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_map()?.get(key)
}

/// A list's element by 0-based index; `None` when `v` is not a list or the index is out of range.
pub fn get_index(v: &Value, index: i64) -> Option<&Value> {
    v.as_list()?.get(usize::try_from(index).ok()?)
}
