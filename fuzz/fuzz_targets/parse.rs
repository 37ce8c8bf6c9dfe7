//! The afl harness of target `parse`. Its checking body is `fuzz/checks/parse.rs`, which
//! the workspace's corpus replay test includes too. Build and run with `make fuzz` (see
//! README.md).

#[path = "../checks/parse.rs"]
mod check;

fn main() {
    afl::fuzz!(|data: &[u8]| check::check(data));
}
