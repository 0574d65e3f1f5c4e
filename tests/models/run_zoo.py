#!/usr/bin/env python3
"""The real-model gate: every zoo model compiled and run at every pipeline depth.

For each model (tests/models/zoo.py exports it with random weights and
onnxruntime's outputs as the reference):
  - ppcc at -pp 1, 2, 3, 4 under the `auto` and `params` policies, pprt on the
    exported inputs;
  - outputs within rtol 1e-3 / atol 1e-4 of onnxruntime, and every split
    bit-identical to -pp 1 (every stage on one thread: what pprt promises is
    the same bits at the same threads per stage, docs/design-notes.md);
  - `params` splits top-level modules: where a model has fewer of them than
    stages, that combination is "n/a" (the error says so), not a failure;
  - where pprt has oneDNN (its default backend then), the -pp 1 plan also on
    the reference kernels (--backend ref, the oracle): the oneDNN outputs
    within rtol 1e-3 / atol 1e-4 of them.
Transformers (zoo kind "transformer": Llama, Mistral, GPT-J, DistilBERT,
BART) instead as check_transformer says: -pp 1, 2, 4 with -b 2 --dim seq=S,
each plan on the reference kernels and on oneDNN (default threads and
--threads 1), every output against onnxruntime (rtol 1e-3 / atol 1e-4); the
reference kernels, and oneDNN at --threads 1, bit-identical across -pp (what
pprt promises: the same bits at the same threads per stage).
Prints Markdown tables (model, params, ops after the passes, compile time,
-pp 2 imbalance of time and memory, max error against onnxruntime, result)
and exits 1 if any model fails.

Usage: run_zoo.py WORKDIR [--models a,b,...] [--ci] [--tag fast|slow|sweep] [--table FILE]
(env: PPCC, PPRT; the exported models are cached in WORKDIR/NAME)."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PPCC, PPRT = os.environ["PPCC"], os.environ["PPRT"]
CI_MODELS = ["resnet50", "vit_b_16", "densenet121", "unet", "gpt", "llama", "mistral", "gptj",
             "distilbert", "bart_small"]
HAVE_DNNL = subprocess.run([PPRT, "--backend", "dnnl", "--version"], capture_output=True).returncode == 0


def run(argv, timeout=1800):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def zoo_models(tag):
    out = run([sys.executable, os.path.join(HERE, "zoo.py"), "list"]).stdout.split("\n")
    return [l.split("\t")[0] for l in out if l.endswith("\t" + tag)]


def check_model(name, work):
    d = os.path.join(work, name)
    row = {"model": name, "result": "FAIL", "notes": []}
    if not os.path.exists(os.path.join(d, "expected")):
        r = run([sys.executable, os.path.join(HERE, "zoo.py"), "export", name, d, "--batch", "2"], timeout=3600)
        if r.returncode != 0:
            row["notes"].append("export failed: " + (r.stderr.strip().splitlines() or ["?"])[-1])
            return row
    meta = json.load(open(os.path.join(d, "meta.json")))
    row["params"] = meta.get("params", 0)
    if meta.get("kind") == "transformer":
        return check_transformer(row, d, meta)
    model = os.path.join(d, "model.onnx")
    expected = {f[:-4]: np.load(os.path.join(d, "expected", f)) for f in os.listdir(os.path.join(d, "expected"))}
    ref_out = {}
    worst = 0.0
    ok = True
    for pol in ("auto", "params"):
        for pp in (1, 2, 3, 4):
            plan = os.path.join(d, f"{pol}_{pp}.plan")
            rep = os.path.join(d, f"{pol}_{pp}.json")
            t0 = time.time()
            r = run([PPCC, model, "-pp", str(pp), "-b", "1", "--policy", pol, "--report-json", rep, "-q", "-o", plan])
            dt = time.time() - t0
            if r.returncode != 0:
                if pol == "params" and "more stages than the params policy has units" in r.stderr:
                    row[f"{pol}{pp}"] = None
                    row["notes"].append(f"params -pp {pp}: n/a (too few top-level modules)")
                    continue
                row["notes"].append(f"ppcc {pol} -pp {pp}: " + r.stderr.strip().splitlines()[-1])
                ok = False
                continue
            report = json.load(open(rep))
            row[f"{pol}{pp}"] = report["imbalance"]
            if pol == "auto" and pp == 1:
                row["compile_s"] = dt
                row["ops"] = sum(s["ops"] for s in report["stages"])
            out = os.path.join(d, f"out_{pol}_{pp}")
            r = run([PPRT, plan, os.path.join(d, "data"), "-o", out, "-q", "--threads", "1"])
            if r.returncode != 0:
                row["notes"].append(f"pprt {pol} -pp {pp}: " + r.stderr.strip().splitlines()[-1])
                ok = False
                drop(plan, out)
                continue
            good, err, got_all = compare(row, f"{pol} -pp {pp}", out, expected)
            ok = ok and good
            worst = max(worst, err)
            for oname, got in got_all.items():
                if got.shape != expected[oname].shape:
                    continue
                if oname not in ref_out:
                    ref_out[oname] = got
                elif not np.array_equal(got, ref_out[oname]):
                    row["notes"].append(f"{pol} -pp {pp}: {oname} not bit-identical to -pp 1")
                    ok = False
            if HAVE_DNNL and pol == "auto" and pp == 1:
                ok = against_ref(row, plan, d, out) and ok
            drop(plan, out)
    row["max_err"] = worst
    row["result"] = "pass" if ok else "FAIL"
    return row


def drop(plan, *outs):
    """A plan is a copy of the weights (ViT-B/16's 330 MB, BART-large's 1.6 GB) and
    BART's outputs are 25 MB a run: each goes as soon as it is checked, so the
    test needs the disk of one model and one plan, not of every plan at once
    (CI's disk is finite: keeping ViT's eight plans to the end of the model
    once took 2.6 GB)."""
    for p in (plan, *outs):
        if os.path.isdir(p):
            shutil.rmtree(p, ignore_errors=True)
        elif os.path.exists(p):
            os.remove(p)


def compare(row, what, out, expected, rtol=1e-3, atol=1e-4):
    """Every expected output against out/NAME.npy; returns (ok, max abs err, outputs)."""
    ok, worst, got_all = True, 0.0, {}
    for oname, want in expected.items():
        got = np.load(os.path.join(out, oname + ".npy"))
        got_all[oname] = got
        if got.shape != want.shape or got.dtype != want.dtype:
            row["notes"].append(f"{what}: {oname} is {got.dtype}{got.shape}, want {want.dtype}{want.shape}")
            ok = False
            continue
        err = float(np.max(np.abs(got.astype(np.float64) - want))) if got.size else 0.0
        worst = max(worst, err)
        if not np.allclose(got, want, rtol=rtol, atol=atol):
            bad = int((~np.isclose(got, want, rtol=rtol, atol=atol)).sum())
            row["notes"].append(f"{what}: {oname}: {bad} of {got.size} values beyond rtol {rtol:g} / "
                                f"atol {atol:g} (max abs error {err:.3g})")
            ok = False
    return ok, worst, got_all


def same_bits(a, b):
    return all(np.array_equal(a[k], b[k]) for k in a)


# A transformer (tests/models/zoo.py, kind "transformer"): -pp 1, 2, 4 under
# auto with the export's compile arguments (-b 2 --dim seq=S); each plan on
# the reference kernels and, with oneDNN, on oneDNN at the default threads
# and at --threads 1; every output against onnxruntime. The reference
# kernels, and oneDNN at --threads 1, must give the same bits at every -pp
# (the "dnnl same bits" column): a cut never changes which kernels run
# (ppcc's fusion chains; DistilBERT's last MatMul of layer 2 once ran as
# another kernel at -pp 2).
TRANSFORMER_PP = (1, 2, 3, 4)


def check_transformer(row, d, meta):
    model = os.path.join(d, "model.onnx")
    data = os.path.join(d, "data")
    expected = {f[:-4]: np.load(os.path.join(d, "expected", f)) for f in os.listdir(os.path.join(d, "expected"))}
    runs = [("ref", ["--backend", "ref"])]
    if HAVE_DNNL:
        runs += [("dnnl", ["--backend", "dnnl"]), ("dnnl-t1", ["--backend", "dnnl", "--threads", "1"])]
    first, ok, err = {}, True, {"ref": 0.0, "dnnl": 0.0}
    row["dnnl_same"] = {}
    t_start = time.time()
    for pp in TRANSFORMER_PP:
        plan, rep = os.path.join(d, f"pp{pp}.plan"), os.path.join(d, f"pp{pp}.json")
        t0 = time.time()
        r = run([PPCC, model, "-pp", str(pp), *meta["compile_args"], "--report-json", rep, "-q", "-o", plan])
        dt = time.time() - t0
        if r.returncode != 0:
            row["notes"].append(f"ppcc -pp {pp}: " + (r.stderr.strip().splitlines() or ["?"])[-1])
            ok = False
            continue
        report = json.load(open(rep))
        row[f"auto{pp}"] = report["imbalance"]
        if pp == 1:
            row["compile_s"], row["ops"] = dt, sum(s["ops"] for s in report["stages"])
        for tag, args in runs:
            out = os.path.join(d, f"out_pp{pp}_{tag}")
            r = run([PPRT, plan, data, "-o", out, "-q", *args])
            if r.returncode != 0:
                row["notes"].append(f"pprt -pp {pp} {tag}: " + (r.stderr.strip().splitlines() or ["?"])[-1])
                ok = False
                drop(out)
                continue
            good, worst, got = compare(row, f"-pp {pp} {tag}", out, expected)
            drop(out)
            ok = ok and good
            key = "ref" if tag == "ref" else "dnnl"
            err[key] = max(err[key], worst)
            if pp == 1:
                first[tag] = got
            elif tag in first:
                same = same_bits(got, first[tag])
                if tag == "ref" and not same:
                    row["notes"].append(f"-pp {pp} ref: not bit-identical to -pp 1")
                    ok = False
                if tag == "dnnl-t1":
                    row["dnnl_same"][pp] = same
                    if not same:
                        row["notes"].append(f"-pp {pp} oneDNN --threads 1: not bit-identical to -pp 1")
                        ok = False
        drop(plan)
    row["max_err"], row["ref_err"] = err["ref"], err["dnnl"] if HAVE_DNNL else None
    if os.path.basename(d) in HALF_DECODERS:
        ok = check_half(row, d, meta, expected) and ok
    row["seconds"] = time.time() - t_start
    row["result"] = "pass" if ok else "FAIL"
    return row


# Half plans of the small decoders (ppcc --precision fp16|bf16, issue 54): Hugging Face's masks of
# finfo(float32).min computed in f32 then cast to half, which gave NaN rows before 2026-12-06 (a fully masked
# row all -inf), and its RMSNorm and tanh GELU fused. -pp 1 and 2 on the reference kernels and -pp 1 on
# cuda-emu where pprt has it: no NaN, max |error| over max |output| of onnxruntime's f32 within fp16 3e-3 and
# bf16 3e-2 (measured 2026-12-06: Llama 1.1e-3 / 8.5e-3, Mistral 1.1e-3 / 1.0e-2, GPT-J 1.3e-3 / 1.0e-2), the
# reference kernels' -pp 2 the bits of -pp 1; on cuda-emu also with --cuda-fused-attention on, Llama's and
# Mistral's 4 attention patterns with their masks one kernel each, GPT-J's with its Where (Llama 1.1e-3 /
# 9.1e-3, Mistral 1.0e-3 / 9.1e-3, GPT-J 1.2e-3 / 9.6e-3, measured 2026-12-06); and BART's encoder-decoder, its 6
# patterns (self and cross attention) with their masks added in a per-head view of the scores (3.7e-4 / 2.8e-3,
# unfused 3.6e-4 / 2.9e-3, measured 2026-12-06).
HALF_DECODERS = {"llama", "mistral", "gptj", "bart_small"}
HALF_BOUND = {"fp16": 3e-3, "bf16": 3e-2}
FUSED_MASKED = {"llama": 4, "mistral": 4, "gptj": 4, "bart_small": 6}  # --cuda-fused-attention's steps, with masks
HAVE_EMU = subprocess.run([PPRT, "--backend", "cuda-emu", "--version"], capture_output=True).returncode == 0


def check_half(row, d, meta, expected):
    ok, errs = True, []
    for pr, bound in HALF_BOUND.items():
        got1 = None
        # (cuda-emu also with the fused attention on: Llama's and Mistral's patterns with their causal-plus-padding
        # mask, GPT-J's with its masked_fill (a Where) and padding mask, one kernel each (FUSED_MASKED, counted
        # from --cuda-explain))
        for pp, tag, args in [(1, "ref", ["--backend", "ref"]), (2, "ref", ["--backend", "ref"])] + \
                ([(1, "cuda-emu", ["--backend", "cuda-emu"]),
                  (1, "cuda-emu fused", ["--backend", "cuda-emu", "--cuda-fused-attention", "on", "--cuda-explain"])]
                 if HAVE_EMU else []):
            plan, out = os.path.join(d, f"{pr}_pp{pp}.plan"), os.path.join(d, f"out_{pr}_pp{pp}_{tag.replace(' ', '_')}")
            r = run([PPCC, os.path.join(d, "model.onnx"), "-pp", str(pp), "--precision", pr, *meta["compile_args"],
                     "-q", "-o", plan])
            if r.returncode == 0:
                r = run([PPRT, plan, os.path.join(d, "data"), "-o", out, "-q", *args])
            drop(plan)
            if r.returncode != 0:
                row["notes"].append(f"{pr} -pp {pp} {tag}: " + (r.stderr.strip().splitlines() or ["?"])[-1])
                ok = False
                continue
            if tag == "cuda-emu fused":
                nf, want = r.stderr.count("fused attention"), FUSED_MASKED.get(os.path.basename(d), 0)
                if nf != want:
                    row["notes"].append(f"{pr} {tag}: {nf} fused attention steps, want {want}")
                    ok = False
            got = {k: np.load(os.path.join(out, k + ".npy")) for k in expected}
            drop(out)
            for k, want in expected.items():
                g, w = got[k].astype(np.float64), want.astype(np.float64)
                if np.isnan(g).any() != np.isnan(w).any():
                    row["notes"].append(f"{pr} -pp {pp} {tag}: {k}: {int(np.isnan(g).sum())} NaN")
                    ok = False
                    continue
                e = float(np.nanmax(np.abs(g - w)) / np.nanmax(np.abs(w)))
                errs.append(e)
                if not e <= bound:
                    row["notes"].append(f"{pr} -pp {pp} {tag}: {k}: error {e:.2e} over the largest output, bound "
                                        f"{bound:g}")
                    ok = False
            if pp == 1 and tag == "ref":
                got1 = got
            elif pp == 2 and got1 is not None and not same_bits(got, got1):
                row["notes"].append(f"{pr} -pp 2 ref: not bit-identical to -pp 1")
                ok = False
        row["notes"].append(f"{pr} plans: worst error {max(errs or [0]):.1e} (bound {bound:g})")
        errs = []
    return export_half(row, d, meta, expected) and ok


def export_half(row, d, meta, expected):
    """The fp16 plan's stage as ONNX (ppcc --export-stages: the fused RMSNorm and GELU written back in f32
    between Casts, the saturating Casts as Clip/IsInf/Where then Cast) runs in onnxruntime: no NaN, and within
    the fp16 bound of its f32 outputs at the positions the attention mask keeps (a padded position's row is
    fully masked: its values are noise in any precision; measured 2026-12-06: Llama 6e-4 there, 3.7e-2 at
    padding). onnxruntime's CPU has no bf16 MatMul, so fp16 only."""
    stages = os.path.join(d, "stages_fp16")
    r = run([PPCC, os.path.join(d, "model.onnx"), "--precision", "fp16", *meta["compile_args"], "-q",
             "--export-stages", stages, "-o", os.devnull])
    if r.returncode != 0:
        row["notes"].append("fp16 --export-stages: " + (r.stderr.strip().splitlines() or ["?"])[-1])
        return False
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    try:
        s = ort.InferenceSession(os.path.join(stages, "stage_0.onnx"), so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001
        row["notes"].append(f"fp16 stage: onnxruntime refuses it: {str(e)[-200:]}")
        return False
    data = {i.name: np.load(os.path.join(d, "data", i.name + ".npy")) for i in s.get_inputs()}
    b = s.get_inputs()[0].shape[0]
    n = next(iter(data.values())).shape[0]
    got = [s.run(None, {k: v[i:i + b] for k, v in data.items()}) for i in range(0, n - n % b, b)]
    drop(stages)
    ok = True
    for j, o in enumerate(s.get_outputs()):
        g = np.concatenate([q[j] for q in got]).astype(np.float64)
        w = expected[o.name][:g.shape[0]].astype(np.float64)
        keep = data["attention_mask"][:g.shape[0]].astype(bool)
        e = float(np.max(np.abs(g[keep] - w[keep])) / np.max(np.abs(w)))
        if np.isnan(g).any() or not e <= HALF_BOUND["fp16"]:
            row["notes"].append(f"fp16 stage in onnxruntime: {o.name}: {int(np.isnan(g).sum())} NaN, error {e:.2e}")
            ok = False
        else:
            row["notes"].append(f"fp16 stage in onnxruntime: error {e:.1e}")
    return ok


def against_ref(row, plan, d, out):
    """The default (oneDNN) outputs in `out` against the reference kernels'."""
    ref = os.path.join(d, "out_ref")
    r = run([PPRT, plan, os.path.join(d, "data"), "--backend", "ref", "-o", ref, "-q"])
    if r.returncode != 0:
        row["notes"].append("pprt --backend ref: " + r.stderr.strip().splitlines()[-1])
        drop(ref)
        return False
    ok, worst = True, 0.0
    for f in sorted(os.listdir(ref)):
        want, got = np.load(os.path.join(ref, f)), np.load(os.path.join(out, f))
        if got.shape != want.shape or got.dtype != want.dtype:
            row["notes"].append(f"oneDNN vs ref: {f} is {got.dtype}{got.shape}, ref {want.dtype}{want.shape}")
            ok = False
            continue
        if got.size:
            worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - want))))
        if not np.allclose(got, want, rtol=1e-3, atol=1e-4):
            row["notes"].append(f"oneDNN vs ref: {f} max abs error {worst:.3g} beyond rtol 1e-3/atol 1e-4")
            ok = False
    drop(ref)
    row["ref_err"] = worst
    return ok


def fmt_imb(x):
    return "n/a" if not x else f"{x['time']:.2f} / {x['memory']:.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--models")
    ap.add_argument("--ci", action="store_true", help="the subset CI runs")
    ap.add_argument("--tag", default="fast", help="the zoo's models of this tag (default fast)")
    ap.add_argument("--table")
    a = ap.parse_args()
    names = a.models.split(",") if a.models else CI_MODELS if a.ci else zoo_models(a.tag)
    os.makedirs(a.work, exist_ok=True)
    rows = []
    for n in names:
        t0 = time.time()
        rows.append(check_model(n, a.work))
        print(f"[run_zoo] {n}: {rows[-1]['result']} ({time.time() - t0:.0f} s)"
              + "".join(f"\n    {x}" for x in rows[-1]["notes"]), file=sys.stderr, flush=True)
    lines = ["| model | params | ops | compile s | pp=2 imbalance time / memory, auto | same, params "
             "| max abs err vs onnxruntime | oneDNN vs reference kernels | result |",
             "|---|---:|---:|---:|---|---|---:|---:|---|"]
    for r in rows:
        if "dnnl_same" in r:
            continue
        lines.append(f"| {r['model']} | {r.get('params', 0) / 1e6:.1f}M | {r.get('ops', '-')} | "
                     f"{r.get('compile_s', 0):.2f} | {fmt_imb(r.get('auto2'))} | {fmt_imb(r.get('params2'))} | "
                     f"{r.get('max_err', float('nan')):.2g} | "
                     f"{'%.2g' % r['ref_err'] if 'ref_err' in r else '-'} | {r['result']} |")
    trows = [r for r in rows if "dnnl_same" in r]
    if len(trows) == len(rows):
        lines = []
    if trows:
        lines += ["" if lines else None, "Transformers (-b 2, --dim seq, auto policy; same bits: -pp N against -pp 1):", "",
                  "| model | params | ops | compile s | pp=2 imbalance time / memory | max abs err vs onnxruntime, "
                  "reference kernels | same, oneDNN | oneDNN same bits at --threads 1, pp 2 / 3 / 4 | check s | result |",
                  "|---|---:|---:|---:|---|---:|---:|---|---:|---|"]
        for r in trows:
            same = " / ".join("yes" if r["dnnl_same"].get(p) else "no" if p in r["dnnl_same"] else "-"
                              for p in TRANSFORMER_PP[1:])
            lines.append(f"| {r['model']} | {r.get('params', 0) / 1e6:.1f}M | {r.get('ops', '-')} | "
                         f"{r.get('compile_s', 0):.2f} | {fmt_imb(r.get('auto2'))} | "
                         f"{r.get('max_err', float('nan')):.2g} | "
                         f"{'%.2g' % r['ref_err'] if r.get('ref_err') is not None else '-'} | {same} | "
                         f"{r.get('seconds', 0):.0f} | {r['result']} |")
    text = "\n".join(l for l in lines if l is not None)
    print(text)
    for r in rows:
        for n in r["notes"]:
            print(f"  {r['model']}: {n}")
    if a.table:
        with open(a.table, "w") as f:
            f.write(text + "\n")
    sys.exit(0 if all(r["result"] == "pass" for r in rows) else 1)


if __name__ == "__main__":
    main()
