#!/usr/bin/env python3
"""Bullet-shaped NDJSON records for testing the Bullet peer until `needle gen bullet` is available.

Same shape as the `bullet` workload in shared/WORKLOADS.md: 92 top-level fields (62 strings, 4 longs,
23 maps string -> string with 3-12 entries, 3 lists of 1-5 maps string -> string), about 1.8 KiB per line,
with `id` (10 random hex characters, unique), `event_ts` (ms), `demographics` (country skewed over 50
values, age, gender), `device` (10 values), `browser_name` (8), `browser_version` (30), `timespent`.
Deterministic for a given --seed.

    python3 gen_records.py --count 20000 --seed 1 > records.ndjson
"""
import argparse
import json
import random
import sys

COUNTRIES = ["US", "IN", "GB", "DE", "FR", "BR", "JP", "CA", "MX", "ES", "IT", "AU", "KR", "ID", "TR",
             "NL", "SA", "CH", "AR", "SE", "PL", "BE", "TH", "IR", "AT", "NO", "AE", "NG", "IL", "ZA",
             "HK", "IE", "DK", "SG", "MY", "PH", "CO", "PK", "CL", "FI", "BD", "EG", "VN", "CZ", "PT",
             "RO", "PE", "NZ", "GR", "IQ"]
DEVICES = ["desktop", "phone", "tablet", "tv", "console", "watch", "car", "speaker", "ereader", "other"]
BROWSERS = ["chrome", "firefox", "safari", "edge", "opera", "samsung", "uc", "other"]
BROWSER_VERSIONS = ["%d.%d" % (major, minor) for major in range(60, 66) for minor in range(5)]
GENDERS = ["f", "m", "u"]


def word(rng, lo=4, hi=12):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(lo, hi)))


def string_map(rng, lo, hi):
    # Sizes skewed toward the low end so that a record stays near 1.8 KiB.
    size = min(hi, lo + int(rng.expovariate(1.5)))
    return {"abcdefghijkl"[i]: word(rng, 1, 3) for i in range(size)}


def record(rng, seq, start_ms):
    r = {
        "id": "%010x" % rng.getrandbits(40),
        "event_ts": start_ms + seq,
        "device": rng.choice(DEVICES),
        "browser_name": rng.choice(BROWSERS),
        "browser_version": rng.choice(BROWSER_VERSIONS),
        "timespent": rng.randint(0, 600_000),
        "demographics": {
            # Skewed: index drawn from a geometric-like distribution over the 50 countries.
            "country": COUNTRIES[min(int(rng.expovariate(0.15)), len(COUNTRIES) - 1)],
            "age": str(rng.randint(13, 90)),
            "gender": rng.choice(GENDERS),
        },
    }
    for i in range(58):  # 62 strings with id, device, browser_name, browser_version
        r["s%02d" % i] = word(rng, 2, 7)
    for i in range(2):  # 4 longs with event_ts, timespent
        r["l%d" % i] = rng.getrandbits(32)
    for i in range(22):  # 23 maps with demographics
        r["m%02d" % i] = string_map(rng, 3, 12)
    for i in range(3):
        r["lm%d" % i] = [string_map(rng, 2, 4) for _ in range(rng.randint(1, 5))]
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start-ms", type=int, default=1_700_000_000_000)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    seen = set()
    out = sys.stdout
    seq = 0
    while seq < args.count:
        r = record(rng, seq, args.start_ms)
        if r["id"] in seen:
            continue
        seen.add(r["id"])
        out.write(json.dumps(r, separators=(",", ":")))
        out.write("\n")
        seq += 1


if __name__ == "__main__":
    main()
