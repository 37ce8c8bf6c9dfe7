//! [`Error`]: everything the library can refuse, each saying what to do about it.

use needle_runtime::{RuntimeError, SubmitError};

/// What went wrong, and what to do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is wrong (a file, an environment variable or a builder setting).
    #[error(
        "bad configuration: {0} (fix the setting named; `needle config` prints what is in force)"
    )]
    Config(String),
    /// needle could not start (threads, the history store, the source).
    #[error("needle could not start: {0}")]
    Start(String),
    /// The query is wrong: the message says where (line and column) and, when it can, how to
    /// fix it.
    #[error("{rendered}")]
    Query {
        /// The error's one-line message.
        message: String,
        /// 1-based line of the query text the error is at (1 when it concerns the whole query).
        line: usize,
        /// 1-based column.
        column: usize,
        /// What to do about it, when needle knows.
        hint: Option<String>,
        /// The message with the query's line and a caret under the column, as the CLI prints it.
        rendered: String,
    },
    /// A limit refused the query (too many running, for the process or this owner): end some
    /// queries, or raise `runtime.max_queries`.
    #[error("{0}")]
    TooMany(String),
    /// The engine cannot run this (valid) query.
    #[error("the engine cannot run this query: {0}")]
    Unsupported(String),
    /// needle is shutting down, or this instance takes no more of what was asked (a second
    /// source, a pusher beside a source).
    #[error("{0}")]
    Closed(String),
    /// A source or the history store failed while running.
    #[error("{0}")]
    Io(String),
}

impl From<RuntimeError> for Error {
    fn from(error: RuntimeError) -> Self {
        Error::Start(error.to_string())
    }
}

impl Error {
    pub(crate) fn from_submit(error: SubmitError) -> Self {
        match error {
            SubmitError::Invalid { error, text } => {
                let (line, column) = error.line_column(&text);
                Error::Query {
                    message: error.message.clone(),
                    line,
                    column,
                    hint: error.hint.clone(),
                    rendered: error.render(&text).trim_end().to_owned(),
                }
            }
            SubmitError::Engine(message) => Error::Unsupported(message),
            SubmitError::TooMany(message) => Error::TooMany(message),
            SubmitError::ShuttingDown => Error::Closed("needle is shutting down".into()),
            SubmitError::WrongRole(message) | SubmitError::Unavailable(message) => {
                Error::Closed(message)
            }
        }
    }
}
