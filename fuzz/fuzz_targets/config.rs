//! The afl harness of target `config`. Its checking body is `fuzz/checks/config.rs`, which the
//! workspace's corpus replay test includes too. Build and run with `make fuzz` (see
//! README.md).

#[path = "../checks/config.rs"]
mod check;

fn main() {
    afl::fuzz!(|data: &[u8]| check::check(data));
}
