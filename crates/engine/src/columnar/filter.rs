//! [`Filter`]: a WHERE clause evaluated over whole columns in SQL's three-valued logic, exactly
//! as the engine evaluates it record by record (numbers compare across numeric types, strings
//! by bytes, NULL and values of types that do not compare make a comparison NULL). Only what
//! can be evaluated that way is accepted: AND, OR, NOT, comparisons of a top-level field with a
//! literal, BETWEEN and IN of literals, IS NULL, a field or a literal as a boolean. Anything else
//! (functions, nested fields, arithmetic) is not a [`Filter`], and a JSON column met while
//! evaluating one makes the evaluation give up (`None`): the caller then reads records.

use super::view::{ColumnView, Columns};
use arrow_array::Array;
use needle_query::ast::{BinaryOp, CompareOp, Expr, ExprKind, UnaryOp};
use needle_record::Value;
use std::cmp::Ordering;

/// A WHERE clause that can be evaluated over whole columns (see the module doc).
#[derive(Debug, Clone)]
pub struct Filter {
    expr: Expr,
    fields: Vec<String>,
}

impl Filter {
    /// `None` when `expr` holds something the column path cannot evaluate exactly.
    pub fn compile(expr: &Expr) -> Option<Filter> {
        let mut fields = Vec::new();
        supported(expr, &mut fields).then(|| Filter { expr: expr.clone(), fields })
    }

    /// The top-level fields the filter reads.
    pub fn fields(&self) -> &[String] {
        &self.fields
    }

    /// Which of the batch's rows make the filter TRUE; `None` when a column it reads cannot be
    /// evaluated here (JSON text).
    pub fn rows(&self, columns: &Columns<'_>) -> Option<Vec<bool>> {
        Some(eval(&self.expr, columns)?.t)
    }
}

/// A top-level field as it is (no path, no type hint): its name, noted in `fields`.
fn field<'e>(expr: &'e Expr, fields: &mut Vec<String>) -> Option<&'e str> {
    match &expr.kind {
        ExprKind::Field(f) if f.path.is_empty() && f.hint.is_none() => {
            if !fields.contains(&f.name) {
                fields.push(f.name.clone());
            }
            Some(f.name.as_str())
        }
        _ => None,
    }
}

/// A literal that is not a list or a map.
fn scalar(expr: &Expr) -> Option<&Value> {
    match &expr.kind {
        ExprKind::Literal(Value::List(_) | Value::Map(_)) => None,
        ExprKind::Literal(v) => Some(v),
        _ => None,
    }
}

/// The items of an IN list of scalar literals (`(a, b)` or a literal list).
fn list_items(expr: &Expr) -> Option<Vec<&Value>> {
    match &expr.kind {
        ExprKind::List(items) => items.iter().map(scalar).collect(),
        ExprKind::Literal(Value::List(items)) => items
            .iter()
            .map(|v| (!matches!(v, Value::List(_) | Value::Map(_))).then_some(v))
            .collect(),
        _ => None,
    }
}

fn supported(expr: &Expr, fields: &mut Vec<String>) -> bool {
    match &expr.kind {
        ExprKind::Literal(Value::Bool(_) | Value::Null) => true,
        ExprKind::Field(_) => field(expr, fields).is_some(),
        ExprKind::Binary { op: BinaryOp::And | BinaryOp::Or, left, right } => {
            supported(left, fields) && supported(right, fields)
        }
        ExprKind::Unary { op: UnaryOp::Not, operand } => supported(operand, fields),
        ExprKind::Compare { quantifier: None, left, right, .. } => {
            (scalar(right).is_some() && field(left, fields).is_some())
                || (scalar(left).is_some() && field(right, fields).is_some())
        }
        ExprKind::Between { value, low, high, .. } => {
            scalar(low).is_some() && scalar(high).is_some() && field(value, fields).is_some()
        }
        ExprKind::In { value, list, .. } => {
            list_items(list).is_some() && field(value, fields).is_some()
        }
        ExprKind::IsNull { value, .. } => field(value, fields).is_some(),
        _ => false,
    }
}

/// The rows where an expression is TRUE, and those where it is FALSE (neither: NULL).
struct Truth {
    t: Vec<bool>,
    f: Vec<bool>,
}

impl Truth {
    fn null(rows: usize) -> Self {
        Truth { t: vec![false; rows], f: vec![false; rows] }
    }

    fn constant(rows: usize, value: bool) -> Self {
        Truth { t: vec![value; rows], f: vec![!value; rows] }
    }

    fn not(self) -> Self {
        Truth { t: self.f, f: self.t }
    }

    fn and(mut self, other: Truth) -> Self {
        for (a, b) in self.t.iter_mut().zip(&other.t) {
            *a &= *b;
        }
        for (a, b) in self.f.iter_mut().zip(&other.f) {
            *a |= *b;
        }
        self
    }

    fn or(self, other: Truth) -> Self {
        self.not().and(other.not()).not()
    }
}

fn eval(expr: &Expr, columns: &Columns<'_>) -> Option<Truth> {
    let rows = columns.rows();
    let mut ignored = Vec::new();
    Some(match &expr.kind {
        ExprKind::Literal(Value::Bool(b)) => Truth::constant(rows, *b),
        ExprKind::Literal(Value::Null) => Truth::null(rows),
        ExprKind::Field(_) => {
            let name = field(expr, &mut ignored)?;
            match columns.get(name) {
                ColumnView::Json(_) | ColumnView::Unreadable => return None,
                ColumnView::Bool(a) => {
                    let mut truth = Truth::null(rows);
                    for i in 0..rows {
                        if a.is_valid(i) {
                            let v = a.value(i);
                            truth.t[i] = v;
                            truth.f[i] = !v;
                        }
                    }
                    truth
                }
                // not a BOOLEAN: NULL as a condition
                _ => Truth::null(rows),
            }
        }
        ExprKind::Binary { op: BinaryOp::And, left, right } => {
            eval(left, columns)?.and(eval(right, columns)?)
        }
        ExprKind::Binary { op: BinaryOp::Or, left, right } => {
            eval(left, columns)?.or(eval(right, columns)?)
        }
        ExprKind::Unary { op: UnaryOp::Not, operand } => eval(operand, columns)?.not(),
        ExprKind::Compare { op, quantifier: None, left, right } => {
            let (name, op, literal) = match (field(left, &mut ignored), scalar(right)) {
                (Some(name), Some(literal)) => (name, *op, literal),
                _ => (field(right, &mut ignored)?, op.flipped(), scalar(left)?),
            };
            compare(columns.get(name), rows, op, literal)?
        }
        ExprKind::Between { negated, value, low, high } => {
            let col = columns.get(field(value, &mut ignored)?);
            let truth = compare(col, rows, CompareOp::Ge, scalar(low)?)?.and(compare(
                col,
                rows,
                CompareOp::Le,
                scalar(high)?,
            )?);
            if *negated {
                truth.not()
            } else {
                truth
            }
        }
        ExprKind::In { negated, value, list } => {
            let col = columns.get(field(value, &mut ignored)?);
            let mut truth = Truth::constant(rows, false);
            for item in list_items(list)? {
                truth = truth.or(compare(col, rows, CompareOp::Eq, item)?);
            }
            if *negated {
                truth.not()
            } else {
                truth
            }
        }
        ExprKind::IsNull { negated, value } => {
            let nulls: Vec<bool> = match columns.get(field(value, &mut ignored)?) {
                ColumnView::Json(_) | ColumnView::Unreadable => return None,
                ColumnView::Missing => vec![true; rows],
                ColumnView::Bool(a) => (0..rows).map(|i| a.is_null(i)).collect(),
                ColumnView::Int(a) => (0..rows).map(|i| a.is_null(i)).collect(),
                ColumnView::Long(a) => (0..rows).map(|i| a.is_null(i)).collect(),
                ColumnView::Float(a) => (0..rows).map(|i| a.is_null(i)).collect(),
                ColumnView::Double(a) => (0..rows).map(|i| a.is_null(i)).collect(),
                ColumnView::Text(a) => (0..rows).map(|i| a.is_null(i)).collect(),
                ColumnView::Dictionary(keys, _) => (0..rows).map(|i| keys.is_null(i)).collect(),
            };
            let not_nulls = nulls.iter().map(|n| !n).collect();
            let truth = Truth { t: nulls, f: not_nulls };
            if *negated {
                truth.not()
            } else {
                truth
            }
        }
        _ => return None,
    })
}

/// Does `a op b` hold, given how `a` orders against `b`?
fn holds(op: CompareOp, ordering: Ordering) -> bool {
    match op {
        CompareOp::Eq => ordering == Ordering::Equal,
        CompareOp::Ne => ordering != Ordering::Equal,
        CompareOp::Lt => ordering == Ordering::Less,
        CompareOp::Le => ordering != Ordering::Greater,
        CompareOp::Gt => ordering == Ordering::Greater,
        CompareOp::Ge => ordering != Ordering::Less,
    }
}

/// `column op literal` for every row: TRUE or FALSE where the value and the literal compare,
/// NULL where the value is NULL or of a type that does not compare with the literal's.
fn compare(col: ColumnView<'_>, rows: usize, op: CompareOp, literal: &Value) -> Option<Truth> {
    let mut truth = Truth::null(rows);
    let mut set = |i: usize, ordering: Option<Ordering>| {
        if let Some(o) = ordering {
            let h = holds(op, o);
            truth.t[i] = h;
            truth.f[i] = !h;
        }
    };
    let long = match literal {
        Value::Int(v) => Some(i64::from(*v)),
        Value::Long(v) => Some(*v),
        _ => None,
    };
    let float = literal.as_f64().filter(|_| literal.is_numeric());
    match (col, literal) {
        (ColumnView::Json(_) | ColumnView::Unreadable, _) => return None,
        (ColumnView::Missing, _) | (_, Value::Null) => {}
        (ColumnView::Long(a), _) if long.is_some() => {
            let l = long.unwrap_or_default();
            compare_numbers(&mut truth, a.values(), op, l, |v| v, |_| true);
            clear_nulls(&mut truth, a);
        }
        (ColumnView::Int(a), _) if long.is_some() => {
            let l = long.unwrap_or_default();
            compare_numbers(&mut truth, a.values(), op, l, i64::from, |_| true);
            clear_nulls(&mut truth, a);
        }
        // a literal that is NaN orders against nothing: NULL in every row
        (_, _) if float.is_some_and(f64::is_nan) => {}
        (ColumnView::Long(a), _) if float.is_some() => {
            let l = float.unwrap_or_default();
            compare_numbers(&mut truth, a.values(), op, l, |v| v as f64, |_| true);
            clear_nulls(&mut truth, a);
        }
        (ColumnView::Int(a), _) if float.is_some() => {
            let l = float.unwrap_or_default();
            compare_numbers(&mut truth, a.values(), op, l, f64::from, |_| true);
            clear_nulls(&mut truth, a);
        }
        (ColumnView::Float(a), _) if float.is_some() => {
            let l = float.unwrap_or_default();
            compare_numbers(&mut truth, a.values(), op, l, f64::from, |v| !v.is_nan());
            clear_nulls(&mut truth, a);
        }
        (ColumnView::Double(a), _) if float.is_some() => {
            let l = float.unwrap_or_default();
            compare_numbers(&mut truth, a.values(), op, l, |v| v, |v| !v.is_nan());
            clear_nulls(&mut truth, a);
        }
        (ColumnView::Text(a), Value::String(s)) => {
            for i in 0..rows {
                if a.is_valid(i) {
                    set(i, Some(a.value(i).cmp(s.as_str())));
                }
            }
        }
        (ColumnView::Dictionary(keys, values), Value::String(s)) => {
            let by_key: Vec<Option<Ordering>> = (0..values.len())
                .map(|k| values.is_valid(k).then(|| values.value(k).cmp(s.as_str())))
                .collect();
            for i in 0..rows {
                if keys.is_valid(i) {
                    set(i, usize::try_from(keys.value(i)).ok().and_then(|k| by_key[k]));
                }
            }
        }
        (ColumnView::Bool(a), Value::Bool(b)) => {
            for i in 0..rows {
                if a.is_valid(i) {
                    set(i, Some(a.value(i).cmp(b)));
                }
            }
        }
        // types that do not compare: NULL in every row
        _ => {}
    }
    Some(truth)
}

/// `value op literal` into `truth` for every row, one comparison a row and no branch (each
/// operator its own loop, which the compiler unrolls and vectorizes): TRUE or FALSE where
/// `known` says the value orders at all (NaN does not: NULL, as `partial_cmp` has it), NULL
/// otherwise. NULL rows are the caller's to clear ([`clear_nulls`]).
fn compare_numbers<T: Copy, K: PartialOrd + Copy>(
    truth: &mut Truth,
    values: &[T],
    op: CompareOp,
    literal: K,
    key: impl Fn(T) -> K + Copy,
    known: impl Fn(K) -> bool + Copy,
) {
    match op {
        CompareOp::Eq => fill(truth, values, key, known, |k| k == literal),
        CompareOp::Ne => fill(truth, values, key, known, |k| k != literal),
        CompareOp::Lt => fill(truth, values, key, known, |k| k < literal),
        CompareOp::Le => fill(truth, values, key, known, |k| k <= literal),
        CompareOp::Gt => fill(truth, values, key, known, |k| k > literal),
        CompareOp::Ge => fill(truth, values, key, known, |k| k >= literal),
    }
}

/// [`compare_numbers`]' loop for one operator.
#[inline(always)]
fn fill<T: Copy, K: Copy>(
    truth: &mut Truth,
    values: &[T],
    key: impl Fn(T) -> K,
    known: impl Fn(K) -> bool,
    test: impl Fn(K) -> bool,
) {
    for ((t, f), v) in truth.t.iter_mut().zip(truth.f.iter_mut()).zip(values) {
        let k = key(*v);
        let (known, holds) = (known(k), test(k));
        *t = known & holds;
        *f = known & !holds;
    }
}

/// Makes the NULL rows of a column NULL in `truth` (neither TRUE nor FALSE).
fn clear_nulls(truth: &mut Truth, column: &dyn Array) {
    let Some(nulls) = column.nulls().filter(|n| n.null_count() > 0) else { return };
    for ((t, f), valid) in truth.t.iter_mut().zip(truth.f.iter_mut()).zip(nulls.iter()) {
        *t &= valid;
        *f &= valid;
    }
}

/// Where the stretch of `value`s from `from` ends: 32 rows at a time (one vector compare)
/// while they are all `value`, then row by row. For cutting a filter's rows into the runs it
/// kept and those it did not, and a sorted key column into its runs.
pub fn stretch_end<T: Copy + PartialEq>(rows: &[T], from: usize, value: T) -> usize {
    const LANES: usize = 32;
    let mut i = from;
    while let Some(chunk) = rows.get(i..i + LANES) {
        if !chunk.iter().fold(true, |all, row| all & (*row == value)) {
            break;
        }
        i += LANES;
    }
    while i < rows.len() && rows[i] == value {
        i += 1;
    }
    i
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use arrow_array::{Int64Array, RecordBatch};

    /// The WHERE of a query as a column filter (the summarizer's tests use it too).
    pub(crate) fn filter(text: &str) -> Option<Filter> {
        let query = format!("SELECT * FROM STREAM() WHERE {text}");
        let plan = needle_query::compile(&query, &needle_query::QueryConfig::default()).unwrap();
        Filter::compile(plan.stage.filter.as_ref().unwrap())
    }

    #[test]
    fn only_what_columns_evaluate_exactly_is_a_filter() {
        let f = filter("a > 1 AND (b = 'x' OR NOT c IS NULL) AND d BETWEEN (1, 2) AND e IN (1, 2)");
        assert_eq!(f.unwrap().fields(), ["a", "b", "c", "d", "e"]);
        assert!(filter("flag").is_some());
        assert!(filter("2 < a").is_some());
        for computed in ["SIZEOF(a) > 1", "m.x = 1", "a + 1 > 2", "a > b", "a RLIKE 'x.*'"] {
            assert!(filter(computed).is_none(), "{computed}");
        }
    }

    #[test]
    fn a_comparison_is_null_where_the_value_is_null_or_of_another_type() {
        let batch = RecordBatch::try_from_iter([(
            "a",
            std::sync::Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])) as _,
        )])
        .unwrap();
        let columns = Columns::of(&batch, &[]);
        let rows = |text: &str| filter(text).unwrap().rows(&columns).unwrap();
        assert_eq!(rows("a >= 2"), [false, false, true]);
        assert_eq!(rows("NOT a >= 2"), [true, false, false]);
        assert_eq!(rows("a > 1.5"), [false, false, true]);
        assert_eq!(rows("NOT a = 'x'"), [false, false, false]);
        assert_eq!(rows("a IS NULL OR missing IS NULL"), [true, true, true]);
        assert_eq!(rows("NOT missing = 1"), [false, false, false]);
    }

    proptest::proptest! {
        /// A stretch ends where a row by row walk ends it, whatever its length against the
        /// 32 rows compared at once.
        #[test]
        fn a_stretch_ends_where_the_values_change(
            runs in proptest::collection::vec((0i32..3, 1usize..80), 0..8),
            from in 0usize..200,
        ) {
            let rows: Vec<i32> = runs.iter().flat_map(|(v, n)| std::iter::repeat_n(*v, *n)).collect();
            let from = from.min(rows.len());
            let value = rows.get(from).copied().unwrap_or(0);
            let walked = from + rows[from..].iter().take_while(|r| **r == value).count();
            proptest::prop_assert_eq!(stretch_end(&rows, from, value), walked);
            let flags: Vec<bool> = rows.iter().map(|r| *r == 0).collect();
            let flag = flags.get(from).copied().unwrap_or(true);
            let walked = from + flags[from..].iter().take_while(|r| **r == flag).count();
            proptest::prop_assert_eq!(stretch_end(&flags, from, flag), walked);
        }
    }

    /// A number column (any kind, NULLs or none) against a literal (integer, decimal, NaN):
    /// the column filter keeps exactly the rows the record path's WHERE keeps, and its NOT
    /// exactly those that NOT keeps (NULL stays NULL, NaN orders against nothing, -0.0 = 0.0).
    mod against_the_record_path {
        use super::*;
        use crate::eval::{CompiledExpr, EvalContext};
        use arrow_array::{ArrayRef, Float32Array, Float64Array, Int32Array};
        use needle_record::Record;
        use proptest::prelude::*;
        use std::sync::Arc;

        fn value() -> impl Strategy<Value = Option<f64>> {
            prop_oneof![
                4 => (-5i32..5).prop_map(|v| Some(f64::from(v))),
                1 => Just(Some(f64::NAN)),
                1 => Just(Some(-0.0)),
                1 => Just(Some(2.5)),
                1 => Just(None),
            ]
        }

        /// The values as a column of `kind` (0 INT, 1 BIGINT, 2 FLOAT, 3 DOUBLE) and as the
        /// records' values of the same type.
        fn column(kind: u8, values: &[Option<f64>]) -> (ArrayRef, Vec<Value>) {
            let finite = |v: &Option<f64>| v.filter(|f| kind >= 2 || f.is_finite());
            let values: Vec<Option<f64>> = values.iter().map(finite).collect();
            let as_value = |v: &Option<f64>| match (kind, v) {
                (_, None) => Value::Null,
                (0, Some(f)) => Value::Int(*f as i32),
                (1, Some(f)) => Value::Long(*f as i64),
                (2, Some(f)) => Value::Float(*f as f32),
                (_, Some(f)) => Value::Double(*f),
            };
            let array: ArrayRef = match kind {
                0 => Arc::new(Int32Array::from_iter(values.iter().map(|v| v.map(|f| f as i32)))),
                1 => Arc::new(Int64Array::from_iter(values.iter().map(|v| v.map(|f| f as i64)))),
                2 => Arc::new(Float32Array::from_iter(values.iter().map(|v| v.map(|f| f as f32)))),
                _ => Arc::new(Float64Array::from_iter(values.iter().copied())),
            };
            (array, values.iter().map(as_value).collect())
        }

        proptest! {
            #[test]
            fn numbers_compare_as_records_do(
                kind in 0u8..4,
                values in proptest::collection::vec(value(), 0..40),
                op in prop::sample::select(vec!["=", "<>", "<", "<=", ">", ">="]),
                literal in prop::sample::select(vec!["0", "-3", "2", "2.5", "0.0", "-0.0", "95"]),
                negated in any::<bool>(),
            ) {
                let (array, records) = column(kind, &values);
                let batch = RecordBatch::try_from_iter([("a", array)]).unwrap();
                let text = match negated {
                    true => format!("NOT a {op} {literal}"),
                    false => format!("a {op} {literal}"),
                };
                let query = format!("SELECT * FROM STREAM() WHERE {text}");
                let plan = needle_query::compile(&query, &needle_query::QueryConfig::default())
                    .unwrap();
                let where_ = plan.stage.filter.as_ref().unwrap();
                let Some(column_filter) = Filter::compile(where_) else {
                    return Ok(()); // (a literal the column path does not take: rows are read)
                };
                let by_columns = column_filter.rows(&Columns::of(&batch, &[])).unwrap();
                let by_records = CompiledExpr::compile(where_).unwrap();
                let ctx = EvalContext::new(0);
                for (row, value) in records.into_iter().enumerate() {
                    let mut record = Record::new();
                    if value != Value::Null {
                        record.insert("a".to_owned(), value);
                    }
                    prop_assert_eq!(by_columns[row], by_records.test(&record, &ctx), "{} row {}", text, row);
                }
            }
        }
    }
}
