//! A worker's column path: a [`super::ColumnBatch`] run through every running query column at
//! a time — each query's WHERE over whole columns, its groups and aggregates folded from the
//! columns ([`needle_engine::columnar::summarize_batch`], the reader of stored blocks too) into a
//! partial the worker's state absorbs — when every query allows it: a GROUP ALL or GROUP BY
//! of plain fields with COUNT, SUM, AVG, MIN and MAX, and a WHERE of comparisons of plain
//! fields with literals (or none), at most [`MAX_COLUMN_QUERIES`] of them. Otherwise the
//! worker reads the batch row by row through the matcher, as it reads records.

use crate::history::replay::{column_filter, group_rows};
use crate::registry::Snapshot;
use needle_engine::columnar::{summarize_batch, Filter, GroupRequest};
use needle_engine::matching::{MatchSet, MatchWorker, Member};
use needle_engine::Partial;
use std::sync::Arc;

/// Past this many running queries, a batch is read row by row: the matching index finds a
/// row's few candidates among thousands of queries for less than every query's pass over every
/// column would cost.
pub(crate) const MAX_COLUMN_QUERIES: usize = 64;

/// How one query reads columns.
struct Plan {
    member: Arc<Member>,
    keys: Vec<String>,
    fields: Vec<String>,
    filter: Option<Filter>,
}

impl Plan {
    fn of(member: &Arc<Member>) -> Option<Plan> {
        let (keys, fields) = member.query.group_fields()?;
        let owned = |names: Vec<&str>| names.into_iter().map(str::to_owned).collect();
        Some(Plan {
            member: member.clone(),
            keys: owned(keys),
            fields: owned(fields),
            filter: column_filter(&member.query)?,
        })
    }

    /// The partial of `batch`'s rows, and the rows its WHERE passed (`None`: it has none);
    /// `None` when a column cannot be read this way.
    fn partial(&self, batch: &arrow_array::RecordBatch) -> Option<(Partial, Option<Vec<bool>>)> {
        let request = GroupRequest {
            keys: &self.keys,
            fields: &self.fields,
            filter: self.filter.as_ref(),
            bucket: None,
        };
        let (groups, passed) = summarize_batch(&request, batch)?;
        let groups: Vec<_> = groups.into_iter().map(group_rows).collect();
        // records seen are counted once for all queries, by the worker
        Some((self.member.query.partial_from_groups(0, &groups)?, passed))
    }
}

/// A worker's plans for the snapshot it saw last (see the module doc).
#[derive(Default)]
pub(crate) struct ColumnRunner {
    version: Option<u64>,
    /// `None`: some query needs rows.
    plans: Option<Vec<Plan>>,
}

impl ColumnRunner {
    /// True when every query of `snapshot` reads columns (and there are at most
    /// [`MAX_COLUMN_QUERIES`]).
    pub(crate) fn allows(&mut self, snapshot: &Snapshot) -> bool {
        self.refresh(snapshot);
        self.plans.is_some()
    }

    fn refresh(&mut self, snapshot: &Snapshot) {
        if self.version != Some(snapshot.version) {
            self.plans = plans_of(&snapshot.set);
            self.version = Some(snapshot.version);
        }
    }

    /// Runs `batch` through every query of `snapshot` column at a time, their partials folded
    /// into `matcher`'s states; how many rows some query matched. `None` when a query cannot
    /// be run that way, nothing changed: the caller reads the batch row by row.
    pub(crate) fn run(
        &mut self,
        snapshot: &Snapshot,
        batch: &super::ColumnBatch,
        matcher: &mut MatchWorker,
    ) -> Option<u64> {
        self.refresh(snapshot);
        let plans = self.plans.as_deref()?;
        let batch = batch.record_batch();
        let (partials, passed): (Vec<Partial>, Vec<Option<Vec<bool>>>) = plans
            .iter()
            .map(|plan| plan.partial(batch))
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .unzip();
        let matched = matched_rows(&partials, &passed, batch.num_rows());
        for (plan, partial) in plans.iter().zip(partials) {
            if partial.matched > 0 {
                // a partial of the query's own making: its fingerprint is the query's
                let absorbed = matcher.absorb(&plan.member, partial);
                debug_assert!(absorbed.is_ok(), "{absorbed:?}");
            }
        }
        Some(matched)
    }
}

/// Every query's plan, when each has one and there are at most [`MAX_COLUMN_QUERIES`].
fn plans_of(set: &MatchSet) -> Option<Vec<Plan>> {
    if set.len() > MAX_COLUMN_QUERIES {
        return None;
    }
    set.members().map(Plan::of).collect()
}

/// The rows of a batch of `rows` at least one query matched, from each query's partial and
/// the rows its WHERE passed: all of them when a query has no WHERE, one query's matches when
/// there is one.
fn matched_rows(partials: &[Partial], passed: &[Option<Vec<bool>>], rows: usize) -> u64 {
    if passed.iter().any(Option::is_none) {
        return rows as u64;
    }
    if let [one] = partials {
        return one.matched;
    }
    let mut any = vec![false; rows];
    for passed in passed.iter().flatten() {
        any.iter_mut().zip(passed).for_each(|(a, m)| *a |= m);
    }
    any.iter().filter(|m| **m).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::{ColumnsBuilder, Scalar};
    use crate::registry::QuerySet;
    use needle_engine::exec::CompiledQuery;
    use needle_engine::EvalContext;
    use needle_query::QueryConfig;
    use needle_record::Record;

    fn queries(texts: &[&str]) -> QuerySet {
        let set = QuerySet::new();
        for (i, text) in texts.iter().enumerate() {
            let plan = needle_query::compile(text, &QueryConfig::default()).unwrap();
            set.add(format!("q{i}").into(), Arc::new(CompiledQuery::compile(&plan).unwrap()));
        }
        set
    }

    fn batch(rows: i64) -> super::super::ColumnBatch {
        let mut builder = ColumnsBuilder::new(16);
        for n in 0..rows {
            assert!(builder.stage("k", Scalar::Text(["x", "y"][n as usize % 2])));
            assert!(builder.stage("v", Scalar::Long(n)));
            builder.commit();
        }
        builder.finish().unwrap()
    }

    /// Each query's flushed partial, encoded, by query id.
    fn flushed(matcher: &mut MatchWorker) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        matcher.flush(|member, partial| {
            out.push((member.id.to_string(), member.query.encode_partial(&partial)))
        });
        out.sort();
        out
    }

    #[test]
    fn columns_give_the_partials_rows_give() {
        let set = queries(&[
            "SELECT k, COUNT(*) AS n, SUM(v) AS s FROM STREAM(1000, TIME) WHERE v > 3 GROUP BY k",
            "SELECT MIN(v) AS lo, MAX(k) AS hi FROM STREAM(1000, TIME) WHERE v < 2",
        ]);
        let (snapshot, batch) = (set.load(), batch(10));
        let mut by_columns = MatchWorker::new();
        let matched = ColumnRunner::default().run(&snapshot, &batch, &mut by_columns);
        // rows 4..9 pass the first WHERE, rows 0 and 1 the second
        assert_eq!(matched, Some(8));
        let mut by_rows = MatchWorker::new();
        let (reader, mut record, ctx) = (batch.rows_reader(), Record::new(), EvalContext::new(0));
        for row in 0..batch.rows() {
            reader.write(row, &mut record);
            by_rows.process_record(&snapshot.set, &record, None, &ctx);
        }
        let columns = flushed(&mut by_columns);
        assert_eq!(columns.len(), 2);
        assert_eq!(columns, flushed(&mut by_rows));
    }

    #[test]
    fn a_query_that_needs_rows_sends_the_batch_to_rows() {
        for needs_rows in [
            "SELECT * FROM STREAM(1000, TIME) WHERE v > 3",
            "SELECT TOP(2, k) FROM STREAM(1000, TIME)",
            "SELECT COUNT(*) AS n FROM STREAM(1000, TIME) WHERE v + 1 > 3",
        ] {
            let set = queries(&["SELECT COUNT(*) AS n FROM STREAM(1000, TIME)", needs_rows]);
            let mut matcher = MatchWorker::new();
            assert_eq!(ColumnRunner::default().run(&set.load(), &batch(4), &mut matcher), None);
            assert!(flushed(&mut matcher).is_empty(), "nothing changed: {needs_rows}");
        }
        let many: Vec<String> = (0..=MAX_COLUMN_QUERIES)
            .map(|i| format!("SELECT COUNT(*) AS n FROM STREAM(1000, TIME) WHERE v = {i}"))
            .collect();
        let set = queries(&many.iter().map(String::as_str).collect::<Vec<_>>());
        let mut matcher = MatchWorker::new();
        assert_eq!(ColumnRunner::default().run(&set.load(), &batch(4), &mut matcher), None);
    }
}
