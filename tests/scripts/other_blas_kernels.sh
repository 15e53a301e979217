#!/usr/bin/env bash
# Runs a test command under another instruction set's OpenBLAS kernels, so a test that compares
# two computation orders (chunked vs whole, batched vs single, 2 ranks vs 1) and passes only with
# one machine's GEMM rounding fails on every machine, not only on the other kind.
#
#   other_blas_kernels.sh PROBE COMMAND [ARGS...]
#
# AVX-512 machine: OPENBLAS_CORETYPE=Haswell (the AVX2 kernels the AMD EPYC machines run).
# AVX2 machine:    OPENBLAS_CORETYPE=Sandybridge (AVX without FMA; SkylakeX's AVX-512 kernels
#                  cannot run here, so the nearest other kernel family stands in for them).
# Debian's OpenBLAS is built with DYNAMIC_ARCH, which honours OPENBLAS_CORETYPE. PROBE is a
# binary linked to the same OpenBLAS, started with --help under OPENBLAS_VERBOSE=2 (which makes
# OpenBLAS print the core it picked): the script fails unless the override took effect.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
probe=$1
shift
if grep -qw avx512f /proc/cpuinfo; then core=Haswell; else core=Sandybridge; fi
export OPENBLAS_CORETYPE=$core
picked=$(OPENBLAS_VERBOSE=2 "$probe" --help 2>&1 | sed -n 's/^Core: //p' | head -n 1 || true)
if [ "$picked" != "$core" ]; then
  echo "FAIL: asked OpenBLAS for the $core kernels, $probe reports '${picked:-no core}'" >&2
  exit 1
fi
echo "other_blas_kernels: OPENBLAS_CORETYPE=$core, confirmed by $probe"
exec "$@"
