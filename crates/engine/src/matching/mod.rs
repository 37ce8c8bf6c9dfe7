//! Many queries, one pass: which of the active queries a record can match, found without
//! testing every query against every record.
//!
//! - [`access`]: what a query's filter offers an index (equality, IN, ranges, their ANDs and
//!   ORs); which fields it reads is the compiled query's (`crate::exec::reads`);
//! - [`index`]: the immutable predicate index over a list of queries;
//! - [`set`]: [`MatchSet`], the snapshot the workers read (an index updated incrementally, and
//!   the union of the fields to decode);
//! - [`worker`]: [`MatchWorker`], one worker thread's loop over a line and its per-query states.
//!
//! The contract: for every record, the queries that match it through a [`MatchWorker`] are
//! exactly those that match when every query's filter runs on the whole record
//! (`tests/matching_differential.rs` checks it on random queries and records). A record costs
//! the decoding of the fields some query reads, one lookup per indexed field, and the work of
//! the queries it may match — not of every query that exists.

pub mod access;
pub mod index;
pub mod set;
pub mod worker;

pub use set::MatchSet;
pub use worker::{LineOutcome, MatchWorker};

use crate::exec::CompiledQuery;
use access::Access;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One active query as the matcher knows it. `serial` is unique for the life of a process (the
/// registry hands them out), so a worker's state cannot be confused with a later query's.
#[derive(Debug)]
pub struct Member {
    pub serial: u64,
    pub id: Arc<str>,
    pub query: Arc<CompiledQuery>,
    pub(crate) access: Access,
    /// Set once, when the member leaves its [`MatchSet`]: from then on no snapshot offers it as
    /// a candidate, old ones included, even before the index drops it physically.
    retired: AtomicBool,
}

impl Member {
    pub fn new(serial: u64, id: Arc<str>, query: Arc<CompiledQuery>) -> Arc<Member> {
        let access = Access::of(&query);
        Arc::new(Member { serial, id, query, access, retired: AtomicBool::new(false) })
    }

    /// False once the member was removed from its set.
    pub fn is_live(&self) -> bool {
        !self.retired.load(Ordering::Relaxed)
    }

    /// Marks the member removed; true when it was live until now.
    pub(crate) fn retire(&self) -> bool {
        !self.retired.swap(true, Ordering::Relaxed)
    }

    /// True when the index can skip this query for records its filter's conjuncts rule out; false
    /// when every record is a candidate (no filter, or none the index can use).
    pub fn is_indexed(&self) -> bool {
        self.access.conjuncts.is_some()
    }

    /// What this query reads of a record: top-level field names, and `name\u{0}key` for a
    /// field it reads only through a constant key.
    pub fn fields(&self) -> &[Box<str>] {
        &self.query.reads.fields
    }
}

/// A member running `bql` (compiled with the default configuration), for tests.
#[cfg(test)]
pub(crate) fn member_of(serial: u64, bql: &str) -> Arc<Member> {
    let plan = needle_query::compile(bql, &needle_query::QueryConfig::default()).unwrap();
    Member::new(
        serial,
        format!("q{serial}").into(),
        Arc::new(CompiledQuery::compile(&plan).unwrap()),
    )
}

#[cfg(test)]
mod tests {
    /// Each of a million idle queries is one `Arc<Member>`: with its two counts it must stay
    /// within the allocator's 80-byte class (it was 88 bytes, in the 96-byte class).
    #[test]
    fn a_member_with_its_arc_s_counts_fits_in_80_bytes() {
        let counts = 2 * std::mem::size_of::<usize>();
        assert!(std::mem::size_of::<super::Member>() + counts <= 80);
    }
}
