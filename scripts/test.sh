#!/usr/bin/env bash
# Everything `make test` does: install what the tests need, check formatting and lints, run every
# test in the workspace (units, golden files, integration tests against the real binary).
set -euo pipefail
cd "$(dirname "$0")/.."

rustup component add rustfmt clippy >/dev/null 2>&1 || true

echo "== fmt"
cargo fmt --all -- --check
echo "== clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== tests"
cargo test --workspace --locked
