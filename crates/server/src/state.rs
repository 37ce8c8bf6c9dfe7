//! What every handler can reach: the configuration, the metrics, the process start time.

use needle_runtime::metrics::Metrics;
use needle_runtime::NeedleConfig;
use std::sync::Arc;
use std::time::Instant;

/// Shared by all handlers; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    config: NeedleConfig,
    metrics: Arc<Metrics>,
    started: Instant,
}

impl AppState {
    pub fn new(config: NeedleConfig, metrics: Arc<Metrics>) -> Self {
        Self { inner: Arc::new(Inner { config, metrics, started: Instant::now() }) }
    }

    pub fn config(&self) -> &NeedleConfig {
        &self.inner.config
    }

    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    pub fn uptime_ms(&self) -> u128 {
        self.inner.started.elapsed().as_millis()
    }
}
