#!/usr/bin/env bash
# Everything `make test` does: install what the tests need, check formatting and lints, run every
# test: the Bullet peer's JUnit tests (Maven fetches its jars from Maven Central), DuckDB from PyPI
# (it must read the history store's files), Schemathesis from PyPI (the API conformance run, last),
# then the Rust
# workspace's (units, golden files, property tests, integration tests against the real binary,
# and the Kafka tests against a real broker run from Apache Kafka's jars, also from Maven
# Central, the object-storage tests against a real MinIO built through the Go module proxy, and
# the metrics agents' tests against Debian's Prometheus and collectd, installed with apt-get,
# and the history's Iceberg table read by pyiceberg and Spark),
# and the web UI's (vitest, and Playwright driving Debian's chromium against a real
# needle serve).
set -euo pipefail
cd "$(dirname "$0")/.."

rustup component add rustfmt clippy >/dev/null 2>&1 || true

# First, so every build below embeds the web UI.
echo "== the web UI (ui/: npm ci, vite build)"
bash scripts/ui.sh build

echo "== fmt"
cargo fmt --all -- --check
echo "== clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== docs (rustdoc, warnings are errors: broken or private links, the library's missing docs)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
echo "== the fuzz targets' lock file (fuzz/ is its own workspace: make fuzz builds it --locked)"
cargo metadata --locked --format-version 1 --manifest-path fuzz/Cargo.toml >/dev/null
echo "== the Bullet peer (bench/peers/bullet: Maven, JUnit)"
(cd bench/peers/bullet && mvn -B -q package)
echo "== DuckDB and Schemathesis from PyPI (DuckDB must read the history's files and is needle bench history's peer; Schemathesis checks the API against its OpenAPI document)"
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
    "duckdb==2.0.1" "schemathesis==4.32.5"
echo "== Apache Kafka's jars (scripts/kafka/broker.sh: a real broker for the Kafka tests)"
bash scripts/kafka/broker.sh fetch
echo "== MinIO through the Go module proxy (scripts/s3/minio.sh: a real S3 server for the object-storage tests)"
bash scripts/s3/minio.sh fetch
echo "== Prometheus and collectd from Debian (scripts/agents/install.sh: real agents writing to needle, for cli_agents)"
bash scripts/agents/install.sh
echo "== the Iceberg readers: pyiceberg and pyspark from PyPI, Iceberg's Spark runtime from Maven Central (scripts/interop/install.sh)"
bash scripts/interop/install.sh
echo "== tests"
cargo test --workspace --locked
cargo build --locked --bin needle
echo "== the HTTP API against its OpenAPI document (scripts/api/conformance.sh: Schemathesis, every check, stateful links)"
NEEDLE=target/debug/needle bash scripts/api/conformance.sh
echo "== the web UI in chromium (vitest, then Playwright against the needle binary built here)"
UI_TEST_BIN="$PWD/target/debug/needle" bash scripts/ui.sh test
