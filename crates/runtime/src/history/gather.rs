//! The distributed mode's read of the past: each worker node reads its own store (the records
//! of the partitions it read) and sends its pieces in time order; an api node's [`Gather`]
//! puts the workers' pieces back into one time order, so its join side merges them exactly as
//! it merges one local read.
//!
//! ```text
//! worker A: Planned(first, last)  Piece(t1) Piece(t4) ... Done(report)
//! worker B: Planned(first, last)  Piece(t2) Piece(t3) ... Done(report)
//!                     │
//!   Gather: Range(min first, max last) once every worker planned;
//!           then pieces in time order: a piece goes out once every worker still reading has
//!           one waiting (none can send an earlier one), the smallest time first;
//!           Done(the reports summed) once every worker is done
//! ```
//!
//! A worker that stops answering (the api node no longer hears from it) is given up
//! ([`Gather::lose`]): the result goes on without its part, and the final report names it.

use crate::history::ReplayReport;
use std::collections::{BTreeMap, VecDeque};

/// What one worker node sends about its read of the past (its partials already encoded or
/// decoded: `P`).
#[derive(Debug)]
pub enum WorkerHistory<P> {
    /// The read is planned: the times of the first and last stored record in range (`None`:
    /// this worker stores none).
    Planned { data: Option<(i64, i64)> },
    /// A partial at the record time it belongs at; a worker sends its pieces in time order.
    Piece { at_ms: i64, partial: P },
    /// The read is over.
    Done { report: ReplayReport },
}

/// What the join side does next, in order.
#[derive(Debug, PartialEq)]
pub enum Gathered<P> {
    /// Every worker planned: the first and last stored record time over all of them (the
    /// run's windows are placed from it, [`crate::history::replay::record_range`]).
    Range(Option<(i64, i64)>),
    /// The next piece in time order.
    Piece { at_ms: i64, partial: P },
    /// Every worker is done (or given up): what the read cost in all.
    Done(Box<ReplayReport>),
}

struct WorkerRead<P> {
    planned: bool,
    data: Option<(i64, i64)>,
    queue: VecDeque<(i64, P)>,
    done: bool,
    report: ReplayReport,
}

impl<P> WorkerRead<P> {
    fn new() -> Self {
        Self {
            planned: false,
            data: None,
            queue: VecDeque::new(),
            done: false,
            report: ReplayReport::default(),
        }
    }
}

/// One query's read of the past on several worker nodes, on its api node (see the module doc).
pub struct Gather<P> {
    workers: BTreeMap<String, WorkerRead<P>>,
    ranged: bool,
    finished: bool,
    lost: Vec<String>,
}

impl<P> Gather<P> {
    /// Waits for `workers` (the worker nodes keeping history when the query started).
    pub fn new(workers: impl IntoIterator<Item = String>) -> Self {
        let workers = workers.into_iter().map(|w| (w, WorkerRead::new())).collect();
        Self { workers, ranged: false, finished: false, lost: Vec::new() }
    }

    /// The workers whose read is not over yet.
    pub fn waiting_for(&self) -> impl Iterator<Item = &str> {
        self.workers.iter().filter(|(_, w)| !w.done).map(|(name, _)| name.as_str())
    }

    /// Takes what `worker` sent and returns what can go on now. A worker that was not expected
    /// joins while no piece has gone out yet (it started meanwhile); after that its part
    /// cannot be put in order any more and is left out (and named in the report).
    pub fn take(&mut self, worker: &str, event: WorkerHistory<P>) -> Vec<Gathered<P>> {
        if self.finished {
            return Vec::new();
        }
        if !self.workers.contains_key(worker) {
            if self.ranged {
                if !self.lost.iter().any(|w| w == worker) {
                    self.lost.push(worker.to_owned());
                }
                return Vec::new();
            }
            self.workers.insert(worker.to_owned(), WorkerRead::new());
        }
        let read = self.workers.get_mut(worker).expect("inserted above");
        if read.done {
            return Vec::new(); // (a worker restarted mid-read: its second read is not counted)
        }
        match event {
            WorkerHistory::Planned { data } => {
                read.planned = true;
                read.data = data;
            }
            WorkerHistory::Piece { at_ms, partial } => read.queue.push_back((at_ms, partial)),
            WorkerHistory::Done { report } => {
                read.planned = true;
                read.done = true;
                read.report = report;
            }
        }
        self.drain()
    }

    /// Gives up on `worker` (it stopped answering): what it sent still counts; the rest of its
    /// part is missing, and the report says so.
    pub fn lose(&mut self, worker: &str) -> Vec<Gathered<P>> {
        match self.workers.get_mut(worker) {
            Some(read) if !read.done => {
                read.planned = true;
                read.done = true;
                self.lost.push(worker.to_owned());
                self.drain()
            }
            _ => Vec::new(),
        }
    }

    fn drain(&mut self) -> Vec<Gathered<P>> {
        let mut out = Vec::new();
        if !self.ranged {
            if !self.workers.values().all(|w| w.planned) {
                return out;
            }
            self.ranged = true;
            let data = self.workers.values().filter_map(|w| w.data).reduce(|a, b| {
                (a.0.min(b.0), a.1.max(b.1)) //
            });
            out.push(Gathered::Range(data));
        }
        loop {
            // a worker still reading with nothing waiting may yet send an earlier piece
            if self.workers.values().any(|w| !w.done && w.queue.is_empty()) {
                return out;
            }
            let next = self
                .workers
                .values_mut()
                .filter(|w| !w.queue.is_empty())
                .min_by_key(|w| w.queue.front().map(|(at, _)| *at));
            match next.and_then(|w| w.queue.pop_front()) {
                Some((at_ms, partial)) => out.push(Gathered::Piece { at_ms, partial }),
                None => break,
            }
        }
        // every worker is done and everything sent went out
        self.finished = true;
        let mut report = ReplayReport::default();
        for read in self.workers.values() {
            report.add(&read.report);
        }
        report.workers = self.workers.len() as u64;
        report.workers_missing = std::mem::take(&mut self.lost);
        out.push(Gathered::Done(Box::new(report)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(at_ms: i64, partial: u32) -> WorkerHistory<u32> {
        WorkerHistory::Piece { at_ms, partial }
    }

    fn done(read: u64) -> WorkerHistory<u32> {
        WorkerHistory::Done { report: ReplayReport { records_read: read, ..Default::default() } }
    }

    fn pieces(out: &[Gathered<u32>]) -> Vec<(i64, u32)> {
        out.iter()
            .filter_map(|g| match g {
                Gathered::Piece { at_ms, partial } => Some((*at_ms, *partial)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn pieces_of_two_workers_come_out_in_time_order() {
        let mut g = Gather::new(["a".to_owned(), "b".to_owned()]);
        assert!(g.take("a", WorkerHistory::Planned { data: Some((10, 40)) }).is_empty());
        let out = g.take("b", WorkerHistory::Planned { data: Some((5, 30)) });
        assert_eq!(out, vec![Gathered::Range(Some((5, 40)))]);
        assert!(g.take("a", piece(10, 1)).is_empty(), "b may still send something earlier");
        assert!(g.take("a", piece(40, 2)).is_empty());
        // b's next piece may still come before a's 10
        assert_eq!(pieces(&g.take("b", piece(5, 3))), vec![(5, 3)]);
        assert_eq!(pieces(&g.take("b", piece(30, 4))), vec![(10, 1), (30, 4)]);
        let out = g.take("b", done(7));
        assert_eq!(pieces(&out), vec![(40, 2)], "b is done: a's pieces need not wait for it");
        assert!(!matches!(out.last(), Some(Gathered::Done(_))), "a is still reading");
        let out = g.take("a", done(5));
        assert_eq!(pieces(&out), vec![]);
        let Some(Gathered::Done(report)) = out.last() else { panic!("{out:?}") };
        assert_eq!(report.records_read, 12);
        assert_eq!(report.workers, 2);
        assert!(report.workers_missing.is_empty());
        assert!(g.take("a", piece(50, 9)).is_empty(), "nothing after the end");
    }

    proptest::proptest! {
        /// Whatever the workers' pieces and however their messages interleave, every piece
        /// goes out once, in time order, and the end comes last.
        #[test]
        fn any_interleaving_comes_out_whole_and_in_time_order(
            reads in proptest::collection::vec(proptest::collection::vec(0i64..50, 0..12), 1..4),
            order in proptest::collection::vec(0usize..4, 0..80),
        ) {
            let names: Vec<String> = (0..reads.len()).map(|w| format!("w{w}")).collect();
            let mut queues: Vec<Vec<WorkerHistory<u32>>> = reads
                .iter()
                .enumerate()
                .map(|(w, times)| {
                    let mut times = times.clone();
                    times.sort();
                    let data = times.first().map(|&first| (first, *times.last().unwrap()));
                    let mut events = vec![WorkerHistory::Planned { data }];
                    events.extend(times.iter().enumerate().map(|(i, &t)| piece(t, (w * 100 + i) as u32)));
                    events.push(done(times.len() as u64));
                    events.reverse(); // popped from the back
                    events
                })
                .collect();
            let mut g = Gather::new(names.clone());
            let mut out = Vec::new();
            let mut turns = order.into_iter();
            while queues.iter().any(|q| !q.is_empty()) {
                let w = turns.next().unwrap_or(0) % queues.len();
                let w = (w..w + queues.len()).map(|i| i % queues.len()).find(|&i| !queues[i].is_empty()).unwrap();
                let event = queues[w].pop().unwrap();
                out.extend(g.take(&names[w], event));
            }
            let times: Vec<i64> = pieces(&out).iter().map(|p| p.0).collect();
            let mut sorted = times.clone();
            sorted.sort();
            proptest::prop_assert_eq!(&times, &sorted);
            proptest::prop_assert_eq!(times.len(), reads.iter().map(Vec::len).sum::<usize>());
            let ranges = out.iter().filter(|g| matches!(g, Gathered::Range(_))).count();
            proptest::prop_assert_eq!(ranges, 1);
            proptest::prop_assert!(matches!(out.first(), Some(Gathered::Range(_))));
            let Some(Gathered::Done(report)) = out.last() else { panic!("no end: {out:?}") };
            proptest::prop_assert_eq!(report.records_read as usize, times.len());
        }
    }

    #[test]
    fn workers_with_nothing_stored_give_an_empty_range_and_end_at_once() {
        let mut g: Gather<u32> = Gather::new(["a".to_owned(), "b".to_owned()]);
        g.take("a", WorkerHistory::Planned { data: None });
        assert_eq!(g.take("b", WorkerHistory::Planned { data: None }), vec![Gathered::Range(None)]);
        g.take("a", done(0));
        assert!(matches!(g.take("b", done(0)).as_slice(), [Gathered::Done(_)]));
    }

    #[test]
    fn a_lost_worker_no_longer_holds_the_others_back_and_is_named() {
        let mut g = Gather::new(["a".to_owned(), "b".to_owned()]);
        g.take("a", WorkerHistory::Planned { data: Some((1, 2)) });
        assert!(g.take("a", piece(1, 1)).is_empty());
        let out = g.lose("b");
        assert_eq!(out.first(), Some(&Gathered::Range(Some((1, 2)))));
        assert_eq!(pieces(&out), vec![(1, 1)]);
        let out = g.take("a", done(3));
        let Some(Gathered::Done(report)) = out.last() else { panic!("{out:?}") };
        assert_eq!(report.workers_missing, vec!["b".to_owned()]);
        assert_eq!(g.waiting_for().count(), 0);
    }

    #[test]
    fn a_worker_that_started_meanwhile_joins_until_the_first_piece_goes_out() {
        let mut g = Gather::new(["a".to_owned()]);
        g.take("c", WorkerHistory::Planned { data: Some((0, 9)) });
        assert_eq!(g.waiting_for().collect::<Vec<_>>(), vec!["a", "c"]);
        let out = g.take("a", WorkerHistory::Planned { data: Some((3, 4)) });
        assert_eq!(out, vec![Gathered::Range(Some((0, 9)))]);
        // too late now: a worker nobody waited for is left out, and named
        assert!(g.take("late", piece(1, 1)).is_empty());
        g.take("c", done(1));
        let out = g.take("a", done(1));
        let Some(Gathered::Done(report)) = out.last() else { panic!("{out:?}") };
        assert_eq!(report.workers_missing, vec!["late".to_owned()]);
    }
}
