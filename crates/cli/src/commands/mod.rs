//! One module per subcommand; each has its clap `Args` and a `run` returning the exit code.

pub mod client;
pub mod cluster;
pub mod config;
pub mod explain;
pub mod gen;
pub mod history;
pub mod ingest;
pub mod kill;
pub mod output;
pub mod queries;
pub mod query;
pub mod query_remote;
pub mod serve;
pub mod validate;
