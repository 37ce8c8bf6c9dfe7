"""DuckDB beside needle on the IoT workload (`needle bench history`).

Reads the same NDJSON records needle ingested, stores them the way DuckDB would (its own table,
and the Parquet file it writes sorted by sensor, ts with zstd), and times the four queries of the
benchmark over its table, over its own Parquet file, and over needle's store as it is
(`read_parquet('STORE/**/*.parquet')`). Prints one JSON object.

    python3 iot.py --input iot.ndjson --store /tmp/needle-store --work /tmp/duckdb-work \
        --sensor sensor_3 --from-ms 1577836800000 --runs 5
"""

import argparse
import json
import os
import statistics
import time

import duckdb


def timed(con, sql, runs):
    """Median wall time of `sql` in ms (after one warm-up), its rows, and a checksum: the sum
    of every number in the result but the time and bucket columns (needle checks its answers
    against it)."""
    cursor = con.execute(sql)
    result = cursor.fetchall()
    names = [d[0] for d in cursor.description]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = con.execute(sql).fetchall()
        times.append((time.perf_counter() - start) * 1000.0)
    checksum = 0.0
    for row in result:
        for name, value in zip(names, row):
            if name not in ("ts", "h") and isinstance(value, (int, float)) and not isinstance(value, bool):
                checksum += float(value)
    return statistics.median(times), result, checksum


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--input", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--sensor", required=True)
    p.add_argument("--from-ms", type=int, required=True)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--threads", type=int, default=0)
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    con = duckdb.connect(os.path.join(a.work, "iot.duckdb"))
    if a.threads:
        con.execute(f"SET threads = {a.threads}")
    con.execute("DROP TABLE IF EXISTS iot")
    start = time.perf_counter()
    con.execute(
        f"CREATE TABLE iot AS SELECT * FROM read_json('{a.input}', format='newline_delimited') "
        "ORDER BY sensor, ts"
    )
    load_s = time.perf_counter() - start
    con.execute("CHECKPOINT")
    parquet = os.path.join(a.work, "iot.parquet")
    con.execute(
        f"COPY (SELECT * FROM iot ORDER BY sensor, ts) TO '{parquet}' "
        "(FORMAT parquet, COMPRESSION zstd)"
    )
    rows = con.execute("SELECT COUNT(*) FROM iot").fetchone()[0]
    hour_to = a.from_ms + 3_600_000
    day_to = a.from_ms + 86_400_000
    queries = {
        "per-series MAX(temp0)": "SELECT sensor, MAX(temp0) FROM {t} GROUP BY sensor",
        "temp0 > 95": "SELECT sensor, ts, temp0 FROM {t} WHERE temp0 > 95",
        "hourly downsample of one sensor": (
            "SELECT ts // 3600000 AS h, MAX(temp0), MIN(temp0), AVG(temp0) FROM {t} "
            f"WHERE sensor = '{a.sensor}' AND ts >= {a.from_ms} AND ts < {day_to} GROUP BY h"
        ),
        "one-hour COUNT(*)": (
            f"SELECT COUNT(*) FROM {{t}} WHERE ts >= {a.from_ms} AND ts < {hour_to}"
        ),
    }
    sources = {
        "table": "iot",
        "own parquet": f"read_parquet('{parquet}')",
        "needle's files": f"read_parquet('{a.store}/**/*.parquet', union_by_name=true)",
    }
    out = {
        "duckdb_version": duckdb.__version__,
        "rows": rows,
        "load_seconds": load_s,
        "parquet_bytes": os.path.getsize(parquet),
        "queries": {},
    }
    for name, sql in queries.items():
        out["queries"][name] = {}
        for source, table in sources.items():
            ms, result, checksum = timed(con, sql.format(t=table), a.runs)
            out["queries"][name][source] = {"ms": ms, "rows": len(result), "sum": checksum}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
