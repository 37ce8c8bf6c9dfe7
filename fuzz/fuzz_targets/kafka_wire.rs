//! The afl harness of target `kafka_wire`. Its checking body is `fuzz/checks/kafka_wire.rs`, which
//! the workspace's corpus replay test includes too. Build and run with `make fuzz` (see
//! README.md).
//!
//! Without afl's abort-on-any-panic hook (`fuzz_nohook!`): the engine runs its sketch code under
//! `catch_unwind` and reports a corrupt partial, as it must; a panic that escapes the check still
//! aborts and is a crash.

#[path = "../checks/kafka_wire.rs"]
mod check;

fn main() {
    afl::fuzz_nohook!(|data: &[u8]| check::check(data));
}
