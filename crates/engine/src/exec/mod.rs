//! Running a query (module doc being written with the join side).

pub mod result;
pub mod window;
