//! The protocols crate's one error type: why a line of a metrics protocol is not a record.

/// Why a line is malformed. The source counts it per protocol, logs a sample, and goes on with
/// the next line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// The line does not follow the protocol's syntax (`reason` says where).
    #[error("malformed {protocol} line: {reason}")]
    Malformed { protocol: &'static str, reason: String },
    /// The same tag or field name twice on one line: there is no right value to keep.
    #[error("malformed {protocol} line: '{key}' is given twice")]
    DuplicateKey { protocol: &'static str, key: String },
    /// A `format=` or `precision=` option that names nothing known.
    #[error("unknown {what} '{given}' (known: {known})")]
    UnknownOption { what: &'static str, given: String, known: &'static str },
}

impl ProtocolError {
    pub(crate) fn malformed(protocol: &'static str, reason: impl Into<String>) -> Self {
        Self::Malformed { protocol, reason: reason.into() }
    }
}
