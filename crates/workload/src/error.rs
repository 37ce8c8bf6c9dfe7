//! The workload crate's one error type.

/// What can be wrong with a workload spec or its options.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// The workload name is not one of `bullet`, `iot`, `small`.
    #[error("unknown workload `{0}` (expected bullet, iot or small)")]
    UnknownKind(String),
    /// A spec string or option that cannot be used (unknown parameter, bad number, ...).
    #[error("bad workload spec: {0}")]
    Spec(String),
    /// A needle that cannot be injected (unknown field, wrong value type, out of range, ...).
    #[error("bad needle: {0}")]
    Needle(String),
}
