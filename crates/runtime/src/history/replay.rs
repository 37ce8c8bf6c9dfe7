//! Reading the stored past through the engine: [`Replay`] turns one query and a time range into
//! the [`Piece`]s (partials, each with the record time it belongs at) that a [`QueryRun`] on
//! record time merges into exactly the results the query would have given live over the same
//! records.
//!
//! ```text
//! store.scan(range, WHERE for pruning, fields the query reads)
//!   └─ blocks (+ the write buffer) ──▶ threads (one per core) pull blocks, decode only the
//!        fields read, run the query's worker side: one WorkerState per bucket of record time
//!        (time windows), or per record hit (RAW, to be put in time order)
//!   └─ pieces in time order: per bucket, its partials; RAW hits sorted by time ──▶ QueryRun
//! ```
//!
//! - **Three ways to read a block**, the cheapest that answers exactly: from its statistics
//!   (a GROUP ALL with no WHERE over a block wholly in range and in one bucket); column at a
//!   time (a GROUP ALL or GROUP BY of plain fields whose WHERE
//!   [`needle_engine::columnar::Filter`] evaluates over whole columns: rows folded into
//!   per-bucket, per-group summaries, no record built); or record by record, with the WHERE
//!   evaluated over the columns first where it can be, so that only the rows that pass become
//!   records (a RAW `temp0 > 95` builds its matches).
//! - **Windows by record time.** A time window buckets records by `floor(time / size)`
//!   (epoch-aligned). The run's windows start at the bucket of the first stored record in the
//!   range and the query ends with the bucket of the last one (or at `to`), so a sparse range
//!   does not emit every empty bucket back to 1970; empty buckets between records are emitted
//!   empty, as a quiet live window is.
//! - **RAW in time order.** Matches are handed on in record time order (ties by block and row),
//!   so `LIMIT n` gives the first n records by time, as a live query started at `from` would
//!   have; without a window each thread keeps only its n earliest.
//! - **Records seen** is the number of stored records the query read: blocks its zone maps
//!   ruled out are not read, and not counted (the `History` metadata says how many were
//!   skipped). A time window's emission counts the records of the buckets so far.

use crate::history::HistoryStore;
use needle_engine::aggregate::group::{ColumnSummary, GroupRows};
use needle_engine::columnar::{ColumnStats, Filter, GroupRequest, GroupSummary};
use needle_engine::exec::{CompiledQuery, Partial, QueryRun, WindowPlan, WorkerState};
use needle_engine::EvalContext;
use needle_history::{Block, BlockRows, FailedRows, ScanRequest, ScanStats, StoredRecord};
use needle_query::ast::Expr;
use needle_record::Record;
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A time bucket's partial from a block: (bucket, the bucket's last record time, partial).
type BucketPiece = (i64, i64, Partial);

/// A partial for the join side and the record time it belongs at.
#[derive(Debug)]
pub struct Piece {
    pub at_ms: i64,
    pub partial: Partial,
}

/// How a worker node whose store the workers share reads its part of the past (see
/// [`HistoryStore::scan_shared`]): the live worker nodes the api node asked, and the manifest
/// version it planned from (`None`: by writers).
#[derive(Debug, Clone, Copy, Default)]
pub struct SharedRead<'a> {
    pub roster: &'a [String],
    pub version: Option<u64>,
}

/// What reading the past cost, for `explain`, the final emission's metadata and the CLI.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReplayReport {
    /// The store's pruning: partitions, parts and blocks in range, skipped, read.
    pub scan: ScanStats,
    /// Stored records in range the query read (after pruning).
    pub records_read: u64,
    /// Of those, the ones no piece counted as seen (a RAW read with no match): the join side
    /// adds them to "Records Seen" when the past is read.
    #[serde(skip)]
    pub seen_after: u64,
    /// Blocks answered from their statistics (count, sum, min, max) without being decoded.
    #[serde(default)]
    pub blocks_from_aggregates: u64,
    /// Blocks whose GROUP ALL or GROUP BY was folded from their columns, no record built.
    #[serde(default)]
    pub blocks_by_columns: u64,
    /// Blocks that could not be read (a corrupt part): skipped, logged once each.
    pub blocks_failed: u64,
    pub seconds: f64,
    /// The distributed mode: how many worker nodes read their stores for the query.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub workers: u64,
    /// The distributed mode: worker nodes that stopped answering before their read was over
    /// (their part of the past is missing from the result).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers_missing: Vec<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ReplayReport {
    /// Adds another read's figures (another worker node's): counts add up, the time is the
    /// longest.
    pub fn add(&mut self, other: &ReplayReport) {
        self.scan.add(&other.scan);
        self.records_read += other.records_read;
        self.blocks_from_aggregates += other.blocks_from_aggregates;
        self.blocks_by_columns += other.blocks_by_columns;
        self.seen_after += other.seen_after;
        self.blocks_failed += other.blocks_failed;
        self.seconds = self.seconds.max(other.seconds);
    }
}

/// One query's read of a time range of the store, planned ([`Replay::plan`]) then run.
pub struct Replay {
    blocks: Vec<Block>,
    buffered: Vec<StoredRecord>,
    scan: ScanStats,
    /// The times of the first and last stored record in range (`None`: nothing stored there).
    pub data: Option<(i64, i64)>,
    /// Where the run's first time window starts (bucket-aligned), in record time.
    pub window_start_ms: i64,
    /// Where the query ends in record time: the end of the bucket of the last record in range
    /// (or `to`, whichever is first); `i64::MAX` when the query goes on live (`SINCE`).
    pub end_ms: i64,
}

impl Replay {
    /// Plans the read of `[from_ms, to_ms)` (`to_ms` = `None`: everything stored from
    /// `from_ms` on, then live). Pruning uses the query's WHERE only when nothing is exploded
    /// before it (an exploded alias is not a stored column).
    pub fn plan(
        store: &HistoryStore,
        query: &CompiledQuery,
        filter: Option<&Expr>,
        explodes: bool,
        from_ms: i64,
        to_ms: Option<i64>,
    ) -> Result<Self, needle_history::HistoryError> {
        Self::plan_shared(store, query, filter, explodes, (from_ms, to_ms), &SharedRead::default())
    }

    /// [`Replay::plan`] on a worker node whose store the workers share: its share of the
    /// records, as `shared` says ([`HistoryStore::scan_shared`]).
    pub fn plan_shared(
        store: &HistoryStore,
        query: &CompiledQuery,
        filter: Option<&Expr>,
        explodes: bool,
        (from_ms, to_ms): (i64, Option<i64>),
        shared: &SharedRead<'_>,
    ) -> Result<Self, needle_history::HistoryError> {
        let request = ScanRequest {
            from_ms,
            to_ms: to_ms.unwrap_or(i64::MAX),
            filter: if explodes { None } else { filter.cloned() },
            fields: query.fields_read(),
        };
        let scan = store.scan_shared(&request, shared.roster, shared.version)?;
        let mut first = i64::MAX;
        let mut last = i64::MIN;
        for block in &scan.blocks {
            let (lo, hi) = block.time_range();
            first = first.min(lo.max(from_ms));
            last = last.max(hi.min(request.to_ms.saturating_sub(1)));
        }
        for r in &scan.buffered {
            first = first.min(r.time_ms);
            last = last.max(r.time_ms);
        }
        let data = (first <= last).then_some((first, last));
        let (window_start_ms, end_ms) = record_range(query, data, from_ms, to_ms);
        Ok(Self {
            blocks: scan.blocks,
            buffered: scan.buffered,
            scan: scan.stats,
            data,
            window_start_ms,
            end_ms,
        })
    }

    /// [`Replay::plan`] of a query's own range and WHERE, for a plan that reads history
    /// (`None` for one that does not).
    pub fn of_plan(
        store: &HistoryStore,
        plan: &needle_query::Plan,
        query: &CompiledQuery,
    ) -> Option<Result<Self, needle_history::HistoryError>> {
        Self::of_plan_shared(store, plan, query, &SharedRead::default())
    }

    /// [`Replay::of_plan`] with [`Replay::plan_shared`]'s `shared`.
    pub fn of_plan_shared(
        store: &HistoryStore,
        plan: &needle_query::Plan,
        query: &CompiledQuery,
        shared: &SharedRead<'_>,
    ) -> Option<Result<Self, needle_history::HistoryError>> {
        let past = plan.history?;
        Some(Self::plan_shared(
            store,
            query,
            plan.stage.filter.as_ref(),
            !plan.stage.explode.is_empty(),
            (past.from_ms, past.to_ms),
            shared,
        ))
    }

    /// The store's pruning figures for this read, before it runs (for `explain`).
    pub fn scan_stats(&self) -> &ScanStats {
        &self.scan
    }

    /// Of the blocks to read, those `query` would answer from their statistics alone (for
    /// `explain`).
    pub fn blocks_from_aggregates(&self, query: &CompiledQuery) -> u64 {
        if query.summary_fields().is_none() {
            return 0;
        }
        self.blocks.iter().filter(|block| answer(query, block).is_some()).count() as u64
    }

    /// A run on record time for this read: windows from [`Replay::window_start_ms`], the end
    /// at [`Replay::end_ms`].
    pub fn new_run(&self, query: Arc<CompiledQuery>, id: &str, receive_ms: i64) -> QueryRun {
        QueryRun::on_record_time(
            query,
            id.to_owned(),
            receive_ms,
            self.window_start_ms,
            self.end_ms,
        )
    }

    /// Reads every block on `threads` threads and hands the pieces to `out` in time order.
    /// `now_ms` is the query's `NOW`. Stops early when `cancel` is raised (a killed query).
    pub fn run(
        self,
        query: &CompiledQuery,
        threads: usize,
        now_ms: i64,
        cancel: &AtomicBool,
        out: impl FnMut(Piece),
    ) -> ReplayReport {
        let started = Instant::now();
        let plan = ReadPlan::new(query, now_ms);
        // blocks in an object store: their columns fetched at once, in parallel, before the
        // threads read them block by block (a cold read waited for a request a block, in
        // turn); not for RAW queries, whose LIMIT may stop the read early, nor for blocks
        // their statistics answer
        if !plan.raw {
            let to_read: Vec<&Block> =
                self.blocks.iter().filter(|b| plan.stats_answer(b).is_none()).collect();
            if let Err(error) = needle_history::store::prefetch(&to_read) {
                eprintln!(
                    "needle: history: fetching ahead failed (each block fetches its own): {error}"
                );
            }
        }
        let results = self.read_on_threads(&plan, threads, cancel);
        let mut report = ReplayReport { scan: self.scan.clone(), ..ReplayReport::default() };
        plan.deliver(results, &mut report, out);
        report.seconds = started.elapsed().as_secs_f64();
        report
    }

    /// Every block, and the write buffer's records after them, each a unit of work pulled by
    /// `threads` threads in turn; what each thread made.
    fn read_on_threads(
        &self,
        plan: &ReadPlan<'_>,
        threads: usize,
        cancel: &AtomicBool,
    ) -> Vec<ThreadResult> {
        let units = self.blocks.len() + usize::from(!self.buffered.is_empty());
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<ThreadResult>> = Mutex::new(Vec::new());
        let threads = threads.clamp(1, units.max(1));
        let read = || {
            let mut mine = ThreadResult::default();
            let mut raw_worker = plan.query.new_worker();
            while !cancel.load(Ordering::Relaxed) {
                let unit = next.fetch_add(1, Ordering::Relaxed);
                if unit >= units {
                    break;
                }
                self.read_unit(plan, unit, &mut mine, &mut raw_worker);
            }
            results.lock().unwrap_or_else(|e| e.into_inner()).push(mine);
        };
        // this thread and kept reader threads (a thread made per query cost a small read more
        // than its reading: see the readers module)
        let read = &read;
        super::readers::run_all(
            (0..threads).map(|_| Box::new(read) as Box<dyn FnOnce() + Send + '_>).collect(),
        );
        results.into_inner().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads unit `unit` (a block, or the write buffer past the last block) the cheapest way
    /// that answers exactly: from its statistics, column at a time, or record by record.
    fn read_unit(
        &self,
        plan: &ReadPlan<'_>,
        unit: usize,
        mine: &mut ThreadResult,
        raw_worker: &mut WorkerState,
    ) {
        let Some(block) = self.blocks.get(unit) else {
            for (row, stored) in self.buffered.iter().enumerate() {
                mine.take_row(plan, raw_worker, (unit, row), stored.time_ms, Some(&stored.record));
            }
            return;
        };
        if let Some(piece) = plan.stats_answer(block) {
            mine.from_aggregates += 1;
            mine.add_pieces(plan.query, [piece]);
            return;
        }
        match plan.by_columns(block) {
            Ok(Some(pieces)) => {
                mine.by_columns += 1;
                mine.add_pieces(plan.query, pieces);
                return;
            }
            Ok(None) => {}
            Err(error) => {
                eprintln!("needle: history: a block could not be read: {error}");
                mine.failed += 1;
                return;
            }
        }
        let mut row = 0usize;
        // a record, or the times of rows the column filter proved fail the WHERE (a RAW query
        // only counts those)
        let read =
            block.for_each_matching(plan.prefilter(), &mut |rows: BlockRows<'_>| match rows {
                BlockRows::Record(time_ms, record) => {
                    mine.take_row(plan, raw_worker, (unit, row), time_ms, Some(record));
                    row += 1;
                }
                BlockRows::FailedCount(n) => {
                    mine.read += n as u64;
                    row += n;
                }
                BlockRows::Failed(times) => {
                    for t in times {
                        mine.take_row(plan, raw_worker, (unit, row), *t, None);
                        row += 1;
                    }
                }
            });
        if let Err(error) = read {
            eprintln!("needle: history: a block could not be read: {error}");
            mine.failed += 1;
        }
    }
}

/// How a run reads: what the query asks of each block, decided once.
struct ReadPlan<'q> {
    query: &'q CompiledQuery,
    ctx: EvalContext,
    raw: bool,
    /// A RAW query without a window keeps only its first `n` matches by time.
    keep_raw: Option<usize>,
    /// A time window's (size, include) in ms.
    bucket_ms: Option<(i64, i64)>,
    summarizes: bool,
    /// The WHERE over whole columns ([`column_filter`]).
    column_filter: Option<Option<Filter>>,
    /// GROUP ALL / GROUP BY of plain fields: the keys, and the fields summarized.
    group_fields: Option<(Vec<String>, Vec<String>)>,
    bucket_fn: Option<Box<dyn Fn(i64) -> i64 + Sync>>,
}

impl<'q> ReadPlan<'q> {
    fn new(query: &'q CompiledQuery, now_ms: i64) -> Self {
        let raw = query.is_raw();
        let keep_raw = match (raw, query.window()) {
            (true, WindowPlan::None) => query.raw_limit().map(|n| n as usize),
            _ => None,
        };
        let bucket_ms = match query.window() {
            WindowPlan::Time { every_ms, include_ms, .. } => {
                Some((every_ms as i64, include_ms as i64))
            }
            _ => None,
        };
        let bucket_fn = bucket_ms.map(|(every, include)| {
            Box::new(move |t| bucket_of(t, every, include)) as Box<dyn Fn(i64) -> i64 + Sync>
        });
        let group_fields = query.group_fields().map(|(keys, fields)| {
            let owned =
                |names: Vec<&str>| names.into_iter().map(str::to_owned).collect::<Vec<String>>();
            (owned(keys), owned(fields))
        });
        Self {
            query,
            ctx: EvalContext::new(now_ms),
            raw,
            keep_raw,
            bucket_ms,
            summarizes: query.summary_fields().is_some(),
            column_filter: column_filter(query),
            group_fields,
            bucket_fn,
        }
    }

    /// The column filter a block's read applies first, and how it hands on the rows that
    /// fail: a RAW query only counts them, others put each in its window by its time.
    fn prefilter(&self) -> Option<(&Filter, FailedRows)> {
        let filter = self.column_filter.as_ref().and_then(Option::as_ref)?;
        Some((filter, if self.raw { FailedRows::Counted } else { FailedRows::ByTime }))
    }

    /// The block's partial from its statistics alone, when they answer the query.
    fn stats_answer(&self, block: &Block) -> Option<BucketPiece> {
        self.summarizes.then(|| answer(self.query, block)).flatten()
    }

    /// The column path: the WHERE over whole columns, and GROUP ALL / GROUP BY folded from
    /// columns into per-bucket, per-group summaries (no record built); `None` when the query
    /// or the block does not allow it.
    fn by_columns(&self, block: &Block) -> Result<Option<Vec<BucketPiece>>, String> {
        let (Some((keys, fields)), Some(filter)) = (&self.group_fields, &self.column_filter) else {
            return Ok(None);
        };
        let request = GroupRequest {
            keys: keys.as_slice(),
            fields: fields.as_slice(),
            filter: filter.as_ref(),
            bucket: self.bucket_fn.as_deref(),
        };
        let Some(buckets) = block.summarize(&request).map_err(|e| e.to_string())? else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(buckets.len());
        for b in buckets {
            let groups: Vec<GroupRows> = b.groups.into_iter().map(group_rows).collect();
            match self.query.partial_from_groups(b.seen, &groups) {
                Some(partial) => out.push((b.bucket, b.last_ms, partial)),
                None => return Ok(None), // a summary cannot stand in: read the records
            }
        }
        Ok(Some(out))
    }

    /// The threads' results merged and handed to `out` in time order: RAW matches by time
    /// (the first `n` when only those are kept), a time bucket's partials at its start, and
    /// without time windows at the last record's time.
    fn deliver(
        &self,
        results: Vec<ThreadResult>,
        report: &mut ReplayReport,
        mut out: impl FnMut(Piece),
    ) {
        let mut hits = Vec::new();
        let mut buckets: BTreeMap<i64, (i64, Vec<Partial>)> = BTreeMap::new();
        for mut r in results {
            report.records_read += r.read;
            report.blocks_failed += r.failed;
            report.blocks_from_aggregates += r.from_aggregates;
            report.blocks_by_columns += r.by_columns;
            for (bucket, (last_ms, partials)) in std::mem::take(&mut r.summarized) {
                let slot = buckets.entry(bucket).or_insert((i64::MIN, Vec::new()));
                slot.0 = slot.0.max(last_ms);
                slot.1.extend(partials);
            }
            hits.extend(r.hits.drain().map(|h| h.0));
            for (bucket, mut state) in r.buckets {
                let slot = buckets.entry(bucket).or_insert((i64::MIN, Vec::new()));
                slot.0 = slot.0.max(state.last_ms);
                // a bucket's partial counts the records it read as seen
                if let Some(partial) = self.query.flush(&mut state.worker) {
                    slot.1.push(partial);
                }
            }
        }
        if self.raw {
            hits.sort_by(Hit::order);
            if let Some(n) = self.keep_raw {
                hits.truncate(n);
            }
            // the records read are seen by the time the first match arrives (it may end the
            // query, by its LIMIT); with no match, when the past is read
            match hits.first_mut() {
                Some(first) => first.partial.seen = report.records_read,
                None => report.seen_after = report.records_read,
            }
            for hit in hits {
                out(Piece { at_ms: hit.at_ms, partial: hit.partial });
            }
        } else {
            for (bucket, (last_ms, partials)) in buckets {
                let at_ms = if self.bucket_ms.is_some() { bucket } else { last_ms };
                for partial in partials {
                    out(Piece { at_ms, partial });
                }
            }
        }
    }
}

/// The query's WHERE as the column path evaluates it: `Some(None)` when there is none, `None`
/// when it cannot be evaluated over whole columns (or reads exploded records).
pub(crate) fn column_filter(query: &CompiledQuery) -> Option<Option<Filter>> {
    match query.filter_expr()? {
        None => Some(None),
        Some(expr) => Filter::compile(expr).map(Some),
    }
}

/// How a query reads the blocks its statistics do not answer (for `explain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockRead {
    /// Column at a time: its groups folded from the columns, no record built.
    Columns,
    /// Its WHERE evaluated over whole columns, records built only for the rows that pass.
    FilteredRecords,
    /// Record by record.
    Records,
}

impl BlockRead {
    pub fn of(query: &CompiledQuery) -> BlockRead {
        match (query.group_fields().is_some(), column_filter(query)) {
            (true, Some(_)) => BlockRead::Columns,
            (false, Some(Some(_))) => BlockRead::FilteredRecords,
            _ => BlockRead::Records,
        }
    }
}

impl std::fmt::Display for BlockRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BlockRead::Columns => {
                "column at a time (the groups folded from the columns, no record built)"
            }
            BlockRead::FilteredRecords => {
                "with the WHERE evaluated over whole columns first, records built only for the \
                 rows that pass"
            }
            BlockRead::Records => "record by record",
        })
    }
}

/// A block answered from its statistics, when the query allows it ([`CompiledQuery::
/// summary_fields`]), the block is wholly in the range, in one time bucket, and its statistics
/// stand in for its records exactly: (bucket, last record time, partial).
fn answer(query: &CompiledQuery, block: &Block) -> Option<(i64, i64, Partial)> {
    if !block.fully_in_range() {
        return None;
    }
    let (lo, hi) = block.time_range();
    let bucket = match query.window() {
        WindowPlan::None => 0,
        WindowPlan::Time { every_ms, include_ms, .. } => {
            let (every, include) = (every_ms as i64, include_ms as i64);
            let bucket = bucket_of(lo, every, include);
            if bucket_of(hi, every, include) != bucket {
                return None; // the block spans buckets
            }
            bucket
        }
        _ => return None,
    };
    let partial = query.partial_from_summary(block.rows(), &|field| summary(block, field))?;
    Some((bucket, hi, partial))
}

/// A group the column path summarized, as the engine takes it.
pub(crate) fn group_rows(group: GroupSummary) -> GroupRows {
    let fields = group.fields.into_iter().map(column_summary).collect();
    GroupRows { keys: group.keys, rows: group.rows, fields }
}

fn column_summary(stats: ColumnStats) -> ColumnSummary {
    ColumnSummary { count: stats.count, sum: stats.sum, min: stats.min, max: stats.max }
}

/// What a block's column statistics say of `field`, as the engine takes it.
fn summary(block: &Block, field: &str) -> Option<ColumnSummary> {
    Some(column_summary(block.column_stats(field)?))
}

/// Where a run over stored records starts its windows and ends, in record time, given the
/// first and last stored record in `[from_ms, to_ms)` (`data`; `None` when there is none):
/// windows from the bucket of the first record, the end after the bucket of the last one (or at
/// `to`); with nothing stored, one empty bucket at `from` (or no end, for `SINCE`). The
/// distributed mode combines its workers' `data` and calls this once, so every worker's
/// pieces fall in the same buckets.
pub fn record_range(
    query: &CompiledQuery,
    data: Option<(i64, i64)>,
    from_ms: i64,
    to_ms: Option<i64>,
) -> (i64, i64) {
    let bucket = match query.window() {
        WindowPlan::Time { every_ms, .. } => every_ms as i64,
        _ => 1,
    };
    match data {
        None => {
            // nothing stored in range: the query ends at once, with an empty result
            let start = align(from_ms, bucket);
            (start, if to_ms.is_some() { start.saturating_add(bucket) } else { i64::MAX })
        }
        Some((first, last)) => {
            let end = align(last, bucket).saturating_add(bucket);
            let end = match to_ms {
                Some(to) => end.min(to.max(align(first, bucket) + 1)),
                None => i64::MAX,
            };
            (align(first, bucket), end)
        }
    }
}

/// `t` rounded down to a multiple of `size` (epoch-aligned buckets; negative times too).
pub fn align(t: i64, size: i64) -> i64 {
    t.div_euclid(size.max(1)).saturating_mul(size.max(1))
}

/// Where a record at `t` joins a time window of `every` ms that keeps its first `include` ms:
/// the window's start, or (past its first `include` ms) the moment those end, where the join
/// drops it and counts it, as it would a live record arriving then.
fn bucket_of(t: i64, every: i64, include: i64) -> i64 {
    let start = align(t, every);
    if t - start < include {
        start
    } else {
        start + include
    }
}

#[derive(Default)]
struct ThreadResult {
    read: u64,
    failed: u64,
    /// Blocks answered from their statistics, and their partials by bucket (with the last
    /// record time of the bucket's blocks).
    from_aggregates: u64,
    /// Blocks folded column at a time (their partials go in `summarized` too).
    by_columns: u64,
    summarized: BTreeMap<i64, (i64, Vec<Partial>)>,
    /// RAW matches; a max-heap by time when only the earliest `n` are kept.
    hits: BinaryHeap<HeapHit>,
    buckets: BTreeMap<i64, Bucket>,
}

impl ThreadResult {
    /// Partials of a block read without its records, each counted as read and folded into
    /// this thread's partial of its bucket (the joiner's thread then merges one a thread, not
    /// one a block: at 10,000 groups in 110 blocks that merge was a fifth of the query).
    fn add_pieces(&mut self, query: &CompiledQuery, pieces: impl IntoIterator<Item = BucketPiece>) {
        for (bucket, last_ms, partial) in pieces {
            self.read += partial.seen;
            let slot = self.summarized.entry(bucket).or_insert((i64::MIN, Vec::new()));
            slot.0 = slot.0.max(last_ms);
            match slot.1.first_mut() {
                // a mismatch cannot happen (one query's partials): it would surface in the join
                Some(into) => {
                    if let Err(error) = query.combine(into, partial) {
                        eprintln!("needle: history: partials did not merge: {error}");
                    }
                }
                None => slot.1.push(partial),
            }
        }
    }

    /// One stored row read record by record: its record, or `None` when the column filter
    /// proved it fails the WHERE (it is counted as seen, in its time bucket). `at` is the
    /// row's place (unit, row in it), which orders RAW matches of the same time.
    fn take_row(
        &mut self,
        plan: &ReadPlan<'_>,
        raw_worker: &mut WorkerState,
        (unit, row): (usize, usize),
        time_ms: i64,
        record: Option<&Record>,
    ) {
        self.read += 1;
        let query = plan.query;
        if plan.raw {
            let Some(record) = record else { return };
            if query.process(raw_worker, record, &plan.ctx) {
                if let Some(mut partial) = query.flush(raw_worker) {
                    partial.seen = 0;
                    self.push_hit(Hit { at_ms: time_ms, unit, row, partial }, plan.keep_raw);
                }
            }
            return;
        }
        let bucket =
            plan.bucket_ms.map_or(0, |(every, include)| bucket_of(time_ms, every, include));
        let state = self
            .buckets
            .entry(bucket)
            .or_insert_with(|| Bucket { worker: query.new_worker(), last_ms: i64::MIN });
        state.last_ms = state.last_ms.max(time_ms);
        match record {
            Some(record) => {
                query.process(&mut state.worker, record, &plan.ctx);
            }
            None => query.skip(&mut state.worker),
        }
    }

    fn push_hit(&mut self, hit: Hit, keep: Option<usize>) {
        self.hits.push(HeapHit(hit));
        if keep.is_some_and(|n| self.hits.len() > n) {
            self.hits.pop();
        }
    }
}

struct Bucket {
    worker: WorkerState,
    last_ms: i64,
}

/// One RAW match: where it is in time (then in the store, for a stable order).
struct Hit {
    at_ms: i64,
    unit: usize,
    row: usize,
    partial: Partial,
}

impl Hit {
    fn order(a: &Hit, b: &Hit) -> CmpOrdering {
        (a.at_ms, a.unit, a.row).cmp(&(b.at_ms, b.unit, b.row))
    }
}

struct HeapHit(Hit);

impl PartialEq for HeapHit {
    fn eq(&self, other: &Self) -> bool {
        Hit::order(&self.0, &other.0) == CmpOrdering::Equal
    }
}
impl Eq for HeapHit {}
impl PartialOrd for HeapHit {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for HeapHit {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        Hit::order(&self.0, &other.0)
    }
}

/// Runs a replay to the end on this thread and returns every emission: the local form
/// (`needle query --history`, tests). `receive_ms` is when the query was received (and its
/// `NOW`).
pub fn run_local(
    replay: Replay,
    query: Arc<CompiledQuery>,
    id: &str,
    receive_ms: i64,
    threads: usize,
) -> Result<(Vec<needle_engine::Emission>, ReplayReport), needle_engine::EngineError> {
    let mut run = replay.new_run(query.clone(), id, receive_ms);
    let end_ms = replay.end_ms;
    let cancel = AtomicBool::new(false);
    let mut emissions = Vec::new();
    let mut failure = None;
    let report = replay.run(&query, threads, receive_ms, &cancel, |piece| {
        if failure.is_some() {
            return;
        }
        match run.merge(piece.partial, piece.at_ms) {
            Ok(out) => emissions.extend(out),
            Err(e) => failure = Some(e),
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    run.add_seen(report.seen_after);
    emissions.extend(run.tick(end_ms));
    emissions.extend(run.finish(end_ms));
    if let Some(last) = emissions.last_mut() {
        annotate(last, &report);
    }
    Ok((emissions, report))
}

/// Adds what the read cost to an emission's metadata (`History`).
pub fn annotate(emission: &mut needle_engine::Emission, report: &ReplayReport) {
    if let Ok(value) = serde_json::to_value(report) {
        emission.meta.insert("History".into(), value);
    }
}
