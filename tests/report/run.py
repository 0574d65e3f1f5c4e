#!/usr/bin/env python3
"""ppcc --report-html opened in a real browser (headless Chromium, driven over
the DevTools protocol on a pipe: no network, no extra package).

For each model (ResNet-50 at -pp 4, ViT-B/16 at -pp 4, both exported by
tests/models/zoo.py with random weights and cached in WORKDIR/NAME, and a
synthetic chain of 1,200+ ops with module names, for a large graph):
  - ppcc MODEL -pp 4 -b 1 --report-html R.html --report-json R.json;
  - the page loads from file:// with no console error, no uncaught exception
    and no log entry of level error (its Content-Security-Policy turns any
    attempt to load something from outside into such an error);
  - what it shows matches the JSON report: the stage count, every stage's op
    count, and for every cut the tensors crossing it (names, in order); the
    SVG draws one box per op;
  - its controls work: a search for a module name finds ops and a nonsense
    one finds none; "collapse" hides ops and makes the drawing shorter,
    "expand" restores it; jumping to a node scrolls the graph;
  - size and load time (navigation start to the script done, and to the
    first frames drawn) are printed; the file must stay under 5 MB and load
    in under 5 s (the aim is about one second: see docs/usage.md);
  - with --screenshot PNG, the ResNet-50 page (scrolled to its first cut) is
    saved there (docs/usage.md's picture).
Exits 77 (skipped) when no Chromium is installed (scripts/setup.sh installs
Debian's chromium-headless-shell). Usage: run.py WORKDIR [--screenshot PNG]
[--models resnet50,vit_b_16,chain] (env: PPCC)."""
import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from harness import finish, zoo_dir  # noqa: E402

PPCC = os.environ["PPCC"]
BROWSERS = ["chromium-headless-shell", "chromium", "chromium-browser"]
MAX_BYTES, MAX_LOAD_S = 5_000_000, 5.0


class Browser:
    """Headless Chromium over --remote-debugging-pipe: commands as JSON
    terminated by NUL on fd 3, replies and events on fd 4."""

    def __init__(self, exe, width=1280, height=800):
        self.profile = tempfile.mkdtemp(prefix="pp-chrome-")
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()

        def fds():  # the pipe ends at 3 and 4, inheritable (dup2 clears close-on-exec)
            import fcntl
            a, b = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [exe, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "--hide-scrollbars"]
        if os.path.basename(exe) != "chromium-headless-shell":
            args[1] = "--headless=new"
        self.p = subprocess.Popen(args, preexec_fn=fds, close_fds=False, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self.buf = b""
        self.next_id = 0
        self.events = []
        tid = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": tid, "flatten": True})["sessionId"]
        for d in ("Page", "Runtime", "Log"):
            self.call(d + ".enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=True)

    def _read(self, deadline):
        while b"\0" not in self.buf:
            if time.time() > deadline:
                raise TimeoutError("no answer from the browser")
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise RuntimeError("the browser closed the pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=False, timeout=60):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            r = self._read(deadline)
            if r.get("id") == self.next_id:
                if "error" in r:
                    raise RuntimeError(f"{method}: {r['error']}")
                return r.get("result", {})
            self.events.append(r)

    def wait_event(self, method, timeout=60):
        deadline = time.time() + timeout
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        while True:
            e = self._read(deadline)
            if e.get("method") == method:
                return e
            self.events.append(e)

    def js(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True},
                      session=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr[:80]}: {r['exceptionDetails'].get('text')} "
                               f"{r['exceptionDetails'].get('exception', {}).get('description', '')}")
        return r["result"].get("value")

    def errors(self):
        """console errors, uncaught exceptions and error log entries so far"""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append("exception: " + p["exceptionDetails"].get("text", "") + " " +
                           p["exceptionDetails"].get("exception", {}).get("description", ""))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
                out.append(f"console.{p['type']}: " + " ".join(str(a.get("value", a.get("description")))
                                                               for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append("log: " + p["entry"].get("text", ""))
        return out

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except Exception:  # noqa: BLE001 - it may be gone already
            pass
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        os.close(self.to_w)
        os.close(self.from_r)
        shutil.rmtree(self.profile, ignore_errors=True)


def chain_model(path, blocks=300):
    """A deep residual MLP whose ops carry module names (/blocks/blocks.K/fc/...):
    4 ops a block after the passes, 1,200+ in all."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "input"
    for k in range(blocks):
        p = f"/blocks/blocks.{k}"
        w = numpy_helper.from_array((rng.standard_normal((16, 16)) * 0.1).astype(np.float32), f"w{k}")
        b = numpy_helper.from_array((rng.standard_normal(16) * 0.1).astype(np.float32), f"b{k}")
        inits += [w, b]
        nodes += [helper.make_node("MatMul", [x, f"w{k}"], [f"{p}/mm"], name=f"{p}/fc/MatMul"),
                  helper.make_node("Add", [f"{p}/mm", f"b{k}"], [f"{p}/fc"], name=f"{p}/fc/Add"),
                  helper.make_node("Tanh", [f"{p}/fc"], [f"{p}/act"], name=f"{p}/act/Tanh"),
                  helper.make_node("Add", [x, f"{p}/act"], [f"{p}/out"], name=f"{p}/Add")]
        x = f"{p}/out"
    nodes.append(helper.make_node("Identity", [x], ["output"], name="/head/Identity"))
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 8, 16])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 8, 16])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def model_path(name, work):
    if name != "chain":
        return os.path.join(zoo_dir(name, work), "model.onnx")
    m = os.path.join(work, name, "model.onnx")
    os.makedirs(os.path.dirname(m), exist_ok=True)
    if not os.path.exists(m):
        chain_model(m)
    return m


PAGE_STATE = """(() => {
  const q = s => Array.from(document.querySelectorAll(s));
  return {
    ready: document.body.dataset.ready || '',
    stages: +document.getElementById('n-stages').textContent,
    stage_rows: q('#stage-table tbody tr').map(r => [+r.dataset.stage, +r.dataset.ops]),
    cuts: q('#cut-table tbody tr').map(r => [+r.dataset.cut, r.dataset.tensor]),
    node_boxes: q('#nodes > g.n').length,
    cut_edges: q('#edges > polyline.cut').length,
    policies: q('#policy-table tbody tr').map(r => r.dataset.policy),
    height: +document.getElementById('graph').getAttribute('height'),
  };
})()"""


def check_page(browser, name, html, rep, problems, screenshot=None):
    fail = lambda msg: problems.append(f"{name}: {msg}")  # noqa: E731
    browser.events.clear()
    url = "file://" + os.path.abspath(html)
    t0 = time.time()
    browser.call("Page.navigate", {"url": url}, session=True)
    browser.wait_event("Page.loadEventFired")
    wall = time.time() - t0
    script_ms = browser.js("performance.getEntriesByType('navigation')[0].loadEventEnd")
    frames_ms = browser.js("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => "
                           "r(performance.now()))))")
    st = browser.js(PAGE_STATE)
    if st["ready"] != "1":
        fail("the page's script did not finish (body.dataset.ready unset)")
    n = len(rep["stages"])
    if st["stages"] != n or [s for s, _ in st["stage_rows"]] != list(range(n)):
        fail(f"the page shows {st['stages']} stages, rows {st['stage_rows']}; the JSON report has {n}")
    want_ops = [s["ops"] for s in rep["stages"]]
    if [o for _, o in st["stage_rows"]] != want_ops:
        fail(f"ops per stage on the page {[o for _, o in st['stage_rows']]}, in the JSON {want_ops}")
    if st["node_boxes"] != sum(want_ops):
        fail(f"the graph draws {st['node_boxes']} op boxes, the model has {sum(want_ops)} ops")
    want_cuts = [[c["from"], t["name"]] for c in rep["cuts"] for t in c["tensors"]]
    if st["cuts"] != want_cuts:
        fail(f"cut tensors on the page {st['cuts'][:6]}..., in the JSON {want_cuts[:6]}...")
    if n > 1 and st["cut_edges"] == 0:
        fail("no edge is drawn as crossing a cut")
    if "auto" not in st["policies"] or len(st["policies"]) < 5:
        fail(f"the policy table lists {st['policies']}")
    # the controls
    module = {"resnet50": "layer3", "vit_b_16": "encoder_layer_5", "chain": "blocks.7"}.get(name, "")
    hits = browser.js(f"(() => {{ const s = document.getElementById('search'); s.value = '{module}'; "
                      "s.dispatchEvent(new Event('input')); return document.querySelectorAll('#nodes > g.hit').length; })()")
    none = browser.js("(() => { const s = document.getElementById('search'); s.value = 'zz-no-such-op-zz'; "
                      "s.dispatchEvent(new Event('input')); return document.querySelectorAll('#nodes > g.hit').length; })()")
    if not hits or none:
        fail(f"search: '{module}' finds {hits} ops, a nonsense name {none}")
    folded = browser.js("(() => { document.getElementById('fold-all').click(); "
                        "return [document.querySelectorAll('#nodes > g.hidden').length, "
                        "+document.getElementById('graph').getAttribute('height')]; })()")
    unfolded = browser.js("(() => { document.getElementById('unfold-all').click(); "
                          "return [document.querySelectorAll('#nodes > g.hidden').length, "
                          "+document.getElementById('graph').getAttribute('height')]; })()")
    if not folded[0] or folded[1] >= st["height"] or unfolded != [0, st["height"]]:
        fail(f"collapse hid {folded[0]} ops (height {st['height']} -> {folded[1]}), expand left "
             f"{unfolded[0]} hidden (height {unfolded[1]})")
    last_cut_node = browser.js("(() => { const a = document.querySelector('#cut-table a.goto'); "
                               "return a ? a.getAttribute('href').slice(1) : ''; })()")
    if last_cut_node:
        scrolled = browser.js(f"(() => {{ ppShow('{last_cut_node}'); const v = document.getElementById('view'); "
                              "return v.scrollTop; })()")
        if n > 1 and not scrolled and st["height"] > 2000:
            fail(f"jumping to {last_cut_node} did not scroll the graph")
    errs = browser.errors()
    if errs:
        fail("browser errors: " + "; ".join(errs[:5]))
    if screenshot:
        browser.js("(() => { const s = document.getElementById('search'); s.value = ''; "
                   "s.dispatchEvent(new Event('input')); })()")
        browser.js("new Promise(r => requestAnimationFrame(() => r(1)))")
        png = base64.b64decode(browser.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"])
        with open(screenshot, "wb") as f:
            f.write(png)
    size = os.path.getsize(html)
    if size > MAX_BYTES:
        fail(f"the page is {size / 1e6:.2f} MB, more than {MAX_BYTES / 1e6:.0f} MB")
    if frames_ms / 1e3 > MAX_LOAD_S:
        fail(f"the page took {frames_ms / 1e3:.2f} s to show, more than {MAX_LOAD_S} s")
    return {"bytes": size, "script_ms": script_ms, "frames_ms": frames_ms, "wall_s": wall, "ops": sum(want_ops)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--screenshot")
    ap.add_argument("--models", default="resnet50,vit_b_16,chain")
    a = ap.parse_args()
    exe = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if not exe:
        print("report: no Chromium found (apt-get install chromium-headless-shell; scripts/setup.sh does): skipped")
        return 77
    os.makedirs(a.work, exist_ok=True)
    problems = []
    browser = Browser(exe)
    try:
        for name in a.models.split(","):
            try:
                model = model_path(name, a.work)
            except Exception as e:  # noqa: BLE001
                problems.append(f"{name}: {e}")
                continue
            html, rep = os.path.join(a.work, f"{name}_report.html"), os.path.join(a.work, f"{name}_report.json")
            t0 = time.time()
            r = subprocess.run([PPCC, model, "-pp", "4", "-b", "1", "-q", "-o", os.path.join(a.work, f"{name}.plan"),
                                "--report-html", html, "--report-json", rep], capture_output=True, text=True)
            t_ppcc = time.time() - t0
            if r.returncode != 0:
                problems.append(f"{name}: ppcc failed: {r.stderr.strip()}")
                continue
            os.remove(os.path.join(a.work, f"{name}.plan"))  # only the pages are checked; the plan holds the weights
            res = check_page(browser, name, html, json.load(open(rep)), problems,
                             a.screenshot if name == "resnet50" else None)
            print(f"{name:10s} -pp 4: {res['ops']:5d} ops, page {res['bytes'] / 1e6:.2f} MB, script done at "
                  f"{res['script_ms']:.0f} ms, first frames at {res['frames_ms']:.0f} ms (load event after "
                  f"{res['wall_s']:.2f} s), ppcc {t_ppcc:.2f} s")
    finally:
        browser.close()
    return finish(problems, len(a.models.split(",")))


if __name__ == "__main__":
    sys.exit(main())
