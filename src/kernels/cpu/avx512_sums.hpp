#pragma once
// Horizontal sums of AVX-512 accumulators for the one-row kernels (gemv.cpp, kv_rows.cpp), in one
// fixed order so that a row's result does not depend on which pass of four it fell into.
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

namespace hw::cpu::detail {

// (Helpers of these target functions are named target functions, not lambdas: a lambda does not
// take its enclosing function's target attribute, so a build without -mavx512f, e.g.
// HEADWISE_CPU_ARCH=x86-64-v3 or -march=native on an AVX2 machine, fails to inline its intrinsics.)

// A 16-lane vector's two halves added. (The zero-masking extracts: GCC 12's plain ones trip
// -Wmaybe-uninitialized on their undefined source.)
__attribute__((target("avx512f,avx512dq"))) inline __m256 halves(__m512 a) {
  return _mm256_add_ps(_mm512_maskz_extractf32x8_ps(0xff, a, 0), _mm512_maskz_extractf32x8_ps(0xff, a, 1));
}

// The sums of four rows' 16-lane accumulators as one vector [row 0..3]: the halves added, then
// pairs by hadd. A store and 16 scalar adds per row cost ~15% of a GPT-2-shaped decode's GEMV
// time at I = 768 (24 dot-product steps per row).
__attribute__((target("avx512f,avx512dq"))) inline __m128 sum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  const __m256 h01 = _mm256_hadd_ps(halves(a0), halves(a1)), h23 = _mm256_hadd_ps(halves(a2), halves(a3));
  const __m256 h = _mm256_hadd_ps(h01, h23);  // [r0 r1 r2 r3 | r0' r1' r2' r3']
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// One row's sum in sum4's order.
__attribute__((target("avx512f,avx512dq"))) inline float sum1(__m512 a) { return _mm_cvtss_f32(sum4(a, a, a, a)); }

}  // namespace hw::cpu::detail
#endif
