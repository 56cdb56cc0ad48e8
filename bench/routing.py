#!/usr/bin/env python3
"""Prefix-aware routing against round robin (docs/operations.md, "Routing";
`make bench-routing`, a few minutes).

Starts three nginx instances on loopback ports: two nodes, each with its
own engine (kv_cache_memory small enough that one node cannot keep every
system prompt cached), and a front with llm_tokenizer and no engine. Then,
for each policy (`hash $llm_prefix_hash consistent`, then round robin),
with fresh engines: --requests chat requests, --clients at a time, each
one of --prompts system prompts (300-600 tokens) and a random user
message, streamed, --max-tokens each. Reports the prefix-cache hit tokens
of both nodes (vllm:prefix_cache_hits_total / _queries_total deltas), the
client's TTFT p50/p90 and the requests per node.

    bench/routing.py --build build --model $MODEL [--port 19220] [--rounds 2]
"""
import argparse
import http.client
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time

WORDS = ("account billing invoice refund shipping order customer warranty "
         "product manual device battery screen network router password "
         "security update firmware replacement delivery tracking payment "
         "subscription plan upgrade discount policy return exchange repair "
         "appointment technician support ticket escalation priority region "
         "language contract renewal cancellation notice privacy data").split()


def system_prompt(i, rng):
    """~300-600 tokens, its own from the first word"""
    n = rng.randint(280, 560)
    body = " ".join(rng.choice(WORDS) for _ in range(n))
    return (f"You are the assistant of help desk number {i}. Follow these "
            f"notes of desk {i} strictly: {body}. Answer in one sentence.")


def node_conf(args, name, port, binary):
    return f"""
load_module {args.module};
worker_processes 1;
error_log logs/error.log notice;
pid logs/nginx.pid;
events {{ worker_connections 256; }}
http {{
    access_log off;
    llm_engine main {{
        model {args.model};
        binary {binary};
        served_model_name smollm2;
        threads {args.threads};
        max_num_seqs 8;
        max_model_len 1024;
        kv_cache_memory {args.kv_cache_memory};
    }}
    server {{
        listen 127.0.0.1:{port};
        add_header X-Node {name} always;
        location /v1/ {{ llm_api main; }}
        location = /healthz {{ llm_health main; }}
        location = /metrics {{ llm_metrics; }}
    }}
}}
"""


def front_conf(args, port, nodes, policy):
    balance = "hash $llm_prefix_hash consistent;" if policy == "hash" else ""
    servers = "\n".join(f"        server 127.0.0.1:{p};" for p in nodes)
    return f"""
load_module {args.module};
worker_processes 1;
error_log logs/error.log notice;
pid logs/nginx.pid;
events {{ worker_connections 256; }}
http {{
    access_log off;
    llm_tokenizer smollm2 {{
        model {args.model};
    }}
    upstream nodes {{
        {balance}
{servers}
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{port};
        llm_prefix_hash smollm2;
        llm_prefix_hash_tokens {args.prefix_tokens};
        location /v1/ {{
            proxy_pass http://nodes;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_next_upstream error timeout http_503;
        }}
    }}
}}
"""


class Nginx:
    def __init__(self, prefix, conf):
        self.prefix = prefix
        shutil.rmtree(prefix, ignore_errors=True)
        os.makedirs(f"{prefix}/logs")
        with open(f"{prefix}/nginx.conf", "w") as f:
            f.write(conf)
        self.cmd = ["nginx", "-p", prefix + "/", "-c", "nginx.conf"]
        subprocess.run(self.cmd, check=True)

    def stop(self):
        subprocess.run(self.cmd + ["-s", "stop"], check=False,
                       stderr=subprocess.DEVNULL)


def get(port, path, timeout=5):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def wait_healthy(port, secs=120):
    end = time.time() + secs
    while time.time() < end:
        try:
            if get(port, "/healthz")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"node on {port} not healthy in {secs}s")


def counters(port):
    _, text = get(port, "/metrics")
    m = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        for k in ("vllm:prefix_cache_hits_total",
                  "vllm:prefix_cache_queries_total"):
            if line.startswith(k + "{") or line.startswith(k + " "):
                m[k] = m.get(k, 0) + float(line.rsplit(" ", 1)[1])
    return m


def one(port, system, user, max_tokens):
    body = json.dumps({"model": "smollm2", "stream": True,
                       "max_tokens": max_tokens, "temperature": 0,
                       "messages": [{"role": "system", "content": system},
                                    {"role": "user", "content": user}]})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    t0 = time.monotonic()
    c.request("POST", "/v1/chat/completions", body,
              {"Content-Type": "application/json"})
    r = c.getresponse()
    node = r.getheader("X-Node", "?")
    ttft = None
    while True:
        line = r.readline()
        if not line:
            break
        if ttft is None and line.startswith(b"data: {"):
            ttft = time.monotonic() - t0
    c.close()
    return r.status, node, ttft


def run_policy(args, policy, work, ports, binary):
    top = os.path.abspath(f"{args.build}/bench-routing/{policy}")
    nodes = [Nginx(f"{top}/node{i + 1}",
                   node_conf(args, f"node{i + 1}", p, binary))
             for i, p in enumerate(ports[1:])]
    front = Nginx(f"{top}/front", front_conf(args, ports[0], ports[1:],
                                             policy))
    try:
        for p in ports[1:]:
            wait_healthy(p)
        before = [counters(p) for p in ports[1:]]
        results, lock = [], threading.Lock()
        queue = list(work)

        def client():
            while True:
                with lock:
                    if not queue:
                        return
                    system, user = queue.pop(0)
                res = one(ports[0], system, user, args.max_tokens)
                with lock:
                    results.append(res)

        t0 = time.monotonic()
        threads = [threading.Thread(target=client)
                   for _ in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - t0
        after = [counters(p) for p in ports[1:]]
    finally:
        front.stop()
        for n in nodes:
            n.stop()
        time.sleep(1)

    hits = sum(a["vllm:prefix_cache_hits_total"]
               - b["vllm:prefix_cache_hits_total"]
               for a, b in zip(after, before))
    queries = sum(a["vllm:prefix_cache_queries_total"]
                  - b["vllm:prefix_cache_queries_total"]
                  for a, b in zip(after, before))
    ttfts = sorted(r[2] for r in results if r[0] == 200 and r[2])
    per_node = {}
    for r in results:
        per_node[r[1]] = per_node.get(r[1], 0) + 1
    bad = sum(1 for r in results if r[0] != 200)
    return {"policy": policy, "hits": hits, "queries": queries,
            "ttft_p50": statistics.median(ttfts) if ttfts else 0,
            "ttft_p90": ttfts[int(len(ttfts) * 0.9) - 1] if ttfts else 0,
            "per_node": per_node, "errors": bad, "wall": wall}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--model", required=True)
    ap.add_argument("--port", type=int, default=19220)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--kv-cache-memory", default="64m")
    ap.add_argument("--prefix-tokens", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policies", default="hash,round-robin")
    ap.add_argument("--rounds", type=int, default=1,
                    help="each round runs every policy, fresh engines")
    args = ap.parse_args()

    args.build = os.path.abspath(args.build)
    args.module = f"{args.build}/modules/ngx_http_llm_module.so"
    # a copy: someone's rebuild must not swap the engine mid-run
    bindir = f"{args.build}/bench-routing/bin"
    os.makedirs(bindir, exist_ok=True)
    binary = f"{bindir}/ngx_llm_engine"
    shutil.copy2(f"{args.build}/ngx_llm_engine", binary)

    rng = random.Random(args.seed)
    systems = [system_prompt(i, rng) for i in range(args.prompts)]
    work = [(rng.choice(systems),
             f"Question {k}: what about my {rng.choice(WORDS)} and "
             f"{rng.choice(WORDS)}?") for k in range(args.requests)]
    ports = [args.port, args.port + 1, args.port + 2]

    print(f"{args.prompts} system prompts, {args.requests} requests, "
          f"{args.clients} clients, max_tokens {args.max_tokens}, "
          f"kv_cache_memory {args.kv_cache_memory} per node, "
          f"llm_prefix_hash_tokens {args.prefix_tokens}, "
          f"load {os.getloadavg()[0]:.2f}")
    print("| routing | prefix-cache hit tokens | hit rate | TTFT p50 | "
          "TTFT p90 | requests per node | errors | wall |")
    print("|---|---|---|---|---|---|---|---|")
    for policy in [p for _ in range(args.rounds)
                   for p in args.policies.split(",")]:
        r = run_policy(args, policy, work, ports, binary)
        nodes = " / ".join(f"{k} {v}" for k, v in sorted(r["per_node"]
                                                         .items()))
        rate = r["hits"] / r["queries"] if r["queries"] else 0
        print(f"| {policy} | {r['hits']:.0f} of {r['queries']:.0f} | "
              f"{rate:.0%} | {r['ttft_p50'] * 1000:.0f} ms | "
              f"{r['ttft_p90'] * 1000:.0f} ms | {nodes} | {r['errors']} | "
              f"{r['wall']:.1f} s |", flush=True)


if __name__ == "__main__":
    main()
