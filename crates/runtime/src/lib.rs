//! needle's runtime in one process: sources read bytes and cut them into batches of whole lines;
//! workers (one per core) decode, match and aggregate them; the joiner merges partials and emits
//! results. Every hand-off is a bounded queue, so a slow consumer slows the source instead of
//! losing accepted data.
//!
//! This crate owns threads and I/O; the engine crate owns query semantics. In the distributed
//! mode a runtime is half of this (a worker node or an api node, see [`remote`]); the
//! `needle-kafka` crate connects the halves.

mod clock;
pub mod cluster;
pub mod columns;
pub mod config;
pub mod error;
pub mod framing;
pub mod history;
mod id_table;
pub mod joiner;
mod messages;
pub mod metrics;
pub mod registry;
pub mod remote;
pub mod results;
pub mod runtime;
pub mod schema;
pub mod secrets;
pub mod source;
mod status;
mod worker;

pub use config::NeedleConfig;
pub use error::RuntimeError;
pub use messages::EndReason;
pub use remote::Role;
pub use results::{QueryResults, ReadyQueues, ResultQueue};
pub use runtime::{AdoptedPast, Adoption, QueryHandle, Runtime, Sent, SubmitError};
pub use status::QueryStatus;
