#!/usr/bin/env bash
# `make demo`: shows needle on its built-in generated stream. Until `needle serve` lands it
# generates a Bullet-shaped stream, runs the example queries over it and explains them.
set -euo pipefail
cd "$(dirname "$0")/.."
needle=target/release/needle
data=$(mktemp -t needle-demo-XXXXXX.ndjson)
trap 'rm -f "$data"' EXIT

echo "== generating 20,000 Bullet-shaped records (needle gen bullet), with 10 needle records"
"$needle" gen bullet --count 20000 --seed 7 --needle id=c39ba8cfe8 --needle-count 10 --needle-at 5000 >"$data"
for q in examples/queries/*; do
  echo
  echo "== $q"
  cat "$q"
  echo "-- explained:"
  "$needle" explain - <"$q"
  echo "-- results:"
  "$needle" query --source "file:$data" - <"$q"
done
