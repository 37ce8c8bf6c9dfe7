//! The afl harness of target `framing`. Its checking body is `fuzz/checks/framing.rs`, which the
//! workspace's corpus replay test includes too. Build and run with `make fuzz` (see
//! README.md).

#[path = "../checks/framing.rs"]
mod check;

fn main() {
    afl::fuzz!(|data: &[u8]| check::check(data));
}
