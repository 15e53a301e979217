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

// Four rows per pass, each row's sum over its 16-column blocks in order. With NB > 0 (D in
// (16 (NB - 1), 16 NB]) q's blocks are loaded once into registers (10-20% faster at D = 64);
// NB = 0 is any D, q's blocks reloaded per pass. Both give the same bits.
template <HalfType T, int NB>
HW_KV_TARGET void dot_rows_avx512(float* out, const float* q, const uint16_t* K, int64_t n, int64_t D, float scale) {
  constexpr int kRegs = NB > 0 ? NB : 1;
  const int64_t blocks = NB > 0 ? NB : (D + 15) / 16;
  auto mask = [D](int64_t b) {
    const int64_t rem = D - 16 * b;
    return rem >= 16 ? __mmask16(0xffff) : __mmask16((1u << rem) - 1);
  };
  __m512 qr[kRegs];
  if constexpr (NB > 0)
    for (int b = 0; b < NB; ++b) qr[b] = _mm512_maskz_loadu_ps(mask(b), q + 16 * b);
  auto qv = [&](int64_t b) { return NB > 0 ? qr[b] : _mm512_maskz_loadu_ps(mask(b), q + 16 * b); };
  const __m128 sc = _mm_set1_ps(scale);
  int64_t r = 0;
  for (; r + 4 <= n; r += 4) {
    const uint16_t* k0 = K + r * D;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const __mmask16 m = mask(b);
      const __m512 x = qv(b);
      const uint16_t* k = k0 + 16 * b;
      a0 = _mm512_fmadd_ps(x, load16(k, m, T), a0);
      a1 = _mm512_fmadd_ps(x, load16(k + D, m, T), a1);
      a2 = _mm512_fmadd_ps(x, load16(k + 2 * D, m, T), a2);
      a3 = _mm512_fmadd_ps(x, load16(k + 3 * D, m, T), a3);
    }
    _mm_storeu_ps(out + r, _mm_mul_ps(sc, sum4(a0, a1, a2, a3)));
  }
  for (; r < n; ++r) {
    const uint16_t* k0 = K + r * D;
    __m512 a0 = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) a0 = _mm512_fmadd_ps(qv(b), load16(k0 + 16 * b, mask(b), T), a0);
    out[r] = scale * detail::sum1(a0);
  }
}

template <HalfType T>
HW_KV_TARGET void dot_rows_avx512(float* out, const float* q, const uint16_t* K, int64_t n, int64_t D, float scale) {
  switch ((D + 15) / 16) {
    case 1: return dot_rows_avx512<T, 1>(out, q, K, n, D, scale);
    case 2: return dot_rows_avx512<T, 2>(out, q, K, n, D, scale);
    case 3: return dot_rows_avx512<T, 3>(out, q, K, n, D, scale);
    case 4: return dot_rows_avx512<T, 4>(out, q, K, n, D, scale);
    case 5: return dot_rows_avx512<T, 5>(out, q, K, n, D, scale);
    case 6: return dot_rows_avx512<T, 6>(out, q, K, n, D, scale);
    case 7: return dot_rows_avx512<T, 7>(out, q, K, n, D, scale);
    case 8: return dot_rows_avx512<T, 8>(out, q, K, n, D, scale);
    default: return dot_rows_avx512<T, 0>(out, q, K, n, D, scale);
  }
}

// Columns [d0, d0 + 16 NB) of acc (the last block masked at D), over all n rows in order: the
// NB blocks of two row chains (even and odd rows, added at the end) stay in registers, so V is
// read front to back, each row's bytes once. (Column block by column block over all rows, the
// previous order, re-read every row D / 16 times through L2 and ran at half the dot's rate.)
template <HalfType T, int NB>
HW_KV_TARGET void axpy_cols_avx512(float* acc, const float* p, const uint16_t* V, int64_t n, int64_t D, int64_t d0) {
  __mmask16 m[NB];
  __m512 e[NB], o[NB];
  for (int b = 0; b < NB; ++b) {
    const int64_t rem = D - d0 - 16 * b;
    m[b] = rem >= 16 ? __mmask16(0xffff) : __mmask16((1u << rem) - 1);
    e[b] = _mm512_setzero_ps();
    o[b] = _mm512_setzero_ps();
  }
  const uint16_t* v = V + d0;
  int64_t r = 0;
  for (; r + 2 <= n; r += 2, v += 2 * D) {
    const __m512 pe = _mm512_set1_ps(p[r]), po = _mm512_set1_ps(p[r + 1]);
    for (int b = 0; b < NB; ++b) {
      e[b] = _mm512_fmadd_ps(pe, load16(v + 16 * b, m[b], T), e[b]);
      o[b] = _mm512_fmadd_ps(po, load16(v + D + 16 * b, m[b], T), o[b]);
    }
  }
  if (r < n) {
    const __m512 pe = _mm512_set1_ps(p[r]);
    for (int b = 0; b < NB; ++b) e[b] = _mm512_fmadd_ps(pe, load16(v + 16 * b, m[b], T), e[b]);
  }
  for (int b = 0; b < NB; ++b) {
    float* a = acc + d0 + 16 * b;
    _mm512_mask_storeu_ps(a, m[b], _mm512_add_ps(_mm512_maskz_loadu_ps(m[b], a), _mm512_add_ps(e[b], o[b])));
  }
}

// Four 16-column blocks at a time (8 accumulators: D = 64 in one pass), then the remainder.
template <HalfType T>
HW_KV_TARGET void axpy_rows_avx512(float* acc, const float* p, const uint16_t* V, int64_t n, int64_t D) {
  int64_t d0 = 0;
  for (; D - d0 > 48; d0 += 64) axpy_cols_avx512<T, 4>(acc, p, V, n, D, d0);
  if (D - d0 > 32)
    axpy_cols_avx512<T, 3>(acc, p, V, n, D, d0);
  else if (D - d0 > 16)
    axpy_cols_avx512<T, 2>(acc, p, V, n, D, d0);
  else if (D - d0 > 0)
    axpy_cols_avx512<T, 1>(acc, p, V, n, D, d0);
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
  if (use_avx512())
    return t == HalfType::BF16 ? dot_rows_avx512<HalfType::BF16>(out, q, K, n, D, scale)
                               : dot_rows_avx512<HalfType::F16>(out, q, K, n, D, scale);
#endif
  dot_rows_plain(out, q, K, n, D, t, scale);
}

void kv_axpy_rows(float* acc, const float* p, const uint16_t* V, int64_t n, int64_t D, HalfType t) {
#if defined(HW_HAVE_X86)
  if (use_avx512())
    return t == HalfType::BF16 ? axpy_rows_avx512<HalfType::BF16>(acc, p, V, n, D)
                               : axpy_rows_avx512<HalfType::F16>(acc, p, V, n, D);
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
