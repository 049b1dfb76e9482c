"""Bounded load test of `memra serve`: N requests at concurrency C with mixed prompt lengths
and max_tokens, streamed; reports throughput and time-to-first-token percentiles. A
benchmark, not a test: it asserts only that every request succeeded.

Usage: bench_serve.py [--binary B --plugin P | --url http://127.0.0.1:8080]
                      [--requests 200] [--concurrency 16] [--api-key K]"""
import argparse
import http.client
import json
import os
import random
import sys
import threading
import time
from urllib.parse import urlparse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_harness import Server  # noqa: E402


def one(host, port, key, body):
    """Streams one completion; returns (ttft, total, completion_tokens)."""
    c = http.client.HTTPConnection(host, port, timeout=600)
    h = {"Content-Type": "application/json"}
    if key:
        h["Authorization"] = "Bearer " + key
    t0 = time.time()
    c.request("POST", "/v1/completions", json.dumps(body), h)
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("status %d: %s" % (r.status, r.read()[:200]))
    ttft, usage = None, None
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if ttft is None and ev["choices"] and ev["choices"][0]["text"]:
            ttft = time.time() - t0
        usage = ev.get("usage") or usage
    c.close()
    total = time.time() - t0
    return ttft if ttft is not None else total, total, usage["completion_tokens"]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="bazel-bin/tools/serve/memra-serve")
    ap.add_argument("--plugin", default="bazel-bin/plugins/cpu/libmemra_cpu.so")
    ap.add_argument("--url", default="")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--api-key", default="")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    srv = None
    if a.url:
        u = urlparse(a.url)
        host, port = u.hostname, u.port
    else:
        srv = Server(a.binary, a.plugin, ["--ctx-size", "512", "--parallel",
                                          str(a.concurrency), "--max-queue", "1024"])
        host, port = "127.0.0.1", srv.port
    rng = random.Random(a.seed)
    bodies = [{"prompt": [rng.randrange(200, 40000) for _ in range(rng.choice([4, 16, 64, 200]))],
               "max_tokens": rng.choice([8, 32, 64]), "temperature": 0.7, "seed": i,
               "stream": True} for i in range(a.requests)]
    results, errors, lock = [], [], threading.Lock()
    nxt = [0]

    def worker():
        while True:
            with lock:
                if nxt[0] >= len(bodies):
                    return
                i = nxt[0]
                nxt[0] += 1
            try:
                r = one(host, port, a.api_key, bodies[i])
                with lock:
                    results.append(r)
            except Exception as e:  # noqa: BLE001 - reported below
                with lock:
                    errors.append(str(e))

    t0 = time.time()
    th = [threading.Thread(target=worker) for _ in range(a.concurrency)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.time() - t0
    if srv:
        srv.stop()
    ttfts = [r[0] for r in results]
    toks = sum(r[2] for r in results)
    print("requests %d (errors %d) at concurrency %d in %.1f s" %
          (len(results), len(errors), a.concurrency, wall))
    if results:
        print("throughput: %.2f req/s, %.1f generated tok/s" % (len(results) / wall, toks / wall))
        print("TTFT p50 %.3f s  p99 %.3f s;  latency p50 %.3f s  p99 %.3f s" %
              (pct(ttfts, 50), pct(ttfts, 99), pct([r[1] for r in results], 50),
               pct([r[1] for r in results], 99)))
    for e in errors[:5]:
        print("error:", e)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
