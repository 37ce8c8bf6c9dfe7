//! The runtime crate's one error type.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A source specification that cannot be understood (`--source` / config).
    #[error("bad source '{spec}': {reason}")]
    BadSource { spec: String, reason: String },
    /// An I/O failure of a source, with what it was doing.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    /// History could not be opened or configured (`history.*`).
    #[error("history: {0}")]
    History(String),
}

impl RuntimeError {
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        Self::Io { context: context.into(), source }
    }

    pub fn bad_source(spec: &str, reason: impl Into<String>) -> Self {
        Self::BadSource { spec: spec.to_owned(), reason: reason.into() }
    }
}
