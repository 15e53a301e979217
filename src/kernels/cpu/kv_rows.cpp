// KV cache rows (kv_rows.hpp). A decode step reads every cached row of every head once, so these
// loops are bound by the bytes they read, like the weight GEMVs: the scores four rows per pass
// (four independent accumulators), the values front to back with the output in registers; each
// row's D values loaded (16-bit ones widened) 16 at a time. One template per loop for the three
// row types.
#include "headwise/kernels/kv_rows.hpp"

#include "kernels/cpu/avx512_sums.hpp"

#include <cmath>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HW_HAVE_X86 1
#endif

namespace hw::cpu {
namespace {

enum class Row { F32, BF16, F16 };
template <Row R>
using Elem = std::conditional_t<R == Row::F32, float, uint16_t>;

template <Row R>
inline float widen(Elem<R> v) {
  if constexpr (R == Row::F32) return v;
  else if constexpr (R == Row::BF16) return bf16_to_float(v);
  else return f16_to_float(v);
}

template <Row R>
void dot_rows_plain(float* out, const float* q, const Elem<R>* K, int64_t n, int64_t D, float scale) {
  for (int64_t r = 0; r < n; ++r) {
    const Elem<R>* k = K + r * D;
    float a = 0.f;
    if constexpr (R == Row::F16) {  // (f16_to_float's branches do not vectorize)
      for (int64_t d = 0; d < D; ++d) a += q[d] * widen<R>(k[d]);
    } else {
#pragma omp simd reduction(+ : a)
      for (int64_t d = 0; d < D; ++d) a += q[d] * widen<R>(k[d]);
    }
    out[r] = scale * a;
  }
}

template <Row R>
void axpy_rows_plain(float* acc, const float* p, const Elem<R>* V, int64_t n, int64_t D) {
  for (int64_t r = 0; r < n; ++r) {
    const Elem<R>* v = V + r * D;
    const float pr = p[r];
    if constexpr (R == Row::F16) {
      for (int64_t d = 0; d < D; ++d) acc[d] += pr * widen<R>(v[d]);
    } else {
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) acc[d] += pr * widen<R>(v[d]);
    }
  }
}

#if defined(HW_HAVE_X86)
#define HW_KV_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

// 16 values from p (the first lanes of mask m; the rest 0) as fp32.
template <Row R>
HW_KV_TARGET inline __m512 load16(const Elem<R>* p, __mmask16 m) {
  // (Zero-masking forms throughout: GCC 12 warns on the plain ones' undefined sources.)
  if constexpr (R == Row::F32) {
    return _mm512_maskz_loadu_ps(m, p);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, p);
    if constexpr (R == Row::BF16)
      return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, h), 16));
    else
      return _mm512_maskz_cvtph_ps(0xffff, h);
  }
}

// Lanes [16 b, D) of a block of 16 (all of them when the block is whole).
inline __mmask16 block_mask(int64_t D, int64_t b) {
  const int64_t rem = D - 16 * b;
  return rem >= 16 ? __mmask16(0xffff) : __mmask16((1u << rem) - 1);
}

using detail::sum4;

// Four rows per pass, each row's sum over its 16-column blocks in order. With NB > 0 (D in
// (16 (NB - 1), 16 NB]) q's blocks are loaded once into registers (10-20% faster at D = 64);
// NB = 0 is any D, q's blocks reloaded per pass. Both give the same bits.
template <Row R, int NB>
HW_KV_TARGET void dot_rows_avx512(float* out, const float* q, const Elem<R>* K, int64_t n, int64_t D, float scale) {
  constexpr int kRegs = NB > 0 ? NB : 1;
  const int64_t blocks = NB > 0 ? NB : (D + 15) / 16;
  __m512 qr[kRegs];
  if constexpr (NB > 0)
    for (int b = 0; b < NB; ++b) qr[b] = _mm512_maskz_loadu_ps(block_mask(D, b), q + 16 * b);
  auto qv = [&](int64_t b) HW_KV_TARGET { return NB > 0 ? qr[b] : _mm512_maskz_loadu_ps(block_mask(D, b), q + 16 * b); };
  const __m128 sc = _mm_set1_ps(scale);
  int64_t r = 0;
  for (; r + 4 <= n; r += 4) {
    const Elem<R>* k0 = K + r * D;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const __mmask16 m = block_mask(D, b);
      const __m512 x = qv(b);
      const Elem<R>* k = k0 + 16 * b;
      a0 = _mm512_fmadd_ps(x, load16<R>(k, m), a0);
      a1 = _mm512_fmadd_ps(x, load16<R>(k + D, m), a1);
      a2 = _mm512_fmadd_ps(x, load16<R>(k + 2 * D, m), a2);
      a3 = _mm512_fmadd_ps(x, load16<R>(k + 3 * D, m), a3);
    }
    _mm_storeu_ps(out + r, _mm_mul_ps(sc, sum4(a0, a1, a2, a3)));
  }
  for (; r < n; ++r) {
    const Elem<R>* k0 = K + r * D;
    __m512 a0 = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) a0 = _mm512_fmadd_ps(qv(b), load16<R>(k0 + 16 * b, block_mask(D, b)), a0);
    out[r] = scale * detail::sum1(a0);
  }
}

template <Row R>
HW_KV_TARGET void dot_rows_avx512(float* out, const float* q, const Elem<R>* K, int64_t n, int64_t D, float scale) {
  switch ((D + 15) / 16) {
    case 1: return dot_rows_avx512<R, 1>(out, q, K, n, D, scale);
    case 2: return dot_rows_avx512<R, 2>(out, q, K, n, D, scale);
    case 3: return dot_rows_avx512<R, 3>(out, q, K, n, D, scale);
    case 4: return dot_rows_avx512<R, 4>(out, q, K, n, D, scale);
    case 5: return dot_rows_avx512<R, 5>(out, q, K, n, D, scale);
    case 6: return dot_rows_avx512<R, 6>(out, q, K, n, D, scale);
    case 7: return dot_rows_avx512<R, 7>(out, q, K, n, D, scale);
    case 8: return dot_rows_avx512<R, 8>(out, q, K, n, D, scale);
    default: return dot_rows_avx512<R, 0>(out, q, K, n, D, scale);
  }
}

// Columns [d0, d0 + 16 NB) of acc (the last block masked at D), over all n rows in order: the
// NB blocks of two row chains (even and odd rows, added at the end) stay in registers, so V is
// read front to back, each row's bytes once. (Column block by column block over all rows, the
// previous order, re-read every row D / 16 times through L2 and ran at half the dot's rate;
// OpenBLAS's GEMV on fp32 rows ran at 0.6x of this.)
template <Row R, int NB>
HW_KV_TARGET void axpy_cols_avx512(float* acc, const float* p, const Elem<R>* V, int64_t n, int64_t D, int64_t d0) {
  __mmask16 m[NB];
  __m512 e[NB], o[NB];
  for (int b = 0; b < NB; ++b) {
    m[b] = block_mask(D - d0, b);
    e[b] = _mm512_setzero_ps();
    o[b] = _mm512_setzero_ps();
  }
  const Elem<R>* v = V + d0;
  int64_t r = 0;
  for (; r + 2 <= n; r += 2, v += 2 * D) {
    const __m512 pe = _mm512_set1_ps(p[r]), po = _mm512_set1_ps(p[r + 1]);
    for (int b = 0; b < NB; ++b) {
      e[b] = _mm512_fmadd_ps(pe, load16<R>(v + 16 * b, m[b]), e[b]);
      o[b] = _mm512_fmadd_ps(po, load16<R>(v + D + 16 * b, m[b]), o[b]);
    }
  }
  if (r < n) {
    const __m512 pe = _mm512_set1_ps(p[r]);
    for (int b = 0; b < NB; ++b) e[b] = _mm512_fmadd_ps(pe, load16<R>(v + 16 * b, m[b]), e[b]);
  }
  for (int b = 0; b < NB; ++b) {
    float* a = acc + d0 + 16 * b;
    _mm512_mask_storeu_ps(a, m[b], _mm512_add_ps(_mm512_maskz_loadu_ps(m[b], a), _mm512_add_ps(e[b], o[b])));
  }
}

// Four 16-column blocks at a time (8 accumulators: D = 64 in one pass), then the remainder.
template <Row R>
HW_KV_TARGET void axpy_rows_avx512(float* acc, const float* p, const Elem<R>* V, int64_t n, int64_t D) {
  int64_t d0 = 0;
  for (; D - d0 > 48; d0 += 64) axpy_cols_avx512<R, 4>(acc, p, V, n, D, d0);
  if (D - d0 > 32)
    axpy_cols_avx512<R, 3>(acc, p, V, n, D, d0);
  else if (D - d0 > 16)
    axpy_cols_avx512<R, 2>(acc, p, V, n, D, d0);
  else if (D - d0 > 0)
    axpy_cols_avx512<R, 1>(acc, p, V, n, D, d0);
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

template <Row R>
void dot_rows(float* out, const float* q, const Elem<R>* K, int64_t n, int64_t D, float scale) {
#if defined(HW_HAVE_X86)
  if (use_avx512()) return dot_rows_avx512<R>(out, q, K, n, D, scale);
#endif
  dot_rows_plain<R>(out, q, K, n, D, scale);
}

template <Row R>
void axpy_rows(float* acc, const float* p, const Elem<R>* V, int64_t n, int64_t D) {
#if defined(HW_HAVE_X86)
  if (use_avx512()) return axpy_rows_avx512<R>(acc, p, V, n, D);
#endif
  axpy_rows_plain<R>(acc, p, V, n, D);
}

}  // namespace

void kv_dot_rows(float* out, const float* q, const uint16_t* K, int64_t n, int64_t D, HalfType t, float scale) {
  if (t == HalfType::BF16)
    dot_rows<Row::BF16>(out, q, K, n, D, scale);
  else
    dot_rows<Row::F16>(out, q, K, n, D, scale);
}

void kv_dot_rows(float* out, const float* q, const float* K, int64_t n, int64_t D, float scale) {
  dot_rows<Row::F32>(out, q, K, n, D, scale);
}

void kv_axpy_rows(float* acc, const float* p, const uint16_t* V, int64_t n, int64_t D, HalfType t) {
  if (t == HalfType::BF16)
    axpy_rows<Row::BF16>(acc, p, V, n, D);
  else
    axpy_rows<Row::F16>(acc, p, V, n, D);
}

void kv_axpy_rows(float* acc, const float* p, const float* V, int64_t n, int64_t D) {
  axpy_rows<Row::F32>(acc, p, V, n, D);
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
