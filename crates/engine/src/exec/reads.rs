//! What a stream stage reads of a record ([`Reads`]): the top-level fields the decoder must keep
//! and the index may look up (whether it wants whole records is the compiled query's
//! `reads_whole_records`). Computed once with the compiled query; the matcher and the history
//! store read it from there.

use needle_query::ast::{Accessor, ExprKind};
use needle_query::plan::Stage;

/// Separates a field's name and a key of it in [`Reads::fields`].
pub(crate) const PART: char = '\u{0}';

/// What a stream stage reads of a record.
#[derive(Debug, Clone)]
pub(crate) struct Reads {
    /// Top-level field names, and `name\u{0}key` for a field read only through a constant key.
    pub fields: Box<[Box<str>]>,
}

impl Reads {
    /// What a stream stage reads of a record: its top-level fields, a field read only through a
    /// constant key as `name` [`PART`] `key` (the decoder may keep just the keys queries ask for).
    pub(crate) fn of(stage: &Stage) -> Reads {
        let mut fields: Vec<Box<str>> = Vec::new();
        for expr in stage.input_expressions() {
            expr.visit(&mut |e| {
                if let ExprKind::Field(f) = &e.kind {
                    let read: Box<str> = match f.path.first() {
                        Some(Accessor::Key(key)) => format!("{}{PART}{key}", f.name).into(),
                        _ => f.name.as_str().into(),
                    };
                    if !fields.contains(&read) {
                        fields.push(read);
                    }
                }
            });
        }
        Reads { fields: fields.into() }
    }
}
