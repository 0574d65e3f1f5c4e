#!/usr/bin/env bash
# copy_libs.sh DEST FILE...: every shared library the FILEs load, beyond
# glibc's and the compiler's own (which every Linux machine has), copied
# into DEST. Used by build_carry.sh (ppcc and pprt's protobuf-c, xxhash,
# cJSON, zlib) and carry_ompi.sh (Open MPI's and its plugins' libraries): a
# list of names went stale once, when cJSON came in and a lease found it
# missing.
set -euo pipefail
dest=$1
shift
ldd "$@" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' \
  | grep -v -E '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' | sort -u \
  | while read -r lib; do cp -L "$lib" "$dest/"; done
