//! [`Background`]: a thread that polls Kafka until told to stop (the query follower, the results
//! reader), stopped and joined on [`Background::stop`] or when dropped.

use crate::KafkaError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

pub struct Background {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    /// Runs `work` on a thread named `name`; `work` returns once the flag it is given is set.
    pub fn spawn(
        name: &str,
        work: impl FnOnce(&AtomicBool) + Send + 'static,
    ) -> Result<Self, KafkaError> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || work(&flag))
            .map_err(|e| KafkaError::Config(format!("cannot start thread {name}: {e}")))?;
        Ok(Self { stop, thread: Some(thread) })
    }

    /// Sets the flag and waits for the thread. Idempotent.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop();
    }
}

/// True once the flag of a [`Background`] thread is set.
pub fn stopped(flag: &AtomicBool) -> bool {
    flag.load(Ordering::Relaxed)
}
