#!/usr/bin/env bash
# The Open MPI that build_carry.sh carries to the GPU machine (ctest
# mpi_carry, about 15 s): tests/cuda/carry_ompi.sh copies this machine's
# into WORK/ompi; then, with only its env.sh for guidance, mpirun from the
# copy runs digits at -pp 2 on two ranks (--transport mpi), bit-identical to
# the threaded run, and (under strace, where ptrace is allowed) opens no
# file of the system's Open MPI or PMIx: what would be missing on a machine
# without them is all in the copy. Exit 77 (skipped) in builds without MPI.
# usage: carry_ompi_check.sh WORK   (env: PPCC, PPRT, SRC, PP_MPI)
set -euo pipefail
: "${PPCC:?}" "${PPRT:?}" "${SRC:?}"
w=$1
if [ "${PP_MPI:-OFF}" != ON ] || ! command -v mpirun > /dev/null || ! command -v ompi_info > /dev/null; then
  echo "mpi_carry: no MPI in this build, or no Open MPI here: skipping"
  exit 77
fi
fail() { echo "mpi_carry: FAIL: $*" >&2; exit 1; }
rm -rf "$w" && mkdir -p "$w" && cd "$w"
bash "$SRC/tests/cuda/carry_ompi.sh" "$w/ompi" > carry.txt || fail "carry_ompi.sh: $(cat carry.txt)"
S=$SRC/samples/digits
"$PPCC" "$S/model.onnx" -pp 2 -o p.plan -q
"$PPRT" p.plan "$S/data" -o thr -q
# what the copy must stand in for: the system's Open MPI and PMIx folders
sys=$(ompi_info --path all --parsable | sed -n -E 's/^path:(libdir|pkglibdir|pkgdatadir|sysconfdir)://p' | sort -u)
pmix=$(ldd "$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')"/mca_pmix_*.so 2>/dev/null \
       | awk '/libpmix\.so/ {print $3; exit}')
[ -n "$pmix" ] && sys="$sys"$'\n'"$(dirname "$(dirname "$(readlink -f "$pmix")")")"
mf=(--oversubscribe); [ "$(id -u)" = 0 ] && mf+=(--allow-run-as-root)
run() { (d=$w/ompi; . "$d/env.sh"; "$@" mpirun "${mf[@]}" -np 2 "$PPRT" p.plan "$S/data" -o mpi -q --transport mpi --mpi-timeout 30); }
traced=no
if command -v strace > /dev/null && strace -o /dev/null true 2> /dev/null; then
  run strace -z -f -e trace=openat,open,execve -o trace.txt > run.txt 2>&1 || fail "mpirun from the copy (traced): $(tail -5 run.txt)"
  traced=yes
else
  run env > run.txt 2>&1 || fail "mpirun from the copy: $(tail -5 run.txt)"
fi
cmp -s thr/logits.npy mpi/logits.npy || fail "two ranks from the copy gave other bytes than threads"
if [ $traced = yes ]; then
  grep -q "$w/ompi/lib/openmpi/" trace.txt || fail "the trace shows no plugin loaded from the copy: is the trace empty?"
  while read -r p; do
    [ -n "$p" ] || continue
    hits=$(grep -F "\"$p/" trace.txt | grep -v -F "$w/" | head -3 || true)
    [ -z "$hits" ] || fail "a run from the copy opened the system's $p: $hits"
  done <<< "$sys"
  # the libraries themselves, wherever the system keeps them
  hits=$(grep -E '"[^"]*/lib(mpi|open-pal|open-rte|pmix)\.so[^"]*"' trace.txt | grep -v -F "$w/" | head -3 || true)
  [ -z "$hits" ] || fail "a run from the copy loaded a system MPI library: $hits"
fi
echo "mpi_carry: $(tail -1 carry.txt | cut -f1) copied; two ranks from the copy bit-identical to threads;" \
     "$([ $traced = yes ] && echo "nothing of the system's Open MPI or PMIx opened (strace)" || echo "not traced (no strace, or ptrace refused)")"
