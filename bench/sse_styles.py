#!/usr/bin/env python3
"""bench/sse_styles.py: serve_bench against every style of a valid stream.

make bench's peer mode points bench/serve_bench at other servers
(llama.cpp's and ik_llama.cpp's llama-server), and an earlier
serve_bench crashed on a stream that ours never sends. This starts small
fake OpenAI servers, one per style the SSE format and HTTP/1.1 allow, each
sending its bytes in small pieces with chunk boundaries anywhere, and runs
serve_bench against each: every one must give all its tokens, the 500
must fail cleanly, none may crash.

    python3 bench/sse_styles.py [build/bench/serve_bench]

Styles: LF, CRLF and lone-CR lines; "data:" without the space; comments
and event:/id: fields; data split over two lines; no usage object (the
chunks are counted); no blank line after the last event; a Content-Length
body; a body delimited by close (HTTP/1.0); an error status.
"""
import json
import random
import socket
import subprocess
import sys
import threading
import time

STYLES = ["lf", "crlf", "cr", "nospace", "comments", "multiline", "nousage",
          "notrail", "length", "close", "error"]


def events(style, n):
    evs = [{"choices": [{"index": 0, "delta": {"role": "assistant",
                                               "content": None}}]}]
    evs += [{"choices": [{"index": 0, "delta": {"content": "t%d " % i},
                          "finish_reason": None}]} for i in range(n)]
    evs.append({"choices": [{"index": 0, "delta": {},
                             "finish_reason": "length"}]})
    if style != "nousage":
        evs.append({"choices": [], "usage": {"prompt_tokens": 10,
                                             "completion_tokens": n,
                                             "total_tokens": n + 10}})
    return evs


def body(style, n):
    nl = {"crlf": "\r\n", "cr": "\r"}.get(style, "\n")
    out = [": ping" + nl + nl] if style == "comments" else []
    for e in events(style, n):
        j = json.dumps(e)
        if style == "multiline":
            k = j.index(",")
            out.append("data: " + j[:k + 1] + nl + "data: " + j[k + 1:]
                       + nl + nl)
        elif style in ("nospace", "comments"):
            out.append("event: message" + nl + "id: 1" + nl + "data:" + j
                       + nl + nl)
        else:
            out.append("data: " + j + nl + nl)
    out.append("data: [DONE]" + ("" if style == "notrail" else nl + nl))
    return "".join(out).encode()


def handle(c, style):
    req = b""
    while b"\r\n\r\n" not in req:
        req += c.recv(65536)
    head, _, rest = req.partition(b"\r\n\r\n")
    n = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
         if l.lower().startswith(b"content-length")][0]
    while len(rest) < n:
        rest += c.recv(65536)
    b = body(style, json.loads(rest)["max_tokens"])
    if style == "error":
        e = b'{"error":{"message":"no","type":"server_error"}}'
        c.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: "
                  b"application/json\r\nContent-Length: %d\r\n\r\n%s"
                  % (len(e), e))
    elif style == "length":
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(b))
        for i in range(0, len(b), 7):
            c.sendall(b[i:i + 7])
    elif style == "close":
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream"
                  b"\r\n\r\n")
        time.sleep(0.01)            # headers alone first, as llama-server
        for i in range(0, len(b), 13):
            c.sendall(b[i:i + 13])
    else:
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                  b"Transfer-Encoding: chunked\r\nConnection: keep-alive"
                  b"\r\n\r\n")
        time.sleep(0.01)
        i = 0
        while i < len(b):
            k = random.randint(1, 40)
            raw = b"%x;ext=1\r\n%s\r\n" % (len(b[i:i + k]), b[i:i + k])
            i += k
            for j in range(0, len(raw), 3):
                c.sendall(raw[j:j + 3])
        c.sendall(b"0\r\n\r\n")
        time.sleep(0.05)            # a keep-alive server: no close at once
    c.close()


def serve(s, style):
    while True:
        c, _ = s.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=handle, args=(c, style), daemon=True).start()


def main():
    sb = sys.argv[1] if len(sys.argv) > 1 else "build/bench/serve_bench"
    bad = 0
    for style in STYLES:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        threading.Thread(target=serve, args=(s, style), daemon=True).start()
        p = subprocess.run([sb, "stream", "--port", str(s.getsockname()[1]),
                            "--streams", "4", "--tokens", "16",
                            "--timeout", "30"],
                           capture_output=True, text=True, timeout=60)
        res = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
        kv = dict(x.split("=", 1) for x in res[0].split()[1:]) if res else {}
        want = (1, "0") if style == "error" else (0, "256")
        ok = p.returncode == want[0] and kv.get("tokens") == want[1]
        bad += not ok
        print("%-10s %s  rc %d, tokens %s%s" % (
            style, "ok  " if ok else "FAIL", p.returncode,
            kv.get("tokens", "-"),
            "" if ok else "\n" + p.stdout + p.stderr))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
