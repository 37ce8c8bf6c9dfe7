//! Which Kafka offsets may be committed: those of records whose results have gone out.
//!
//! The Kafka source cuts what it polls into batches; each batch is a *round* with, per partition,
//! the offset after its last message. A round is *held* while the batch waits for room in the
//! workers' queue, *in flight* from the moment the source offers it to the queue, and *done* when
//! the batch's receipt drops in flight (the worker flushed the batch's partials and the progress
//! message after them was delivered, or the in-process joiner merged them). A held round whose
//! batch is dropped (the source stopped before handing it on) is *abandoned*: never done.
//! Offsets are stored only through the longest prefix of done rounds, so a committed offset
//! never passes a record whose partials might still be lost, or that nobody processed.
//!
//! The source marks a round in flight *before* offering its batch, while no worker can have it,
//! and back to held if the queue refuses it: so a worker that finishes a batch quickly always
//! finds its round in flight.
//!
//! A rebalance that takes partitions away ([`Tracker::reset`]) starts a new *generation*: rounds
//! of the old one that finish later change nothing.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Held,
    InFlight,
    Done,
    Abandoned,
}

#[derive(Debug)]
struct Round {
    seq: u64,
    state: State,
    /// Per partition, the offset after the round's last message there.
    next: Vec<(i32, i64)>,
}

#[derive(Debug, Default)]
struct Rounds {
    generation: u64,
    next_seq: u64,
    rounds: VecDeque<Round>,
}

/// The rounds of one Kafka source.
#[derive(Debug, Default)]
pub struct Tracker {
    rounds: Mutex<Rounds>,
    changed: Condvar,
}

/// A round's token, in its batch's receipt: dropping it marks the round done (or abandoned, if
/// it was never handed on).
#[derive(Debug)]
pub struct RoundToken {
    tracker: Arc<Tracker>,
    generation: u64,
    seq: u64,
}

impl Drop for RoundToken {
    fn drop(&mut self) {
        self.tracker.change(self.generation, self.seq, |state| match state {
            State::InFlight => State::Done,
            State::Held => State::Abandoned,
            other => other,
        });
    }
}

/// A round's identity, kept by the source to say where its batch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundId {
    pub generation: u64,
    seq: u64,
}

impl Tracker {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    fn lock(&self) -> MutexGuard<'_, Rounds> {
        self.rounds.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current generation (changes at every [`Tracker::reset`]).
    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Opens a held round ending at `next` (partition → offset after its last message).
    pub fn begin(self: &Arc<Self>, next: Vec<(i32, i64)>) -> (RoundToken, RoundId) {
        let mut rounds = self.lock();
        let seq = rounds.next_seq;
        rounds.next_seq += 1;
        let generation = rounds.generation;
        rounds.rounds.push_back(Round { seq, state: State::Held, next });
        (RoundToken { tracker: self.clone(), generation, seq }, RoundId { generation, seq })
    }

    /// The source is offering the round's batch to the workers' queue (call before the offer).
    pub fn handing_on(&self, id: RoundId) {
        self.change(id.generation, id.seq, |state| match state {
            State::Held => State::InFlight,
            other => other,
        });
    }

    /// The queue refused the batch: the source holds it again.
    pub fn held_again(&self, id: RoundId) {
        self.change(id.generation, id.seq, |state| match state {
            State::InFlight => State::Held,
            other => other,
        });
    }

    fn change(&self, generation: u64, seq: u64, to: impl FnOnce(State) -> State) {
        let mut rounds = self.lock();
        if rounds.generation != generation {
            return;
        }
        if let Some(round) = rounds.rounds.iter_mut().find(|r| r.seq == seq) {
            round.state = to(round.state);
        }
        drop(rounds);
        self.changed.notify_all();
    }

    /// Takes the done rounds at the front and returns, per partition, the offset to store
    /// (empty when nothing new is done).
    pub fn completed(&self) -> BTreeMap<i32, i64> {
        let mut rounds = self.lock();
        let mut out = BTreeMap::new();
        while rounds.rounds.front().is_some_and(|r| r.state == State::Done) {
            let round = rounds.rounds.pop_front().expect("checked just above");
            for (partition, next) in round.next {
                let slot = out.entry(partition).or_insert(next);
                *slot = (*slot).max(next);
            }
        }
        out
    }

    /// Waits until no round is in flight (held rounds do not count: nobody will finish them),
    /// for at most `timeout`. True when none is.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut rounds = self.lock();
        loop {
            if !rounds.rounds.iter().any(|r| r.state == State::InFlight) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            rounds = self.changed.wait_timeout(rounds, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Rounds not yet done.
    pub fn open(&self) -> usize {
        self.lock().rounds.iter().filter(|r| r.state != State::Done).count()
    }

    /// Forgets every round and starts a new generation (partitions were revoked).
    pub fn reset(&self) {
        let mut rounds = self.lock();
        rounds.generation += 1;
        rounds.rounds.clear();
        drop(rounds);
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_advance_only_through_done_rounds_in_order() {
        let t = Tracker::new();
        let (a, ida) = t.begin(vec![(0, 10), (1, 5)]);
        let (b, idb) = t.begin(vec![(0, 20)]);
        let (c, idc) = t.begin(vec![(1, 9)]);
        for id in [ida, idb, idc] {
            t.handing_on(id);
        }
        drop(b);
        assert!(t.completed().is_empty(), "round a is not done: nothing may be stored");
        drop(a);
        assert_eq!(t.completed(), BTreeMap::from([(0, 20), (1, 5)]));
        assert!(t.completed().is_empty(), "taken once");
        assert!(!t.wait_idle(Duration::from_millis(20)), "c is still in flight");
        drop(c);
        assert!(t.wait_idle(Duration::from_millis(20)));
        assert_eq!(t.completed(), BTreeMap::from([(1, 9)]));
    }

    #[test]
    fn a_held_round_blocks_storing_but_not_waiting_and_a_reset_forgets_it() {
        let t = Tracker::new();
        let (held, _) = t.begin(vec![(0, 3)]);
        assert!(t.wait_idle(Duration::ZERO), "held rounds are nobody's to finish");
        assert_eq!(t.open(), 1);
        let before = t.generation();
        t.reset();
        assert_ne!(t.generation(), before);
        drop(held);
        assert!(t.completed().is_empty(), "a token of an old generation changes nothing");
        assert_eq!(t.open(), 0);
    }

    #[test]
    fn a_batch_dropped_without_being_handed_on_never_counts_as_done() {
        let t = Tracker::new();
        let (a, ida) = t.begin(vec![(0, 5)]);
        let (never, idn) = t.begin(vec![(0, 9)]);
        let (c, idc) = t.begin(vec![(1, 4)]);
        t.handing_on(ida);
        t.handing_on(idn);
        t.held_again(idn); // the queue was full
        t.handing_on(idc);
        drop(a);
        drop(never); // the source stopped with it in hand
        drop(c);
        assert_eq!(t.completed(), BTreeMap::from([(0, 5)]), "nothing past the abandoned round");
        assert!(t.completed().is_empty());
    }

    #[test]
    fn a_worker_finishing_before_the_offer_returns_still_counts() {
        let t = Tracker::new();
        let (token, id) = t.begin(vec![(2, 7)]);
        t.handing_on(id);
        drop(token); // the worker was quicker than the source
        assert_eq!(t.completed(), BTreeMap::from([(2, 7)]));
    }

    #[test]
    fn waiting_wakes_when_another_thread_finishes_a_round() {
        let t = Tracker::new();
        let (token, id) = t.begin(vec![(0, 1)]);
        t.handing_on(id);
        let worker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            drop(token);
        });
        assert!(t.wait_idle(Duration::from_secs(5)));
        worker.join().unwrap();
    }
}
