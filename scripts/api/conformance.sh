#!/usr/bin/env bash
# The HTTP API against its own OpenAPI document: Schemathesis (PyPI) with every check, the
# stateful phase included (the links from a started query to its status and kill), against a
# real `needle serve` on a free loopback port reading a generated stream and taking HTTP writes
# (--ingest). Exits non-zero on any failure. EXAMPLES sets how many cases each operation gets
# (default 30).
set -euo pipefail
cd "$(dirname "$0")/../.."
NEEDLE=${NEEDLE:-target/release/needle}
EXAMPLES=${EXAMPLES:-30}
work=$(mktemp -d)
cleanup() {
    [[ -n ${pid:-} ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
# short queries: a query the fuzzer runs must end quickly (a longer one gets a 422)
printf '[query]\nmax_duration_ms = 1500\n' >"$work/needle.toml"
"$NEEDLE" serve --listen 127.0.0.1:0 --workers 1 --config "$work/needle.toml" \
    --source 'gen:small?rate=200' --ingest >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 100); do
    url=$(sed -n 's/^needle listening on //p' "$work/out")
    [[ -n $url ]] && break
    sleep 0.1
done
[[ -n ${url:-} ]] || { echo "needle serve did not start:"; cat "$work/err"; exit 1; }
# Every check but use_after_free: DELETE /api/v1/queries/{id} kills a query, it does not delete
# it, so its status stays readable (`running: false`, its final figures) and its subscriber still
# reads the final emission, which says it was killed.
schemathesis --config-file scripts/api/schemathesis.toml run "$url/api/v1/openapi.json" \
    --checks all --exclude-checks use_after_free --max-examples "$EXAMPLES" --seed 7 \
    --request-timeout 10 --no-color
