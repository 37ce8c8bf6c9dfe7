#!/usr/bin/env python3
"""Query files for the Bullet peer: N queries `SELECT * FROM STREAM(30000, TIME) WHERE id = '<absent>' LIMIT 10`.

Each id is 10 random hex characters (the shape of a record id) that no record of --records has, so every
record goes through every query and no query ends early. Deterministic for a given --seed.

    python3 gen_queries.py --count 100 --records records.ndjson > q100.bql
"""
import argparse
import json
import random
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--records", help="NDJSON records whose ids the queries must not match")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    present = set()
    if args.records:
        with open(args.records) as f:
            for line in f:
                if line.strip():
                    present.add(json.loads(line).get("id"))
    rng = random.Random(args.seed)
    chosen = set()
    out = sys.stdout
    out.write("-- %d absent-id RAW queries (seed %d)\n" % (args.count, args.seed))
    while len(chosen) < args.count:
        qid = "%010x" % rng.getrandbits(40)
        if qid in present or qid in chosen:
            continue
        chosen.add(qid)
        out.write("SELECT * FROM STREAM(30000, TIME) WHERE id = '%s' LIMIT 10\n" % qid)


if __name__ == "__main__":
    main()
