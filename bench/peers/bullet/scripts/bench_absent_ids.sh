#!/usr/bin/env bash
# Bullet's engine with 1, 10, 100 and 1,000 queries `SELECT * FROM STREAM(30000, TIME) WHERE id = '<absent>'
# LIMIT 10` over Bullet-shaped records: every record goes through every query (the notes/json.md measurement).
#   scripts/bench_absent_ids.sh [RECORDS.ndjson] [-- extra peer options, e.g. --mode querier]
# Without RECORDS it generates 20,000 records with gen_records.py. The 1,000-query run uses the first
# ${BIG_RECORDS:-5000} records to keep it short. Work files go to ${WORK:-/tmp/bullet-peer-bench}.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="${WORK:-/tmp/bullet-peer-bench}"
mkdir -p "$work"
records="${1:-}"
[[ $# -gt 0 ]] && shift
[[ "${1:-}" == "--" ]] && shift
if [[ -z "$records" ]]; then
    records="$work/records.ndjson"
    [[ -f "$records" ]] || python3 "$here/gen_records.py" --count 20000 --seed 1 > "$records"
fi
head -n "${BIG_RECORDS:-5000}" "$records" > "$work/records-small.ndjson"

printf '%-8s %-9s %14s %14s %14s %16s\n' queries records 'records/s' 'records/CPU-s' 'decode rec/s' 'decode rec/CPU-s'
for n in 1 10 100 1000; do
    input="$records"
    [[ $n -ge 1000 ]] && input="$work/records-small.ndjson"
    python3 "$here/gen_queries.py" --count "$n" --records "$input" > "$work/q$n.bql"
    "$here/../run.sh" --records "$input" --queries "$work/q$n.bql" --format json "$@" > "$work/out-$n.json"
    python3 - "$work/out-$n.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert all(len(x) == 0 for x in r["results"]), "an absent id matched a record"
print("%-8d %-9d %14s %14s %14s %16s" % (r["queries"], r["records"], format(r["records_per_sec"], ","),
      format(r["records_per_cpu_sec"], ","), format(r["decode_records_per_sec"], ","),
      format(r["decode_records_per_cpu_sec"], ",")))
PY
done
