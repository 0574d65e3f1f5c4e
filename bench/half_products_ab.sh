#!/usr/bin/env bash
# A/B of PPRT_DNNL_HALF_PRODUCTS and PPRT_DNNL_CASTS (bench/RESULTS.md, "bf16 training's products on oneDNN's
# bf16 kernels" and "bf16 training's Casts on vectors"): run in a folder with f32.plan, bf16.plan and data/
# (ResNet-18 training plans; the command is in RESULTS.md). PPRT: the pprt binary (default build/pprt of this tree).
run() { # plan half_products casts
  OMP_WAIT_POLICY=passive PPRT_DNNL_HALF_PRODUCTS=$2 PPRT_DNNL_CASTS=$3 "${PPRT:-$(dirname "$0")/../build/pprt}" $1 data \
    --steps 4 --accumulate 2 --backend dnnl --threads 2 --no-shuffle -q --log-json ab.json >/dev/null 2>&1
  python3 -c "import json,statistics as s;st=json.load(open('ab.json'))['steps'][1:];print(round(s.median(x['samples_per_s'] for x in st),2), 'samples/s', round(s.median(x['cpu_s'] for x in st),2), 'cpu s')"
}
for i in 1 2; do
  echo "f32                    $(run f32.plan 1 1) load $(cut -d' ' -f1 /proc/loadavg)"
  echo "bf16 products0 casts1  $(run bf16.plan 0 1) load $(cut -d' ' -f1 /proc/loadavg)"
  echo "bf16 products1 casts0  $(run bf16.plan 1 0) load $(cut -d' ' -f1 /proc/loadavg)"
  echo "bf16 products1 casts1  $(run bf16.plan 1 1) load $(cut -d' ' -f1 /proc/loadavg)"
done
