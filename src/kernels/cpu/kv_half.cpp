// 16-bit KV cache rows (kv_half.hpp). A decode step reads every cached row of every head once, so
// these loops are bound by the bytes they read, like the weight GEMVs: four rows per pass (four
// independent accumulators), each row's D values widened 16 at a time.
#include "headwise/kernels/kv_half.hpp"

#include "kernels/cpu/avx512_sums.hpp"

#include <cmath>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HW_HAVE_X86 1
#endif

namespace hw::cpu {
namespace {

inline float widen(uint16_t h, HalfType t) { return t == HalfType::BF16 ? bf16_to_float(h) : f16_to_float(h); }

void dot_rows_plain(float* out, const float* q, const uint16_t* K, int64_t n, int64_t D, HalfType t, float scale) {
  for (int64_t r = 0; r < n; ++r) {
    const uint16_t* k = K + r * D;
    float a = 0.f;
    if (t == HalfType::BF16) {
#pragma omp simd reduction(+ : a)
      for (int64_t d = 0; d < D; ++d) a += q[d] * bf16_to_float(k[d]);
    } else {
      for (int64_t d = 0; d < D; ++d) a += q[d] * f16_to_float(k[d]);
    }
    out[r] = scale * a;
  }
}

void axpy_rows_plain(float* acc, const float* p, const uint16_t* V, int64_t n, int64_t D, HalfType t) {
  for (int64_t r = 0; r < n; ++r) {
    const uint16_t* v = V + r * D;
    const float pr = p[r];
    if (t == HalfType::BF16) {
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) acc[d] += pr * bf16_to_float(v[d]);
    } else {
      for (int64_t d = 0; d < D; ++d) acc[d] += pr * widen(v[d], t);
    }
  }
}

#if defined(HW_HAVE_X86)
#define HW_KV_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

// 16 values from p (the first `m` lanes; the rest 0) widened to fp32.
HW_KV_TARGET inline __m512 load16(const uint16_t* p, __mmask16 m, HalfType t) {
  // (Zero-masking forms throughout: GCC 12 warns on the plain ones' undefined sources.)
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  if (t == HalfType::BF16)
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, h), 16));
  return _mm512_maskz_cvtph_ps(0xffff, h);
}

using detail::sum4;

HW_KV_TARGET void dot_rows_avx512(float* out, const float* q, const uint16_t* K, int64_t n, int64_t D, HalfType t,
                                  float scale) {
  const __mmask16 all = 0xffff;
  const __m128 sc = _mm_set1_ps(scale);
  int64_t r = 0;
  for (; r + 4 <= n; r += 4) {
    const uint16_t* k0 = K + r * D;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    for (int64_t d = 0; d < D; d += 16) {
      const __mmask16 m = D - d >= 16 ? all : __mmask16((1u << (D - d)) - 1);
      const __m512 qv = _mm512_maskz_loadu_ps(m, q + d);
      a0 = _mm512_fmadd_ps(qv, load16(k0 + d, m, t), a0);
      a1 = _mm512_fmadd_ps(qv, load16(k0 + D + d, m, t), a1);
      a2 = _mm512_fmadd_ps(qv, load16(k0 + 2 * D + d, m, t), a2);
      a3 = _mm512_fmadd_ps(qv, load16(k0 + 3 * D + d, m, t), a3);
    }
    _mm_storeu_ps(out + r, _mm_mul_ps(sc, sum4(a0, a1, a2, a3)));
  }
  for (; r < n; ++r) {
    const uint16_t* k0 = K + r * D;
    __m512 a0 = _mm512_setzero_ps();
    for (int64_t d = 0; d < D; d += 16) {
      const __mmask16 m = D - d >= 16 ? all : __mmask16((1u << (D - d)) - 1);
      a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + d), load16(k0 + d, m, t), a0);
    }
    out[r] = scale * detail::sum1(a0);
  }
}

HW_KV_TARGET void axpy_rows_avx512(float* acc, const float* p, const uint16_t* V, int64_t n, int64_t D, HalfType t) {
  const __mmask16 all = 0xffff;
  for (int64_t d = 0; d < D; d += 16) {  // one 16-wide column block of acc at a time, all rows
    const __mmask16 m = D - d >= 16 ? all : __mmask16((1u << (D - d)) - 1);
    // Two chains (even and odd rows) so the FMAs do not wait on each other, added at the end.
    __m512 e = _mm512_setzero_ps(), o = _mm512_setzero_ps();
    int64_t r = 0;
    for (; r + 2 <= n; r += 2) {
      e = _mm512_fmadd_ps(_mm512_set1_ps(p[r]), load16(V + r * D + d, m, t), e);
      o = _mm512_fmadd_ps(_mm512_set1_ps(p[r + 1]), load16(V + (r + 1) * D + d, m, t), o);
    }
    if (r < n) e = _mm512_fmadd_ps(_mm512_set1_ps(p[r]), load16(V + r * D + d, m, t), e);
    _mm512_mask_storeu_ps(acc + d, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, acc + d), _mm512_add_ps(e, o)));
  }
}

bool cpu_has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}
#endif

bool use_avx512() {
#if defined(HW_HAVE_X86)
  static const bool has = cpu_has_avx512();
  return has && !half_kernels_plain();
#else
  return false;
#endif
}

}  // namespace

void kv_dot_rows(float* out, const float* q, const uint16_t* K, int64_t n, int64_t D, HalfType t, float scale) {
#if defined(HW_HAVE_X86)
  if (use_avx512()) return dot_rows_avx512(out, q, K, n, D, t, scale);
#endif
  dot_rows_plain(out, q, K, n, D, t, scale);
}

void kv_axpy_rows(float* acc, const float* p, const uint16_t* V, int64_t n, int64_t D, HalfType t) {
#if defined(HW_HAVE_X86)
  if (use_avx512()) return axpy_rows_avx512(acc, p, V, n, D, t);
#endif
  axpy_rows_plain(acc, p, V, n, D, t);
}

void kv_widen_rows(float* dst, const uint16_t* src, int64_t n, HalfType t) {
  if (t == HalfType::BF16) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_float(src[i]);
  }
}

bool kv_store_row(uint16_t* dst, const float* src, int64_t D, HalfType t) {
  bool ok = true;
  for (int64_t d = 0; d < D; ++d) {
    if (t == HalfType::BF16) {
      dst[d] = float_to_bf16(src[d]);
    } else {
      dst[d] = float_to_f16(src[d]);
      ok = ok && ((dst[d] & 0x7c00u) != 0x7c00u || !std::isfinite(src[d]));  // finite -> inf: out of range
    }
  }
  return ok;
}

}  // namespace hw::cpu
