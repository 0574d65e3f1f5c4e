#!/usr/bin/env bash
# Compiler and loader cost against graph size: generated chains of N nodes
# (default 20k, 100k, 200k, 1M), each compiled with `ppcc -pp 4` and loaded
# and verified with `pprt --info` (which also prints every node). Two chains:
#   eltwise  Add (a shared constant) / Relu, alternating: the partitioner,
#            memory planner, boundaries, lowering, writing and the loader;
#   mixed    MatMul, Add, Identity, Sigmoid, Mul blocks, each with its own
#            (duplicate) constants: simplify (no-ops, shared constants) and
#            fuse (Gemm, SiLU) too.
# Prints a markdown table: wall and CPU (user + sys) seconds, peak RSS.
# With OLD=DIR (a build of another commit), its ppcc and pprt are timed too,
# for the sizes in OLD_SIZES (default "20000 100000"; the old partitioner is
# quadratic), with a time limit of OLD_LIMIT seconds (default 300).
#
# usage: bench/scaling.sh BUILD_DIR [SIZES...]   (env: PY, WORK, OLD, OLD_SIZES, OLD_LIMIT, CHAINS)
set -euo pipefail
build=$(cd "${1:?usage: bench/scaling.sh BUILD_DIR [SIZES...]}" && pwd)
shift
sizes=("${@:-20000 100000 200000 1000000}")
read -r -a sizes <<< "${sizes[*]}"
src=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-$src/.venv/bin/python}
work=${WORK:-/tmp/scaling}
mkdir -p "$work"
chains=(${CHAINS:-eltwise mixed})

gen() { # gen KIND N OUT
  "$PY" - "$@" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
kind, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
nodes, inits, prev = [], [], "x"
if kind == "eltwise":
    D = 16
    inits.append(numpy_helper.from_array(np.full(D, 0.5, np.float32), "c"))
    for i in range(n):
        o = f"t{i}" if i < n - 1 else "y"
        if i % 2 == 0:
            nodes.append(helper.make_node("Add", [prev, "c"], [o], name=f"/block{i // 100}/op{i}/Add"))
        else:
            nodes.append(helper.make_node("Relu", [prev], [o], name=f"/block{i // 100}/op{i}/Relu"))
        prev = o
else:
    D = 8
    for b in range(n // 5):
        p, t = f"/blk{b // 50}/b{b}", [f"t{b}_{k}" for k in range(5)]
        inits += [numpy_helper.from_array(np.eye(D, dtype=np.float32), f"w{b}"),
                  numpy_helper.from_array(np.full(D, 0.5, np.float32), f"c{b}")]
        nodes += [helper.make_node("MatMul", [prev, f"w{b}"], [t[0]], name=p + "/MatMul"),
                  helper.make_node("Add", [t[0], f"c{b}"], [t[1]], name=p + "/Add"),
                  helper.make_node("Identity", [t[1]], [t[2]], name=p + "/Identity"),
                  helper.make_node("Sigmoid", [t[2]], [t[3]], name=p + "/Sigmoid"),
                  helper.make_node("Mul", [t[2], t[3]], [t[4]], name=p + "/Mul")]
        prev = t[4]
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="/out/Identity"))
g = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", D])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", D])], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), out)
EOF
}

# measure LIMIT COMMAND...: prints "wall cpu rss_MB" (or "timeout" past LIMIT seconds)
measure() {
  local limit=$1 t
  shift
  t=$(mktemp)
  if timeout "$limit" /usr/bin/time -f "%e %U %S %M" -o "$t" "$@" > /dev/null 2>&1; then
    awk '{printf "%.2f %.2f %.0f", $1, $2 + $3, $4 / 1024}' "$t"
  else
    echo "timeout"
  fi
  rm -f "$t"
}

cell() { # cell "wall cpu rss" -> "wall s (cpu s)"
  if [ "$1" = timeout ]; then echo "> ${2} s"; else set -- $1; echo "$1 s (CPU $2 s)"; fi
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%Y-%m-%d)"
echo
echo "| chain | nodes | ops after passes | ppcc -pp 4 | ppcc peak RSS | plan | pprt --info (load, verify, print) | pprt peak RSS |$([ -n "${OLD:-}" ] && echo " old ppcc -pp 4 | old pprt --info |")"
echo "|---|---:|---:|---:|---:|---:|---:|---:|$([ -n "${OLD:-}" ] && echo "---:|---:|")"
for kind in "${chains[@]}"; do
  for n in "${sizes[@]}"; do
    m=$work/$kind$n.onnx
    [ -s "$m" ] || gen "$kind" "$n" "$m"
    c=$(measure 600 "$build/ppcc" "$m" -pp 4 -b 1 -q -o "$work/$kind$n.plan")
    ops=$("$build/pprt" --info "$work/$kind$n.plan" | awk '/^stage [0-9]+:/ {s += $3} END {print s}')
    r=$(measure 600 "$build/pprt" --info "$work/$kind$n.plan")
    row="| $kind | $n | $ops | $(cell "$c" 600) | $(echo "$c" | awk '{print $3}') MB | $(( $(stat -c %s "$work/$kind$n.plan") / 1000000 )) MB | $(cell "$r" 600) | $(echo "$r" | awk '{print $3}') MB |"
    if [ -n "${OLD:-}" ]; then
      if [[ " ${OLD_SIZES:-20000 100000} " == *" $n "* ]]; then
        oc=$(measure "${OLD_LIMIT:-300}" "$OLD/ppcc" "$m" -pp 4 -b 1 -q -o "$work/old$kind$n.plan")
        orr=timeout
        [ "$oc" != timeout ] && orr=$(measure "${OLD_LIMIT:-300}" "$OLD/pprt" --info "$work/old$kind$n.plan")
        row="$row $(cell "$oc" "${OLD_LIMIT:-300}") | $(cell "$orr" "${OLD_LIMIT:-300}") |"
      else
        row="$row - | - |"
      fi
    fi
    echo "$row"
  done
done
