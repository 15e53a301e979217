#!/usr/bin/env bash
# The AVX-512 one-row kernels (src/kernels/cpu/gemv.cpp) keep their software prefetches in the
# object code: each must hold both hints, prefetcht0 (passes that fit half of L1) and prefetcht1
# (wider passes). A compiler may drop them without a word: GCC 12 once dropped every call of a
# helper it did not inline and found free of side effects, and decoding streamed at half speed
# with every numeric test passing. Skips (77) off x86-64 or without objdump.
# Usage: test_kernel_prefetch.sh LIBHW_KERNELS_A
set -uo pipefail
LIB=${1:?usage: test_kernel_prefetch.sh libhw_kernels.a}
[ "$(uname -m)" = x86_64 ] || { echo "SKIP: not x86-64"; exit 77; }
command -v objdump >/dev/null || { echo "SKIP: no objdump"; exit 77; }
[ -f "$LIB" ] || { echo "error: $LIB not found"; exit 1; }
# One line per (function, hint) with its count; functions named by their demangled prefix.
counts=$(objdump -d --no-show-raw-insn -C "$LIB" |
  awk '/^[0-9a-f]+ </ { name = $0 } /prefetcht[01]/ { c[name "\t" $2]++ } END { for (k in c) print k "\t" c[k] }')
fail=0
# The fp32 kernel is inlined into dot_rows_f32 in a -march=native build on an AVX-512 CPU and
# stays rows_f32_dot elsewhere (HEADWISE_CPU_ARCH=x86-64-v3): either name counts ("a|b").
for fn in 'rows_half_widen<(hw::cpu::HalfType)0>' 'rows_half_widen<(hw::cpu::HalfType)1>' 'rows_bf16_dot(' \
          'hw::cpu::dot_rows_f32(|rows_f32_dot('; do
  for hint in prefetcht0 prefetcht1; do
    n=$(printf '%s\n' "$counts" | awk -F'\t' -v f="$fn" -v h="$hint" '
      BEGIN { k = split(f, alt, "|") }
      $2 == h { for (j = 1; j <= k; ++j) if (index($1, alt[j])) { s += $3; break } }
      END { print s + 0 }')
    if [ "$n" -lt 1 ]; then
      echo "FAIL: $fn has no $hint in $LIB"
      fail=1
    else
      echo "ok: $fn: $n x $hint"
    fi
  done
done
exit $fail
