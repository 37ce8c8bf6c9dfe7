//! The afl harness of target `history_reader`. Its checking body is
//! `fuzz/checks/history_reader.rs`, which the workspace's corpus replay test includes too.
//! Build and run with `make fuzz` (see README.md).
//!
//! Without afl's abort-on-any-panic hook (`fuzz_nohook!`): the history store catches the
//! panics of the Parquet reader on a corrupt part and reports an error, as it must; a panic
//! that escapes the check still aborts and is a crash.

#[path = "../checks/history_reader.rs"]
mod check;

fn main() {
    afl::fuzz_nohook!(|data: &[u8]| check::check(data));
}
