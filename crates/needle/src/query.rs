//! [`Query`]: one running query, and its emissions as a blocking iterator or an async
//! [`Stream`](futures_core::Stream) ([`Emissions`]).
//!
//! A query's results wait in a bounded queue (`runtime.subscriber_buffer` emissions and
//! `runtime.max_result_bytes_per_query` bytes): a reader too slow to keep up loses the oldest
//! emissions, and the next one it reads says how many in its metadata (`"Dropped Emissions"`);
//! the final emission is never dropped. Dropping the handle ends the query, as closing an HTTP
//! stream does on the server.

use needle_engine::exec::Emission;
use needle_runtime::{QueryHandle, ResultQueue, Runtime};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Kills the query when the last handle on it goes (a [`Query`] or its [`Emissions`]).
struct EndOnDrop {
    runtime: Arc<Runtime>,
    id: String,
}

impl std::fmt::Debug for EndOnDrop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.id)
    }
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.runtime.kill(&self.id);
    }
}

/// A running query. Iterating it blocks for each emission; [`Query::next_async`] and
/// [`Query::into_stream`] wait without blocking a thread. The iteration ends after the query's
/// final emission (its duration is over, or it was killed).
#[derive(Debug)]
pub struct Query {
    results: Arc<ResultQueue>,
    windowed: bool,
    ends_ms: i64,
    guard: Arc<EndOnDrop>,
}

impl Query {
    pub(crate) fn new(runtime: Arc<Runtime>, handle: QueryHandle) -> Self {
        Self {
            results: handle.results,
            windowed: handle.windowed,
            ends_ms: handle.ends_ms,
            guard: Arc::new(EndOnDrop { runtime, id: handle.id }),
        }
    }

    /// The query's id, as `needle queries` and the HTTP API show it.
    pub fn id(&self) -> &str {
        &self.guard.id
    }

    /// True when the query has a window: it emits once per window, not once at its end.
    pub fn is_windowed(&self) -> bool {
        self.windowed
    }

    /// When the query ends by its duration, in milliseconds since the Unix epoch.
    pub fn ends_at_ms(&self) -> i64 {
        self.ends_ms
    }

    /// The next emission, waiting without blocking a thread; `None` once the final emission was
    /// read.
    pub async fn next_async(&mut self) -> Option<Emission> {
        self.results.next().await
    }

    /// Ends the query now: its final emission (the results so far) is the next one read.
    pub fn kill(&self) -> bool {
        self.guard.runtime.kill(&self.guard.id)
    }

    /// The emissions as an async [`Stream`](futures_core::Stream).
    pub fn into_stream(self) -> Emissions {
        Emissions { results: self.results, guard: self.guard, waiting: None }
    }
}

impl Iterator for Query {
    type Item = Emission;

    /// Blocks until the next emission; `None` once the final emission was read.
    fn next(&mut self) -> Option<Emission> {
        futures_executor::block_on(self.results.next())
    }
}

type NextEmission = Pin<Box<dyn Future<Output = Option<Emission>> + Send>>;

/// A query's emissions as an async [`Stream`](futures_core::Stream) (see [`Query::into_stream`]);
/// dropping it ends the query.
pub struct Emissions {
    results: Arc<ResultQueue>,
    guard: Arc<EndOnDrop>,
    waiting: Option<NextEmission>,
}

impl Emissions {
    /// The query's id.
    pub fn id(&self) -> &str {
        &self.guard.id
    }
}

impl std::fmt::Debug for Emissions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emissions").field("id", &self.guard.id).finish_non_exhaustive()
    }
}

impl futures_core::Stream for Emissions {
    type Item = Emission;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Emission>> {
        let results = self.results.clone();
        let waiting =
            self.waiting.get_or_insert_with(|| Box::pin(async move { results.next().await }));
        match waiting.as_mut().poll(cx) {
            Poll::Ready(next) => {
                self.waiting = None;
                Poll::Ready(next)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
