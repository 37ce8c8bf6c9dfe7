//! Running a query (the worker and join sides land with the aggregations): EXPLODE
//! ([`explode`]), post-aggregation ([`post`]), windows ([`window`]) and emissions ([`result`]).

pub mod explode;
pub mod post;
pub mod result;
pub mod window;

pub use result::{Emission, Notice};
pub use window::WindowPlan;
