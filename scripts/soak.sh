#!/usr/bin/env bash
# A soak run (not part of `make test`): `needle serve` on a generated stream for a long time, with
# queries of every kind starting, ending, being killed and left unread all the time; its resident
# memory is sampled every 10 s and must stay flat; beside it the live heap (jemalloc's allocated
# bytes: a resident size that grows while the heap does not is memory the allocator keeps) and
# the results held for readers (within runtime.max_result_bytes), from /metrics. Writes
# soak-out/rss.csv and soak-out/rss.svg,
# prints the verdict, and exits 1 when the memory of the last third grew past the middle third's
# by more than 15%.
#
#   scripts/soak.sh                      # 30 minutes at 50,000 records/s (release build)
#   SOAK_SECONDS=600 SOAK_RATE=20000 scripts/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin needle
exec python3 scripts/soak/soak.py \
  --needle target/release/needle \
  --seconds "${SOAK_SECONDS:-1800}" \
  --rate "${SOAK_RATE:-50000}" \
  --out "${SOAK_OUT:-soak-out}"
