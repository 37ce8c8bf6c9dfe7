//! The record crate's one error type.

/// What can go wrong turning bytes into a record.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RecordError {
    /// The input is not valid JSON; `offset` is the byte position where decoding stopped, if known.
    #[error("malformed JSON: {message}")]
    Malformed { message: String, offset: Option<usize> },
    /// Valid JSON, but not an object at the top level.
    #[error("a record must be a JSON object, found {found}")]
    NotAnObject { found: &'static str },
}
