//! One module per subcommand; each has its clap `Args` and a `run` returning the exit code.

pub mod explain;
pub mod gen;
pub mod query;
pub mod validate;
