//! The join side of one query ([`QueryRun`]): merges the workers' [`Partial`]s, keeps the window,
//! the duration, the RAW limit, counters and metadata, and makes the [`Emission`]s.
//!
//! Time is always the caller's `now_ms` (the injected clock); the engine never reads the system
//! clock. The query ends at `receive_ms + duration`: the first [`QueryRun::tick`] (or
//! [`QueryRun::merge`]) at or after that time makes the final emission. A windowless RAW query
//! also ends as soon as `size` records have arrived.
//!
//! Decisions where LANGUAGE.md is silent:
//! - **The last window is always emitted**, even partial or empty, as the final emission (it
//!   carries `Finish Time`, so a client knows the query ended). Bullet's join does the same: an
//!   expired query emits whatever its current window holds. When the duration ends exactly on
//!   a window boundary, that window *is* the final emission (no extra empty one).
//! - **RAW and windows**: `size` caps each window. A window that holds `size` records is emitted
//!   at once and the next one starts (Bullet's RAW strategy closes its window when full); for
//!   time windows the schedule is unchanged. Without a window, `size` caps the whole query and
//!   reaching it ends the query early. Records past the cap are dropped and counted in
//!   `Stats.Records Dropped`.
//! - **Record windows** count records arriving at the join, in the order partials are merged
//!   (so with several workers, which records share a window depends on flush order). A partial
//!   larger than what is left of a window is split across windows: one `merge` can emit several.
//! - **FIRST m of a time window** admits a partial when it is merged within the first m ms of
//!   the window; later ones are dropped (counted). Workers flush on the runtime's tick, so this
//!   is as precise as that tick.
//! - **A late tick** (the joiner was busy past a boundary) emits once what arrived, and the
//!   schedule skips the missed boundaries; a warning in that emission's metadata says how many
//!   windows late it was.
//! - After the query is done, `merge` ignores partials (they are in no result) and `tick`
//!   returns nothing.

use super::result::{Emission, Facts, Meta, Notice};
use super::window::{WindowClock, WindowPlan};
use super::worker::Partial;
use super::CompiledQuery;
use crate::aggregate::PartialState;
use crate::eval::EvalContext;
use crate::EngineError;
use needle_record::Record;
use serde_json::{Map, Value as Json};
use std::sync::Arc;

/// The most records a RAW query's window makes room for at its first record.
const RAW_RESERVE: u64 = 64;

/// The most windows a run on record time emits for one step of its clock (a gap in the data
/// of more buckets than this is folded into one late emission).
pub const MAX_EMPTY_BUCKETS: usize = 100_000;

/// Where the records RAW windows hold are counted against a bound in bytes (the runtime's
/// budget of results waiting): asked before a window keeps a record, told when it lets go.
pub trait WindowBytes: Send + Sync + std::fmt::Debug {
    /// Takes `bytes` when they fit under the bound; false when they do not.
    fn try_take(&self, bytes: usize) -> bool;
    /// Gives back bytes taken before.
    fn give_back(&self, bytes: usize);
}

/// A RAW window's bound in bytes: its own, and the budget it shares with every other.
#[derive(Debug)]
struct RawBound {
    per_query: usize,
    shared: Arc<dyn WindowBytes>,
    /// Bytes this run's window holds (taken from `shared`).
    held: usize,
    /// Since the last emission: windows emitted before their time to stay under the bound,
    /// and records not kept because even an empty window had no room.
    early: u64,
    refused: u64,
}

/// One running query on the join side. Single-threaded: the joiner owns it.
#[derive(Debug)]
pub struct QueryRun {
    query: Arc<CompiledQuery>,
    id: Arc<str>,
    receive_ms: i64,
    end_ms: i64,
    clock: WindowClock,
    /// The merged aggregation (not RAW).
    state: PartialState,
    /// RAW: the current window's records.
    raw: Vec<Record>,
    /// RAW without a window: records collected so far (the LIMIT counts these).
    window_matched: u64,
    seen: u64,
    matched: u64,
    dropped: u64,
    done: bool,
    /// Driven by the records' own times (stored records read back): time windows are buckets
    /// of record time, and their metadata names each bucket's start and end.
    record_time: bool,
    /// RAW: the bound in bytes on the records the window holds ([`QueryRun::bound_raw_bytes`]).
    raw_bound: Option<RawBound>,
}

impl QueryRun {
    /// Starts a query received at `receive_ms` (the injected clock); `id` names it in metadata.
    pub fn new(query: Arc<CompiledQuery>, id: impl Into<Arc<str>>, receive_ms: i64) -> Self {
        let duration = i64::try_from(query.duration_ms()).unwrap_or(i64::MAX);
        Self {
            state: query.inner.aggregator.new_state(),
            clock: WindowClock::new(query.window, receive_ms),
            end_ms: receive_ms.saturating_add(duration),
            query,
            id: id.into(),
            receive_ms,
            raw: Vec::new(),
            window_matched: 0,
            seen: 0,
            matched: 0,
            dropped: 0,
            done: false,
            record_time: false,
            raw_bound: None,
        }
    }

    /// Bounds the bytes of the records a RAW window holds: at most `per_query`, and only while
    /// `shared` has room. A window that reaches the bound is emitted at once, as one that
    /// reaches its LIMIT is, and warns; a record that finds no room even in an empty window
    /// (others hold the shared budget) is not kept, and the next emission warns.
    ///
    /// Only windows that can be emitted early are bounded: a RAW query without a window (or
    /// with one that grows for the whole query) holds what it found until its LIMIT, its
    /// duration or its end, as before — its records are its one answer (a find-record query
    /// waiting for its needles), and its LIMIT bounds them.
    pub fn bound_raw_bytes(&mut self, per_query: usize, shared: Arc<dyn WindowBytes>) {
        let plan = self.clock.plan();
        if matches!(plan, WindowPlan::None) || !plan.resets() {
            return;
        }
        self.raw_bound = Some(RawBound { per_query, shared, held: 0, early: 0, refused: 0 });
    }

    /// Takes room for `record` in the RAW window's bound (always, without one).
    fn room_for(&mut self, record: &Record) -> bool {
        let Some(bound) = &mut self.raw_bound else { return true };
        let bytes = record.approx_bytes();
        if bound.held + bytes > bound.per_query || !bound.shared.try_take(bytes) {
            return false;
        }
        bound.held += bytes;
        true
    }

    /// A run driven by the records' own times rather than the clock of their arrival: stored
    /// records read back in time order. `now_ms` passed to `merge`, `tick` and `finish` is record
    /// time; time windows start at `window_start_ms` (callers align it to the window size, so
    /// buckets are `floor(time / size)`, epoch-aligned) and each emission's window metadata
    /// carries its bucket's `Start` and `End`. The query ends at `end_ms` by record time
    /// (`i64::MAX`: only when [`QueryRun::finish`]ed); `receive_ms` is when it was received,
    /// for the metadata.
    pub fn on_record_time(
        query: Arc<CompiledQuery>,
        id: impl Into<Arc<str>>,
        receive_ms: i64,
        window_start_ms: i64,
        end_ms: i64,
    ) -> Self {
        let mut run = Self::new(query, id, receive_ms);
        run.clock = WindowClock::new(run.query.window, window_start_ms);
        run.end_ms = end_ms;
        run.record_time = true;
        run
    }

    /// Moves a record-time run's first window to `window_start_ms` and its end to `end_ms`,
    /// before anything was merged into it (the distributed mode learns where the stored
    /// records lie from its workers after the query started).
    pub fn place_on_record_time(&mut self, window_start_ms: i64, end_ms: i64) {
        self.clock = WindowClock::new(self.query.window, window_start_ms);
        self.end_ms = end_ms;
    }

    /// True for a run made by [`QueryRun::on_record_time`].
    pub fn is_on_record_time(&self) -> bool {
        self.record_time
    }

    /// Continues a record-time run on the clock of arrival from `now_ms` on (`SINCE`: the
    /// stored past has been read, live records follow): the current window keeps its schedule,
    /// and the query ends `duration` after `receive_ms`, as a live query does.
    pub fn continue_live(&mut self) {
        let duration = i64::try_from(self.query.duration_ms()).unwrap_or(i64::MAX);
        self.end_ms = self.receive_ms.saturating_add(duration);
        self.record_time = false;
    }

    /// When the query was received (its start: its duration counts from it).
    pub fn receive_ms(&self) -> i64 {
        self.receive_ms
    }

    pub fn query(&self) -> &Arc<CompiledQuery> {
        &self.query
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The id as it was given: the same allocation as the id the query's matching member and
    /// status entry hold when they were given it too, which a map keyed by it compares by
    /// address before comparing text.
    pub fn shared_id(&self) -> &Arc<str> {
        &self.id
    }

    /// True once the final emission has been made.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Counts `records` more input records as seen by this query (its "Records Seen"), for a
    /// runtime whose workers count the records they read once for all queries instead of in
    /// each partial ([`CompiledQuery::process_candidate`]). Ignored once the query is done.
    pub fn add_seen(&mut self, records: u64) {
        if !self.done {
            self.seen = self.seen.saturating_add(records);
        }
    }

    /// When the query ends by its duration (ms, the injected clock).
    pub fn end_ms(&self) -> i64 {
        self.end_ms
    }

    /// The next time [`QueryRun::tick`] has something to do: the next time window's boundary or
    /// the end of the query, whichever is first; `None` when done.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        if self.done {
            return None;
        }
        Some(self.clock.expected_emit_ms().map_or(self.end_ms, |t| t.min(self.end_ms)))
    }

    /// Merges a worker's partial at `now_ms`. It first does what [`QueryRun::tick`] would (a
    /// due time window is emitted before the partial joins the next one; past the end of the
    /// query the partial is dropped). Returns the emissions made: those, RAW
    /// record windows that filled, a RAW window that reached `size`, or the final emission when a
    /// windowless RAW query reaches its LIMIT.
    pub fn merge(&mut self, partial: Partial, now_ms: i64) -> Result<Vec<Emission>, EngineError> {
        // a due window or the end of the query comes first: this partial arrived after it
        let mut out = self.tick(now_ms);
        // saturating: a partial's counts come off the wire (the distributed mode) unchecked
        self.seen = self.seen.saturating_add(partial.seen);
        self.matched = self.matched.saturating_add(partial.matched);
        if self.done {
            self.dropped = self.dropped.saturating_add(partial.matched);
            return Ok(out);
        }
        if self.query.is_raw() {
            let mut state = partial.state;
            let aggregator = &self.query.inner.aggregator;
            self.dropped = self.dropped.saturating_add(aggregator.raw_dropped(&state));
            let records = aggregator.take_raw(&mut state);
            self.merge_raw(records, now_ms, &mut out);
        } else {
            let admitted = match self.clock.plan() {
                WindowPlan::Time { .. } => self.clock.admit(now_ms).keep,
                _ => true,
            };
            if admitted {
                self.query.inner.aggregator.merge_owned(&mut self.state, partial.state)?;
                self.window_matched = self.window_matched.saturating_add(partial.matched);
            } else {
                self.dropped = self.dropped.saturating_add(partial.matched);
            }
        }
        Ok(out)
    }

    /// [`QueryRun::merge`] of a partial encoded by [`CompiledQuery::encode_partial`].
    pub fn merge_bytes(&mut self, bytes: &[u8], now_ms: i64) -> Result<Vec<Emission>, EngineError> {
        let partial = self.query.decode_partial(bytes)?;
        self.merge(partial, now_ms)
    }

    fn merge_raw(&mut self, records: Vec<Record>, now_ms: i64, out: &mut Vec<Emission>) {
        let size = self.query.inner.raw_size().unwrap_or(u64::MAX);
        let windowless = matches!(self.clock.plan(), WindowPlan::None);
        let mut records = records.into_iter();
        for record in records.by_ref() {
            let admission = self.clock.admit(now_ms);
            if admission.keep {
                let mut fits = self.room_for(&record);
                if !fits && !self.raw.is_empty() {
                    // full in bytes: the window goes now, as one full of records does
                    if let Some(bound) = &mut self.raw_bound {
                        bound.early += 1;
                    }
                    let is_final = now_ms >= self.end_ms;
                    out.push(self.emit(now_ms, is_final));
                    if is_final {
                        break;
                    }
                    fits = self.room_for(&record);
                }
                if fits {
                    if self.raw.capacity() == 0 {
                        // room for the LIMIT at once (up to a point): growing one record at a
                        // time reallocated a query's records four times on the way to 10, a
                        // tenth of the joiner's time when 100,000 queries each found 10
                        self.raw.reserve(size.min(RAW_RESERVE) as usize);
                    }
                    self.raw.push(record);
                    self.window_matched += 1;
                } else {
                    // no room even in an empty window (other queries hold the budget)
                    self.dropped += 1;
                    if let Some(bound) = &mut self.raw_bound {
                        bound.refused += 1;
                    }
                }
            } else {
                self.dropped += 1;
            }
            let full = self.raw.len() as u64 >= size;
            if windowless && full {
                out.push(self.emit(now_ms, true));
                break;
            }
            if admission.closes || full {
                let is_final = now_ms >= self.end_ms;
                out.push(self.emit(now_ms, is_final));
                if is_final {
                    break;
                }
            }
        }
        self.dropped += records.len() as u64;
    }

    /// Advances the clock to `now_ms`: emits a due time window, or the final emission when the
    /// query's duration is over.
    pub fn tick(&mut self, now_ms: i64) -> Vec<Emission> {
        if self.done {
            return Vec::new();
        }
        if self.record_time {
            return self.tick_record_time(now_ms);
        }
        if now_ms >= self.end_ms {
            return vec![self.emit(now_ms, true)];
        }
        if self.clock.due(now_ms) {
            return vec![self.emit(now_ms, false)];
        }
        Vec::new()
    }

    /// [`QueryRun::tick`] on record time: every bucket the clock passed is emitted, in order,
    /// each at its own end (a bucket with no records gives an empty result, as a live query's
    /// quiet window does), rather than late ones being folded into one. Past
    /// [`MAX_EMPTY_BUCKETS`] in one step the rest are skipped as a late live tick would.
    fn tick_record_time(&mut self, now_ms: i64) -> Vec<Emission> {
        let mut out = Vec::new();
        while let Some(due) = self.clock.expected_emit_ms().filter(|&due| due <= now_ms) {
            if due >= self.end_ms || out.len() >= MAX_EMPTY_BUCKETS {
                break;
            }
            out.push(self.emit(due, false));
        }
        if now_ms >= self.end_ms {
            out.push(self.emit(now_ms, true));
        } else if self.clock.due(now_ms) {
            out.push(self.emit(now_ms, false));
        }
        out
    }

    /// Ends the query now (input exhausted, cancelled, shutting down): the final emission, with
    /// whatever the current window holds. `None` when the query was already done.
    pub fn finish(&mut self, now_ms: i64) -> Option<Emission> {
        if self.done {
            return None;
        }
        Some(self.emit(now_ms, true))
    }

    /// Makes the current window's emission and starts the next window (or ends the query).
    fn emit(&mut self, now_ms: i64, is_final: bool) -> Emission {
        let ctx = EvalContext::new(now_ms);
        let stage = &self.query.inner;
        let (records, sketch) = if self.query.is_raw() {
            let window = if self.clock.plan().resets() {
                if let Some(bound) = &mut self.raw_bound {
                    bound.shared.give_back(std::mem::take(&mut bound.held));
                }
                std::mem::take(&mut self.raw)
            } else {
                self.raw.clone()
            };
            (stage.post.apply(window, &ctx), Map::new())
        } else {
            stage.results(&self.state, &ctx)
        };
        let (records, outer_sketch) = match &self.query.outer {
            Some(outer) => {
                let (records, meta) = outer.run_batch(&records, &ctx);
                (records, Some(meta))
            }
            None => (records, None),
        };
        // the window boundaries this emission is late for: their data is merged into it
        let late = match (self.clock.expected_emit_ms(), self.clock.plan()) {
            (Some(due), WindowPlan::Time { every_ms, .. }) if !is_final => {
                u64::try_from((now_ms - due) / every_ms as i64).unwrap_or(0)
            }
            _ => 0,
        };
        let meta = self.meta(now_ms, is_final, late, sketch, outer_sketch);
        if let Some(bound) = &mut self.raw_bound {
            (bound.early, bound.refused) = (0, 0);
        }
        if is_final {
            self.done = true;
        } else {
            self.clock.advance(now_ms);
            if self.clock.plan().resets() {
                self.state = stage.aggregator.new_state();
                self.window_matched = 0;
            }
        }
        Emission { records, meta, is_final }
    }

    fn meta(
        &self,
        now_ms: i64,
        is_final: bool,
        late: u64,
        sketch: Map<String, Json>,
        outer_sketch: Option<Map<String, Json>>,
    ) -> Meta {
        let mut warnings: Vec<Json> = Vec::new();
        // the aggregator's metadata ("Sketch", "Groups", "Ignored Values") passes through
        if let Some(value) = sketch.get("Groups") {
            warnings.push(
                Notice::new(
                    format!(
                        "GROUP BY reached its limit of {} groups; {} record(s) of further \
                         groups were dropped",
                        value.get("Limit").unwrap_or(&Json::Null),
                        value.get("Dropped Records").unwrap_or(&Json::Null)
                    ),
                    "Narrow the query with WHERE, group by fewer or coarser keys, or raise \
                     the max_groups setting",
                )
                .to_json(),
            );
        }
        if late > 0 {
            warnings.push(
                Notice::new(
                    format!(
                        "this result was {late} window(s) late: it also holds the data of the \
                         windows that should have been emitted before it"
                    ),
                    "Use a longer window, or give the query engine more capacity",
                )
                .to_json(),
            );
        }
        if let Some(bound) = self.raw_bound.as_ref().filter(|b| b.early + b.refused > 0) {
            let what = match (bound.early, bound.refused) {
                (early, 0) => format!(
                    "{early} window(s) were emitted before their time: their records reached \
                     the bytes results may hold"
                ),
                (_, refused) => format!(
                    "{refused} matching record(s) were not kept: the results waiting for \
                     subscribers reached the bytes they may hold"
                ),
            };
            let fix = "Read the results faster, select fewer fields or a smaller LIMIT, or raise \
                       runtime.max_result_bytes_per_query and runtime.max_result_bytes";
            warnings.push(Notice::new(what, fix).to_json());
        }
        let bounds = match (self.record_time, self.clock.plan()) {
            (true, WindowPlan::Time { every_ms, .. }) => {
                let start = self.clock.window_start_ms();
                Some((start, start.saturating_add(every_ms as i64)))
            }
            _ => None,
        };
        Meta::from_facts(Facts {
            id: self.id.clone(),
            body: self.query.shared_text(),
            receive_ms: self.receive_ms,
            finish_ms: is_final.then_some(now_ms),
            window_name: self.clock.plan().name(),
            number: self.clock.number(),
            size: self.window_matched,
            emit_ms: now_ms,
            bounds,
            expected_emit_ms: self.clock.expected_emit_ms().map(|e| e.min(self.end_ms)),
            is_final,
            sketch,
            outer: outer_sketch.filter(|outer| !outer.is_empty()),
            seen: self.seen,
            matched: self.matched,
            dropped: self.dropped,
            warnings,
        })
    }
}

impl Drop for QueryRun {
    /// The bytes a RAW window still holds go back to the shared bound with it.
    fn drop(&mut self) {
        if let Some(bound) = &mut self.raw_bound {
            bound.shared.give_back(std::mem::take(&mut bound.held));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::result::keys;
    use crate::exec::LocalQuery;
    use needle_query::ast::{
        BinaryOp, CompareOp, Expr, ExprKind, Field, Include, Span, StreamDuration, WindowKind,
        WindowUnit,
    };
    use needle_query::plan::{
        AggregateFunction, Aggregation, NamedAggregate, NamedExpr, Plan, PostAggregation,
        Projection, Stage,
    };
    use needle_record::Value;

    fn field(name: &str) -> Expr {
        Expr::new(
            ExprKind::Field(Field { name: name.into(), path: vec![], hint: None }),
            Span::default(),
        )
    }

    fn count() -> Aggregation {
        Aggregation::GroupAll {
            aggregates: vec![NamedAggregate {
                name: "COUNT(*)".into(),
                function: AggregateFunction::Count,
                input: None,
            }],
        }
    }

    fn raw(size: u64) -> Aggregation {
        Aggregation::Raw {
            projection: Projection::Fields {
                fields: vec![NamedExpr { name: "id".into(), expr: field("id") }],
            },
            size,
        }
    }

    fn stage(aggregation: Aggregation) -> Stage {
        Stage { explode: vec![], filter: None, aggregation, post: PostAggregation::default() }
    }

    fn plan(aggregation: Aggregation, window: Option<WindowKind>, duration_ms: u64) -> Plan {
        Plan {
            text: "test".into(),
            duration_ms,
            requested_duration: StreamDuration::Millis(duration_ms),
            window,
            stage: stage(aggregation),
            outer: None,
            history: None,
        }
    }

    fn rec(id: i64) -> Record {
        let mut r = Record::new();
        r.insert("id", Value::Long(id));
        r.insert("g", Value::from(if id % 2 == 0 { "even" } else { "odd" }));
        r
    }

    fn ids(e: &Emission) -> Vec<i64> {
        e.records.iter().map(|r| r.get("id").and_then(Value::as_i64).unwrap()).collect()
    }

    fn count_of(e: &Emission) -> i64 {
        e.records[0].get("COUNT(*)").and_then(Value::as_i64).unwrap()
    }

    fn window(e: &Emission, key: &str) -> Json {
        e.meta[keys::WINDOW][key].clone()
    }

    #[test]
    fn windowless_raw_ends_when_the_limit_is_reached() {
        let mut q = LocalQuery::new(&plan(raw(2), None, 10_000), "q", 0).unwrap();
        assert!(q.push(&rec(1), 5).unwrap().is_empty());
        let out = q.push(&rec(2), 6).unwrap();
        assert_eq!(out.len(), 1);
        assert!(out[0].is_final && q.is_done());
        assert_eq!(ids(&out[0]), [1, 2]);
        assert_eq!(out[0].meta[keys::QUERY][keys::FINISH_TIME], 6);
        assert!(q.push(&rec(3), 7).unwrap().is_empty());
        assert!(q.finish(8).unwrap().is_empty());
    }

    #[test]
    fn tumbling_time_windows_reset_and_the_last_partial_window_is_final() {
        let w = WindowKind::Tumbling { every: 1000, unit: WindowUnit::Time };
        let mut q = LocalQuery::new(&plan(count(), Some(w), 2500), "q", 0).unwrap();
        let mut out = Vec::new();
        out.extend(q.push(&rec(1), 100).unwrap());
        out.extend(q.push(&rec(2), 900).unwrap());
        out.extend(q.push(&rec(3), 1200).unwrap());
        out.extend(q.advance(2000).unwrap());
        out.extend(q.advance(2600).unwrap());
        assert_eq!(out.iter().map(count_of).collect::<Vec<_>>(), [2, 1, 0]);
        assert_eq!(out.iter().map(|e| window(e, keys::NUMBER)).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(out.iter().map(|e| window(e, keys::SIZE)).collect::<Vec<_>>(), [2, 1, 0]);
        assert_eq!(
            out.iter().map(|e| window(e, keys::EXPECTED_EMIT_TIME)).collect::<Vec<_>>(),
            [1000, 2000, 2500]
        );
        assert_eq!(out.iter().map(|e| e.is_final).collect::<Vec<_>>(), [false, false, true]);
        assert!(q.is_done());
    }

    #[test]
    fn a_run_on_record_time_buckets_by_record_time_and_names_each_bucket() {
        let w = WindowKind::Tumbling { every: 1000, unit: WindowUnit::Time };
        let query = Arc::new(CompiledQuery::compile(&plan(count(), Some(w), 0)).unwrap());
        let mut run = QueryRun::on_record_time(query.clone(), "q", 99, 1000, i64::MAX);
        let mut out = Vec::new();
        for (id, time) in [(1, 1500), (2, 1700), (3, 2300), (4, 4100)] {
            let mut worker = query.new_worker();
            assert!(query.process(&mut worker, &rec(id), &EvalContext::new(0)));
            out.extend(run.merge(query.flush(&mut worker).unwrap(), time).unwrap());
        }
        // a duration of 0 does not end a run on record time: only finish does
        assert!(!run.is_done());
        out.extend(run.finish(5000));
        assert_eq!(out.iter().map(count_of).collect::<Vec<_>>(), [2, 1, 0, 1]);
        let bucket = |e: &Emission| (window(e, keys::START), window(e, keys::END));
        assert_eq!(
            out.iter().map(bucket).collect::<Vec<_>>(),
            [
                (1000.into(), 2000.into()),
                (2000.into(), 3000.into()),
                (3000.into(), 4000.into()),
                (4000.into(), 5000.into())
            ]
        );
        assert_eq!(out[3].meta[keys::QUERY][keys::RECEIVE_TIME], 99);
        assert!(out[3].is_final);
    }

    #[test]
    fn a_run_on_record_time_continues_live_until_its_duration() {
        let w = WindowKind::Tumbling { every: 1000, unit: WindowUnit::Time };
        let query = Arc::new(CompiledQuery::compile(&plan(count(), Some(w), 10_000)).unwrap());
        let mut run = QueryRun::on_record_time(query.clone(), "q", 50_000, 1000, i64::MAX);
        let mut worker = query.new_worker();
        query.process(&mut worker, &rec(1), &EvalContext::new(0));
        assert!(run.merge(query.flush(&mut worker).unwrap(), 1500).unwrap().is_empty());
        run.continue_live();
        assert_eq!(run.end_ms(), 60_000);
        assert!(!run.is_on_record_time());
        let out = run.tick(60_000);
        assert!(out.last().unwrap().is_final);
        assert_eq!(out.iter().map(count_of).sum::<i64>(), 1);
    }

    #[test]
    fn every_all_accumulates() {
        let w = WindowKind::Every { every: 1000, unit: WindowUnit::Time, include: Include::All };
        let mut q = LocalQuery::new(&plan(count(), Some(w), 10_000), "q", 0).unwrap();
        let mut out = Vec::new();
        out.extend(q.push(&rec(1), 100).unwrap());
        out.extend(q.push(&rec(2), 1100).unwrap());
        out.extend(q.push(&rec(3), 1200).unwrap());
        out.extend(q.advance(2000).unwrap());
        out.extend(q.finish(2100).unwrap());
        assert_eq!(out.iter().map(count_of).collect::<Vec<_>>(), [1, 3, 3]);
        assert_eq!(window(&out[2], keys::NAME), "Additive Tumbling");
        assert_eq!(window(&out[1], keys::SIZE), 3);
    }

    #[test]
    fn record_windows_split_a_partial_across_windows() {
        let w = WindowKind::Tumbling { every: 2, unit: WindowUnit::Record };
        let query = Arc::new(CompiledQuery::compile(&plan(raw(100), Some(w), 10_000)).unwrap());
        let mut worker = query.new_worker();
        for id in 1..=5 {
            assert!(query.process(&mut worker, &rec(id), &EvalContext::new(0)));
        }
        let mut run = QueryRun::new(query.clone(), "q", 0);
        let out = run.merge(query.flush(&mut worker).unwrap(), 10).unwrap();
        assert_eq!(out.iter().map(ids).collect::<Vec<_>>(), [vec![1, 2], vec![3, 4]]);
        let last = run.finish(20).unwrap();
        assert_eq!((ids(&last), last.is_final, last.window_number()), (vec![5], true, 3));
        assert_eq!(window(&last, keys::NAME), "Sliding");
    }

    /// A shared bound of bytes, as the runtime's results budget is.
    #[derive(Debug)]
    struct Budget {
        used: std::sync::atomic::AtomicUsize,
        limit: usize,
    }

    impl WindowBytes for Budget {
        fn try_take(&self, bytes: usize) -> bool {
            use std::sync::atomic::Ordering::SeqCst;
            let fits = self.used.load(SeqCst) + bytes <= self.limit;
            if fits {
                self.used.fetch_add(bytes, SeqCst);
            }
            fits
        }
        fn give_back(&self, bytes: usize) {
            self.used.fetch_sub(bytes, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn budget(limit: usize) -> Arc<Budget> {
        Arc::new(Budget { used: 0.into(), limit })
    }

    fn raw_run(window: Option<WindowKind>) -> (Arc<CompiledQuery>, QueryRun) {
        let query = Arc::new(CompiledQuery::compile(&plan(raw(100), window, 10_000)).unwrap());
        let run = QueryRun::new(query.clone(), "q", 0);
        (query, run)
    }

    /// The partial of `ids`' records, as a worker sends it.
    fn partial(query: &CompiledQuery, ids: std::ops::RangeInclusive<i64>) -> Partial {
        let mut worker = query.new_worker();
        for id in ids {
            assert!(query.process(&mut worker, &rec(id), &EvalContext::new(0)));
        }
        query.flush(&mut worker).unwrap()
    }

    #[test]
    fn a_raw_window_full_in_bytes_is_emitted_early_and_loses_nothing() {
        let w = WindowKind::Tumbling { every: 1000, unit: WindowUnit::Time };
        let (query, mut run) = raw_run(Some(w));
        let one = projected(1).approx_bytes();
        let shared = budget(usize::MAX);
        run.bound_raw_bytes(3 * one, shared.clone());
        let mut out = run.merge(partial(&query, 1..=7), 10).unwrap();
        assert_eq!(out.iter().map(ids).collect::<Vec<_>>(), [vec![1, 2, 3], vec![4, 5, 6]]);
        assert!(out[0].meta[keys::WARNINGS][0]["error"]
            .as_str()
            .unwrap()
            .contains("1 window(s) were emitted before their time"));
        assert_eq!(shared.used.load(std::sync::atomic::Ordering::SeqCst), one, "record 7 held");
        out.extend(run.tick(1000));
        assert_eq!(ids(out.last().unwrap()), vec![7]);
        assert!(out.last().unwrap().meta.get(keys::WARNINGS).is_none(), "a window on time");
        assert_eq!(shared.used.load(std::sync::atomic::Ordering::SeqCst), 0, "given back");
        run.merge(partial(&query, 8..=8), 1010).unwrap();
        drop(run);
        assert_eq!(shared.used.load(std::sync::atomic::Ordering::SeqCst), 0, "back at drop");
    }

    /// A record as the test plans' RAW keeps it (its `id`, collected as a projection does).
    fn projected(id: i64) -> Record {
        [("id".to_owned(), Value::Long(id))].into_iter().collect()
    }

    #[test]
    fn raw_records_past_a_shared_bound_are_not_kept_and_the_emission_says_so() {
        let one = projected(1).approx_bytes();
        // other queries hold all of the budget but half a record's room
        let shared = budget(3 * one);
        assert!(shared.try_take(3 * one - one / 2));
        let w = WindowKind::Tumbling { every: 1000, unit: WindowUnit::Time };
        let (query, mut run) = raw_run(Some(w));
        run.bound_raw_bytes(usize::MAX, shared.clone());
        assert!(run.merge(partial(&query, 1..=5), 10).unwrap().is_empty());
        let next = run.tick(1000);
        assert!(next[0].records.is_empty());
        assert_eq!(next[0].meta[keys::STATS][keys::RECORDS_DROPPED], 5);
        let warning = next[0].meta[keys::WARNINGS][0]["error"].as_str().unwrap().to_owned();
        assert!(warning.contains("5 matching record(s) were not kept"), "{warning}");
        // room again: the next window keeps its records
        shared.give_back(3 * one - one / 2);
        run.merge(partial(&query, 6..=6), 1010).unwrap();
        assert_eq!(ids(&run.tick(2000)[0]), vec![6]);
    }

    #[test]
    fn a_raw_query_without_a_window_keeps_its_records_whatever_the_bound() {
        // its records are its one answer (a needle search): only its LIMIT bounds them
        let (query, mut run) = raw_run(None);
        run.bound_raw_bytes(1, budget(1));
        assert!(run.merge(partial(&query, 1..=5), 10).unwrap().is_empty());
        let last = run.finish(20).unwrap();
        assert_eq!(ids(&last), vec![1, 2, 3, 4, 5]);
        assert!(last.meta.get(keys::WARNINGS).is_none());
    }

    #[test]
    fn a_raw_time_window_that_fills_emits_early_and_keeps_the_schedule() {
        let w = WindowKind::Tumbling { every: 1000, unit: WindowUnit::Time };
        let mut q = LocalQuery::new(&plan(raw(2), Some(w), 3000), "q", 0).unwrap();
        let mut out = Vec::new();
        for (id, t) in [(1, 10), (2, 20), (3, 30), (4, 1500)] {
            out.extend(q.push(&rec(id), t).unwrap());
        }
        out.extend(q.advance(1000).unwrap());
        out.extend(q.advance(2000).unwrap());
        assert_eq!(out.iter().map(ids).collect::<Vec<_>>(), [vec![1, 2], vec![3], vec![4]]);
        assert_eq!(
            out.iter().map(|e| window(e, keys::EMIT_TIME)).collect::<Vec<_>>(),
            [20, 1500, 2000]
        );
    }

    #[test]
    fn first_part_of_a_time_window_drops_later_records() {
        let w = WindowKind::Every {
            every: 1000,
            unit: WindowUnit::Time,
            include: Include::First { count: 300, unit: WindowUnit::Time },
        };
        let mut q = LocalQuery::new(&plan(count(), Some(w), 2000), "q", 0).unwrap();
        let mut out = Vec::new();
        for t in [0, 100, 299, 300, 900, 1050, 1400] {
            out.extend(q.push(&rec(t), t).unwrap());
        }
        out.extend(q.advance(2000).unwrap());
        assert_eq!(out.iter().map(count_of).collect::<Vec<_>>(), [3, 1]);
        assert_eq!(out[1].meta[keys::STATS][keys::RECORDS_DROPPED], 3);
    }

    #[test]
    fn a_late_tick_emits_once_and_warns() {
        let w = WindowKind::Tumbling { every: 1000, unit: WindowUnit::Time };
        let mut q = LocalQuery::new(&plan(count(), Some(w), 10_000), "q", 0).unwrap();
        q.push(&rec(1), 10).unwrap();
        let out = q.advance(3500).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(q.next_deadline_ms(), Some(4000));
        assert_eq!(count_of(&out[0]), 1);
        assert!(out[0].meta[keys::WARNINGS][0]["error"]
            .as_str()
            .unwrap()
            .contains("2 window(s) late"));
        q.push(&rec(2), 3600).unwrap();
        let next = q.advance(4000).unwrap();
        assert_eq!(count_of(&next[0]), 1);
        assert!(next[0].meta.get(keys::WARNINGS).is_none());
    }

    /// The metadata written straight from its facts is the text of the map it reads as, for
    /// every kind of emission: windowless and final, time windows due and late, record-time
    /// windows with their bounds, sketches and group limits passed through, an outer query's.
    #[test]
    fn metadata_is_written_as_the_map_it_reads_as() {
        let config = needle_query::QueryConfig { max_groups: 1, ..Default::default() };
        let mut emissions = Vec::new();
        for bql in [
            "SELECT * FROM STREAM(10000, TIME) LIMIT 2",
            "SELECT g, COUNT(*) FROM STREAM(10000, TIME) GROUP BY g WINDOWING TUMBLING(1000, TIME)",
            "SELECT COUNT(DISTINCT g) FROM STREAM(10000, TIME)",
            "SELECT COUNT(*) FROM (SELECT g, COUNT(*) FROM STREAM(10000, TIME) GROUP BY g)",
        ] {
            let plan = needle_query::compile(bql, &config).unwrap();
            let mut q = LocalQuery::new(&plan, "q-1", 0).unwrap();
            for (i, at) in [10, 20, 3500, 3600].into_iter().enumerate() {
                emissions.extend(q.push(&rec(i as i64), at).unwrap());
                emissions.extend(q.advance(at).unwrap());
            }
            emissions.extend(q.finish(9000).unwrap());
        }
        // a run on record time: its windows' bounds
        let w = WindowKind::Tumbling { every: 1000, unit: WindowUnit::Time };
        let query = Arc::new(CompiledQuery::compile(&plan(count(), Some(w), 0)).unwrap());
        let mut run = QueryRun::on_record_time(query.clone(), "q-2", 99, 1000, i64::MAX);
        for (id, time) in [(1, 1500), (2, 2300)] {
            let mut worker = query.new_worker();
            query.process(&mut worker, &rec(id), &EvalContext::new(0));
            emissions.extend(run.merge(query.flush(&mut worker).unwrap(), time).unwrap());
        }
        emissions.extend(run.finish(5000));
        let keys_seen: std::collections::BTreeSet<String> =
            emissions.iter().flat_map(|e| e.meta.keys().cloned()).collect();
        for key in [keys::QUERY, keys::WINDOW, keys::STATS, keys::WARNINGS, "Groups", "Sketch"] {
            assert!(keys_seen.contains(key), "no emission has {key}: {keys_seen:?}");
        }
        assert!(emissions.iter().any(|e| e.meta[keys::WINDOW].get(keys::START).is_some()));
        for e in &emissions {
            let written = serde_json::to_string(&e.meta).unwrap();
            let fresh = e.clone(); // not yet read as a map
            assert_eq!(serde_json::to_string(&fresh.meta).unwrap(), written);
            assert_eq!(written, serde_json::to_string(&e.meta.to_map()).unwrap());
            assert_eq!(written, serde_json::to_string(&*e.meta).unwrap());
            assert!(e.meta.approx_bytes() >= written.len() / 2, "{written}");
        }
        // a change makes it a map of its own, the rest kept
        let mut changed = emissions[0].clone();
        changed.meta.insert("Dropped Emissions".into(), Json::from(3));
        let text = serde_json::to_string(&changed.meta).unwrap();
        assert!(
            text.starts_with(r#"{"Query":{"ID":"q-1""#)
                && text.ends_with(r#""Dropped Emissions":3}"#)
        );
    }

    #[test]
    fn partials_travel_as_bytes_and_merge() {
        let query = Arc::new(CompiledQuery::compile(&plan(count(), None, 1000)).unwrap());
        let mut run = QueryRun::new(query.clone(), "q", 0);
        for n in [3, 4] {
            let mut w = query.new_worker();
            for id in 0..n {
                query.process(&mut w, &rec(id), &EvalContext::new(0));
            }
            let bytes = query.encode_partial(&query.flush(&mut w).unwrap());
            assert!(run.merge_bytes(&bytes, 1).unwrap().is_empty());
        }
        assert!(query.decode_partial(&[1, 2, 3]).is_err());
        let out = run.tick(1000);
        assert_eq!(count_of(&out[0]), 7);
        assert_eq!(out[0].meta[keys::STATS][keys::RECORDS_SEEN], 7);
        assert!(run.tick(2000).is_empty() && run.finish(2000).is_none());
    }

    #[test]
    fn a_partials_counts_off_the_wire_saturate_rather_than_overflow() {
        // seen and matched head the bytes unchecked (a fuzz find: fuzz/regressions/kafka_wire/)
        let query = Arc::new(CompiledQuery::compile(&plan(count(), None, 1000)).unwrap());
        let mut run = QueryRun::new(query.clone(), "q", 0);
        let mut w = query.new_worker();
        query.process(&mut w, &rec(1), &EvalContext::new(0));
        let mut bytes = query.encode_partial(&query.flush(&mut w).unwrap());
        bytes[..16].fill(0xff);
        for now in [1, 2] {
            assert!(run.merge_bytes(&bytes, now).unwrap().is_empty());
        }
        let mut other = query.decode_partial(&bytes).unwrap();
        query.combine(&mut other, query.decode_partial(&bytes).unwrap()).unwrap();
        assert_eq!((other.seen, other.matched), (u64::MAX, u64::MAX));
        run.add_seen(5);
        let out = run.tick(1000);
        assert_eq!(count_of(&out[0]), 2);
        assert_eq!(out[0].meta[keys::STATS][keys::RECORDS_SEEN], u64::MAX);
    }

    #[test]
    fn filter_explode_and_an_outer_query_run_per_emission() {
        // inner: SELECT g, COUNT(*) FROM STREAM() WHERE id > 1 GROUP BY g
        // outer: SELECT COUNT(*) FROM (inner) WHERE COUNT(*) >= 2
        let gt = |l: Expr, v: i64, op| {
            Expr::new(
                ExprKind::Compare {
                    op,
                    quantifier: None,
                    left: Box::new(l),
                    right: Box::new(Expr::new(ExprKind::Literal(Value::Long(v)), Span::default())),
                },
                Span::default(),
            )
        };
        let mut inner = stage(Aggregation::GroupBy {
            keys: vec![NamedExpr { name: "g".into(), expr: field("g") }],
            aggregates: vec![NamedAggregate {
                name: "COUNT(*)".into(),
                function: AggregateFunction::Count,
                input: None,
            }],
            max_groups: 100,
        });
        inner.filter = Some(gt(field("id"), 1, CompareOp::Gt));
        let mut outer = stage(count());
        outer.filter = Some(gt(field("COUNT(*)"), 2, CompareOp::Ge));
        outer.post.computations = vec![NamedExpr {
            name: "twice".into(),
            expr: Expr::new(
                ExprKind::Binary {
                    op: BinaryOp::Mul,
                    left: Box::new(field("COUNT(*)")),
                    right: Box::new(Expr::new(ExprKind::Literal(Value::Long(2)), Span::default())),
                },
                Span::default(),
            ),
        }];
        let mut p = plan(count(), None, 1000);
        p.stage = inner;
        p.outer = Some(outer);
        let mut q = LocalQuery::new(&p, "q", 0).unwrap();
        for id in 1..=4 {
            q.push(&rec(id), 0).unwrap();
        }
        // groups: even {2, 4} = 2, odd {3} = 1 → one group with COUNT(*) >= 2
        let out = q.finish(5).unwrap();
        assert_eq!(out[0].records[0].to_json(), r#"{"COUNT(*)":1,"twice":2}"#);
        assert_eq!(out[0].meta[keys::STATS][keys::RECORDS_MATCHED], 3);
    }

    #[test]
    fn a_partial_merged_past_a_boundary_joins_the_next_window() {
        let w = WindowKind::Tumbling { every: 1000, unit: WindowUnit::Time };
        let query = Arc::new(CompiledQuery::compile(&plan(count(), Some(w), 3000)).unwrap());
        let mut run = QueryRun::new(query.clone(), "q", 0);
        let partial = |n: i64| {
            let mut w = query.new_worker();
            for id in 0..n {
                query.process(&mut w, &rec(id), &EvalContext::new(0));
            }
            query.flush(&mut w).unwrap()
        };
        assert!(run.merge(partial(2), 500).unwrap().is_empty());
        let out = run.merge(partial(3), 1200).unwrap();
        assert_eq!((out.len(), count_of(&out[0])), (1, 2));
        let out = run.merge(partial(4), 3000).unwrap();
        assert_eq!((out.len(), count_of(&out[0]), out[0].is_final), (1, 3, true));
        // the query ended at 3000 before this partial came: it is not in the result
        assert_eq!(out[0].meta[keys::STATS][keys::RECORDS_SEEN], 5);
        assert!(run.is_done() && run.merge(partial(1), 3001).unwrap().is_empty());
    }

    #[test]
    fn record_windows_need_raw() {
        let w = WindowKind::Tumbling { every: 2, unit: WindowUnit::Record };
        assert!(CompiledQuery::compile(&plan(count(), Some(w), 1000)).is_err());
    }
}
