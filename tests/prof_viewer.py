#!/usr/bin/env python3
"""Loads a scaleout timeline into a real trace viewer and checks what it saw.

The viewer is speedscope (npm package `speedscope`, installed by
scripts/install-deps.sh), whose Chrome trace-event importer runs inside
headless Chromium, driven over the DevTools protocol on a pipe
(--remote-debugging-pipe: NUL-separated JSON on fds 3 and 4, standard
library only). chrome://tracing itself cannot be used: Debian's Chromium
lists it but fails to load it (ERR_FAILED), even with the internal debugging
pages enabled. We then ask speedscope to export what it imported (its own
JSON format) and compare that with the trace file: one process per rank,
threads `compute` and `comm` in each, the same number of slices of every
name on every thread, and no warning or error logged during the import.

Usage: prof_viewer.py TRACE RANKS [--speedscope DIR] [--screenshot PNG]
Exit 0 ok, 1 check failed, 77 viewer not available (skip)."""
import argparse
import base64
import collections
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77


def find_speedscope(given):
    cands = [given] if given else []
    if os.environ.get("SCALEOUT_SPEEDSCOPE"):
        cands.append(os.environ["SCALEOUT_SPEEDSCOPE"])
    npm = shutil.which("npm")
    if npm:
        try:
            root = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, timeout=30).stdout.strip()
            cands.append(os.path.join(root, "speedscope"))
        except (OSError, subprocess.SubprocessError):
            pass
    cands += ["/usr/local/lib/node_modules/speedscope", "/usr/lib/node_modules/speedscope"]
    for c in cands:
        if c and os.path.isfile(os.path.join(c, "dist", "release", "index.html")):
            return os.path.join(c, "dist", "release")
    return None


class Server:
    """Serves speedscope's files and the trace on 127.0.0.1 (fetch() cannot read file:// URLs)."""

    def __init__(self, root, trace):
        class Handler(http.server.SimpleHTTPRequestHandler):
            def translate_path(self, path):
                return trace if path.split("?")[0] == "/trace.json" else super().translate_path(path)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=root))
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


class Browser:
    """Headless Chromium with the DevTools protocol on a pipe."""

    def __init__(self, chrome, profile_dir):
        r_in, w_in = os.pipe()    # browser reads commands from fd 3
        r_out, w_out = os.pipe()  # browser writes replies to fd 4

        def child():
            a, b = os.dup(r_in), os.dup(w_out)  # dup: fds 3/4 must not be close-on-exec
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.log = open(os.path.join(profile_dir, "chrome.log"), "w")
        self.proc = subprocess.Popen(
            [chrome, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-unsafe-swiftshader",
             "--remote-debugging-pipe",
             "--user-data-dir=" + os.path.join(profile_dir, "profile"), "--window-size=1400,900", "about:blank"],
            preexec_fn=child, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, close_fds=False)
        os.close(r_in)
        os.close(w_out)
        self.w = os.fdopen(w_in, "wb", buffering=0)
        self.r = os.fdopen(r_out, "rb", buffering=0)
        self.buf, self.next_id, self.events = b"", 0, []
        self.session = None

    def send(self, method, params=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session:
            msg["sessionId"] = self.session
        self.w.write(json.dumps(msg).encode() + b"\0")
        return self.next_id

    def recv(self):
        while b"\0" not in self.buf:
            data = self.r.read(1 << 16)
            if not data:
                raise RuntimeError("browser closed the DevTools pipe")
            self.buf += data
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None):
        i = self.send(method, params)
        while True:
            m = self.recv()
            if m.get("id") == i:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def open_page(self):
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.call(domain + ".enable")

    def eval(self, js):
        r = self.call("Runtime.evaluate", {"expression": js, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"script failed: {r['exceptionDetails'].get('exception', {}).get('description')}")
        return r["result"].get("value")

    def wait_for(self, js, seconds):
        end = time.time() + seconds
        while time.time() < end:
            v = self.eval(js)
            if v:
                return v
            time.sleep(0.2)
        return None

    def messages(self, levels=("warning", "error")):
        """Console and log messages of the given levels seen so far (and exceptions)."""
        out = []
        for m in self.events:
            p = m.get("params", {})
            if m.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("warning", "error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif m.get("method") == "Runtime.exceptionThrown":
                out.append(p["exceptionDetails"].get("exception", {}).get("description", "exception"))
            elif (m.get("method") == "Log.entryAdded" and p["entry"].get("level") in levels
                  and p["entry"].get("source") != "rendering"):  # GPU driver notes, not the page's
                out.append(p["entry"].get("source", "") + ": " + p["entry"].get("text", ""))
        return out

    def close(self):
        try:
            self.session = None
            self.send("Browser.close")
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
        self.log.close()


# Keeps every Blob speedscope creates (its export is one), so we can read it back.
HOOK = """
window.__blobs = [];
const origCreate = URL.createObjectURL;
URL.createObjectURL = function (b) { window.__blobs.push(b); return origCreate.call(URL, b); };
HTMLAnchorElement.prototype.click = function () {};  // no download dialog
"""


def trace_counts(trace):
    """Slices per (pid, tid, name) and thread names in the trace file."""
    ev = json.load(open(trace))["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "thread_name"}
    counts = collections.Counter((e["pid"], e["tid"], e["name"]) for e in ev if e.get("ph") == "X")
    return procs, threads, counts


def viewer_counts(exported, procs, threads):
    """Slices per (pid, tid, name) in speedscope's export. Profile names are
    'PROCESS (pid P), THREAD (tid T)'; frame names 'NAME {args}'."""
    frames = exported["shared"]["frames"]
    counts, seen = collections.Counter(), set()
    for prof in exported["profiles"]:
        key = next(((pid, tid) for (pid, tid), tn in threads.items()
                    if prof["name"] == f"{procs.get(pid)} (pid {pid}), {tn} (tid {tid})"), None)
        if key is None:
            raise AssertionError(f"viewer shows an unexpected profile {prof['name']!r}")
        seen.add(key)
        for e in prof["events"]:
            if e["type"] == "O":
                counts[(key[0], key[1], frames[e["frame"]]["name"].split(" {")[0])] += 1
    return seen, counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("ranks", type=int)
    ap.add_argument("--speedscope")
    ap.add_argument("--screenshot")
    a = ap.parse_args()
    chrome = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    root = find_speedscope(a.speedscope)
    if not chrome or not root:
        print(f"SKIP: trace viewer not available ({'speedscope (npm install -g speedscope)' if chrome else 'chromium'}"
              " missing; scripts/install-deps.sh installs both)")
        return SKIP
    procs, threads, want = trace_counts(a.trace)
    tmp = tempfile.mkdtemp(prefix="prof_viewer.")
    server, browser = Server(root, os.path.abspath(a.trace)), None
    try:
        browser = Browser(chrome, tmp)
        browser.open_page()
        browser.call("Page.addScriptToEvaluateOnNewDocument", {"source": HOOK})
        url = f"http://127.0.0.1:{server.port}/index.html#profileURL=/trace.json"
        browser.call("Page.navigate", {"url": url})
        # Loaded: the toolbar names the first profile ("rank 0 (pid 0), compute (tid 0)").
        if not browser.wait_for("!!document.body && document.body.innerText.includes('(tid ')", 60):
            print("FAIL: speedscope did not show the trace:", browser.eval("document.body.innerText.slice(0, 300)"),
                  browser.messages())
            return 1
        time.sleep(0.5)
        if a.screenshot:
            png = browser.call("Page.captureScreenshot", {"format": "png"})["data"]
            with open(a.screenshot, "wb") as f:
                f.write(base64.b64decode(png))
        clicked = browser.eval("""(() => {
            const b = [...document.querySelectorAll('div,button,span')].find(
                e => e.children.length <= 1 && /Export/.test(e.textContent) && e.textContent.length < 20);
            if (!b) return false; b.click(); return true; })()""")
        text = clicked and browser.wait_for("window.__blobs.length ? window.__blobs[0].text() : ''", 30)
        if not text:
            print("FAIL: could not export the imported profile from speedscope")
            return 1
        seen, got = viewer_counts(json.loads(text), procs, threads)
        fail = []
        warnings = [m for m in browser.messages() if "favicon" not in m]
        if warnings:
            fail.append(f"import warnings/errors: {warnings[:5]}")
        pids = {pid for pid, _ in seen}
        if len(pids) != a.ranks or len(procs) != a.ranks:
            fail.append(f"viewer shows {len(pids)} processes, trace names {len(procs)}, want {a.ranks}")
        for pid in range(a.ranks):
            names = sorted(threads.get((pid, t), "?") for (p, t) in seen if p == pid)
            if names != ["comm", "compute"]:
                fail.append(f"rank {pid}: viewer threads {names}, want comm and compute")
        if got != want:
            diff = {k: (want.get(k, 0), got.get(k, 0)) for k in set(want) | set(got) if want.get(k) != got.get(k)}
            fail.append(f"slice counts differ (trace, viewer): {dict(list(diff.items())[:8])}")
        for f in fail:
            print("FAIL:", f)
        if not fail:
            print(f"viewer ok: speedscope imported {len(pids)} processes, {len(seen)} threads, "
                  f"{sum(got.values())} slices ({len(set(n for _, _, n in got))} names), no warnings")
        return 1 if fail else 0
    finally:
        if browser:
            browser.close()
        server.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
