//! The afl harness of target `decode`. Its checking body is `fuzz/checks/decode.rs`, which
//! the workspace's corpus replay test includes too. Build and run with `make fuzz` (see
//! README.md).

#[path = "../checks/decode.rs"]
mod check;

fn main() {
    afl::fuzz!(|data: &[u8]| check::check(data));
}
