//! The afl harness of target `bullet_json`. Its checking body is
//! `fuzz/checks/bullet_json.rs`, which the workspace's corpus replay test includes too. Build
//! and run with `make fuzz` (see README.md).

#[path = "../checks/bullet_json.rs"]
mod check;

fn main() {
    afl::fuzz!(|data: &[u8]| check::check(data));
}
