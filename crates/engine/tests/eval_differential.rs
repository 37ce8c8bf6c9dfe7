//! Differential test of expression evaluation: random expression trees (every operator and
//! function, literals of every type including NULL and NaN, nested fields with computed indexes
//! and type hints) over random records are evaluated by the compiled evaluator
//! ([`CompiledExpr`]) and by the deliberately plain reference interpreter below, a direct
//! recursive reading of the rules documented in `needle_engine::eval` that shares no code with
//! it (it evaluates everything eagerly, does integer arithmetic in i128 and range-checks, compiles
//! every regular expression afresh, casts unconditionally). Results must be identical, type
//! included (NaN equals NaN here). Only date parsing is shared (`eval::time`, unit-tested on its
//! own).

use needle_engine::eval::time;
use needle_engine::{CompiledExpr, EngineError, EvalContext};
use needle_query::ast::*;
use needle_record::{Map, Record, Type, Value};
use proptest::prelude::*;
use std::cmp::Ordering;

// ---------------------------------------------------------------------------------------------
// The reference interpreter.

type B3 = Option<bool>;

fn from_b3(b: B3) -> Value {
    b.map_or(Value::Null, Value::Bool)
}

fn truth(v: &Value) -> B3 {
    match v {
        Value::Bool(b) => Some(*b),
        _ => None,
    }
}

fn and3(a: B3, b: B3) -> B3 {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

fn or3(a: B3, b: B3) -> B3 {
    match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

fn is_int(v: &Value) -> Option<i128> {
    match v {
        Value::Int(x) => Some(*x as i128),
        Value::Long(x) => Some(*x as i128),
        _ => None,
    }
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Int(x) => Some(*x as f64),
        Value::Long(x) => Some(*x as f64),
        Value::Float(x) => Some(*x as f64),
        Value::Double(x) => Some(*x),
        _ => None,
    }
}

fn ord(a: &Value, b: &Value) -> Option<Ordering> {
    if let (Some(x), Some(y)) = (is_int(a), is_int(b)) {
        return Some(x.cmp(&y));
    }
    if let (Some(x), Some(y)) = (num(a), num(b)) {
        return x.partial_cmp(&y);
    }
    match (a, b) {
        (Value::String(x), Value::String(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::List(x), Value::List(y)) => {
            for i in 0..x.len().min(y.len()) {
                let o = ord(&x[i], &y[i])?;
                if o != Ordering::Equal {
                    return Some(o);
                }
            }
            Some(x.len().cmp(&y.len()))
        }
        _ => None,
    }
}

fn same_structure(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && (0..x.len()).all(|i| same_structure(&x[i], &y[i]))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && x.keys().all(|k| y.contains_key(k) && same_structure(&x[k], &y[k]))
        }
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        _ => num(a).is_some() && num(b).is_some() && ord(a, b) == Some(Ordering::Equal),
    }
}

fn eq3(a: &Value, b: &Value) -> B3 {
    match (a, b) {
        (Value::Null, _) | (_, Value::Null) => None,
        (Value::List(_), Value::List(_)) | (Value::Map(_), Value::Map(_)) => {
            Some(same_structure(a, b))
        }
        _ => ord(a, b).map(|o| o == Ordering::Equal),
    }
}

fn cmp3(op: CompareOp, a: &Value, b: &Value) -> B3 {
    match op {
        CompareOp::Eq => eq3(a, b),
        CompareOp::Ne => eq3(a, b).map(|x| !x),
        CompareOp::Lt => ord(a, b).map(|o| o == Ordering::Less),
        CompareOp::Le => ord(a, b).map(|o| o != Ordering::Greater),
        CompareOp::Gt => ord(a, b).map(|o| o == Ordering::Greater),
        CompareOp::Ge => ord(a, b).map(|o| o != Ordering::Less),
    }
}

fn any_of(results: Vec<B3>) -> B3 {
    if results.contains(&Some(true)) {
        Some(true)
    } else if results.contains(&None) {
        None
    } else {
        Some(false)
    }
}

fn all_of(results: Vec<B3>) -> B3 {
    if results.contains(&Some(false)) {
        Some(false)
    } else if results.contains(&None) {
        None
    } else {
        Some(true)
    }
}

fn arith(op: BinaryOp, a: &Value, b: &Value) -> Value {
    let rank = |v: &Value| match v {
        Value::Int(_) => Some(0),
        Value::Long(_) => Some(1),
        Value::Float(_) => Some(2),
        Value::Double(_) => Some(3),
        _ => None,
    };
    let (Some(ra), Some(rb)) = (rank(a), rank(b)) else { return Value::Null };
    let top = ra.max(rb);
    if top <= 1 {
        let (x, y) = (is_int(a).unwrap(), is_int(b).unwrap());
        let r = match op {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div if y == 0 => return Value::Null,
            BinaryOp::Div => x / y,
            BinaryOp::Mod if y == 0 => return Value::Null,
            BinaryOp::Mod => x % y,
            _ => unreachable!(),
        };
        return if top == 0 {
            if r >= i32::MIN as i128 && r <= i32::MAX as i128 {
                Value::Int(r as i32)
            } else {
                Value::Null
            }
        } else if r >= i64::MIN as i128 && r <= i64::MAX as i128 {
            Value::Long(r as i64)
        } else {
            Value::Null
        };
    }
    let (x, y) = (num(a).unwrap(), num(b).unwrap());
    if matches!(op, BinaryOp::Div | BinaryOp::Mod) && y == 0.0 {
        return Value::Null;
    }
    if top == 2 {
        let (x, y) = (x as f32, y as f32);
        Value::Float(match op {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => x / y,
            _ => x % y,
        })
    } else {
        Value::Double(match op {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => x / y,
            _ => x % y,
        })
    }
}

/// A whole-value regex, compiled from scratch; `None` when invalid.
fn regex(p: &str) -> Option<regex::Regex> {
    regex::Regex::new(p).ok()?;
    regex::Regex::new(&format!("^(?:{p})$")).ok()
}

fn rlike1(value: &str, pattern: &Value) -> B3 {
    match pattern {
        Value::String(p) => regex(p).map(|re| re.is_match(value)),
        _ => None,
    }
}

fn trunc_i64(x: f64) -> Option<i64> {
    let t = x.trunc();
    if t.is_nan() || t < i64::MIN as f64 || t >= -(i64::MIN as f64) {
        None
    } else {
        Some(t as i64)
    }
}

fn to_long(v: &Value) -> Option<i64> {
    match v {
        Value::Int(x) => Some(*x as i64),
        Value::Long(x) => Some(*x),
        Value::Float(x) => trunc_i64(*x as f64),
        Value::Double(x) => trunc_i64(*x),
        Value::Bool(b) => Some(if *b { 1 } else { 0 }),
        Value::String(s) => match s.trim().parse::<i64>() {
            Ok(x) => Some(x),
            Err(_) => trunc_i64(s.trim().parse::<f64>().ok()?),
        },
        _ => None,
    }
}

fn to_double(v: &Value) -> Option<f64> {
    match v {
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        other => num(other),
    }
}

fn text_of_float(x: f64, as_f32: bool) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x == f64::INFINITY {
        "Infinity".into()
    } else if x == f64::NEG_INFINITY {
        "-Infinity".into()
    } else if as_f32 {
        format!("{:?}", x as f32)
    } else {
        format!("{x:?}")
    }
}

fn cast(v: &Value, t: &Type) -> Value {
    if v.is_null() {
        return Value::Null;
    }
    let out = match t {
        Type::Integer => to_long(v).and_then(|x| i32::try_from(x).ok()).map(Value::Int),
        Type::Long => to_long(v).map(Value::Long),
        Type::Float => to_double(v).map(|x| Value::Float(x as f32)),
        Type::Double => to_double(v).map(Value::Double),
        Type::Boolean => match v {
            Value::Bool(b) => Some(Value::Bool(*b)),
            Value::String(s) => match s.to_ascii_lowercase().as_str() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            other => num(other).filter(|x| !x.is_nan()).map(|x| Value::Bool(x != 0.0)),
        },
        Type::String => match v {
            Value::String(s) => Some(Value::String(s.clone())),
            Value::Int(x) => Some(Value::String(x.to_string())),
            Value::Long(x) => Some(Value::String(x.to_string())),
            Value::Float(x) => Some(Value::String(text_of_float(*x as f64, true))),
            Value::Double(x) => Some(Value::String(text_of_float(*x, false))),
            Value::Bool(b) => Some(Value::String(if *b { "true" } else { "false" }.into())),
            _ => None,
        },
        Type::List(e) => v.as_list().map(|l| Value::List(l.iter().map(|x| cast(x, e)).collect())),
        Type::Map(e) => v.as_map().map(|m| {
            let mut out = Map::default();
            for (k, x) in m {
                out.insert(k.clone(), cast(x, e));
            }
            Value::Map(out)
        }),
    };
    out.unwrap_or(Value::Null)
}

fn sizeof(v: &Value) -> Option<i64> {
    match v {
        Value::String(s) => Some(s.chars().count() as i64),
        Value::List(l) => Some(l.len() as i64),
        Value::Map(m) => Some(m.len() as i64),
        _ => None,
    }
}

fn sorted(v: &Value) -> Value {
    match v {
        Value::List(l) => Value::List(l.iter().map(sorted).collect()),
        Value::Map(m) => {
            let mut keys: Vec<_> = m.keys().cloned().collect();
            keys.sort();
            let mut out = Map::default();
            for k in keys {
                out.insert(k.clone(), sorted(&m[&k]));
            }
            Value::Map(out)
        }
        other => other.clone(),
    }
}

fn fnv(text: &str) -> i64 {
    let mut h: u64 = 14695981039346656037;
    for b in text.bytes() {
        h = (h ^ b as u64).wrapping_mul(1099511628211);
    }
    h as i64
}

fn java_trim(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut start = 0;
    let mut end = chars.len();
    while start < end && chars[start] <= ' ' {
        start += 1;
    }
    while end > start && chars[end - 1] <= ' ' {
        end -= 1;
    }
    chars[start..end].iter().collect()
}

fn bullet_substring(s: &str, start: i64, len: Option<i64>) -> String {
    let chars: Vec<char> = s.chars().collect();
    let n = chars.len() as i64;
    if chars.is_empty() || start == 0 || start > n || start < -n {
        return String::new();
    }
    let begin = if start > 0 { start - 1 } else { n + start };
    let end = match len {
        None => n,
        Some(l) if l <= 0 => return String::new(),
        Some(l) => (begin as i128 + l as i128).min(n as i128) as i64,
    };
    chars[begin as usize..end as usize].iter().collect()
}

fn function(f: Function, a: &[Value], now: i64) -> Value {
    let int_arg = |v: &Value| match v {
        Value::Int(x) => Some(*x as i64),
        Value::Long(x) => Some(*x),
        _ => None,
    };
    let out: Option<Value> = match f {
        Function::SizeOf => sizeof(&a[0]).and_then(|n| i32::try_from(n).ok()).map(Value::Int),
        Function::Abs => match a[0] {
            Value::Int(x) if x != i32::MIN => Some(Value::Int(x.abs())),
            Value::Long(x) if x != i64::MIN => Some(Value::Long(x.abs())),
            Value::Float(x) => Some(Value::Float(x.abs())),
            Value::Double(x) => Some(Value::Double(x.abs())),
            _ => None,
        },
        Function::Trim => a[0].as_str().map(|s| Value::String(java_trim(s))),
        Function::Lower => a[0].as_str().map(|s| Value::String(s.to_lowercase())),
        Function::Upper => a[0].as_str().map(|s| Value::String(s.to_uppercase())),
        Function::Hash => (!a[0].is_null()).then(|| Value::Long(fnv(&sorted(&a[0]).to_json()))),
        Function::SizeIs => match (sizeof(&a[0]), int_arg(&a[1])) {
            (Some(s), Some(n)) => Some(Value::Bool(s == n)),
            _ => None,
        },
        Function::ContainsKey => match (&a[0], a[1].as_str()) {
            (Value::Map(m), Some(k)) => Some(Value::Bool(
                m.contains_key(k)
                    || m.values().any(|v| v.as_map().is_some_and(|x| x.contains_key(k))),
            )),
            (Value::List(l), Some(k)) => {
                Some(Value::Bool(l.iter().any(|v| v.as_map().is_some_and(|x| x.contains_key(k)))))
            }
            _ => None,
        },
        Function::ContainsValue => {
            let t = &a[1];
            let hit = |v: &Value| match v {
                Value::Map(m) => m.values().any(|x| same_structure(x, t)),
                other => same_structure(other, t),
            };
            match &a[0] {
                _ if t.is_null() => None,
                Value::Map(m) => Some(Value::Bool(m.values().any(hit))),
                Value::List(l) => Some(Value::Bool(l.iter().any(hit))),
                _ => None,
            }
        }
        Function::Filter => match (&a[0], &a[1]) {
            (Value::List(items), Value::List(flags)) => {
                let mut out = vec![];
                for (i, item) in items.iter().enumerate() {
                    if flags.get(i) == Some(&Value::Bool(true)) {
                        out.push(item.clone());
                    }
                }
                Some(Value::List(out))
            }
            _ => None,
        },
        Function::If => match a[0] {
            Value::Bool(true) => Some(a[1].clone()),
            Value::Bool(false) | Value::Null => Some(a[2].clone()),
            _ => None,
        },
        Function::Substring => match (&a[0], int_arg(&a[1])) {
            (Value::String(s), Some(start)) => match a.get(2) {
                None => Some(Value::String(bullet_substring(s, start, None))),
                Some(l) => int_arg(l).map(|l| Value::String(bullet_substring(s, start, Some(l)))),
            },
            _ => None,
        },
        Function::UnixTimestamp => match a.len() {
            0 => Some(Value::Long(now.div_euclid(1000))),
            1 => a[0].as_str().and_then(time::parse_jdbc_timestamp).map(Value::Long),
            _ => {
                let text = match &a[0] {
                    Value::String(s) => Some(s.clone()),
                    other if num(other).is_some() => to_long(other).map(|x| x.to_string()),
                    _ => None,
                };
                match (text, a[1].as_str()) {
                    (Some(t), Some(p)) => time::parse_with_pattern(&t, p).map(Value::Long),
                    _ => None,
                }
            }
        },
    };
    out.unwrap_or(Value::Null)
}

fn field(f: &Field, r: &Record, now: i64) -> Value {
    let mut v = r.get(&f.name).cloned().unwrap_or(Value::Null);
    for a in &f.path {
        let key = match a {
            Accessor::Key(k) => Value::String(k.clone()),
            Accessor::Index(i) => Value::Long(*i),
            Accessor::Expr(e) => eval(e, r, now),
        };
        v = match (&v, &key) {
            (Value::Map(m), Value::String(k)) => m.get(k).cloned().unwrap_or(Value::Null),
            (Value::List(l), Value::Int(_) | Value::Long(_)) => {
                let i = is_int(&key).unwrap();
                if i >= 0 && (i as usize) < l.len() {
                    l[i as usize].clone()
                } else {
                    Value::Null
                }
            }
            _ => Value::Null,
        };
    }
    match &f.hint {
        Some(t) => cast(&v, t),
        None => v,
    }
}

/// The reference interpretation of an expression.
fn eval(e: &Expr, r: &Record, now: i64) -> Value {
    let ev = |x: &Expr| eval(x, r, now);
    match &e.kind {
        ExprKind::Literal(v) => v.clone(),
        ExprKind::List(items) => Value::List(items.iter().map(ev).collect()),
        ExprKind::Now => Value::Long(now),
        ExprKind::Field(f) => field(f, r, now),
        ExprKind::Unary { op: UnaryOp::Not, operand } => from_b3(truth(&ev(operand)).map(|b| !b)),
        ExprKind::Unary { op: UnaryOp::Negate, operand } => {
            arith(BinaryOp::Sub, &Value::Int(0), &ev(operand)).pipe_negate(&ev(operand))
        }
        ExprKind::Binary { op, left, right } => {
            let (l, rv) = (ev(left), ev(right));
            match op {
                BinaryOp::And => from_b3(and3(truth(&l), truth(&rv))),
                BinaryOp::Or => from_b3(or3(truth(&l), truth(&rv))),
                BinaryOp::Xor => match (truth(&l), truth(&rv)) {
                    (Some(x), Some(y)) => Value::Bool(x != y),
                    _ => Value::Null,
                },
                _ => arith(*op, &l, &rv),
            }
        }
        ExprKind::Compare { op, quantifier, left, right } => {
            let (l, rv) = (ev(left), ev(right));
            match quantifier {
                None => from_b3(cmp3(*op, &l, &rv)),
                Some(q) => match &rv {
                    Value::List(items) => {
                        let results = items.iter().map(|x| cmp3(*op, &l, x)).collect();
                        from_b3(if *q == Quantifier::Any {
                            any_of(results)
                        } else {
                            all_of(results)
                        })
                    }
                    _ => Value::Null,
                },
            }
        }
        ExprKind::Rlike { negated, any, value, pattern } => {
            let (v, p) = (ev(value), ev(pattern));
            let result = match (&v, any) {
                (Value::String(s), false) => rlike1(s, &p),
                (Value::String(s), true) => match &p {
                    Value::List(ps) => any_of(ps.iter().map(|x| rlike1(s, x)).collect()),
                    _ => None,
                },
                _ => None,
            };
            from_b3(if *negated { result.map(|b| !b) } else { result })
        }
        ExprKind::In { negated, value, list } => {
            let (v, l) = (ev(value), ev(list));
            let result = match &l {
                Value::List(items) => any_of(items.iter().map(|x| eq3(&v, x)).collect()),
                _ => None,
            };
            from_b3(if *negated { result.map(|b| !b) } else { result })
        }
        ExprKind::Between { negated, value, low, high } => {
            let v = ev(value);
            let result =
                and3(cmp3(CompareOp::Le, &ev(low), &v), cmp3(CompareOp::Le, &v, &ev(high)));
            from_b3(if *negated { result.map(|b| !b) } else { result })
        }
        ExprKind::IsNull { negated, value } => Value::Bool(ev(value).is_null() != *negated),
        ExprKind::Call { function: f, args } => {
            let a: Vec<Value> = args.iter().map(ev).collect();
            function(*f, &a, now)
        }
        ExprKind::Cast { value, to } => cast(&ev(value), to),
        ExprKind::Aggregate(_) => unreachable!("not generated"),
    }
}

/// `-x` as `0 - x` for integers (which overflows exactly when negation does) and sign flip for
/// floats (`0.0 - 0.0` would lose the sign of zero).
trait NegateVia {
    fn pipe_negate(self, operand: &Value) -> Value;
}
impl NegateVia for Value {
    fn pipe_negate(self, operand: &Value) -> Value {
        match operand {
            Value::Int(_) | Value::Long(_) => self,
            Value::Float(x) => Value::Float(-x),
            Value::Double(x) => Value::Double(-x),
            _ => Value::Null,
        }
    }
}

/// True when the expression reads neither the record nor the clock.
fn constant(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Literal(_) => true,
        ExprKind::Now | ExprKind::Field(_) | ExprKind::Aggregate(_) => false,
        ExprKind::List(items) => items.iter().all(constant),
        ExprKind::Unary { operand, .. } => constant(operand),
        ExprKind::Binary { left, right, .. } | ExprKind::Compare { left, right, .. } => {
            constant(left) && constant(right)
        }
        ExprKind::Rlike { value, pattern, .. } => constant(value) && constant(pattern),
        ExprKind::In { value, list, .. } => constant(value) && constant(list),
        ExprKind::Between { value, low, high, .. } => {
            constant(value) && constant(low) && constant(high)
        }
        ExprKind::IsNull { value, .. } | ExprKind::Cast { value, .. } => constant(value),
        ExprKind::Call { function, args } => {
            !(*function == Function::UnixTimestamp && args.is_empty()) && args.iter().all(constant)
        }
    }
}

/// True when some RLIKE in the tree has a constant pattern that is an invalid regex (which must
/// fail compilation).
fn has_invalid_literal_regex(e: &Expr) -> bool {
    let bad = |p: &Value| p.as_str().is_some_and(|p| regex(p).is_none());
    let here = match &e.kind {
        ExprKind::Rlike { any, pattern, .. } if constant(pattern) => {
            match (eval(pattern, &Record::new(), 0), any) {
                (Value::String(p), false) => bad(&Value::String(p)),
                (Value::List(ps), true) => ps.iter().any(bad),
                _ => false,
            }
        }
        _ => false,
    };
    here || children(e).into_iter().any(has_invalid_literal_regex)
}

fn children(e: &Expr) -> Vec<&Expr> {
    match &e.kind {
        ExprKind::Literal(_) | ExprKind::Now | ExprKind::Aggregate(_) => vec![],
        ExprKind::Field(f) => f
            .path
            .iter()
            .filter_map(|a| match a {
                Accessor::Expr(x) => Some(&**x),
                _ => None,
            })
            .collect(),
        ExprKind::List(items) | ExprKind::Call { args: items, .. } => items.iter().collect(),
        ExprKind::Unary { operand, .. } => vec![operand],
        ExprKind::Binary { left, right, .. } | ExprKind::Compare { left, right, .. } => {
            vec![left, right]
        }
        ExprKind::Rlike { value, pattern, .. } => vec![value, pattern],
        ExprKind::In { value, list, .. } => vec![value, list],
        ExprKind::Between { value, low, high, .. } => vec![value, low, high],
        ExprKind::IsNull { value, .. } | ExprKind::Cast { value, .. } => vec![value],
    }
}

/// Equality of results: same types and values, NaN equal to NaN, maps in any key order.
fn identical(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => {
            (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits()
        }
        (Value::Double(x), Value::Double(y)) => {
            (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits()
        }
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(l, r)| identical(l, r))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| identical(v, w)))
        }
        _ => a == b,
    }
}

// ---------------------------------------------------------------------------------------------
// Generators.

const STRINGS: &[&str] = &[
    "",
    "a",
    "ab",
    "ipad",
    "a\nb",
    "ipad\n",
    "iPad",
    "7",
    "-3",
    "5.7",
    "1e3",
    "true",
    "FALSE",
    " x ",
    "é",
    "A",
    ".*",
    "a.*",
    "a|ab",
    "[0-9]+",
    "(",
    "k",
    "2009-02-13 23:31:30",
    "1970-01-01 00:00:00",
    "yyyy-MM-dd HH:mm:ss",
    "20090213",
    "yyyyMMdd",
    "dd/MM/yyyy",
    "13/02/2009",
];
const KEYS: &[&str] = &["a", "b", "k"];
const FIELDS: &[&str] = &["a", "b", "c", "d", "e", "missing"];
const PATTERNS: &[&str] = &[
    ".*", "a.*", "i.*d", "[0-9]+", "a|ab", "", "(?i)IPAD", "\\d", "(", "ip.*", ".*b", ".*a.*",
    "ipad", "a\nb",
];

fn prim() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        prop_oneof![
            prop::sample::select(vec![0, 1, -1, 2, 3, 7, i32::MAX, i32::MIN, 20090213]),
            -50i32..50
        ]
        .prop_map(Value::Int),
        prop_oneof![
            prop::sample::select(vec![0i64, 1, -1, 3, 1 << 31, i64::MAX, i64::MIN, 20090213]),
            -50i64..50
        ]
        .prop_map(Value::Long),
        prop_oneof![
            prop::sample::select(vec![0.0f32, -0.0, 1.5, 7.0, f32::NAN, f32::INFINITY, 3e38]),
            -20.0f32..20.0
        ]
        .prop_map(Value::Float),
        prop_oneof![
            prop::sample::select(vec![0.0, -0.0, 2.5, 7.0, f64::NAN, f64::NEG_INFINITY, 1e300]),
            -20.0f64..20.0
        ]
        .prop_map(Value::Double),
        prop::sample::select(STRINGS).prop_map(Value::from),
    ]
    .boxed()
}

fn map_of(v: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    prop::collection::vec((prop::sample::select(KEYS), v), 0..4)
        .prop_map(|pairs| {
            let mut m = Map::default();
            for (k, v) in pairs {
                m.insert(k.to_string(), v);
            }
            Value::Map(m)
        })
        .boxed()
}

fn value() -> BoxedStrategy<Value> {
    prop_oneof![
        4 => prim(),
        1 => prop::collection::vec(prim(), 0..4).prop_map(Value::List),
        1 => map_of(prim()),
        1 => prop::collection::vec(map_of(prim()), 0..3).prop_map(Value::List),
        1 => map_of(map_of(prim())),
    ]
    .boxed()
}

fn record() -> impl Strategy<Value = Record> {
    prop::collection::vec(prop::option::weighted(0.85, value()), FIELDS.len() - 1).prop_map(|vs| {
        let mut r = Record::new();
        for (name, v) in FIELDS.iter().zip(vs) {
            if let Some(v) = v {
                r.insert(*name, v);
            }
        }
        r
    })
}

fn ty() -> BoxedStrategy<Type> {
    let prim = prop::sample::select(vec![
        Type::Integer,
        Type::Long,
        Type::Float,
        Type::Double,
        Type::Boolean,
        Type::String,
    ]);
    prop_oneof![
        3 => prim.clone(),
        1 => prim.clone().prop_map(|t| Type::List(Box::new(t))),
        1 => prim.clone().prop_map(|t| Type::Map(Box::new(t))),
        1 => prim.prop_map(|t| Type::List(Box::new(Type::Map(Box::new(t))))),
    ]
    .boxed()
}

fn ex(kind: ExprKind) -> Expr {
    Expr::new(kind, Span::default())
}

fn bx(e: Expr) -> Box<Expr> {
    Box::new(e)
}

fn field_expr() -> BoxedStrategy<Expr> {
    let index_leaf = prop_oneof![
        prim().prop_map(|v| ex(ExprKind::Literal(v))),
        prop::sample::select(FIELDS).prop_map(|n| ex(ExprKind::Field(Field {
            name: n.into(),
            path: vec![],
            hint: None
        }))),
    ];
    let accessor = prop_oneof![
        prop::sample::select(KEYS).prop_map(|k| Accessor::Key(k.into())),
        (-1i64..3).prop_map(Accessor::Index),
        index_leaf.prop_map(|e| Accessor::Expr(bx(e))),
    ];
    (
        prop::sample::select(FIELDS),
        prop::collection::vec(accessor, 0..3),
        prop::option::weighted(0.15, ty()),
    )
        .prop_map(|(n, path, hint)| ex(ExprKind::Field(Field { name: n.into(), path, hint })))
        .boxed()
}

fn leaf() -> BoxedStrategy<Expr> {
    prop_oneof![
        3 => value().prop_map(|v| ex(ExprKind::Literal(v))),
        4 => field_expr(),
        1 => Just(ex(ExprKind::Now)),
    ]
    .boxed()
}

fn pattern(inner: BoxedStrategy<Expr>, any: bool) -> BoxedStrategy<Expr> {
    let lit = prop::sample::select(PATTERNS).prop_map(|p| ex(ExprKind::Literal(Value::from(p))));
    if any {
        prop_oneof![
            2 => prop::collection::vec(lit, 0..3).prop_map(|ps| ex(ExprKind::List(ps))),
            1 => inner,
        ]
        .boxed()
    } else {
        prop_oneof![2 => lit, 1 => inner].boxed()
    }
}

/// What kind of argument a function wants; generated arguments are of that kind two times in
/// three, anything the third time (so that wrong types are exercised too).
#[derive(Clone, Copy, Debug)]
enum Want {
    Any,
    Str,
    Int,
    List,
    Container,
    Flags,
    Date,
    DatePattern,
    Castable,
}

fn lit_expr(v: Value) -> Expr {
    ex(ExprKind::Literal(v))
}

fn arg(want: Want, inner: BoxedStrategy<Expr>) -> BoxedStrategy<Expr> {
    let typed: BoxedStrategy<Expr> = match want {
        Want::Any => return inner,
        Want::Str => prop::sample::select(STRINGS).prop_map(|s| lit_expr(Value::from(s))).boxed(),
        Want::Int => prop_oneof![
            (-7i32..7).prop_map(|i| lit_expr(Value::Int(i))),
            (-7i64..7).prop_map(|i| lit_expr(Value::Long(i))),
        ]
        .boxed(),
        Want::List => {
            prop::collection::vec(prim(), 0..5).prop_map(|l| lit_expr(Value::List(l))).boxed()
        }
        Want::Container => value().prop_map(lit_expr).boxed(),
        Want::Flags => prop::collection::vec(
            prop_oneof![any::<bool>().prop_map(Value::Bool), Just(Value::Null)],
            0..5,
        )
        .prop_map(|l| lit_expr(Value::List(l)))
        .boxed(),
        Want::Date => prop_oneof![
            prop::sample::select(vec![
                "2009-02-13 23:31:30",
                "1970-01-01 00:00:00",
                "20090213",
                "13/02/2009",
                "x"
            ])
            .prop_map(|s| lit_expr(Value::from(s))),
            Just(lit_expr(Value::Long(20090213))),
            Just(lit_expr(Value::Double(20090213.5))),
        ]
        .boxed(),
        Want::Castable => prop_oneof![
            prop::sample::select(STRINGS).prop_map(|s| lit_expr(Value::from(s))),
            value().prop_map(lit_expr),
        ]
        .boxed(),
        Want::DatePattern => {
            prop::sample::select(vec!["yyyy-MM-dd HH:mm:ss", "yyyyMMdd", "dd/MM/yyyy", "'"])
                .prop_map(|s| lit_expr(Value::from(s)))
                .boxed()
        }
    };
    prop_oneof![2 => typed, 1 => inner].boxed()
}

/// A literal list of 3 to 9 strings or integers (INTEGER and LONG mixed), sometimes with a NULL:
/// the shape that IN looks up through a hash set.
fn homogeneous_list() -> BoxedStrategy<Expr> {
    let maybe_null = |v: BoxedStrategy<Value>| prop_oneof![6 => v, 1 => Just(Value::Null)].boxed();
    let strings = prop::sample::select(STRINGS).prop_map(Value::from).boxed();
    let ints =
        prop_oneof![(-5i32..5).prop_map(Value::Int), (-5i64..5).prop_map(Value::Long)].boxed();
    prop_oneof![
        prop::collection::vec(maybe_null(strings), 3..10),
        prop::collection::vec(maybe_null(ints), 3..10),
    ]
    .prop_map(|items| ex(ExprKind::Literal(Value::List(items))))
    .boxed()
}

fn call(inner: BoxedStrategy<Expr>) -> BoxedStrategy<Expr> {
    use Function::*;
    use Want::*;
    let shapes: Vec<(Function, Vec<Want>)> = vec![
        (SizeOf, vec![Container]),
        (Abs, vec![Any]),
        (Trim, vec![Str]),
        (Lower, vec![Str]),
        (Upper, vec![Str]),
        (Hash, vec![Container]),
        (SizeIs, vec![Container, Int]),
        (ContainsKey, vec![Container, Str]),
        (ContainsValue, vec![Container, Any]),
        (Filter, vec![List, Flags]),
        (If, vec![Any, Any, Any]),
        (Substring, vec![Str, Int]),
        (Substring, vec![Str, Int, Int]),
        (UnixTimestamp, vec![]),
        (UnixTimestamp, vec![Date]),
        (UnixTimestamp, vec![Date, DatePattern]),
    ];
    prop::sample::select(shapes)
        .prop_flat_map(move |(f, wants)| {
            let args: Vec<BoxedStrategy<Expr>> =
                wants.into_iter().map(|w| arg(w, inner.clone())).collect();
            args.prop_map(move |args| ex(ExprKind::Call { function: f, args }))
        })
        .boxed()
}

fn expr() -> impl Strategy<Value = Expr> {
    leaf().prop_recursive(4, 40, 3, |inner| {
        let unary = prop::sample::select(vec![UnaryOp::Not, UnaryOp::Negate]);
        let binary = prop::sample::select(vec![
            BinaryOp::Mul,
            BinaryOp::Div,
            BinaryOp::Mod,
            BinaryOp::Add,
            BinaryOp::Sub,
            BinaryOp::And,
            BinaryOp::Xor,
            BinaryOp::Or,
        ]);
        let cmp = prop::sample::select(vec![
            CompareOp::Eq,
            CompareOp::Ne,
            CompareOp::Lt,
            CompareOp::Le,
            CompareOp::Gt,
            CompareOp::Ge,
        ]);
        let quant = prop::option::of(prop::sample::select(vec![Quantifier::Any, Quantifier::All]));
        let i = inner.clone();
        prop_oneof![
            1 => (unary, i.clone()).prop_map(|(op, x)| ex(ExprKind::Unary { op, operand: bx(x) })),
            2 => (binary, i.clone(), i.clone()).prop_map(|(op, l, r)| ex(ExprKind::Binary {
                op,
                left: bx(l),
                right: bx(r)
            })),
            2 => (cmp, quant, i.clone(), i.clone()).prop_map(|(op, quantifier, l, r)| {
                ex(ExprKind::Compare { op, quantifier, left: bx(l), right: bx(r) })
            }),
            1 => (any::<bool>(), any::<bool>(), i.clone())
                .prop_flat_map({
                    let i = i.clone();
                    move |(negated, any, v)| {
                        pattern(i.clone(), any).prop_map(move |p| {
                            ex(ExprKind::Rlike { negated, any, value: bx(v.clone()), pattern: bx(p) })
                        })
                    }
                }),
            1 => (any::<bool>(), i.clone(), prop_oneof![
                prop::collection::vec(i.clone(), 0..4).prop_map(|xs| ex(ExprKind::List(xs))),
                homogeneous_list(),
                i.clone()
            ])
                .prop_map(|(negated, v, l)| ex(ExprKind::In { negated, value: bx(v), list: bx(l) })),
            1 => (any::<bool>(), i.clone(), i.clone(), i.clone()).prop_map(|(negated, v, lo, hi)| {
                ex(ExprKind::Between { negated, value: bx(v), low: bx(lo), high: bx(hi) })
            }),
            1 => (any::<bool>(), i.clone())
                .prop_map(|(negated, v)| ex(ExprKind::IsNull { negated, value: bx(v) })),
            3 => call(i.clone()),
            2 => (arg(Want::Castable, i.clone()), ty())
                .prop_map(|(v, to)| ex(ExprKind::Cast { value: bx(v), to })),
            1 => prop::collection::vec(i, 0..3).prop_map(|xs| ex(ExprKind::List(xs))),
        ]
    })
}

// ---------------------------------------------------------------------------------------------
// The properties.

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn compiled_evaluation_matches_the_reference(
        e in expr(),
        records in prop::collection::vec(record(), 1..4),
        now in prop_oneof![Just(0i64), Just(-1), Just(1_234_567_890_123), -5000i64..5000],
    ) {
        let compiled = CompiledExpr::compile(&e);
        if has_invalid_literal_regex(&e) {
            prop_assert!(matches!(compiled, Err(EngineError::Regex { .. })), "{e}: {compiled:?}");
            return Ok(());
        }
        let compiled = compiled.map_err(|err| TestCaseError::fail(format!("{e}: {err}")))?;
        let ctx = EvalContext::new(now);
        for r in &records {
            let expected = eval(&e, r, now);
            let got = compiled.eval(r, &ctx);
            prop_assert!(identical(&got, &expected),
                "{e}\nrecord {}\ncompiled  {got:?}\nreference {expected:?}", r.to_json());
            prop_assert!(identical(&compiled.eval_cow(r, &ctx), &expected));
            prop_assert_eq!(compiled.test(r, &ctx), expected == Value::Bool(true));
            prop_assert_eq!(compiled.eval_bool(r, &ctx), truth(&expected));
        }
    }
}

/// The reference interpreter is itself checked on a few hand-computed cases, so that a
/// disagreement points at the engine.
#[test]
fn the_reference_agrees_with_hand_computed_values() {
    let lit = |v: Value| ex(ExprKind::Literal(v));
    let r = Record::new();
    let add = ex(ExprKind::Binary {
        op: BinaryOp::Add,
        left: bx(lit(Value::Int(i32::MAX))),
        right: bx(lit(Value::Int(1))),
    });
    assert_eq!(eval(&add, &r, 0), Value::Null);
    let sub = ex(ExprKind::Call {
        function: Function::Substring,
        args: vec![lit(Value::from("hello")), lit(Value::Int(-3)), lit(Value::Int(2))],
    });
    assert_eq!(eval(&sub, &r, 0), Value::from("ll"));
    let neg = ex(ExprKind::Unary { op: UnaryOp::Negate, operand: bx(lit(Value::Double(0.0))) });
    assert!(matches!(eval(&neg, &r, 0), Value::Double(x) if x == 0.0 && x.is_sign_negative()));
    let rl = ex(ExprKind::Rlike {
        negated: false,
        any: false,
        value: bx(lit(Value::from("abc"))),
        pattern: bx(lit(Value::from("b"))),
    });
    assert_eq!(eval(&rl, &r, 0), Value::Bool(false));
    assert_eq!(fnv("a"), 0xaf63dc4c8601ec8cu64 as i64);
}
