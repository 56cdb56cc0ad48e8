#!/usr/bin/python3
"""Drive the playground page in headless Chromium over the DevTools protocol
(t/ui/playground.t runs it; Debian's chromium and python3-websockets).

    playground.py URL PROMPT SCREENSHOT.png

Opens URL, waits for the model's facts, types PROMPT and sends it, waits
for the streamed reply, samples the page while it streams, takes a
screenshot, and prints one JSON object: what window.playground says, what
the page shows, and how many different lengths of the reply were seen
while it streamed; then a request the API refuses, and what the page
shows for it."""

import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import websockets


class Page:
    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0

    async def call(self, method, **params):
        self.next_id += 1
        mid = self.next_id
        await self.ws.send(json.dumps({"id": mid, "method": method,
                                       "params": params}))
        while True:
            msg = json.loads(await self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    async def eval(self, expr):
        r = await self.call("Runtime.evaluate", expression=expr,
                            returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr}: {r['exceptionDetails']}")
        return r["result"].get("value")

    async def wait(self, expr, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await self.eval(expr):
                return True
            await asyncio.sleep(0.05)
        return False


def start_chromium(profile):
    # a port the kernel picks, written to DevToolsActivePort in the profile
    proc = subprocess.Popen(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
         "--no-first-run", "--no-default-browser-check",
         "--remote-debugging-port=0", f"--user-data-dir={profile}",
         "--window-size=1200,800", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = os.path.join(profile, "DevToolsActivePort")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if os.path.exists(port_file):
            lines = open(port_file).read().split("\n")
            if len(lines) >= 2 and lines[1]:
                return proc, int(lines[0])
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with {proc.returncode}")
        time.sleep(0.1)
    raise RuntimeError("chromium wrote no DevToolsActivePort in 30 s")


def page_target(port):
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as r:
        targets = json.load(r)
    return next(t["webSocketDebuggerUrl"] for t in targets
                if t["type"] == "page")


async def drive(ws_url, url, prompt, shot):
    out = {}
    async with websockets.connect(ws_url, max_size=None) as ws:
        page = Page(ws)
        await page.call("Page.enable")
        await page.call("Page.navigate", url=url)
        out["loaded"] = await page.wait(
            "window.playground && window.playground.state !== 'loading'", 30)
        out["facts"] = await page.eval("document.getElementById('facts').innerText")
        await page.eval(
            "document.getElementById('prompt').value = " + json.dumps(prompt)
            + "; document.getElementById('send').click(); true")
        lengths = set()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            st = await page.eval("[window.playground.state, window.playground.text.length]")
            if st[0] == "streaming":
                lengths.add(st[1])
            if st[0] in ("done", "error"):
                break
            await asyncio.sleep(0.02)
        out["lengths_seen"] = len(lengths)
        out["playground"] = await page.eval(
            "JSON.parse(JSON.stringify(window.playground))")
        out["stats"] = await page.eval("document.getElementById('stats').innerText")
        out["messages"] = await page.eval(
            "Array.from(document.querySelectorAll('#log .msg'))"
            ".map(function (m) { return m.className + ': ' + m.querySelector('.body').textContent; })")
        out["health"] = await page.eval("document.getElementById('health').innerText")
        png = await page.call("Page.captureScreenshot", format="png")
        with open(shot, "wb") as f:
            f.write(base64.b64decode(png["data"]))
        out["screenshot"] = shot

        # a request the API refuses (temperature above 2): the page says so
        await page.eval(
            "document.getElementById('temperature').value = '3';"
            "document.getElementById('prompt').value = 'again';"
            "document.getElementById('send').click(); true")
        await page.wait("window.playground.state === 'error'", 30)
        out["refused"] = await page.eval(
            "[window.playground.state, window.playground.error,"
            " document.querySelector('#log .msg:last-child').className,"
            " document.getElementById('send').disabled]")
    return out


def main():
    url, prompt, shot = sys.argv[1:4]
    profile = tempfile.mkdtemp(prefix="ngx_llm_chromium.")
    proc = None
    try:
        proc, port = start_chromium(profile)
        out = asyncio.run(drive(page_target(port), url, prompt, shot))
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(profile, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
