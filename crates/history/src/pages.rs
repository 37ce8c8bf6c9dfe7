//! Pruning inside a block: the page index (each page's min, max and null count per column, and
//! where each page starts) proves which runs of a block's rows cannot hold a row in the time
//! range that makes the WHERE TRUE; the reader then skips their pages ([`RowSelection`]).
//!
//! Pages of different columns start at different rows, so the block is cut at every page start
//! of the columns the WHERE reads (and of the time column): each piece lies in one page of each,
//! and is kept when the zone made of those pages' statistics may satisfy the WHERE
//! ([`crate::prune::may_be_true`], the same proof that skips whole blocks) and its time page
//! overlaps the range.

use crate::prune::{self, Zone};
use needle_engine::columnar::layout::{self, Kind, TIME_COLUMN};
use needle_engine::columnar::ColumnStats;
use needle_query::ast::{Expr, ExprKind};
use needle_record::Value;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, RowSelection, RowSelector};
use parquet::file::page_index::column_index::{ColumnIndexMetaData, PrimitiveColumnIndex};
use std::collections::HashMap;

/// Text bounds of this length may have been truncated by the writer: not values then.
const TRUNCATED_TEXT: usize = 64;

/// One column's pages in a block: where each starts, and its statistics.
struct Pages {
    starts: Vec<usize>,
    stats: Vec<Option<ColumnStats>>,
}

impl Pages {
    /// The page holding `row`.
    fn at(&self, row: usize) -> usize {
        self.starts.partition_point(|s| *s <= row).saturating_sub(1)
    }
}

/// The rows of block `index` of a part (its footer `meta`, and which of its columns hold JSON
/// text) worth reading for `filter` and `[from_ms, to_ms)`; `None` when the page index rules
/// nothing out (or the part has none).
pub(crate) fn selection(
    meta: &ArrowReaderMetadata,
    json_columns: &[String],
    index: usize,
    filter: Option<&Expr>,
    from_ms: i64,
    to_ms: i64,
) -> Option<RowSelection> {
    let rows = meta.metadata().row_group(index).num_rows().max(0) as usize;
    let mut fields = Vec::new();
    if let Some(filter) = filter {
        top_fields(filter, &mut fields);
    }
    let mut by_field: HashMap<&str, Pages> = HashMap::new();
    for field in &fields {
        let column = layout::column_name(field);
        if let Some(pages) = pages(meta, json_columns, index, &column, rows) {
            by_field.insert(field.as_str(), pages);
        }
    }
    // the time column by its own name (a field's name would be escaped)
    let times = pages(meta, json_columns, index, TIME_COLUMN, rows);
    if by_field.values().chain(&times).all(|p| p.starts.len() <= 1) {
        return None; // one page a column: the block's own statistics said it all
    }
    let mut cuts: Vec<usize> =
        by_field.values().chain(&times).flat_map(|p| p.starts.iter().copied()).collect();
    cuts.push(rows);
    cuts.sort_unstable();
    cuts.dedup();
    let mut selectors: Vec<RowSelector> = Vec::new();
    let mut any_skipped = false;
    for piece in cuts.windows(2) {
        let (start, end) = (piece[0], piece[1]);
        if start >= end {
            continue;
        }
        let zone = PieceZone { meta, by_field: &by_field, row: start };
        let in_range = match times.as_ref().map(|t| t.stats[t.at(start)].clone()) {
            Some(Some(ColumnStats {
                min: Some(Value::Long(lo)),
                max: Some(Value::Long(hi)),
                ..
            })) => lo < to_ms && hi >= from_ms,
            _ => true,
        };
        let keep = in_range && filter.is_none_or(|f| prune::may_be_true(f, &zone));
        any_skipped |= !keep;
        let length = end - start;
        match selectors.last_mut() {
            Some(last) if last.skip != keep => last.row_count += length,
            _ => selectors.push(if keep {
                RowSelector::select(length)
            } else {
                RowSelector::skip(length)
            }),
        }
    }
    any_skipped.then(|| RowSelection::from(selectors))
}

/// The top-level fields an expression reads.
fn top_fields(expr: &Expr, out: &mut Vec<String>) {
    let mut visit = |e: &Expr| {
        if let ExprKind::Field(f) = &e.kind {
            if f.path.is_empty() && !out.contains(&f.name) {
                out.push(f.name.clone());
            }
        }
    };
    expr.visit(&mut visit);
}

/// A column's pages in block `index`, from the page index (`None`: no such column, or no
/// page index for it).
fn pages(
    meta: &ArrowReaderMetadata,
    json_columns: &[String],
    index: usize,
    column: &str,
    rows: usize,
) -> Option<Pages> {
    let position = meta.schema().index_of(column).ok()?;
    let json = json_columns.iter().any(|c| *c == column);
    let kind = prune::kind_of(meta.schema().field(position).data_type(), json)?;
    let page_index = meta.metadata().page_index_for_row_group(index);
    let offsets = page_index.offset_index(position)?;
    let starts: Vec<usize> = offsets
        .page_locations()
        .iter()
        .map(|p| usize::try_from(p.first_row_index).unwrap_or(0))
        .collect();
    let index = page_index.column_index(position);
    let stats = (0..starts.len())
        .map(|page| {
            let end = starts.get(page + 1).copied().unwrap_or(rows);
            let page_rows = end.saturating_sub(starts[page]) as u64;
            index.and_then(|index| page_stats(index, kind, page, page_rows))
        })
        .collect();
    Some(Pages { starts, stats })
}

/// One page's statistics as values (`None`: unknown).
fn page_stats(
    index: &ColumnIndexMetaData,
    kind: Kind,
    page: usize,
    rows: u64,
) -> Option<ColumnStats> {
    let (min, max, nulls) = match (kind, index) {
        (Kind::Long, ColumnIndexMetaData::INT64(i)) => bounds(i, page, Value::Long),
        (Kind::Int, ColumnIndexMetaData::INT32(i)) => bounds(i, page, Value::Int),
        (Kind::Double, ColumnIndexMetaData::DOUBLE(i)) => bounds(i, page, Value::Double),
        (Kind::Float, ColumnIndexMetaData::FLOAT(i)) => bounds(i, page, Value::Float),
        (Kind::Bool, ColumnIndexMetaData::BOOLEAN(i)) => bounds(i, page, Value::Bool),
        (Kind::Text, ColumnIndexMetaData::BYTE_ARRAY(i)) => {
            let text = |b: Option<&[u8]>| {
                b.filter(|b| b.len() < TRUNCATED_TEXT)
                    .and_then(|b| std::str::from_utf8(b).ok())
                    .map(|t| Value::String(t.to_owned()))
            };
            (text(i.min_value(page)), text(i.max_value(page)), i.null_count(page))
        }
        _ => return None,
    };
    let all_null = index.is_null_page(page);
    // an unknown null count: as many nulls as rows and as many values (either may be there)
    let null_count = if all_null { rows } else { nulls.map_or(rows, |n| n.max(0) as u64) };
    let count =
        if all_null { 0 } else { nulls.map_or(rows, |n| rows.saturating_sub(n.max(0) as u64)) };
    if !all_null && (min.is_none() || max.is_none()) {
        return None;
    }
    Some(ColumnStats { min, max, count, null_count, sum: None })
}

/// A page's min, max (as values) and null count, of a column of numbers or booleans.
fn bounds<T: Copy>(
    index: &PrimitiveColumnIndex<T>,
    page: usize,
    value: fn(T) -> Value,
) -> (Option<Value>, Option<Value>, Option<i64>) {
    let (min, max) = (index.min_value(page).copied(), index.max_value(page).copied());
    (min.map(value), max.map(value), index.null_count(page))
}

/// A piece of a block inside one page of each column read.
struct PieceZone<'a> {
    meta: &'a ArrowReaderMetadata,
    by_field: &'a HashMap<&'a str, Pages>,
    row: usize,
}

impl Zone for PieceZone<'_> {
    fn stats(&self, field: &str) -> Option<Option<ColumnStats>> {
        match self.by_field.get(field) {
            Some(pages) => Some(pages.stats[pages.at(self.row)].clone()),
            None => {
                let column = layout::column_name(field);
                // a column without a page index: unknown; no column: NULL everywhere
                self.meta.schema().index_of(&column).ok().map(|_| None)
            }
        }
    }

    fn might_contain(&self, _field: &str, _value: &Value) -> bool {
        true
    }
}
