//! needle's side of `needle bench vs-bullet`: the queries over the same lines on one thread,
//! through the path the runtime's workers and joiner use.
//!
//! Per pass (every pass starts from new states, as every Bullet pass starts from new Queriers):
//! the queries are compiled into one [`MatchSet`] (untimed, as the peer creates its Queriers
//! before its clock starts); then, timed, every line goes through a [`MatchWorker`] (lazy
//! decoding of the fields the queries read, the predicate index, filters, partial aggregation,
//! a whole decode of a record a `SELECT *` query matched), each RAW match goes at once to its
//! query's [`QueryRun`] (the join: merge, LIMIT), a query whose run is done leaves the set (as
//! the registry removes it, and as Bullet's Filter bolt removes a done query), and every
//! 10,000 lines the worker flushes its other partials to their runs (the runtime's tick).
//! After the clock stops, the end of the input: a last flush and every run's final emission
//! (the peer's `getData()` and Join-bolt combine after its loop, untimed too).
//!
//! Time is injected: every query is received at 0 and the clock stays at 0, so no query's
//! 30 s duration ends mid-run however long a pass takes.

use needle_engine::exec::{CompiledQuery, Partial, QueryRun};
use needle_engine::matching::{MatchSet, MatchWorker, Member};
use needle_engine::EvalContext;
use needle_query::QueryConfig;
use needle_record::{Record, Validation};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Lines between two flushes of the worker's partials (the runtime's tick).
const TICK_LINES: usize = 10_000;
/// The injected clock: when every query is received and every record is processed.
const NOW_MS: i64 = 0;

/// The queries, compiled once.
pub struct Queries {
    compiled: Vec<Arc<CompiledQuery>>,
    validation: Validation,
}

impl Queries {
    /// Compiles every BQL text with needle's default limits; an error names the query.
    pub fn compile(texts: &[String], validation: Validation) -> Result<Self, String> {
        let mut compiled = Vec::with_capacity(texts.len());
        for (i, text) in texts.iter().enumerate() {
            let plan = needle_query::compile(text, &QueryConfig::default())
                .map_err(|e| format!("query {} does not compile: {}", i + 1, e.render(text)))?;
            let query = CompiledQuery::compile(&plan)
                .map(Arc::new)
                .map_err(|e| format!("query {} cannot run: {text}: {e}", i + 1))?;
            compiled.push(query);
        }
        Ok(Self { compiled, validation })
    }

    /// A new match set of the queries: a pass removes the queries that end from its set, and
    /// a removed member is retired for good, so every pass needs members of its own.
    fn set(&self) -> MatchSet {
        let members = self
            .compiled
            .iter()
            .enumerate()
            .map(|(i, query)| Member::new(i as u64 + 1, format!("q{i}").into(), query.clone()));
        MatchSet::with_validation(self.validation).update(members.collect(), &[])
    }

    pub fn len(&self) -> usize {
        self.compiled.len()
    }
}

/// What one pass measured and produced.
pub struct Pass {
    pub wall: Duration,
    pub cpu: Duration,
    /// Per query, in order: the records of all its emissions.
    pub results: Vec<Vec<Record>>,
}

/// One pass of every line through every query, on the calling thread.
pub fn pass(queries: &Queries, lines: &[Vec<u8>]) -> Result<Pass, String> {
    let mut join = Join {
        runs: queries
            .compiled
            .iter()
            .enumerate()
            .map(|(i, q)| QueryRun::new(q.clone(), format!("q{i}"), NOW_MS))
            .collect(),
        results: vec![Vec::new(); queries.len()],
        ended: Vec::new(),
        error: None,
    };
    let mut set = queries.set();
    let mut worker = MatchWorker::new();
    let ctx = EvalContext::new(NOW_MS);
    let mut malformed = 0usize;

    let cpu_start = thread_cpu_time();
    let start = Instant::now();
    for chunk in lines.chunks(TICK_LINES) {
        for line in chunk {
            if worker.process(&set, line, &ctx).is_err() {
                malformed += 1;
            }
            // each line's RAW records at once, as a LIMIT query's end must come with its record
            worker.flush_raw(|m, p| join.merge(m, p));
            join.remove_ended(&mut set);
        }
        worker.flush(|m, p| join.merge(m, p));
        join.remove_ended(&mut set);
    }
    let wall = start.elapsed();
    let cpu = thread_cpu_time().saturating_sub(cpu_start);

    worker.flush(|m, p| join.merge(m, p));
    for (run, results) in join.runs.iter_mut().zip(join.results.iter_mut()) {
        if let Some(last) = run.finish(NOW_MS) {
            results.extend(last.records);
        }
    }
    if let Some(error) = join.error {
        return Err(error);
    }
    if malformed > 0 {
        return Err(format!("{malformed} records did not decode"));
    }
    Ok(Pass { wall, cpu, results: join.results })
}

/// The join side of a pass: one run per query, indexed by serial - 1.
struct Join {
    runs: Vec<QueryRun>,
    results: Vec<Vec<Record>>,
    /// Serials of queries whose run became done, to remove from the set.
    ended: Vec<u64>,
    error: Option<String>,
}

impl Join {
    fn merge(&mut self, member: &Arc<Member>, partial: Partial) {
        let i = (member.serial - 1) as usize;
        let run = &mut self.runs[i];
        match run.merge(partial, NOW_MS) {
            Ok(emissions) => {
                for emission in emissions {
                    self.results[i].extend(emission.records);
                }
                if run.is_done() {
                    self.ended.push(member.serial);
                }
            }
            Err(e) => {
                self.error.get_or_insert_with(|| format!("query {}: {e}", i + 1));
            }
        }
    }

    fn remove_ended(&mut self, set: &mut MatchSet) {
        if !self.ended.is_empty() {
            *set = set.update(Vec::new(), &self.ended);
            self.ended.clear();
        }
    }
}

/// needle's figures at one query count.
pub struct Measured {
    pub passes: usize,
    pub records_per_sec: f64,
    pub records_per_cpu_sec: f64,
}

/// One untimed pass, then timed passes until `seconds` have passed (at least one), on a thread
/// of its own pinned to `cpu` when given.
pub fn measure(
    texts: &[String],
    validation: Validation,
    lines: &[Vec<u8>],
    seconds: f64,
    cpu: Option<usize>,
) -> Result<Measured, String> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                if let Some(cpu) = cpu {
                    pin_current_thread(cpu)?;
                }
                let queries = Queries::compile(texts, validation)?;
                pass(&queries, lines)?;
                let (mut wall, mut cpu_time, mut passes) = (Duration::ZERO, Duration::ZERO, 0);
                while passes == 0 || wall.as_secs_f64() < seconds {
                    let p = pass(&queries, lines)?;
                    wall += p.wall;
                    cpu_time += p.cpu;
                    passes += 1;
                }
                let records = (lines.len() * passes) as f64;
                Ok(Measured {
                    passes,
                    records_per_sec: records / wall.as_secs_f64(),
                    records_per_cpu_sec: records / cpu_time.as_secs_f64().max(1e-9),
                })
            })
            .join()
            .unwrap_or_else(|_| Err("needle's measuring thread panicked".into()))
    })
}

/// The results of one pass over `lines`, for the same-results check.
pub fn results(
    texts: &[String],
    validation: Validation,
    lines: &[Vec<u8>],
) -> Result<Vec<Vec<Record>>, String> {
    Ok(pass(&Queries::compile(texts, validation)?, lines)?.results)
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> Result<(), String> {
    // SAFETY: `set` is a plain bitmask that CPU_ZERO/CPU_SET initialize; pid 0 is this thread.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(format!("CPU {cpu} is out of range"));
        }
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(format!(
            "cannot pin a thread to CPU {cpu}: {} (see --cpu, or --no-pin)",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The CPU time the calling thread has used.
fn thread_cpu_time() -> Duration {
    Duration::try_from_secs_f64(crate::thread_cpu_seconds()).unwrap_or(Duration::ZERO)
}
