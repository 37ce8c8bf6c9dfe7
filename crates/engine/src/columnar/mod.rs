//! Evaluation by columns: records as Arrow columns ([`layout`]), read a batch at a time —
//! a WHERE over whole columns ([`Filter`]) and the rows that pass folded per time bucket and
//! group into what COUNT, SUM, AVG, MIN and MAX need ([`summarize`]), exactly as the record
//! path would answer, with no record built — and a column's rows read back as values, the one
//! way the history store decodes its parts and the runtime writes events pushed as columns into
//! records. No I/O: the history store hands this its blocks' batches, and the runtime the
//! batches of events pushed as columns.
//!
//! - [`layout`]: a field's column name and kind, the time column, reserved names.
//! - [`build`]: [`ColumnBuilder`], a column of a kind being built.
//! - [`view`]: [`ColumnView`], a column read by its kind, a row at a time or whole; a batch's
//!   columns by field name ([`Columns`]).
//! - [`filter`]: [`Filter`], SQL's three-valued logic over whole columns.
//! - [`summarize`]: [`Summarizer`] and [`summarize_batch`], per bucket and group.
//! - [`stats`]: [`ColumnStats`], what is known of a column over some rows.

pub mod build;
pub mod filter;
pub mod layout;
pub mod stats;
pub mod summarize;
pub mod view;

pub use build::ColumnBuilder;
pub use filter::Filter;
pub use stats::ColumnStats;
pub use summarize::{summarize_batch, BucketSummary, GroupRequest, GroupSummary, Summarizer};
pub use view::{ColumnView, Columns};
