//! What a node knows of the others, shared between the query topic and the results topic:
//! - [`Owners`] (worker node): which api node owns each query, learned from the query topic's
//!   notices and read to address each partial on the results topic;
//! - [`Roster`] (api node): the worker nodes heard from on the results topic, each saying it is
//!   up every [`HEARTBEAT`], read to tell which reads of the past a query announced on the query
//!   topic waits for.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// How often a worker node says it is up.
pub const HEARTBEAT: Duration = Duration::from_secs(1);
/// A worker node not heard from for this long is taken for gone.
const SILENCE: Duration = Duration::from_secs(6);

/// Which api node owns each query a worker runs (its partials are addressed to it).
#[derive(Debug, Clone, Default)]
pub struct Owners(Arc<RwLock<HashMap<String, Arc<str>>>>);

impl Owners {
    pub fn get(&self, id: &str) -> Option<Arc<str>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).get(id).cloned()
    }

    pub(crate) fn insert(&self, id: &str, owner: &str) {
        self.0.write().unwrap_or_else(|e| e.into_inner()).insert(id.to_owned(), owner.into());
    }

    pub(crate) fn remove(&self, id: &str) {
        self.0.write().unwrap_or_else(|e| e.into_inner()).remove(id);
    }
}

/// The worker nodes an api node has heard from, when last, and whether each keeps history.
#[derive(Clone)]
pub struct Roster {
    seen: Arc<Mutex<HashMap<String, (Instant, bool)>>>,
    since: Instant,
}

impl Default for Roster {
    fn default() -> Self {
        Self { seen: Arc::default(), since: Instant::now() }
    }
}

impl Roster {
    pub fn heard(&self, worker: &str, history: bool) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.insert(worker.to_owned(), (Instant::now(), history));
    }

    /// The worker nodes keeping history heard from lately. Just after start-up, waits for a
    /// heartbeat's time first (the roster starts empty).
    pub fn keeping_history(&self) -> Vec<String> {
        let settled = HEARTBEAT * 2;
        if let Some(wait) = settled.checked_sub(self.since.elapsed()) {
            std::thread::sleep(wait);
        }
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let mut names: Vec<String> = seen
            .iter()
            .filter(|(_, (at, history))| *history && at.elapsed() < SILENCE)
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
    }

    /// False once `worker` has not been heard from for a while.
    pub fn alive(&self, worker: &str) -> bool {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(worker).is_some_and(|(at, _)| at.elapsed() < SILENCE)
    }
}
