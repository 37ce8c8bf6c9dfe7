//! The limits every JSON reader of this crate holds a line to, and the sizes at which
//! [`crate::FieldSet::decode`] hands a line from one reader to another: how deep arrays and
//! objects may nest ([`MAX_DEPTH`]), which lines are short enough for the one-pass reader or
//! sonic-rs's stream ([`STREAM_MAX_BYTES`]), and which have few enough brackets for sonic-rs's
//! recursive lookup ([`FAST_SKIP_MAX_OPENINGS`]). Both the decoders ([`crate::decode`]) and needle's checker
//! ([`crate::check`]) decide by them, so they live below both.

/// The deepest nesting of arrays and objects a decoder accepts (a top-level array or object is
/// level 1).
///
/// Bullet's types nest at most `LIST[MAP[t]]` or `MAP[MAP[t]]` below a record (3 levels), so 32
/// leaves room for any realistic event. The limit bounds the decoder's recursion: measured, one
/// level costs about 0.9 KiB of stack in an optimized build and up to ~25 KiB in a debug build,
/// so even unoptimized test threads (2 MiB stacks) decode the deepest accepted input safely.
pub const MAX_DEPTH: usize = 32;

/// A line with at most this many `{` and `[` bytes (inside strings or not) cannot nest deeper,
/// so [`crate::Validation::Fields`] may look fields up in it with sonic-rs, whose lookup recurses
/// once per level: that many frames fit any thread's stack; other lines are checked whole.
/// (Before needle's checker, [`crate::Validation::Line`] read such long lines with sonic-rs's
/// tree, which recurses likewise; the line mode keeps the decisions it made then: see
/// [`crate::FieldSet::decode`].)
pub const FAST_SKIP_MAX_OPENINGS: usize = 256;

/// Lines of at most this many bytes are read straight into the kept record, with
/// [`crate::Validation::Line`] and [`crate::Validation::Fields`] alike: a flat object of plain
/// values in one scalar pass, any other line by sonic-rs's serde stream
/// ([`crate::decode_fields`]' way). At that size the stream is as fast as needle's SIMD checker
/// followed by building the values read, and faster than sonic-rs's lookup
/// (`cargo bench -p needle-record --bench decode`, `examples/decode_rounds.rs`).
/// Longer lines are read by needle's checker; before it, by sonic-rs's tree, and the line mode
/// keeps the decisions it made then (see [`crate::FieldSet::decode`]).
pub const STREAM_MAX_BYTES: usize = 512;
