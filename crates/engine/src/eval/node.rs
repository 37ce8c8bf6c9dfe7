//! The compiled form of an expression ([`Node`]) and its per-record evaluation. Values are passed
//! as `Cow` so that field lookups and literals are borrowed, not copied; boolean contexts go
//! through [`Node::eval_bool`], which never builds a `Value`.

use super::ops::{self, ArithOp};
use super::regex_cache::{self, LiteralRegex};
use super::{cast, functions, EvalContext};
use needle_query::ast::{CompareOp, Function, Quantifier};
use needle_record::{Record, Type, Value};
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

static NULL: Value = Value::Null;

/// One step of a field path.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    Key(String),
    Index(i64),
    Expr(Node),
}

/// A compiled field reference.
///
/// `slot` is an inline cache: the position in the record where the top-level field was last
/// found. Records from one producer keep their fields in one order, so checking that slot's key
/// (a string comparison) usually replaces hashing the name. It is a relaxed atomic, written only
/// when the guess misses, so sharing it between threads is safe and costs nothing when layouts
/// agree; a wrong guess only costs the normal lookup.
#[derive(Debug)]
pub(crate) struct FieldRef {
    /// Shared by the clones of this reference (the matching index keeps some).
    pub name: Arc<str>,
    pub path: Vec<Step>,
    pub hint: Option<Type>,
    pub slot: AtomicUsize,
}

impl Clone for FieldRef {
    fn clone(&self) -> Self {
        FieldRef {
            name: self.name.clone(),
            path: self.path.clone(),
            hint: self.hint.clone(),
            slot: AtomicUsize::new(self.slot.load(Ordering::Relaxed)),
        }
    }
}

impl FieldRef {
    pub fn new(name: &str, path: Vec<Step>, hint: Option<Type>) -> Self {
        FieldRef { name: name.into(), path, hint, slot: AtomicUsize::new(usize::MAX) }
    }

    /// The top-level field's value, through the slot cache.
    fn top<'a>(&self, record: &'a Record) -> Option<&'a Value> {
        let fields = record.fields();
        match fields.get_index(self.slot.load(Ordering::Relaxed)) {
            Some((k, v)) if **k == *self.name => Some(v),
            _ => {
                let (i, _, v) = fields.get_full(&*self.name)?;
                self.slot.store(i, Ordering::Relaxed);
                Some(v)
            }
        }
    }

    pub fn lookup<'a>(&'a self, record: &'a Record, ctx: &EvalContext) -> Cow<'a, Value> {
        let Some(mut current) = self.top(record) else {
            return Cow::Borrowed(&NULL);
        };
        for step in &self.path {
            let next = match step {
                Step::Key(k) => ops::get_key(current, k),
                Step::Index(i) => ops::get_index(current, *i),
                Step::Expr(e) => match &*e.eval(record, ctx) {
                    Value::Int(i) => ops::get_index(current, *i as i64),
                    Value::Long(i) => ops::get_index(current, *i),
                    Value::String(k) => ops::get_key(current, k),
                    _ => None,
                },
            };
            match next {
                Some(v) => current = v,
                None => return Cow::Borrowed(&NULL),
            }
        }
        match &self.hint {
            Some(t) if !cast::conforms(current, t) => Cow::Owned(cast::cast(current, t)),
            _ => Cow::Borrowed(current),
        }
    }
}

/// The pattern side of RLIKE.
#[derive(Debug, Clone)]
pub(crate) enum Pattern {
    /// A literal pattern, compiled at compile time.
    Static(LiteralRegex),
    /// A literal list of patterns for RLIKE ANY; `None` for an element that is not a string.
    StaticAny(Vec<Option<LiteralRegex>>),
    /// A pattern (or list of patterns) computed per record.
    Dynamic(Box<Node>),
}

/// The smallest constant IN list that gets a hash set (smaller ones are scanned).
pub(crate) const IN_SET_MIN: usize = 4;

/// The hashed elements of a constant IN list.
#[derive(Debug, Clone)]
pub(crate) enum ConstSet {
    Strings(HashSet<String>),
    Integers(HashSet<i64>),
}

impl ConstSet {
    /// The set for a constant list, when it qualifies (see [`Node::InSet`]); and whether the list
    /// holds a NULL.
    pub fn build(items: &[Value]) -> Option<(ConstSet, bool)> {
        if items.len() < IN_SET_MIN {
            return None;
        }
        let has_null = items.iter().any(Value::is_null);
        let mut values = items.iter().filter(|v| !v.is_null()).peekable();
        let set = match values.peek()? {
            Value::String(_) => ConstSet::Strings(
                values.map(|v| v.as_str().map(str::to_owned)).collect::<Option<_>>()?,
            ),
            Value::Int(_) | Value::Long(_) => {
                ConstSet::Integers(values.map(Value::as_i64).collect::<Option<_>>()?)
            }
            _ => return None,
        };
        Some((set, has_null))
    }
}

/// A compiled expression node.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Const(Value),
    Now,
    Field(FieldRef),
    List(Vec<Node>),
    Negate(Box<Node>),
    Not(Box<Node>),
    Arith(ArithOp, Box<Node>, Box<Node>),
    /// `a AND b AND ...`, flattened: FALSE if one is FALSE (evaluation stops there), else NULL
    /// if one is NULL or not a boolean, else TRUE.
    All(Vec<Node>),
    /// `a OR b OR ...`, flattened: TRUE if one is TRUE (evaluation stops there), else NULL if one
    /// is NULL or not a boolean, else FALSE.
    Any(Vec<Node>),
    Xor(Box<Node>, Box<Node>),
    Compare(CompareOp, Box<Node>, Box<Node>),
    Quantified(CompareOp, Quantifier, Box<Node>, Box<Node>),
    /// `value IN constant list` where the list has at least [`IN_SET_MIN`] elements, all strings or
    /// all INTEGER/LONG (NULLs allowed, at least one non-NULL): a hash lookup with the same
    /// result as `value = ANY list`. `list` is the constant list, for float operands (compared by
    /// value, so they take the linear path).
    InSet {
        value: Box<Node>,
        /// Boxed, like `list` and RLIKE's pattern: the large, rare payloads stay out of every
        /// other node's size.
        set: Box<ConstSet>,
        has_null: bool,
        list: Box<Value>,
    },
    Rlike {
        any: bool,
        value: Box<Node>,
        pattern: Box<Pattern>,
    },
    Between(Box<Node>, Box<Node>, Box<Node>),
    IsNull(Box<Node>),
    Call(Function, Vec<Node>),
    Cast(Box<Node>, Type),
}

fn boolean<'a>(b: Option<bool>) -> Cow<'a, Value> {
    Cow::Owned(b.map_or(Value::Null, Value::Bool))
}

/// Evaluates a function call whose argument count was checked at compile time: the arguments
/// are evaluated here so that `IF` evaluates only the branch it chooses.
fn call<'a>(
    f: Function,
    args: &'a [Node],
    record: &'a Record,
    ctx: &EvalContext,
) -> Cow<'a, Value> {
    let arg = |i: usize| args[i].eval(record, ctx);
    match f {
        Function::If => match &*arg(0) {
            Value::Bool(true) => arg(1),
            Value::Bool(false) | Value::Null => arg(2),
            _ => Cow::Borrowed(&NULL),
        },
        Function::UnixTimestamp if args.is_empty() => {
            Cow::Owned(Value::Long(ctx.now_ms.div_euclid(1000)))
        }
        // At most three arguments: evaluated into locals, no allocation for the argument list.
        _ => Cow::Owned(match args.len() {
            0 => functions::apply(f, &[]),
            1 => functions::apply(f, &[&arg(0)]),
            2 => functions::apply(f, &[&arg(0), &arg(1)]),
            _ => functions::apply(f, &[&arg(0), &arg(1), &arg(2)]),
        }),
    }
}

impl Node {
    /// True when this node's value does not depend on the record or the context.
    pub fn is_const(&self) -> bool {
        matches!(self, Node::Const(_))
    }

    pub fn eval<'a>(&'a self, record: &'a Record, ctx: &EvalContext) -> Cow<'a, Value> {
        match self {
            Node::Const(v) => Cow::Borrowed(v),
            Node::Now => Cow::Owned(Value::Long(ctx.now_ms)),
            Node::Field(f) => f.lookup(record, ctx),
            Node::List(items) => Cow::Owned(Value::List(
                items.iter().map(|n| n.eval(record, ctx).into_owned()).collect(),
            )),
            Node::Negate(n) => Cow::Owned(ops::negate(&n.eval(record, ctx))),
            Node::Arith(op, l, r) => {
                Cow::Owned(ops::arith(*op, &l.eval(record, ctx), &r.eval(record, ctx)))
            }
            Node::Not(_)
            | Node::All(_)
            | Node::Any(_)
            | Node::Xor(..)
            | Node::Compare(..)
            | Node::Quantified(..)
            | Node::InSet { .. }
            | Node::Rlike { .. }
            | Node::Between(..)
            | Node::IsNull(_) => boolean(self.eval_bool(record, ctx)),
            Node::Call(f, args) => call(*f, args, record, ctx),
            Node::Cast(n, t) => {
                let v = n.eval(record, ctx);
                if cast::conforms(&v, t) {
                    v
                } else {
                    Cow::Owned(cast::cast(&v, t))
                }
            }
        }
    }

    /// The node's value as three-valued logic: `None` for NULL and for non-booleans.
    pub fn eval_bool(&self, record: &Record, ctx: &EvalContext) -> Option<bool> {
        match self {
            Node::Not(n) => n.eval_bool(record, ctx).map(|b| !b),
            Node::All(items) => {
                let mut null = false;
                for item in items {
                    match item.eval_bool(record, ctx) {
                        Some(false) => return Some(false),
                        Some(true) => {}
                        None => null = true,
                    }
                }
                (!null).then_some(true)
            }
            Node::Any(items) => {
                let mut null = false;
                for item in items {
                    match item.eval_bool(record, ctx) {
                        Some(true) => return Some(true),
                        Some(false) => {}
                        None => null = true,
                    }
                }
                if null {
                    None
                } else {
                    Some(false)
                }
            }
            Node::Xor(l, r) => {
                let left = l.eval_bool(record, ctx)?;
                Some(left ^ r.eval_bool(record, ctx)?)
            }
            Node::Compare(op, l, r) => {
                ops::compare_op(*op, &l.eval(record, ctx), &r.eval(record, ctx))
            }
            Node::Quantified(op, q, l, r) => {
                ops::quantified(*op, *q, &l.eval(record, ctx), &r.eval(record, ctx))
            }
            Node::InSet { value, set, has_null, list } => {
                let v = value.eval(record, ctx);
                let found = match (&*v, &**set) {
                    (Value::String(x), ConstSet::Strings(set)) => set.contains(x.as_str()),
                    (Value::Int(x), ConstSet::Integers(set)) => set.contains(&(*x as i64)),
                    (Value::Long(x), ConstSet::Integers(set)) => set.contains(x),
                    (Value::Float(_) | Value::Double(_), ConstSet::Integers(_)) => {
                        return ops::quantified(CompareOp::Eq, Quantifier::Any, &v, list)
                    }
                    // NULL, or a type that equals no element (the list has a non-NULL element).
                    _ => return None,
                };
                if found {
                    Some(true)
                } else if *has_null {
                    None
                } else {
                    Some(false)
                }
            }
            Node::Rlike { any, value, pattern } => {
                let value = value.eval(record, ctx);
                let Value::String(s) = &*value else {
                    return None;
                };
                match &**pattern {
                    Pattern::Static(re) => Some(re.is_match(s)),
                    Pattern::StaticAny(res) => {
                        ops::any3(res.iter().map(|re| re.as_ref().map(|re| re.is_match(s))))
                    }
                    Pattern::Dynamic(p) => {
                        let p = p.eval(record, ctx);
                        if *any {
                            let list = p.as_list()?;
                            ops::any3(list.iter().map(|p| regex_cache::dynamic_match(p, s)))
                        } else {
                            regex_cache::dynamic_match(&p, s)
                        }
                    }
                }
            }
            Node::Between(v, lo, hi) => {
                let v = v.eval(record, ctx);
                let low = ops::compare_op(CompareOp::Ge, &v, &lo.eval(record, ctx));
                if low == Some(false) {
                    return Some(false);
                }
                match ops::compare_op(CompareOp::Le, &v, &hi.eval(record, ctx)) {
                    Some(false) => Some(false),
                    Some(true) => low,
                    None => None,
                }
            }
            Node::IsNull(n) => Some(n.eval(record, ctx).is_null()),
            other => other.eval(record, ctx).as_bool(),
        }
    }
}
