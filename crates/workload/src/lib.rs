//! The workloads of WORKLOADS.md, generated deterministically from a seed: `bullet` (Bullet-shaped
//! 1.8 KiB records), `iot` (the Akumuli sensor readings) and `small` (~100-byte events).
