"""The soak run of scripts/soak.sh: see there. Standard library only."""

import argparse
import json
import os
import random
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request

QUERIES = [
    # (text, how it is used): "wait" reads its answer (POST /api/v1/query), "start" starts it and
    # never reads it (its results are dropped within the bounds), "kill" starts then kills it
    ("SELECT * FROM STREAM({d}, TIME) WHERE device = 'ipad' AND timespent > 3000 LIMIT 50", "wait"),
    ("SELECT COUNT(*) AS n, AVG(timespent) AS t FROM STREAM({d}, TIME) WINDOWING TUMBLING(1000, TIME)", "start"),
    ("SELECT device, COUNT(*) FROM STREAM({d}, TIME) GROUP BY device", "wait"),
    ("SELECT TOP(10, browser_name) FROM STREAM({d}, TIME) WINDOWING TUMBLING(2000, TIME)", "start"),
    ("SELECT QUANTILE(timespent, LINEAR, 11) FROM STREAM({d}, TIME)", "wait"),
    ("SELECT COUNT(DISTINCT id) FROM STREAM({d}, TIME)", "kill"),
    ("SELECT * FROM STREAM({d}, TIME) WINDOWING TUMBLING(1000, TIME) LIMIT 200", "start"),
    ("SELECT id, timespent FROM STREAM({d}, TIME) WHERE id = 'needle-{k}' LIMIT 1", "wait"),
]


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def gauges(base):
    """From /metrics: the live heap (needle_heap_allocated_bytes: a resident size that grows
    while it does not is memory the allocator keeps, not a leak) and the results held for their
    readers (needle_result_bytes, within runtime.max_result_bytes)."""
    found = {}
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            name, _, value = line.partition(" ")
            if name in ("needle_heap_allocated_bytes", "needle_result_bytes"):
                found[name] = int(float(value))
    return found.get("needle_heap_allocated_bytes", 0), found.get("needle_result_bytes", 0)


def post(url, body, timeout):
    req = urllib.request.Request(url, data=body.encode(), headers={"content-type": "text/plain"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def client(base, stop, counts, lock, seed):
    rng = random.Random(seed)
    while not stop.is_set():
        text, use = rng.choice(QUERIES)
        text = text.format(d=rng.randint(1000, 20000), k=rng.randint(0, 10**6))
        kind = use
        try:
            if use == "wait":
                post(base + "/api/v1/query", text, timeout=60)
            else:
                _, body = post(base + "/api/v1/queries", text, timeout=10)
                if use == "kill":
                    time.sleep(rng.uniform(0.1, 2.0))
                    qid = json.loads(body)["id"]
                    urllib.request.urlopen(
                        urllib.request.Request(f"{base}/api/v1/queries/{qid}", method="DELETE"),
                        timeout=10,
                    ).read()
                else:
                    time.sleep(rng.uniform(0.05, 0.5))
        except urllib.error.HTTPError as e:
            kind = f"http {e.code}"
        except Exception as e:  # a refused or timed-out request is counted, not fatal
            kind = type(e).__name__
        with lock:
            counts[kind] = counts.get(kind, 0) + 1


def svg(samples, path, title):
    """samples: (seconds, resident, live heap, results held), in bytes: all three drawn."""
    width, height, pad = 800, 300, 50
    t_max = max(s[0] for s in samples) or 1
    r_max = max(s[1] for s in samples) * 1.1 or 1

    def points(i):
        return " ".join(
            f"{pad + (width - 2 * pad) * s[0] / t_max:.1f},{height - pad - (height - 2 * pad) * s[i] / r_max:.1f}"
            for s in samples
        )
    ticks = "".join(
        f'<text x="{pad - 5}" y="{height - pad - (height - 2 * pad) * f:.0f}" text-anchor="end" '
        f'font-size="11">{r_max * f / 2**20:.0f}</text>'
        for f in (0, 0.5, 1)
    )
    with open(path, "w") as f:
        f.write(
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
            f'<rect width="100%" height="100%" fill="white"/>'
            f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>'
            f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="black"/>'
            f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="black"/>'
            f"{ticks}"
            f'<text x="{width / 2}" y="{height - 10}" text-anchor="middle" font-size="12">minutes (0 to {t_max / 60:.0f})</text>'
            f'<text x="12" y="{height / 2}" font-size="12" transform="rotate(-90 12 {height / 2})">resident MiB</text>'
            f'<polyline points="{points(1)}" fill="none" stroke="#2563eb" stroke-width="2"/>'
            f'<polyline points="{points(2)}" fill="none" stroke="#16a34a" stroke-width="1.5"/>'
            f'<polyline points="{points(3)}" fill="none" stroke="#ea580c" stroke-width="1.5"/>'
            f'<text x="{width - pad}" y="{pad - 8}" text-anchor="end" font-size="11">'
            f'<tspan fill="#2563eb">resident</tspan>  <tspan fill="#16a34a">live heap</tspan>  '
            f'<tspan fill="#ea580c">of which results held for readers</tspan></text></svg>'
        )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--needle", required=True)
    ap.add_argument("--seconds", type=int, default=1800)
    ap.add_argument("--rate", type=int, default=50000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--out", default="soak-out")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEEDLE_")}
    server = subprocess.Popen(
        [args.needle, "serve", "--listen", "127.0.0.1:0", "--source", f"gen:bullet?rate={args.rate}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )
    try:
        base = None
        while base is None:
            line = server.stdout.readline()
            if not line:
                raise SystemExit("needle serve did not start")
            m = re.search(r"(https?://\S+)", line)
            base = m.group(1) if m else None
        stop, lock, counts = threading.Event(), threading.Lock(), {}
        clients = [
            threading.Thread(target=client, args=(base, stop, counts, lock, i), daemon=True)
            for i in range(args.clients)
        ]
        for c in clients:
            c.start()
        samples, started = [], time.time()
        with open(os.path.join(args.out, "rss.csv"), "w") as csv:
            csv.write("seconds,rss_bytes,heap_allocated_bytes,result_bytes,queries_running\n")
            while time.time() - started < args.seconds:
                time.sleep(10)
                t = time.time() - started
                rss = rss_bytes(server.pid)
                heap, held = gauges(base)
                with urllib.request.urlopen(base + "/api/v1/queries", timeout=10) as r:
                    running = len(json.loads(r.read()).get("queries", []))
                samples.append((t, rss, heap, held))
                csv.write(f"{t:.0f},{rss},{heap},{held},{running}\n")
                csv.flush()
                print(f"{t / 60:5.1f} min  {rss / 2**20:7.1f} MiB  (live heap {heap / 2**20:6.1f}, "
                      f"results held {held / 2**20:6.1f})  {running} queries running", flush=True)
        stop.set()
        third = max(1, len(samples) // 3)
        middle = sum(s[1] for s in samples[third : 2 * third]) / max(1, len(samples[third : 2 * third]))
        last = sum(s[1] for s in samples[2 * third :]) / max(1, len(samples[2 * third :]))
        growth = last / middle - 1 if middle else 0.0
        svg(samples, os.path.join(args.out, "rss.svg"),
            f"needle serve, {args.rate} records/s, {args.clients} query clients: resident memory")
        print(f"requests: {dict(sorted(counts.items()))}")
        print(f"resident: middle third {middle / 2**20:.1f} MiB, last third {last / 2**20:.1f} MiB "
              f"({growth * 100:+.1f}%); peak {max(s[1] for s in samples) / 2**20:.1f} MiB; live heap "
              f"{samples[third][2] / 2**20:.1f} MiB at a third, {samples[-1][2] / 2**20:.1f} at the end; "
              f"results held at most {max(s[3] for s in samples) / 2**20:.1f} MiB")
        ok = growth <= 0.15 and server.poll() is None
        print("flat" if ok else "NOT FLAT (or the server died)")
        raise SystemExit(0 if ok else 1)
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
