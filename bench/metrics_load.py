#!/usr/bin/env python3
"""Measurements behind docs/operations.md, against a running nginx with
ngx_llm (one engine; /v1/ and /metrics on --port).

  phases    where engine time goes: one long prompt (prefill), one stream
            (decode, batch 1), --batch streams at once (decode, batched):
            tokens/s and compute utilisation from the phase and busy counters
  scrape    what a 20 Hz /metrics scraper (the Gateway API Inference
            Extension's endpoint picker polls every 50 ms) costs the engine:
            decode tokens/s of a steady load, rounds with and without the
            scraper interleaved; and the time one scrape takes

    bench/metrics_load.py --port 8080 phases
    bench/metrics_load.py --port 8080 scrape --rounds 4 --secs 15
"""
import argparse
import http.client
import json
import statistics
import threading
import time


def metrics(conn):
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    m = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, value = line.rpartition(" ")
        m[name] = float(value)
    return m


def pick(m, family, label=""):
    return sum(v for k, v in m.items()
               if k.split("{")[0] == family and label in k)


def complete(port, prompt, max_tokens, results=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": max_tokens,
                       "ignore_eos": True, "temperature": 0})
    conn.request("POST", "/v1/completions", body,
                 {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    if r.status != 200:
        raise SystemExit("completion: %d %s" % (r.status, data[:200]))
    if results is not None:
        results.append(json.loads(data)["usage"])


def phases(args):
    mc = http.client.HTTPConnection("127.0.0.1", args.port, timeout=10)
    threads = pick(metrics(mc), "ngx_llm_compute_threads")

    def run(name, fn):
        m0 = metrics(mc)
        fn()
        m1 = metrics(mc)
        d = lambda f, l="": pick(m1, f, l) - pick(m0, f, l)
        pre = d("ngx_llm_engine_phase_seconds_total", 'phase="prefill"')
        dec = d("ngx_llm_engine_phase_seconds_total", 'phase="decode"')
        mix = d("ngx_llm_engine_phase_seconds_total", 'phase="mixed"')
        busy = d("ngx_llm_compute_busy_seconds_total")
        steps = d("vllm:iteration_tokens_total_count")
        toks = d("vllm:iteration_tokens_total_sum")
        step_s = pre + dec + mix
        print("%-26s prefill %6.2f s  decode %6.2f s  mixed %5.2f s | "
              "%5d steps, %6.1f tokens/step | prompt %7.1f tok/s of prefill, "
              "generated %6.1f tok/s of decode | utilisation %3.0f%%"
              % (name, pre, dec, mix, steps, toks / max(steps, 1),
                 d("vllm:prompt_tokens_total") / pre if pre else 0,
                 d("vllm:generation_tokens_total") / step_s if step_s else 0,
                 100 * busy / (step_s * threads) if step_s else 0))

    long_prompt = "The quick brown fox jumps over the lazy dog. " * 150
    run("prefill (1 x ~1500 tok)", lambda: complete(args.port, long_prompt, 1))
    run("decode, batch 1", lambda: complete(args.port, "Once upon a time", 200))

    def batch():
        ts = [threading.Thread(target=complete,
                               args=(args.port, "Once upon a time %d" % i, 200))
              for i in range(args.batch)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    run("decode, batch %d" % args.batch, batch)


def scrape(args):
    mc = http.client.HTTPConnection("127.0.0.1", args.port, timeout=10)

    # one scrape's time, keep-alive, back to back
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        metrics(mc)
    per = (time.perf_counter() - t0) / n
    print("one /metrics scrape (keep-alive, parsed by this client): %.0f us; "
          "at 20 Hz %.2f%% of one core" % (per * 1e6, per * 20 * 100))

    stop = threading.Event()

    def load():
        while not stop.is_set():
            complete(args.port, "Once upon a time", 64)

    def scraper(done):
        c = http.client.HTTPConnection("127.0.0.1", args.port, timeout=10)
        n = 0
        while not done.is_set():
            t = time.monotonic()
            c.request("GET", "/metrics")
            c.getresponse().read()
            n += 1
            done.wait(max(0.0, 0.05 - (time.monotonic() - t)))
        return n

    workers = [threading.Thread(target=load) for _ in range(args.batch)]
    for w in workers:
        w.start()
    time.sleep(3)                       # the batch fills

    rates = {"without": [], "with": []}
    for r in range(args.rounds):
        for mode in ("without", "with") if r % 2 == 0 else ("with", "without"):
            done = threading.Event()
            count = [0]
            th = None
            if mode == "with":
                th = threading.Thread(target=lambda: count.__setitem__(0, scraper(done)))
                th.start()
            g0 = pick(metrics(mc), "vllm:generation_tokens_total")
            t0 = time.monotonic()
            time.sleep(args.secs)
            g1 = pick(metrics(mc), "vllm:generation_tokens_total")
            t1 = time.monotonic()
            done.set()
            if th:
                th.join()
            rate = (g1 - g0) / (t1 - t0)
            rates[mode].append(rate)
            print("round %d %-7s scraper: %6.1f generated tok/s%s"
                  % (r, mode, rate,
                     " (%d scrapes, %.1f Hz)" % (count[0], count[0] / (t1 - t0))
                     if th else ""))

    stop.set()
    for w in workers:
        w.join()
    a = statistics.mean(rates["without"])
    b = statistics.mean(rates["with"])
    print("mean without %.1f tok/s (stdev %.1f), with %.1f tok/s (stdev %.1f): "
          "%+.2f%%" % (a, statistics.pstdev(rates["without"]), b,
                       statistics.pstdev(rates["with"]), 100 * (b - a) / a))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--secs", type=float, default=15)
    ap.add_argument("what", choices=["phases", "scrape"])
    args = ap.parse_args()
    phases(args) if args.what == "phases" else scrape(args)


if __name__ == "__main__":
    main()
