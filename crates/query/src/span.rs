//! Where a piece of query text stands: the byte [`Span`] that tokens, syntax nodes and errors
//! carry so that a message can point at what it is about.

use serde::Serialize;

/// A byte range `[start, end)` in the query text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        Self { start, end }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}
