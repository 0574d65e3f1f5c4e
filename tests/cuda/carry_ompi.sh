#!/usr/bin/env bash
# carry_ompi.sh DIR: this machine's Open MPI (mpirun, orted, their
# libraries, every MCA plugin and the libraries those load, PMIx and its
# plugins, both help-text folders) copied into DIR (about 25 MB), and
# DIR/env.sh, which points Open MPI and PMIx at that copy instead of the
# paths they were built for (OPAL_* and PMIX_* install-directory variables,
# the loader's path). For the device tool's GPU machine, which has no MPI:
# tests/cuda/build_carry.sh calls this under PP_CARRY_MPI=1, and
# gpu_day.sh's 2c.5 sources DIR/env.sh where no mpirun is on PATH.
# Checked here by tests/cuda/carry_ompi_check.sh (strace: a two-rank run
# from the copy opens nothing of the system's Open MPI or PMIx).
set -euo pipefail
dir=$1
command -v ompi_info > /dev/null || { echo "carry_ompi.sh: no ompi_info (no Open MPI here)" >&2; exit 2; }
path() { ompi_info --path "$1" --parsable | sed -n "s/^path:$1://p"; }
libdir=$(path libdir) pkglibdir=$(path pkglibdir) pkgdatadir=$(path pkgdatadir) sysconfdir=$(path sysconfdir)
orterun=$(readlink -f "$(command -v mpirun)")
orted=$(dirname "$orterun")/orted
# PMIx: the library Open MPI's pmix component loads, and its own plugin and help folders beside it
pmix_lib=$(ldd "$pkglibdir"/mca_pmix_*.so 2>/dev/null | awk '/libpmix\.so/ {print $3; exit}')
pmix_root=$(dirname "$(dirname "$(readlink -f "$pmix_lib")")")
rm -rf "$dir"; mkdir -p "$dir/bin" "$dir/lib/openmpi" "$dir/lib/pmix" "$dir/share/openmpi" "$dir/share/pmix" "$dir/etc"
cp -L "$orterun" "$dir/bin/mpirun"
[ -x "$orted" ] && cp -L "$orted" "$dir/bin/orted"
cp -L "$pkglibdir"/*.so "$dir/lib/openmpi/"
[ -d "$pmix_root/lib/pmix" ] && cp -L "$pmix_root"/lib/pmix/*.so "$dir/lib/pmix/"
cp -rL "$pkgdatadir"/. "$dir/share/openmpi/"
[ -d "$pmix_root/share/pmix" ] && cp -rL "$pmix_root"/share/pmix/. "$dir/share/pmix/"
[ -f "$sysconfdir/openmpi-mca-params.conf" ] && cp -L "$sysconfdir/openmpi-mca-params.conf" "$dir/etc/"
# every library those load, beyond glibc's and the compiler's own (the plugins' too: libfabric, UCX, verbs, ...)
bash "$(dirname "$0")/copy_libs.sh" "$dir/lib" "$dir"/bin/* "$dir"/lib/openmpi/*.so "$dir"/lib/pmix/*.so
# the MPI library a program links against, with its soname (ldd above finds it through the plugins)
mpi=$(readlink -f "$libdir/libmpi.so")
cp -L "$mpi" "$dir/lib/$(objdump -p "$mpi" | awk '/SONAME/ {print $2}')"
cat > "$dir/env.sh" <<'ENV'
# Source with d set to this folder: Open MPI and PMIx from here, not from their built-in paths.
export PATH=$d/bin:$PATH LD_LIBRARY_PATH=$d/lib:${LD_LIBRARY_PATH:-}
export OPAL_PREFIX=$d OPAL_EXEC_PREFIX=$d OPAL_BINDIR=$d/bin OPAL_LIBDIR=$d/lib OPAL_PKGLIBDIR=$d/lib/openmpi \
  OPAL_DATAROOTDIR=$d/share OPAL_DATADIR=$d/share OPAL_PKGDATADIR=$d/share/openmpi OPAL_SYSCONFDIR=$d/etc
export PMIX_PREFIX=$d PMIX_EXEC_PREFIX=$d PMIX_LIBDIR=$d/lib PMIX_PKGLIBDIR=$d/lib/pmix PMIX_DATAROOTDIR=$d/share \
  PMIX_DATADIR=$d/share PMIX_PKGDATADIR=$d/share/pmix PMIX_SYSCONFDIR=$d/etc
export OMPI_MCA_mca_base_component_path=$d/lib/openmpi PMIX_MCA_mca_base_component_path=$d/lib/pmix
# plugins for fabrics the machine lacks (InfiniBand, UCX, OFI) load and stand down; say nothing of them
export OMPI_MCA_mca_base_component_show_load_errors=0 PMIX_MCA_mca_base_component_show_load_errors=0
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
ENV
du -sh "$dir"
