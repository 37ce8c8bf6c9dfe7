#!/usr/bin/env bash
# `make demo`: needle serving a generated Bullet-shaped stream (2,000 records/s, with 10 needle
# records with id c39ba8cfe8 injected 15 seconds in) and keeping it in a history store (a
# temporary directory, removed at the end), four example queries (one looks back), one of them
# run, then serving until Ctrl-C. DEMO_LISTEN=HOST:PORT chooses the address (default 127.0.0.1:9900,
# a free port when that one is taken); not a NEEDLE_* name, which needle would read as config.
set -euo pipefail
cd "$(dirname "$0")/.."
needle=target/release/needle
listen=${DEMO_LISTEN:-127.0.0.1:9900}
source_spec='gen:bullet?rate=2000&seed=7&needle=id=c39ba8cfe8&needle_count=10&needle_at=30000'
out=$(mktemp -t needle-demo-XXXXXX)
history=$(mktemp -d -t needle-demo-history-XXXXXX)
server=

stop() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -f "$out"
  rm -rf "$history"
}
trap stop EXIT
trap 'exit 0' INT TERM

start() {
  "$needle" serve --listen "$1" --source "$source_spec" --history "$history" >"$out" &
  server=$!
  for _ in $(seq 1 100); do
    if grep -q '^needle listening on ' "$out"; then return 0; fi
    if ! kill -0 "$server" 2>/dev/null; then return 1; fi
    sleep 0.1
  done
  return 1
}

if ! start "$listen"; then
  echo "(could not listen on $listen; using a free port instead)"
  start 127.0.0.1:0
fi
url=$(sed -n 's/^needle listening on //p' "$out")
echo "Open $url/ in a browser: the web UI (query editor, builder, live charts, schema)"
echo "needle is serving at $url"
sed -n 's/^source: /reading: /p' "$out"
cat <<EXAMPLES

Four example queries (the needle records arrive about 15 s after start):

  # 1. find the needle records as they go by
  curl -s $url/api/v1/query -d "SELECT id, device, demographics.country AS country FROM STREAM(30000, TIME) WHERE id = 'c39ba8cfe8' LIMIT 10"
  $needle query --server $url "SELECT id, device FROM STREAM(30000, TIME) WHERE id = 'c39ba8cfe8' LIMIT 10"

  # 2. top countries by visits among phones, every 5 seconds
  curl -s $url/api/v1/query -d "SELECT demographics.country AS country, COUNT(*) AS visits, AVG(timespent) AS avg_time FROM STREAM(20000, TIME) WHERE device IN ('iphone', 'android') GROUP BY demographics.country ORDER BY visits DESC WINDOWING TUMBLING(5000, TIME) LIMIT 5"

  # 3. quantiles of time spent, as a Bullet JSON query works too
  curl -s $url/api/v1/query -H 'content-type: application/json' -d '{"aggregation": {"type": "DISTRIBUTION", "attributes": {"type": "QUANTILE", "numberOfPoints": 5}, "fields": {"timespent": ""}}, "duration": 5000}'

  # 4. look back: what went by in the last 10 minutes, then 10 more seconds live (each record once)
  curl -s $url/api/v1/query -d "SELECT device, COUNT(*) AS n FROM STREAM(10000, TIME) SINCE '-10m' GROUP BY device ORDER BY n DESC LIMIT 3"
  $needle query --server $url "SELECT id, device FROM HISTORY('-10m') WHERE id = 'c39ba8cfe8' LIMIT 10"

  The stream is kept in $history (Parquet: $needle history $history).

  Also: $needle queries --server $url   |   curl -s $url/api/v1/schema   |   curl -s $url/metrics

Running the third one now:
EXAMPLES
curl -s "$url/api/v1/query" -H 'content-type: application/json' \
  -d '{"aggregation": {"type": "DISTRIBUTION", "attributes": {"type": "QUANTILE", "numberOfPoints": 5}, "fields": {"timespent": ""}}, "duration": 5000}' \
  | python3 -m json.tool
echo
echo "needle keeps serving at $url; press Ctrl-C to stop."
wait "$server"
