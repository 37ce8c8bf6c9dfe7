//! The afl harness of target `protocols`. Its checking body is `fuzz/checks/protocols.rs`,
//! which the workspace's corpus replay test includes too. Build and run with `make fuzz` (see
//! README.md).

#[path = "../checks/protocols.rs"]
mod check;

fn main() {
    afl::fuzz!(|data: &[u8]| check::check(data));
}
