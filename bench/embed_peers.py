#!/usr/bin/env python3
"""The embedding row of `make bench-peers` (issue 32, docs/perf.md).

256 short passages (about 64 WordPiece tokens each) through POST
/v1/embeddings, 16 requests in flight, one passage a request: our nginx
(an llm_engine serving EMBED_GGUF) against each peer's `llama-server
--embedding` on the same GGUF, THREADS threads each, ROUNDS rounds, the
engines' order rotating each round (one interleaved run). Each run
counts passages/s over the wall time of the 256 requests; every answer
must be a 200 with one vector of the model's width. The ratio is ours
over the faster peer of the same round; the table shows each round's
figures, the median ratio and the load average beside them.

The GGUF: tools/bert_oracle.py --bench OUT.gguf (bge-small's shape,
random weights, F16). The peers are built by the user outside the
repository (docs/perf.md).

    bench/embed_peers.py --gguf G --build build [--llama DIR] [--ik DIR]
        [--rounds 3] [--threads 2] [--port P] [--md docs/perf.md]
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

N_PASSAGES = 256
CONCURRENCY = 16
BEGIN = "<!-- embed-peers:begin -->"
END = "<!-- embed-peers:end -->"

# plain English words the bge vocabulary holds whole: ~1.2 tokens a word
WORDS = """the of and to in is was for on that with as by at from his her
this be are an which or had it not but have one were they all their new
first two has been after who other its more also when time can would into
only over some most years there may such many about these then city state
world group high school part year people war water system music name life
area house river game team later river field power light early public
second found known family south north west east under while three well
company during between government national history series film book road
season since several work used including small large order small around
place through both before until best each among another same left river
""".split()


def passages(seed=11):
    r = random.Random(seed)
    out = []
    for i in range(N_PASSAGES):
        words = [r.choice(WORDS) for _ in range(50)]
        out.append("passage %d: %s." % (i, " ".join(words)))
    return out


def loadavg():
    with open("/proc/loadavg") as f:
        return "/".join(f.read().split()[:3])


def post(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        c.request("POST", "/v1/embeddings", body,
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def run(port, texts, model, dim):
    """all texts, CONCURRENCY at a time: (passages/s, prompt tokens)"""
    lock = threading.Lock()
    state = {"next": 0, "tokens": 0, "bad": None}

    def worker():
        while True:
            with lock:
                i = state["next"]
                state["next"] += 1
            if i >= len(texts):
                return
            try:
                st, raw = post(port, json.dumps({"model": model,
                                                 "input": texts[i]}))
                d = json.loads(raw)
                ok = st == 200 and len(d["data"]) == 1 \
                    and len(d["data"][0]["embedding"]) == dim
            except (OSError, ValueError, KeyError, TypeError) as e:
                ok, st, raw = False, 0, str(e).encode()
            with lock:
                if not ok and state["bad"] is None:
                    state["bad"] = "%d %s" % (st, raw[:200])
                elif ok:
                    state["tokens"] += d["usage"]["prompt_tokens"]

    t0 = time.monotonic()
    th = [threading.Thread(target=worker) for _ in range(CONCURRENCY)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.monotonic() - t0
    if state["bad"] is not None:
        sys.exit("embed_peers: port %d answered %s" % (port, state["bad"]))
    return len(texts) / wall, state["tokens"]


def wait_health(port, path, proc, what, seconds=120):
    for _ in range(seconds * 2):
        if proc is not None and proc.poll() is not None:
            sys.exit("embed_peers: %s exited" % what)
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", path)
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    sys.exit("embed_peers: %s not ready after %d s" % (what, seconds))


def start_ours(a, prefix):
    """a private nginx with one embedding engine (copies of the module and
    the engine: a rebuild cannot pull the code from under it)"""
    os.makedirs(os.path.join(prefix, "logs"), exist_ok=True)
    os.makedirs(os.path.join(prefix, "conf"), exist_ok=True)
    mod = os.path.join(prefix, "ngx_http_llm_module.so")
    eng = os.path.join(prefix, "ngx_llm_engine")
    shutil.copy(os.path.join(a.build, "modules/ngx_http_llm_module.so"), mod)
    shutil.copy(os.path.join(a.build, "ngx_llm_engine"), eng)
    conf = """load_module %s;
worker_processes 1;
error_log logs/error.log notice;
pid logs/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    llm_engine embed {
        model              %s;
        binary             %s;
        served_model_name  bge-small;
        threads            %d;
        max_num_seqs       %d;
        max_batched_tokens %d;
    }
    server {
        listen 127.0.0.1:%d;
        location /v1/ { llm_api embed; }
        location = /healthz { llm_health embed; }
    }
}
""" % (mod, a.gguf, eng, a.threads, CONCURRENCY, a.batch_tokens, a.port)
    with open(os.path.join(prefix, "conf/nginx.conf"), "w") as f:
        f.write(conf)
    subprocess.run([a.nginx, "-p", prefix + "/", "-c", "conf/nginx.conf"],
                   check=True)
    wait_health(a.port, "/healthz", None, "our nginx")


def stop_ours(a, prefix):
    subprocess.run([a.nginx, "-p", prefix + "/", "-c", "conf/nginx.conf",
                    "-s", "stop"], stderr=subprocess.DEVNULL)


def start_peer(name, folder, a, port, out):
    cmd = [os.path.join(folder, "llama-server"), "-m", a.gguf,
           "--embedding", "-t", str(a.threads), "-np", str(CONCURRENCY),
           "-c", str(CONCURRENCY * 256),
           # a non-causal batch must fit one ubatch (llama.cpp asserts it)
           "-b", str(CONCURRENCY * 256), "-ub", str(CONCURRENCY * 256),
           "--host", "127.0.0.1",
           "--port", str(port)]
    log = open(os.path.join(out, "%s-embed-server.log" % name), "w")
    log.write(" ".join(cmd) + "\n")
    log.flush()
    p = subprocess.Popen(cmd, cwd=out, stdout=log, stderr=subprocess.STDOUT)
    wait_health(port, "/health", p, "%s's llama-server" % name)
    return p


def table(rows, engines, a, tokens):
    """the markdown block: one line a round, then the median"""
    peers = [e for e in engines if e != "ours"]
    head = "| round | load | ours | " + " | ".join(peers) \
        + " | ours / faster peer |"
    lines = [BEGIN, "",
             "Embeddings (issue 32): %d passages (%.0f tokens each on "
             "average) through POST /v1/embeddings, %d in flight, one "
             "passage a request; bge-small's shape (12 layers, hidden 384, "
             "FFN 1536), random weights, `%s` "
             "(`tools/bert_oracle.py --bench`), CLS pooling, %d threads "
             "each; ours: nginx + engine, max_batched_tokens %d; peers: "
             "`llama-server --embedding -np %d -c/-b/-ub %d`. Passages/s, %d rounds "
             "interleaved (`make bench-peers EMBED_GGUF=...`)."
             % (N_PASSAGES, tokens, CONCURRENCY, os.path.basename(a.gguf),
                a.threads, a.batch_tokens,
                CONCURRENCY, CONCURRENCY * 256, a.rounds), "",
             head, "|" + "---|" * (3 + len(peers) + 1)]
    ratios = []
    for r, (load, res) in enumerate(rows, 1):
        best = max(res[e] for e in peers)
        ratios.append(res["ours"] / best)
        lines.append("| %d | %s | %.1f | %s | %.2fx |"
                     % (r, load, res["ours"],
                        " | ".join("%.1f" % res[e] for e in peers),
                        ratios[-1]))
    med = statistics.median(ratios)
    lines += ["", "Median ratio ours / faster peer: **%.2fx** (target "
              ">= 1.2x: %s)." % (med, "met" if med >= 1.2 else "missed"),
              "", END]
    return "\n".join(lines), med


def write_md(path, block):
    text = open(path).read() if os.path.exists(path) else ""
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block \
            + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--llama")
    ap.add_argument("--ik")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--port", type=int, default=21000)
    ap.add_argument("--batch-tokens", type=int, default=1024)
    ap.add_argument("--nginx", default="/usr/sbin/nginx")
    ap.add_argument("--md")
    a = ap.parse_args()
    a.gguf = os.path.realpath(a.gguf)
    a.build = os.path.realpath(a.build)
    peers = [(n, d) for n, d in (("llama", a.llama), ("ik", a.ik)) if d]
    if not peers:
        sys.exit("embed_peers: no peer (--llama and/or --ik)")
    out = os.path.join(a.build, "bench/peers")
    prefix = os.path.join(a.build, "bench/embed")
    os.makedirs(out, exist_ok=True)
    texts = passages()
    procs, ports = {}, {"ours": a.port}
    try:
        start_ours(a, prefix)
        for i, (name, folder) in enumerate(peers):
            ports[name] = a.port + 1 + i
            procs[name] = start_peer(name, os.path.realpath(folder), a,
                                     ports[name], out)
        engines = ["ours"] + [n for n, _ in peers]
        dim = len(json.loads(post(a.port, json.dumps(
            {"model": "bge-small", "input": "dimension"}))[1])["data"][0]["embedding"])
        for e in engines:           # warm: first-touch of the weights
            run(ports[e], texts[:32], "bge-small", dim)
        rows, tokens = [], 0
        for r in range(a.rounds):
            order = engines[r % len(engines):] + engines[:r % len(engines)]
            res, load = {}, loadavg()
            for e in order:
                res[e], t = run(ports[e], texts, "bge-small", dim)
                if e == "ours":
                    tokens = t / len(texts)
                print("  round %d %-6s %7.1f passages/s  [load %s]"
                      % (r + 1, e, res[e], loadavg()), flush=True)
            rows.append((load, res))
    finally:
        stop_ours(a, prefix)
        for p in procs.values():
            p.terminate()
            p.wait()
    block, med = table(rows, engines, a, tokens)
    print(block)
    if a.md:
        write_md(a.md, block)


if __name__ == "__main__":
    main()
