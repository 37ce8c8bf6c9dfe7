//! The afl harness of target `kafka_wire`: its checking body is `fuzz/checks/kafka_wire.rs`, which the
//! workspace's corpus replay test includes too. Build and run with `make fuzz` (see README.md).

#[path = "../checks/kafka_wire.rs"]
mod check;

fn main() {
    afl::fuzz!(|data: &[u8]| check::check(data));
}
