//! Compiling an [`Expr`] into a [`Node`] tree: operators lowered to a few node kinds (`IN` is
//! `= ANY`, the `NOT` forms wrap their positive form), literal regular expressions compiled,
//! constant field indexes resolved, function arities checked, and sub-expressions that depend on
//! neither the record nor the clock folded into constants.

use super::functions;
use super::node::{ConstSet, FieldRef, Node, Pattern, Step};
use super::ops::ArithOp;
use super::regex_cache::compile_literal;
use super::EvalContext;
use crate::EngineError;
use needle_query::ast::{
    Accessor, BinaryOp, CompareOp, Expr, ExprKind, Field, Quantifier, UnaryOp,
};
use needle_record::{Record, Value};

fn boxed(e: &Expr) -> Result<Box<Node>, EngineError> {
    Ok(Box::new(compile(e)?))
}

fn not_if(negated: bool, node: Node) -> Node {
    if negated {
        fold(Node::Not(Box::new(node)))
    } else {
        node
    }
}

/// Compiles an expression (see the module doc).
pub(crate) fn compile(expr: &Expr) -> Result<Node, EngineError> {
    let node = match &expr.kind {
        ExprKind::Literal(v) => Node::Const(v.clone()),
        ExprKind::List(items) => Node::List(items.iter().map(compile).collect::<Result<_, _>>()?),
        ExprKind::Now => Node::Now,
        ExprKind::Field(f) => Node::Field(compile_field(f)?),
        ExprKind::Unary { op: UnaryOp::Not, operand } => Node::Not(boxed(operand)?),
        ExprKind::Unary { op: UnaryOp::Negate, operand } => Node::Negate(boxed(operand)?),
        ExprKind::Binary { op, left, right } => {
            if matches!(op, BinaryOp::And | BinaryOp::Or) {
                return logic_chain(expr, *op);
            }
            let (l, r) = (boxed(left)?, boxed(right)?);
            match op {
                BinaryOp::And | BinaryOp::Or => unreachable!("handled above"),
                BinaryOp::Xor => Node::Xor(l, r),
                BinaryOp::Add => Node::Arith(ArithOp::Add, l, r),
                BinaryOp::Sub => Node::Arith(ArithOp::Sub, l, r),
                BinaryOp::Mul => Node::Arith(ArithOp::Mul, l, r),
                BinaryOp::Div => Node::Arith(ArithOp::Div, l, r),
                BinaryOp::Mod => Node::Arith(ArithOp::Rem, l, r),
            }
        }
        ExprKind::Compare { op, quantifier: None, left, right } => {
            Node::Compare(*op, boxed(left)?, boxed(right)?)
        }
        ExprKind::Compare { op, quantifier: Some(q), left, right } => {
            Node::Quantified(*op, *q, boxed(left)?, boxed(right)?)
        }
        ExprKind::Rlike { negated, any, value, pattern } => {
            let value = boxed(value)?;
            let pattern = match (compile(pattern)?, any) {
                (Node::Const(Value::String(p)), false) => Pattern::Static(compile_literal(&p)?),
                (Node::Const(Value::List(items)), true) => Pattern::StaticAny(
                    items
                        .iter()
                        .map(|p| match p {
                            Value::String(p) => compile_literal(p).map(Some),
                            _ => Ok(None),
                        })
                        .collect::<Result<_, _>>()?,
                ),
                (other, _) => Pattern::Dynamic(Box::new(other)),
            };
            not_if(*negated, fold(Node::Rlike { any: *any, value, pattern: Box::new(pattern) }))
        }
        ExprKind::In { negated, value, list } => {
            let (value, list) = (boxed(value)?, boxed(list)?);
            let node = match (&*list, value.is_const()) {
                (Node::Const(l @ Value::List(items)), false) => match ConstSet::build(items) {
                    Some((set, has_null)) => Node::InSet {
                        value,
                        set: Box::new(set),
                        has_null,
                        list: Box::new(l.clone()),
                    },
                    None => Node::Quantified(CompareOp::Eq, Quantifier::Any, value, list),
                },
                _ => Node::Quantified(CompareOp::Eq, Quantifier::Any, value, list),
            };
            not_if(*negated, fold(node))
        }
        ExprKind::Between { negated, value, low, high } => {
            not_if(*negated, fold(Node::Between(boxed(value)?, boxed(low)?, boxed(high)?)))
        }
        ExprKind::IsNull { negated, value } => not_if(*negated, fold(Node::IsNull(boxed(value)?))),
        ExprKind::Call { function, args } => {
            let (min, max) = functions::arity(*function);
            if args.len() < min || args.len() > max {
                return Err(EngineError::Unsupported(format!(
                    "{function} takes {} arguments, not {}",
                    if min == max { min.to_string() } else { format!("{min} to {max}") },
                    args.len()
                )));
            }
            Node::Call(*function, args.iter().map(compile).collect::<Result<_, _>>()?)
        }
        ExprKind::Cast { value, to } => Node::Cast(boxed(value)?, to.clone()),
        ExprKind::Aggregate(a) => {
            return Err(EngineError::Unsupported(format!(
                "the aggregate {a} inside an expression (the plan must replace it with its column)"
            )))
        }
    };
    Ok(fold(node))
}

/// Compiles a chain of one logical operator (`a AND b AND c`, nested either way) into one n-ary
/// node, walking the chain with an explicit stack. Constant operands that cannot change the
/// result (TRUE in AND, FALSE in OR) are dropped; a constant one that decides it (FALSE in AND,
/// TRUE in OR) makes the whole chain that constant.
fn logic_chain(expr: &Expr, op: BinaryOp) -> Result<Node, EngineError> {
    let (decides, neutral) = match op {
        BinaryOp::And => (false, true),
        _ => (true, false),
    };
    let mut operands = Vec::new();
    let mut stack = vec![expr];
    while let Some(e) = stack.pop() {
        match &e.kind {
            ExprKind::Binary { op: o, left, right } if *o == op => {
                stack.push(right);
                stack.push(left);
            }
            _ => match compile(e)? {
                Node::Const(Value::Bool(b)) if b == neutral => {}
                Node::Const(Value::Bool(b)) if b == decides => {
                    operands.push(Node::Const(Value::Bool(b)))
                }
                other => operands.push(other),
            },
        }
    }
    if operands.iter().any(|n| matches!(n, Node::Const(Value::Bool(b)) if *b == decides)) {
        return Ok(Node::Const(Value::Bool(decides)));
    }
    let node = if op == BinaryOp::And { Node::All(operands) } else { Node::Any(operands) };
    Ok(fold(node))
}

/// Compiles a field reference; an index computed from constants becomes a plain key or index.
pub(crate) fn compile_field(f: &Field) -> Result<FieldRef, EngineError> {
    let path = f
        .path
        .iter()
        .map(|a| {
            Ok(match a {
                Accessor::Key(k) => Step::Key(k.clone()),
                Accessor::Index(i) => Step::Index(*i),
                Accessor::Expr(e) => match compile(e)? {
                    Node::Const(Value::String(k)) => Step::Key(k),
                    Node::Const(Value::Int(i)) => Step::Index(i as i64),
                    Node::Const(Value::Long(i)) => Step::Index(i),
                    other => Step::Expr(other),
                },
            })
        })
        .collect::<Result<_, EngineError>>()?;
    Ok(FieldRef::new(&f.name, path, f.hint.clone()))
}

/// True when the node can be evaluated once, now: every input is a constant and nothing reads
/// the record or the clock.
fn foldable(node: &Node) -> bool {
    match node {
        Node::Const(_) | Node::Now | Node::Field(_) => false,
        Node::List(items) | Node::All(items) | Node::Any(items) => items.iter().all(Node::is_const),
        Node::Negate(n) | Node::Not(n) | Node::IsNull(n) | Node::Cast(n, _) => n.is_const(),
        Node::InSet { value, .. } => value.is_const(),
        Node::Arith(_, l, r)
        | Node::Xor(l, r)
        | Node::Compare(_, l, r)
        | Node::Quantified(_, _, l, r) => l.is_const() && r.is_const(),
        Node::Between(v, l, h) => v.is_const() && l.is_const() && h.is_const(),
        Node::Rlike { value, pattern, .. } => {
            value.is_const()
                && match &**pattern {
                    Pattern::Static(_) | Pattern::StaticAny(_) => true,
                    Pattern::Dynamic(p) => p.is_const(),
                }
        }
        Node::Call(f, args) => {
            functions::is_pure(*f, args.len()) && args.iter().all(Node::is_const)
        }
    }
}

/// Replaces a foldable node by its value.
fn fold(node: Node) -> Node {
    if foldable(&node) {
        let value = node.eval(&Record::new(), &EvalContext::default()).into_owned();
        Node::Const(value)
    } else {
        node
    }
}
