#!/usr/bin/env python3
"""Every JSON file the tools write parses whatever the model names its
tensors and nodes (issue 52: the files are built with cJSON, which quotes and
escapes every string). A two-MatMul model whose graph input, cut tensor,
output and nodes carry a double quote, a backslash, a tab, a control byte and
non-ASCII letters, compiled at -pp 2 and run:
- ppcc --report-json, --export-stages' stages.json, the --search and
  --max-batch results, pprt --stats-json, --profile and --trace parse with
  Python's json and give the names back byte for byte, and so does the
  module list inside --report-html's page (whose '<', '>' and '&' must not
  end or change its <script> block);
- ppcc --profile reads that profile back, every node measured; -pp 2
  --measure (two pprt copies side by side where two cores are free) reads
  the profiles back, and the mean profile ppcc writes for the copies.
About 3 s.

Usage: json_names.py WORKDIR (env: PPCC, PPRT)."""
import json
import os
import subprocess
import sys

import numpy as np

PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import check, failures, finish, start  # noqa: E402

start(sys.argv[1], "json_names")
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def run(argv, want=0):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    check(r.returncode == want, f"{' '.join(argv)}: exit {r.returncode} (want {want}): {r.stderr.strip()[-400:]}")
    return r


def load(path):
    """The file as JSON (None, and a failure, when it is not)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        failures.append(f"{path}: not JSON: {e}")
        return None


X = 'in "put" \\ x'          # the graph input
H1 = 'h\t"1"\\cut\x01'       # MatMul's output: a tab, quotes, a backslash, a control byte
H2 = 'h2 \\"é\\"'             # Relu's output
Y = 'out/"y"\\'              # the graph output
NODES = ['/blk "1" \\ </script>&/mm "1"/MatMul', 'relu\\"2"\x1f', 'mm ü "3"']  # the first in modules
rng = np.random.default_rng(52)
w1 = numpy_helper.from_array((rng.standard_normal((16, 16)) * 0.3).astype(np.float32), 'w"1"\\')
w2 = numpy_helper.from_array((rng.standard_normal((16, 4)) * 0.3).astype(np.float32), "w2")
g = helper.make_graph([helper.make_node("MatMul", [X, w1.name], [H1], name=NODES[0]),
                       helper.make_node("Relu", [H1], [H2], name=NODES[1]),
                       helper.make_node("MatMul", [H2, "w2"], [Y], name=NODES[2])], "names",
                      [helper.make_tensor_value_info(X, TensorProto.FLOAT, ["n", 16])],
                      [helper.make_tensor_value_info(Y, TensorProto.FLOAT, ["n", 4])], [w1, w2])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, "m.onnx")
os.makedirs("data")
x = rng.standard_normal((8, 16)).astype(np.float32)
np.save("data/x.npy", x)
want = np.maximum(x @ numpy_helper.to_array(w1), 0) @ numpy_helper.to_array(w2)

# ---- ppcc: the report, the exported stages ----
run([PPCC, "m.onnx", "-pp", "2", "-b", "2", "--policy", "uniform", "-q", "-o", "two.plan", "--report-json",
     "r.json", "--export-stages", "stages", "--report-html", "r.html"])
r = load("r.json")
if r:
    check([(s["first_node"], s["last_node"]) for s in r["stages"]] == [(NODES[0], NODES[0]), (NODES[1], NODES[2])]
          or [(s["first_node"], s["last_node"]) for s in r["stages"]] == [(NODES[0], NODES[1]), (NODES[2], NODES[2])],
          f"--report-json's stages name {[(s['first_node'], s['last_node']) for s in r['stages']]!r}")
    cut = [t["name"] for t in r["cuts"][0]["tensors"]]
    check(cut in ([H1], [H2]), f"--report-json's cut names {cut!r}, want {H1!r} or {H2!r}")
# the HTML report's module list: JSON inside a <script> block that no name may end or change
try:
    html = open("r.html", encoding="utf-8").read()
    head = '<script id="modules" type="application/json">'
    mods = json.loads(html[html.index(head) + len(head):html.index("</script>", html.index(head))])
    check('blk "1" \\ <.script>&.mm "1"' in mods, f"--report-html's modules: {mods!r}")  # '/' cuts modules
except (OSError, ValueError) as e:
    failures.append(f"r.html: no module list that parses: {e}")
st = load("stages/stages.json")
if st:
    check(st["model_inputs"] == [X] and st["model_outputs"] == [Y],
          f"stages.json names {st['model_inputs']!r} -> {st['model_outputs']!r}")
    check(st["stages"][0]["inputs"][0]["name"] == X and st["stages"][1]["outputs"][0]["name"] == Y and
          st["stages"][0]["outputs"][0]["name"] in (H1, H2), f"stages.json's stages: {st['stages']!r}")

# ---- pprt: statistics, profile, trace ----
run([PPRT, "two.plan", "data", "-o", "out", "-q", "--threads", "1", "--stats-json", "s.json", "--profile", "p.json",
     "--trace", "t.json"])
ys = [f for f in os.listdir("out")] if os.path.isdir("out") else []
check(len(ys) == 1 and np.allclose(np.load(os.path.join("out", ys[0])), want, rtol=1e-4, atol=1e-5),
      f"pprt's outputs: {ys}")
s = load("s.json")
if s:
    check([i["name"] for i in s["inputs"]] == [X], f"--stats-json's inputs: {s['inputs']!r}")
p = load("p.json")
if p:
    check(sorted(p["nodes"]) == sorted(NODES), f"--profile names {sorted(p['nodes'])!r}, want {sorted(NODES)!r}")
t = load("t.json")
if t:
    spans = {e["name"] for e in t["traceEvents"] if e.get("cat") == "node"}
    check(spans <= set(NODES) and spans, f"--trace's node spans name {sorted(spans)!r}")

# ---- ppcc reads the profile back, and writes the mean of --measure's copies ----
r = run([PPCC, "m.onnx", "-pp", "2", "-b", "2", "--profile", "p.json", "--report", "-o", "prof.plan"])
check("op times: 3 of 3 ops measured" in r.stdout, f"ppcc --profile: {r.stdout[:400]!r}")
r = run([PPCC, "m.onnx", "-pp", "2", "-b", "2", "--measure", "--measure-runs", "2", "--report", "-o", "meas.plan"])
check("op times: 3 of 3 ops measured" in r.stdout, f"ppcc --measure: {r.stdout[:400]!r} {r.stderr[-400:]!r}")

# ---- --search and --max-batch results ----
run([PPCC, "m.onnx", "--devices", "2", "--search", "--samples", "8", "-q", "--report-json", "search.json"])
sr = load("search.json")
if sr:
    check(sr["format"] == "ppcc-search" and sr["search"]["candidates"], f"--search's file: {str(sr)[:300]}")
run([PPCC, "m.onnx", "-pp", "2", "--max-memory", "1MiB", "--max-batch", "-q", "--report-json", "maxb.json"])
mb = load("maxb.json")
if mb:
    check(mb["format"] == "ppcc-max-batch" and mb["max_batch"]["micro_batch"] > 0, f"--max-batch's file: {str(mb)[:300]}")

finish("json_names")
