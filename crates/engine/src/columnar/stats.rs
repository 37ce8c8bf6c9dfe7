//! [`ColumnStats`]: what is known of one column over a set of rows — a stored block's zone map,
//! a page of it, or a group the summarizer folded ([`super::summarize`]).

use needle_record::Value;

/// One column's statistics over a set of rows (a block, a page, a group).
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnStats {
    /// Smallest and largest non-null value (`None` when every value is null, or unknown).
    pub min: Option<Value>,
    pub max: Option<Value>,
    /// Non-null values.
    pub count: u64,
    pub null_count: u64,
    /// Sum of the values of a numeric column.
    pub sum: Option<f64>,
}
