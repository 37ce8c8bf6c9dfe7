//! The engine crate's one error type.

/// What can go wrong compiling or running a plan. Per-record problems (a value of the wrong type)
/// are never errors: they make that value NULL.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    /// The plan holds something the engine cannot run (it passed validation, so this is a bug or
    /// a plan from a newer version).
    #[error("cannot run this plan: {0}")]
    Unsupported(String),
    /// A regular expression in the query does not compile.
    #[error("invalid regular expression {pattern:?}: {message}")]
    Regex { pattern: String, message: String },
    /// Serialized partial state that cannot be read back.
    #[error("corrupt partial state: {0}")]
    CorruptPartial(String),
    /// Two partials of different aggregations were merged.
    #[error("cannot merge partials: {0}")]
    MergeMismatch(String),
}
