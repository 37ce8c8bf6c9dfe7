//! The afl harness of target `history_reader`: its checking body is `fuzz/checks/history_reader.rs`, which the
//! workspace's corpus replay test includes too. Build and run with `make fuzz` (see README.md).

#[path = "../checks/history_reader.rs"]
mod check;

fn main() {
    afl::fuzz!(|data: &[u8]| check::check(data));
}
