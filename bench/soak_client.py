#!/usr/bin/env python3
"""The client of make soak (bench/soak.sh): standard library only.

N threads send a mix of requests to nginx for a while: chat completions
with and without streaming, streams the client closes after the first
events (cancellations), generations under a location with a tiny
llm_deadline (timeouts), bad JSON and prompts longer than max_model_len
(errors). Every reply's status is checked against what its kind must get.
Meanwhile a thread samples the RSS and open descriptors of the engine and
the workers (/proc/PID/status, /proc/PID/fd).

Phases: a warm-up (the same load, fills the KV pool and the prefix cache),
idle (the baseline sample), the soak, idle again (the final sample and
/metrics). Flat means, per process, final RSS <= baseline + max(RSS_TOL_KB,
RSS_TOL_PCT %) and final descriptors within FD_TOL of the baseline; idle
means running, waiting, ring slots in use and KV blocks in use all 0
(blocks that only the prefix cache holds are not in use). Prints the table; exits 1 when a check fails.

    soak_client.py --port P --pids engine=PID,worker=PID,... --secs S
"""

import argparse
import http.client
import json
import os
import random
import socket
import sys
import threading
import time

RSS_TOL_KB = 8 * 1024
RSS_TOL_PCT = 3.0
FD_TOL = 2

WORDS = ("the cat sat on a mat while rain fell over quiet hills and the "
         "old river kept moving past stone bridges toward the sea").split()

# kind -> share of the mix
MIX = [("chat", 30), ("stream", 30), ("cancel", 15), ("timeout", 10),
       ("bad_json", 8), ("too_long", 7)]


def prompt(n):
    return " ".join(random.choice(WORDS) for _ in range(n))


def body(stream, max_tokens, content):
    return json.dumps({
        "model": "smollm2",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "stream": stream,
    })


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.count = {}         # (kind, outcome) -> n
        self.bad = []           # unexpected outcomes, first few

    def add(self, kind, outcome, ok, detail=""):
        with self.lock:
            self.count[(kind, outcome)] = self.count.get((kind, outcome), 0) + 1
            if not ok and len(self.bad) < 20:
                self.bad.append("%s: %s %s" % (kind, outcome, detail[:200]))


def one(args, kind, st):
    conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=120)
    path = "/v1/chat/completions"
    try:
        if kind == "chat":
            conn.request("POST", path, body(False, random.randint(4, 24),
                                            prompt(random.randint(5, 60))))
            r = conn.getresponse()
            data = r.read()
            ok = r.status == 200 and b'"choices"' in data
            st.add(kind, r.status, ok, data.decode("utf-8", "replace"))

        elif kind == "stream":
            conn.request("POST", path, body(True, random.randint(4, 24),
                                            prompt(random.randint(5, 60))))
            r = conn.getresponse()
            data = r.read()
            ok = r.status == 200 and data.rstrip().endswith(b"data: [DONE]")
            st.add(kind, r.status, ok, data[-200:].decode("utf-8", "replace"))

        elif kind == "cancel":
            conn.request("POST", path, body(True, 200, prompt(30)))
            r = conn.getresponse()
            if r.status != 200:
                st.add(kind, r.status, False, r.read().decode("utf-8", "replace"))
                return
            got = r.fp.readline()       # the first event, then gone
            st.add(kind, "closed", bool(got))
            # RST rather than FIN: the worker sees the client go at once
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                 b"\x01\x00\x00\x00\x00\x00\x00\x00")

        elif kind == "timeout":
            conn.request("POST", "/deadline" + path,
                         body(random.random() < 0.5, 400, prompt(40)))
            r = conn.getresponse()
            data = r.read()
            # 504 before the stream began, an error event after
            ok = (r.status == 504 and b"deadline_exceeded" in data) or \
                 (r.status == 200 and b"deadline_exceeded" in data)
            st.add(kind, r.status, ok, data[-200:].decode("utf-8", "replace"))

        elif kind == "bad_json":
            conn.request("POST", path, '{"model": "smollm2", "messages": [')
            r = conn.getresponse()
            data = r.read()
            st.add(kind, r.status, r.status == 400 and b'"error"' in data,
                   data.decode("utf-8", "replace"))

        elif kind == "too_long":
            conn.request("POST", path, body(False, 8, prompt(args.long_words)))
            r = conn.getresponse()
            data = r.read()
            st.add(kind, r.status, r.status == 400 and b'"error"' in data,
                   data.decode("utf-8", "replace"))
    except (OSError, http.client.HTTPException) as e:
        st.add(kind, type(e).__name__, False, str(e))
    finally:
        conn.close()


def load(args, st, until):
    kinds = [k for k, w in MIX for _ in range(w)]

    def run():
        while time.time() < until:
            one(args, random.choice(kinds), st)

    threads = [threading.Thread(target=run) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def proc_sample(pid):
    rss = None
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        fds = len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None, None
    return rss, fds


def metrics(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    m = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, value = line.rpartition(" ")
        m[name.split("{")[0]] = float(value)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pids", required=True, help="name=pid,...")
    ap.add_argument("--secs", type=int, default=600)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--sample", type=int, default=5)
    ap.add_argument("--long-words", type=int, default=1500)
    args = ap.parse_args()
    pids = [(n, int(p)) for n, p in (x.split("=") for x in args.pids.split(","))]

    st = Stats()
    samples = []                # (t, phase, {name: (rss, fds)})
    phase = ["warm-up"]
    stop = threading.Event()
    t0 = time.time()

    def sampler():
        while not stop.is_set():
            samples.append((time.time() - t0, phase[0],
                            {n: proc_sample(p) for n, p in pids}))
            stop.wait(args.sample)

    th = threading.Thread(target=sampler)
    th.start()

    load(args, st, time.time() + args.warmup)
    time.sleep(3)
    base = {n: proc_sample(p) for n, p in pids}
    phase[0] = "soak"
    load(args, st, time.time() + args.secs)
    phase[0] = "idle"

    # idle: the engine finishes what cancellations left, then 0 everywhere
    deadline = time.time() + 30
    while True:
        m = metrics(args.port)
        busy = (m.get("vllm:num_requests_running", 0)
                + m.get("vllm:num_requests_waiting", 0)
                + m.get("ngx_llm_ring_slots_used", 0))
        if busy == 0 or time.time() > deadline:
            break
        time.sleep(1)
    time.sleep(3)
    final = {n: proc_sample(p) for n, p in pids}
    stop.set()
    th.join()

    # the table: one line a minute of samples, then baseline and final
    print("%8s %-8s " % ("t (s)", "phase")
          + " ".join("%14s %4s" % (n + " RSS kB", "fds") for n, _ in pids))
    last = -1e9
    for t, ph, s in samples:
        if t - last >= 60 or ph == "idle":
            last = t
            print("%8.0f %-8s " % (t, ph) + " ".join(
                "%14s %4s" % s[n] for n, _ in pids))
    print("%8s %-8s " % ("", "baseline") + " ".join(
        "%14s %4s" % base[n] for n, _ in pids))
    print("%8s %-8s " % ("", "final") + " ".join(
        "%14s %4s" % final[n] for n, _ in pids))

    fails = []
    for n, _ in pids:
        (r0, f0), (r1, f1) = base[n], final[n]
        if r0 is None or r1 is None:
            fails.append("%s: gone" % n)
            continue
        tol = max(RSS_TOL_KB, r0 * RSS_TOL_PCT / 100)
        print("%s: RSS %+d kB (tolerance %d kB), fds %+d (tolerance %d)"
              % (n, r1 - r0, tol, f1 - f0, FD_TOL))
        if r1 - r0 > tol:
            fails.append("%s: RSS grew %d kB" % (n, r1 - r0))
        if abs(f1 - f0) > FD_TOL:
            fails.append("%s: descriptors %d -> %d" % (n, f0, f1))

    total = m.get("ngx_llm_kv_blocks_capacity", 0)
    used = round(m.get("vllm:kv_cache_usage_perc", 0) * total)
    cached = m.get("ngx_llm_kv_blocks_cached", 0)
    idle = {
        "vllm:num_requests_running": m.get("vllm:num_requests_running"),
        "vllm:num_requests_waiting": m.get("vllm:num_requests_waiting"),
        "ngx_llm_ring_slots_used": m.get("ngx_llm_ring_slots_used"),
        "KV blocks in use": used,
    }
    print("idle /metrics: %s (KV blocks %d of %d used, %d by the prefix "
          "cache only)" % (", ".join("%s %g" % kv for kv in idle.items()),
                           used, total, cached))
    for k, v in idle.items():
        if v != 0:
            fails.append("idle: %s is %s" % (k, v))

    print("requests (kind, status: count):")
    n_req = 0
    for (k, o), c in sorted(st.count.items(), key=lambda x: str(x[0])):
        print("  %-9s %-8s %d" % (k, o, c))
        n_req += c
    print("  %d requests in %d s of soak and %d s of warm-up"
          % (n_req, args.secs, args.warmup))
    for b in st.bad:
        print("unexpected: " + b)
    if st.bad:
        fails.append("%d unexpected replies" % len(st.bad))

    for f in fails:
        print("soak FAILED: " + f)
    if not fails:
        print("soak: flat and idle")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
