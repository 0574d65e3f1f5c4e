#!/usr/bin/env bash
# The recipe for a new CUDA own kernel (docs/architecture.md, "Recipes"),
# carried out on a scratch copy of the tree: a parameter block and
# its per-thread function appended to runtime/cuda/kmath.h, one row appended
# to runtime/cuda/kernels.def, and nothing else of the backend touched. Then
#   1. the scratch tree is configured and only the CUDA backend's library is
#      built (pprt_lib: the planner, the emulator and, where CUDA is found,
#      kernels.cu under nvcc with warnings as errors and no local memory),
#      plus a small check program (appended to the scratch copy's
#      tests/CMakeLists.txt, the harness, not the recipe);
#   2. with CUDA, the library holds the new kernel's __global__ wrapper
#      (pcu_k_axpb), which only the row can have made;
#   3. the check program builds a one-step plan of the new kind and runs it
#      the way cuda-emu does: the lint (pcu_lint: the row's extents, element
#      sizes and write mask), then the emulator's dispatch (pcu_kernel_thread)
#      over every thread, comparing y with a * x + b; the lint must refuse
#      the step when its parameters reach past the operand, and accept y over
#      x's very bytes (the row says in place).
# Reaching the kernel from an ONNX op also needs a route in the planner
# (plan_cuda.c's plan_table emitting a step of the new kind); that is the
# op's wiring, not the kernel's, and is not part of this check.
# Also: the source tree's launcher (kernels.cu) has no numbered case.
# Usage: cuda_kernel.sh WORKDIR (env SRC: the source tree, default this
# script's ../..; JOBS: build jobs, default 2). 2-4 minutes on 2 busy cores.
# Exit 0 pass, 1 fail, 77 skipped (no git checkout to copy).
set -euo pipefail
SRC=${SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
work=${1:?usage: cuda_kernel.sh WORKDIR}
JOBS=${JOBS:-2}
fail() { echo "FAIL: $*"; exit 1; }

git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1 || { echo "skip: $SRC is not a git checkout"; exit 77; }
# the launcher's cases are the rows' kinds, never numbers
if grep -nE 'case +[0-9]+ *:' "$SRC/runtime/cuda/kernels.cu"; then fail "a numbered case in the CUDA launcher"; fi
echo "ok: no numbered case in the CUDA launcher (kernels.cu)"
rm -rf "$work" && mkdir -p "$work/tree"
tree=$work/tree
# the files git tracks or would (not the ignored ones: build outputs), as
# they are in the working tree, uncommitted edits too
(cd "$SRC" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$tree" 2>/dev/null) || true
[ -f "$tree/runtime/cuda/kernels.def" ] && [ -f "$tree/CMakeLists.txt" ] || fail "could not copy the tree"

# ---- the recipe: a function in kmath.h, a row in kernels.def ----
k=$tree/runtime/cuda/kmath.h
last=$(grep -n '^#endif' "$k" | tail -1 | cut -d: -f1)
head -n $((last - 1)) "$k" > "$k.new"
cat >> "$k.new" <<'EOF'
/* ---- y = a * x + b (tests/recipe/cuda_kernel.sh's kernel) --------------------------------- */

typedef struct pcu_axpb {
    int64_t n;
    float a, b;
} pcu_axpb;

PCU_HD void pcu_axpb_at(const pcu_axpb *k, float *y, const float *x, int64_t i) {
    if (i < k->n) y[i] = k->a * x[i] + k->b;
}

EOF
tail -n +"$last" "$k" >> "$k.new"
mv "$k.new" "$k"
cat >> "$tree/runtime/cuda/kernels.def" <<'EOF'
PCU_KERNEL(AXPB, axpb, axpb, "a x plus b", 2u, 1,
           4,
           k->n,
           pcu_axpb_at(k, OP(1), OP(0), i))
EOF

# ---- the harness: a check program over the scratch tree's library ----
mkdir -p "$tree/tests/recipe"
cat > "$tree/tests/recipe/axpb_check.c" <<'EOF'
/* The recipe's kernel through the lint and the emulator's dispatch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/cuplan.h"

static int fails;
#define CHECK(c, ...) do { if (!(c)) { printf("FAIL: " __VA_ARGS__); printf("\n"); fails++; } } while (0)

int main(void) {
    enum { N = 1000 };
    pprt_stage st;
    memset(&st, 0, sizeof st);
    pcu_ref ops[2] = {{PCU_SP_WORK, -1, 256, N * 4}, {PCU_SP_WORK, -1, 256 + N * 4, N * 4}};
    pcu_step s;
    memset(&s, 0, sizeof s);
    s.kind = PCU_S_KERNEL, s.kernel = PCU_K_AXPB, s.node = -1, s.n_ops = 2, s.ops = ops, s.threads = N;
    s.u.axpb = (pcu_axpb){.n = N, .a = 3.0f, .b = -0.5f};
    pcu_plan pl;
    memset(&pl, 0, sizeof pl);
    pl.st = &st, pl.n_steps = 1, pl.steps = &s;
    pl.bytes[PCU_SP_WORK] = 256 + 2 * N * 4;
    pp_err err = {0};

    CHECK(PCU_K_AXPB == PCU_K_COUNT - 1, "the new row is not the last kind");
    CHECK(pcu_kernel_param_bytes(PCU_K_AXPB) == sizeof(pcu_axpb), "parameter block size");
    CHECK(!strcmp(pcu_step_name(&s), "a x plus b"), "name: %s", pcu_step_name(&s));
    CHECK(pcu_kernel_writes(PCU_K_AXPB, &s.u) == 2u, "write mask");
    CHECK(pcu_lint(&pl, &err) == PP_OK, "lint refused the step: %s", err.msg);

    /* the emulator's loop: every thread through the dispatch */
    unsigned char *work = calloc(1, pl.bytes[PCU_SP_WORK]);
    float *x = (float *)(work + ops[0].off), *y = (float *)(work + ops[1].off);
    for (int i = 0; i < N; i++) x[i] = (float)i * 0.25f - 7.0f, y[i] = -1.0f;
    void *op[PCU_KERNEL_OPS] = {x, y};
    int ew = 0;
    for (int64_t t = 0; t < s.threads; t++) pcu_kernel_thread(&s, op, &ew, t);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += y[i] != 3.0f * x[i] + -0.5f;
    CHECK(bad == 0 && ew == 0, "%d of %d outputs wrong", bad, N);

    /* the row's extent reaches the lint: a block wider than its operand fails */
    s.u.axpb.n = N + 1;
    CHECK(pcu_lint(&pl, &err) != PP_OK, "lint took an extent past the operand");
    if (fails == 0) printf("lint refuses, as it should: %s\n", err.msg);
    s.u.axpb.n = N;
    /* in place (the row's inplace column): y over x's very bytes is allowed */
    ops[1] = ops[0];
    CHECK(pcu_lint(&pl, &err) == PP_OK, "lint refused y over x in place: %s", err.msg);
    free(work);
    printf("axpb_check: %s\n", fails ? "FAIL" : "ok");
    return fails ? 1 : 0;
}
EOF
cat >> "$tree/tests/CMakeLists.txt" <<'EOF'
add_executable(recipe_axpb_check recipe/axpb_check.c)
target_compile_options(recipe_axpb_check PRIVATE ${PP_WARN})
target_link_libraries(recipe_axpb_check PRIVATE pprt_lib m)
target_include_directories(recipe_axpb_check PRIVATE ${CMAKE_SOURCE_DIR})
EOF

# ---- build what the kernel touches, and run the check ----
t0=$(date +%s)
cmake -S "$tree" -B "$work/build" -DPP_WITH_DNNL=OFF -DPP_WITH_MPI=OFF >"$work/configure.log" 2>&1 \
  || { tail -20 "$work/configure.log"; fail "configure"; }
cmake --build "$work/build" -j"$JOBS" --target recipe_axpb_check >"$work/build.log" 2>&1 \
  || { grep -E 'error|warning' "$work/build.log" | head -20; tail -5 "$work/build.log"; fail "build"; }
echo "ok: the scratch tree with the new row builds ($(( $(date +%s) - t0 )) s)"
if [ -f "$work/build/libpprt_cuda_kernels.a" ]; then
  syms=$(nm -C "$work/build/libpprt_cuda_kernels.a")
  grep -q 'pcu_k_axpb(pcu_axpb const\*' <<<"$syms" || fail "no pcu_k_axpb in the CUDA kernels"
  echo "ok: kernels.cu (nvcc, warnings as errors, no local memory) holds the new kernel's wrapper pcu_k_axpb"
else
  echo "skip: no CUDA here, so kernels.cu was not built"
fi
"$work/build/tests/recipe_axpb_check" || fail "the new kernel through the lint and the emulator's dispatch"
echo "ok: a CUDA kernel is its kmath.h function and one row of kernels.def"
