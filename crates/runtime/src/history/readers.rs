//! The threads that read the past, kept between queries: [`run_all`] runs a read's jobs on the
//! calling thread and on reader threads that wait for work, made when none is idle and ended
//! after [`IDLE`] without any.
//!
//! A thread per job, made and ended per query, cost more than a small read: besides making
//! the thread and its stack, the allocator (jemalloc) gives each new thread an arena and, when
//! the arena's last thread ends, returns its memory to the kernel — so every query's buffers were
//! page faults again (a third of the `temp0 > 95` filter's time, and a tenth more for the purge
//! itself under KVM). A kept thread keeps its arena and its cache warm.

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

/// How long a reader thread waits for work before it ends.
pub const IDLE: Duration = Duration::from_secs(60);

/// A job as a reader thread takes it: its borrows are the caller's, who waits for it to end.
type Job = Box<dyn FnOnce() + Send + 'static>;

struct Readers {
    jobs: Sender<Job>,
    waiting: Receiver<Job>,
    /// Threads waiting for a job (each sent job is owed to one of them).
    idle: Mutex<usize>,
}

fn readers() -> &'static Readers {
    static READERS: OnceLock<Readers> = OnceLock::new();
    READERS.get_or_init(|| {
        let (jobs, waiting) = crossbeam_channel::unbounded();
        Readers { jobs, waiting, idle: Mutex::new(0) }
    })
}

impl Readers {
    /// Runs `job` on an idle reader thread, or on a new one.
    fn start(&'static self, job: Job) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if *idle > 0 {
            *idle -= 1;
            // (the receiver lives as long as the process)
            let _ = self.jobs.send(job);
            return;
        }
        drop(idle);
        let spawned = std::thread::Builder::new()
            .name("needle-history-read".into())
            .spawn(move || self.serve(job));
        if let Err(error) = spawned {
            // the job is dropped unrun: its caller counts it as failed ([`Ends`])
            eprintln!("needle: history: cannot start a reader thread: {error}");
        }
    }

    /// A reader thread: its first job, then what it is given, until [`IDLE`] passes without.
    fn serve(&'static self, first: Job) {
        first();
        loop {
            *self.idle.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            match self.waiting.recv_timeout(IDLE) {
                Ok(job) => job(),
                Err(RecvTimeoutError::Timeout) => {
                    let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
                    // a job sent while this thread was counted idle is owed to it
                    match self.waiting.try_recv() {
                        Ok(job) => {
                            drop(idle);
                            job();
                        }
                        Err(_) => {
                            *idle -= 1;
                            return;
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}

/// Jobs not yet ended, and whether one panicked.
struct Pending {
    left: Mutex<(usize, bool)>,
    done: Condvar,
}

/// A job's end, counted when it is dropped: run to its end, or not (a panic, or never run).
struct Ends<'p> {
    pending: &'p Pending,
    ran: bool,
}

impl Drop for Ends<'_> {
    fn drop(&mut self) {
        let mut left = self.pending.left.lock().unwrap_or_else(|e| e.into_inner());
        left.0 -= 1;
        left.1 |= !self.ran;
        if left.0 == 0 {
            self.pending.done.notify_all();
        }
    }
}

/// Runs every job, the first on this thread and the others on reader threads, and returns when
/// all have ended; a job's panic (or one that could not be started) is raised here once all
/// have ended.
pub fn run_all<'a>(mut jobs: Vec<Box<dyn FnOnce() + Send + 'a>>) {
    if jobs.is_empty() {
        return;
    }
    let mine = jobs.remove(0);
    let pending = Pending { left: Mutex::new((jobs.len(), false)), done: Condvar::new() };
    let shared: &Pending = &pending;
    for job in jobs {
        let ends = Ends { pending: shared, ran: false };
        let wrapped: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
            let mut ends = ends;
            ends.ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_ok();
        });
        // SAFETY: the job borrows only what outlives this call ('a, and `pending`), and this
        // call does not return (nor unwind: the job on this thread is caught below) before
        // every job sent has ended, which `pending` counts
        let wrapped: Job = unsafe { std::mem::transmute::<_, Job>(wrapped) };
        readers().start(wrapped);
    }
    let own = std::panic::catch_unwind(std::panic::AssertUnwindSafe(mine));
    let mut left = pending.left.lock().unwrap_or_else(|e| e.into_inner());
    while left.0 > 0 {
        left = pending.done.wait(left).unwrap_or_else(|e| e.into_inner());
    }
    let panicked = left.1;
    drop(left);
    if let Err(panic) = own {
        std::panic::resume_unwind(panic);
    }
    if panicked {
        panic!("needle: history: a reader thread panicked");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_job_runs_once_and_borrows_stay_valid() {
        for n in [1, 2, 5] {
            let count = AtomicUsize::new(0);
            let mut results = vec![0usize; n];
            let jobs: Vec<Box<dyn FnOnce() + Send + '_>> = results
                .iter_mut()
                .enumerate()
                .map(|(i, slot)| {
                    let count = &count;
                    Box::new(move || {
                        count.fetch_add(1, Ordering::Relaxed);
                        *slot = i + 1;
                    }) as Box<dyn FnOnce() + Send + '_>
                })
                .collect();
            run_all(jobs);
            assert_eq!(count.load(Ordering::Relaxed), n);
            assert_eq!(results, (1..=n).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_panic_in_a_reader_is_raised_after_all_have_ended() {
        let ended = AtomicUsize::new(0);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let ended = &ended;
            let jobs: Vec<Box<dyn FnOnce() + Send + '_>> = vec![
                Box::new(move || {
                    std::thread::sleep(Duration::from_millis(20));
                    ended.fetch_add(1, Ordering::Relaxed);
                }),
                Box::new(|| panic!("boom")),
            ];
            run_all(jobs);
        }));
        assert!(outcome.is_err());
        assert_eq!(ended.load(Ordering::Relaxed), 1);
    }
}
