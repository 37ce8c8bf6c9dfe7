//! needle's query language: BQL (Bullet 1.x's SQL-like language) and Bullet's legacy JSON
//! queries, turned into one validated [`Plan`] the engine runs.
//!
//! The path of a query: text → [`ast::Query`] (syntax, with byte spans) → [`Plan`] (validated,
//! aliases resolved, the aggregation kind chosen, limits from [`QueryConfig`] applied). Every
//! failure is one [`QueryError`] that knows where in the text it happened and how to fix it.
//!
//! Its place in the flow: before any record — the API, the CLI and the library hand the query
//! text here; the [`Plan`] goes on to the engine (`needle-engine`) to be compiled and run.

pub mod ast;
pub mod compile;
pub mod config;
pub mod display;
pub mod error;
pub mod explain;
pub mod hint;
pub mod history;
pub mod json;
pub mod lexer;
pub mod parser;
pub mod plan;
pub mod span;
pub mod validate;

pub use compile::compile;
pub use config::QueryConfig;
pub use error::{QueryError, QueryErrorKind};
pub use parser::parse_bql;
pub use plan::{HistoryPlan, Plan};
pub use validate::validate;
