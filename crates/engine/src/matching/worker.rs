//! [`MatchWorker`]: one worker thread's side of matching — its per-query states, and the loop
//! over one line: decode the fields the active queries read, ask the [`MatchSet`] for the
//! candidates, run each candidate's filter and aggregation, take the whole record (kept as its
//! line's text) only for a RAW `*` query that matched.

use super::index::{Hit, NO_CONJUNCT};
use super::{MatchSet, Member};
use crate::eval::EvalContext;
use crate::exec::{Partial, WorkerState};
use crate::EngineError;
use needle_record::{Record, RecordError};
use std::collections::HashMap;
use std::sync::Arc;

type Fast = foldhash::fast::FixedState;

struct Slot {
    member: Arc<Member>,
    state: WorkerState,
    /// A RAW query's state holds records not handed on yet ([`MatchWorker::flush_raw`]).
    raw_pending: bool,
}

impl Slot {
    /// Hands on the partial the state holds, if any, unless its query left its set.
    fn hand_on(&mut self, out: &mut impl FnMut(&Arc<Member>, Partial)) {
        if let Some(partial) = self.member.query.flush(&mut self.state) {
            if self.member.is_live() {
                out(&self.member, partial);
            }
        }
    }
}

/// A record for a query: the line's, or one the query may keep without copying it.
enum Input<'r> {
    Borrowed(&'r Record),
    Owned(Record),
}

/// What one line did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineOutcome {
    /// Queries the record was tested against (index candidates).
    pub candidates: usize,
    /// Queries it matched.
    pub matched: usize,
}

/// One worker's states, one per query that has had a candidate record on this worker.
#[derive(Default)]
pub struct MatchWorker {
    slots: HashMap<u64, Slot, Fast>,
    /// Queries whose state took a record since the last flush (each once): a flush visits
    /// these, not every state (100,000 queries waiting for their needles cost nothing per tick).
    dirty: Vec<u64>,
    /// RAW queries whose states took a record since [`MatchWorker::flush_raw`] (each once).
    raw_pending: Vec<u64>,
    /// Flushes since the states of retired queries were last dropped.
    flushes: u32,
    /// The record lines are decoded into, kept from line to line.
    scratch: Record,
    /// The hits buffer, kept from line to line so a record's candidates cost no allocation
    /// (empty between lines: its hits borrow the set of one call).
    spare_hits: Vec<Hit<'static>>,
}

/// `hits` emptied, as a buffer for hits of another lifetime: the same allocation, since an
/// in-place `collect` of a type into one of the same size and alignment reuses it.
fn recycle<'a, 'b>(mut hits: Vec<Hit<'a>>) -> Vec<Hit<'b>> {
    hits.clear();
    hits.into_iter().map(|_| unreachable!("emptied above")).collect()
}

/// Every this many flushes, the states of queries that left their set are dropped.
const PURGE_EVERY: u32 = 64;

impl MatchWorker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs one line through the active queries. The records RAW queries took wait in their
    /// states for [`MatchWorker::flush_raw`] (the caller's, once per batch of lines: one partial
    /// a query, however many of the batch's records it took). A malformed line is an error and
    /// changes nothing.
    pub fn process(
        &mut self,
        set: &MatchSet,
        line: &[u8],
        ctx: &EvalContext,
    ) -> Result<LineOutcome, RecordError> {
        // the previous line's record, overwritten in place (its names and strings reused)
        let mut record = std::mem::take(&mut self.scratch);
        let outcome = set
            .decode_into(line, &mut record)
            .map(|()| self.process_record(set, &record, Some(line), ctx));
        self.scratch = record;
        outcome
    }

    /// [`MatchWorker::process`] for a record already decoded with (at least) the set's fields.
    /// `line` is the record's text, to decode it whole for RAW `*` queries; `None` when `record`
    /// is whole already.
    pub fn process_record(
        &mut self,
        set: &MatchSet,
        record: &Record,
        line: Option<&[u8]>,
        ctx: &EvalContext,
    ) -> LineOutcome {
        let mut hits = recycle(std::mem::take(&mut self.spare_hits));
        set.candidates(record, ctx, &mut hits);
        let mut outcome = LineOutcome::default();
        let mut whole: Option<Result<Record, RecordError>> = None;
        // A member proven to match that reads the whole record: it takes the record itself
        // (no copy) unless a later member reads it too; most matched lines have one such member.
        let mut deferred: Option<&Arc<Member>> = None;
        // hits come sorted by member: one decision per member
        for group in hits.chunk_by(|a, b| a.member.serial == b.member.serial) {
            let member = group[0].member;
            outcome.candidates += 1;
            // `Some(true)`: the index and the conjunct's clauses prove the filter TRUE;
            // `None`: the filter decides
            let proven = match group[0].conjunct {
                NO_CONJUNCT => None,
                _ if !group.iter().any(|hit| holds(member, hit, record, ctx)) => continue,
                _ if member.access.exact => Some(true),
                _ => None,
            };
            let query = &member.query;
            if query.is_raw() && !query.explodes() && query.sheds_raw(ctx.now_ms) {
                // its records are being dropped downstream for now: counted, neither decoded
                // whole nor copied (see CompiledQuery::shed_raw_until)
                if proven == Some(true) || query.filter_passes(record, ctx) {
                    self.shed(member);
                    outcome.matched += 1;
                }
                continue;
            }
            let input = match line {
                Some(line) if member.access.whole_record => {
                    if proven.is_none()
                        && member.access.prefilter
                        && !query.filter_passes(record, ctx)
                    {
                        continue;
                    }
                    let Ok(whole) = whole.get_or_insert_with(|| set.whole_record(line)) else {
                        // accepted by the field decoder but not whole (too deep): not for `*`
                        continue;
                    };
                    if proven == Some(true) {
                        if let Some(earlier) = deferred.replace(member) {
                            self.aggregate(
                                earlier,
                                Some(true),
                                Input::Borrowed(whole),
                                ctx,
                                &mut outcome,
                            );
                        }
                        continue;
                    }
                    whole
                }
                _ => record,
            };
            self.aggregate(member, proven, Input::Borrowed(input), ctx, &mut outcome);
        }
        if let Some(member) = deferred {
            if let Some(Ok(whole)) = whole.take() {
                self.aggregate(member, Some(true), Input::Owned(whole), ctx, &mut outcome);
            }
        }
        self.spare_hits = recycle(hits);
        outcome
    }

    /// Runs `input` through `member`'s query (`proven`: its filter is known to hold); a RAW
    /// query that took it waits for [`MatchWorker::flush_raw`].
    fn aggregate(
        &mut self,
        member: &Arc<Member>,
        proven: Option<bool>,
        input: Input<'_>,
        ctx: &EvalContext,
        outcome: &mut LineOutcome,
    ) {
        let query = &member.query;
        let slot = slot_of(&mut self.slots, member);
        let was_dirty = slot.state.is_dirty();
        let matched = match (proven, input) {
            (Some(true), Input::Owned(record)) => {
                query.process_matched_owned(&mut slot.state, record, ctx)
            }
            (Some(true), Input::Borrowed(record)) => {
                query.process_matched(&mut slot.state, record, ctx)
            }
            (_, Input::Owned(record)) => query.process_candidate(&mut slot.state, &record, ctx),
            (_, Input::Borrowed(record)) => query.process_candidate(&mut slot.state, record, ctx),
        };
        if matched {
            outcome.matched += 1;
            if query.is_raw() && !slot.raw_pending {
                slot.raw_pending = true;
                self.raw_pending.push(member.serial);
            }
        }
        if !was_dirty && slot.state.is_dirty() {
            self.dirty.push(member.serial);
        }
    }

    /// Counts a record `member`'s RAW query matched and keeps none of it (it sheds records).
    fn shed(&mut self, member: &Arc<Member>) {
        let slot = slot_of(&mut self.slots, member);
        let was_dirty = slot.state.is_dirty();
        member.query.count_shed(&mut slot.state);
        if !was_dirty {
            self.dirty.push(member.serial);
        }
    }

    /// Folds into `member`'s state on this worker a partial made of records read another way
    /// (see [`crate::exec::CompiledQuery::absorb`]); flushed with the rest.
    pub fn absorb(&mut self, member: &Arc<Member>, partial: Partial) -> Result<(), EngineError> {
        let query = &member.query;
        let slot = slot_of(&mut self.slots, member);
        let was_dirty = slot.state.is_dirty();
        query.absorb(&mut slot.state, partial)?;
        if !was_dirty && slot.state.is_dirty() {
            self.dirty.push(member.serial);
        }
        Ok(())
    }

    /// Hands on the partial of every RAW query that took a record since the last call (of
    /// queries still in their set): the records lines matched, for the join to emit at once. A
    /// worker calls it once per batch of lines: a query taking every record of a batch makes one
    /// partial, not one a record (100 `SELECT *` queries made the joiner merge one partial per
    /// record and query, and fall behind).
    pub fn flush_raw(&mut self, mut out: impl FnMut(&Arc<Member>, Partial)) {
        for serial in self.raw_pending.drain(..) {
            let Some(slot) = self.slots.get_mut(&serial) else { continue };
            slot.raw_pending = false;
            slot.hand_on(&mut out);
        }
    }

    /// Flushes every state with something in it (of queries still in their set), and now and
    /// then forgets the states of queries that left it (retired members).
    pub fn flush(&mut self, mut out: impl FnMut(&Arc<Member>, Partial)) {
        self.flush_raw(&mut out);
        for serial in self.dirty.drain(..) {
            if let Some(slot) = self.slots.get_mut(&serial) {
                slot.hand_on(&mut out);
            }
        }
        self.flushes += 1;
        if self.flushes >= PURGE_EVERY {
            self.flushes = 0;
            self.slots.retain(|_, slot| slot.member.is_live());
        }
    }

    /// Queries with a state on this worker.
    pub fn states(&self) -> usize {
        self.slots.len()
    }
}

/// `member`'s slot, made on its first record.
fn slot_of<'s>(slots: &'s mut HashMap<u64, Slot, Fast>, member: &Arc<Member>) -> &'s mut Slot {
    slots.entry(member.serial).or_insert_with(|| Slot {
        member: member.clone(),
        state: member.query.new_worker(),
        raw_pending: false,
    })
}

/// True when the conjunct of `hit` holds for `record`: every clause's sub-expression is TRUE
/// (or the index's key match already says so).
fn holds(member: &Member, hit: &Hit<'_>, record: &Record, ctx: &EvalContext) -> bool {
    if !hit.check {
        return true;
    }
    let Some(conjuncts) = &member.access.conjuncts else { return true };
    conjuncts[hit.conjunct as usize]
        .clauses
        .iter()
        .all(|clause| clause.test.as_ref().is_none_or(|t| t.eval_bool(record, ctx) == Some(true)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matching::member_of as member;

    /// The records of each RAW partial, by query.
    fn raw_records(worker: &mut MatchWorker, set: &MatchSet, line: &str) -> Vec<(u64, String)> {
        let ctx = EvalContext::new(0);
        let mut out = Vec::new();
        let mut keep = |m: &Arc<Member>, p: Partial| {
            for record in p.state.raw_records() {
                out.push((m.serial, serde_json::to_string(record).unwrap()));
            }
        };
        worker.process(set, line.as_bytes(), &ctx).unwrap();
        worker.flush_raw(&mut keep);
        out.sort();
        out
    }

    #[test]
    fn every_query_matching_a_line_gets_the_whole_record_once() {
        let set = MatchSet::new().update(
            vec![
                member(1, "SELECT * FROM STREAM() WHERE s = 'x'"),
                member(2, "SELECT * FROM STREAM() WHERE s = 'x' AND n > 1"),
                member(3, "SELECT * FROM STREAM() WHERE s = 'x'"),
                member(4, "SELECT n FROM STREAM() WHERE s = 'x'"),
                member(5, "SELECT * FROM STREAM() WHERE s = 'y'"),
            ],
            &[],
        );
        let mut worker = MatchWorker::new();
        let whole = r#"{"s":"x","n":2,"m":{"a":[1]}}"#.to_owned();
        let got = raw_records(&mut worker, &set, r#"{"s":"x","n":2,"m":{"a":[1]}}"#);
        let want: Vec<(u64, String)> = vec![
            (1, whole.clone()),
            (2, whole.clone()),
            (3, whole.clone()),
            (4, r#"{"n":2}"#.to_owned()),
        ];
        assert_eq!(got, want);
        // one query alone takes the record itself
        let got = raw_records(&mut worker, &set, r#"{"s":"y","n":0}"#);
        assert_eq!(got, vec![(5, r#"{"s":"y","n":0}"#.to_owned())]);
    }

    #[test]
    fn a_raw_query_hands_on_what_a_batch_of_lines_gave_it_in_one_partial() {
        let set = MatchSet::new().update(
            vec![
                member(1, "SELECT * FROM STREAM() WHERE s = 'x'"),
                member(2, "SELECT n FROM STREAM() WHERE n > 1 LIMIT 1"),
                member(3, "SELECT COUNT(*) AS c FROM STREAM()"),
            ],
            &[],
        );
        let ctx = EvalContext::new(0);
        let mut worker = MatchWorker::new();
        for n in 0..4 {
            worker.process(&set, format!(r#"{{"s":"x","n":{n}}}"#).as_bytes(), &ctx).unwrap();
        }
        let mut handed = Vec::new();
        worker.flush_raw(|m, p| {
            let dropped = m.query.inner.aggregator.raw_dropped(&p.state);
            handed.push((m.serial, p.matched, p.state.raw_len(), dropped))
        });
        handed.sort();
        // the LIMIT's query keeps what its LIMIT takes, and counts the rest as dropped
        assert_eq!(handed, vec![(1, 4, 4, 0), (2, 2, 1, 1)], "one partial each; not the COUNT");
        worker.flush_raw(|m, _| panic!("{} was handed on already", m.serial));
        let mut flushed = Vec::new();
        worker.flush(|m, p| flushed.push((m.serial, p.matched)));
        assert_eq!(flushed, vec![(3, 4)], "the aggregation goes on the tick");
        // the tick hands on what waits too
        worker.process(&set, br#"{"s":"x","n":5}"#, &ctx).unwrap();
        let mut flushed = Vec::new();
        worker.flush(|m, p| flushed.push((m.serial, p.state.raw_len())));
        flushed.sort();
        assert_eq!(flushed, vec![(1, 1), (2, 1), (3, 0)]);
    }

    #[test]
    fn a_raw_query_that_sheds_records_counts_its_matches_and_keeps_none() {
        let set = MatchSet::new().update(
            vec![
                member(1, "SELECT * FROM STREAM() WHERE s = 'x'"),
                member(2, "SELECT * FROM STREAM() WHERE s = 'x'"),
                member(3, "SELECT * FROM STREAM() WHERE n > 1"),
            ],
            &[],
        );
        let shedding: Vec<&Arc<Member>> = set.members().filter(|m| m.serial != 2).collect();
        for m in &shedding {
            m.query.shed_raw_until(1_000);
        }
        let mut worker = MatchWorker::new();
        let line = r#"{"s":"x","n":2}"#;
        let got = raw_records(&mut worker, &set, line);
        assert_eq!(got, vec![(2, line.to_owned())], "only the query not shedding keeps it");
        raw_records(&mut worker, &set, r#"{"s":"x","n":0}"#);
        let mut flushed = Vec::new();
        worker.flush(|m, p| flushed.push((m.serial, p.matched, p.state.raw_len())));
        flushed.sort();
        // the shedding ones' matches are counted (and, by the joiner, dropped)
        assert_eq!(flushed, vec![(1, 2, 0), (3, 1, 0)]);
        // and once the time is past, records are kept again
        let later = EvalContext::new(1_000);
        let mut kept = Vec::new();
        worker.process(&set, line.as_bytes(), &later).unwrap();
        worker.flush_raw(|m, _| kept.push(m.serial));
        kept.sort();
        assert_eq!(kept, vec![1, 2, 3]);
    }

    #[test]
    fn a_recycled_hits_buffer_keeps_its_allocation() {
        let hits: Vec<Hit<'_>> = Vec::with_capacity(16);
        let at = hits.as_ptr() as usize;
        let again: Vec<Hit<'static>> = recycle(hits);
        assert_eq!((again.as_ptr() as usize, again.capacity()), (at, 16));
    }
}
