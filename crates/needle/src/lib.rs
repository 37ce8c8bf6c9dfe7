//! needle as a library: BQL (or Bullet JSON) queries over the events a program pushes, typed or
//! as JSON, or over a source needle reads (a file, a socket, Kafka), each query answered as it
//! runs — in the program's own process, with no server.
//!
//! ```
//! use needle::Needle;
//!
//! let needle = Needle::builder().workers(1).start()?;
//! let query = needle.query(
//!     "SELECT device, COUNT(*) AS n FROM STREAM(500, TIME) GROUP BY device ORDER BY device",
//! )?;
//! let mut pusher = needle.pusher()?;
//! for (device, ms) in [("ipad", 120), ("pixel", 80), ("ipad", 95)] {
//!     pusher.push_with(|event| {
//!         event.set_str("device", device).set_i64("ms", ms);
//!     })?;
//! }
//! pusher.flush()?;
//! // one emission, at the end of the query's 500 ms
//! let emission = query.last().expect("a final emission");
//! assert_eq!(emission.records[0].to_json(), r#"{"device":"ipad","n":2}"#);
//! # Ok::<(), needle::Error>(())
//! ```
//!
//! Its place in the flow: this crate is the front door over needle's layers — the runtime
//! (sources, workers, the joiner; `needle-runtime`), the query language (`needle-query`), the
//! engine (`needle-engine`), history (`needle-history`) and the HTTP API (`needle-server`). The
//! `needle` command line is built on the same layers.
//!
//! - [`Needle`] ([`Builder`]): start one; [`Needle::query`], [`Needle::kill`], [`Needle::queries`],
//!   [`Needle::counts`], [`Needle::metrics_text`], [`Needle::http_api`].
//! - [`Pusher`]: events from code — [`Pusher::push_with`] (typed, no JSON: gathered as columns,
//!   which the workers read column at a time when the queries allow it), [`Pusher::push`] (a
//!   [`Record`]), [`Pusher::push_json`].
//! - [`Query`]: a running query; its [`Emission`]s as a blocking iterator or an async stream
//!   ([`Query::into_stream`]).
//! - [`ingest`]: load a file into a history store for queries that look back.
//!
//! Backpressure, not loss: a pusher waits while the workers are behind. Results wait in a
//! bounded queue per query; a reader that falls behind loses the oldest emissions and is told
//! how many (see [`Query`]).

#![warn(missing_docs)]

mod error;
pub mod ingest;
mod instance;
mod push;
mod query;

pub use error::Error;
pub use instance::{Builder, Counts, Needle};
pub use needle_engine::exec::Emission;
pub use needle_record::{Record, RecordWriter, Value};
pub use needle_runtime::{EndReason, NeedleConfig as Config, QueryStatus};
pub use push::{EventWriter, Pusher};
pub use query::{Emissions, Query};

/// The README's Rust example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeExample;
