//! The history crate's one error type.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// A file or directory of the store could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A Parquet file could not be written, or read back (a corrupt or truncated part).
    #[error("{path}: {message}")]
    Parquet { path: PathBuf, message: String },
    /// An object of a store on object storage could not be read or written.
    #[error("{location}: {message}")]
    Object { location: String, message: String },
    /// A setting of the store is wrong (a URL, an object store's settings, its credentials).
    #[error("{setting}: {message}")]
    Config { setting: String, message: String },
    /// The store's SQL catalog (a SQLite file) could not be read or written.
    #[error("the table's catalog {path}: {message}")]
    Catalog { path: PathBuf, message: String },
    /// The Iceberg REST catalog the table is kept in could not be reached, or refused a
    /// request (the store goes on: see [`crate::rest`]).
    #[error("the REST catalog {url}: {message}")]
    RestCatalog { url: String, message: String },
    /// The store refuses writes (opened read-only).
    #[error("this store is open read-only")]
    ReadOnly,
}

impl HistoryError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }

    pub(crate) fn parquet(path: impl Into<PathBuf>, message: impl ToString) -> Self {
        Self::Parquet { path: path.into(), message: message.to_string() }
    }
}
