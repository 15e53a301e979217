// Products of a few rows at once (batched decoding: one row per live sequence) with W stored
// [O, I]: fp32 (the decoder's re-laid matrices) and 16-bit. One row's product reads each weight
// once and is bound by memory (gemv.cpp); B rows cost B times the arithmetic for the same read,
// so here each weight is loaded into a register once and multiplied into up to four rows: a pass
// takes four weight rows and four input rows (16 accumulators), further input rows take further
// passes over the same four weight rows, now in L1/L2. An output's accumulator runs exactly as
// in the one-row kernel (one vector accumulator over I in the same steps, the masked tail, sum4's
// order, the bias or the accumulated output added last), so each row's result equals its
// one-row product bit for bit: batched decoding gives each sequence the numbers it gets alone.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "headwise/kernels/gemv.hpp"
#include "kernels/cpu/avx512_sums.hpp"
#include "kernels/cpu/gemv_parts.hpp"

namespace hw::cpu {

namespace {

#if defined(HW_HAVE_X86)
using detail::prefetch_lines;
using detail::sum1;
using detail::sum4;

// A vector loaded once into a register: without this GCC folds the load into each of the four
// FMAs that use it, four loads where one does (the passes are bound by loads at 16 rows).
#define HW_IN_REGISTER(v) asm("" : "+v"(v))

// One pass: outputs o..o+3 of R rows. W's four rows are read 64 bytes at a time (16 fp32 or 32
// 16-bit weights; the next four rows prefetched into L2, since the rows' x beside the pass fills
// L1), then the masked tail; step(a, l0, l1, l2, l3, i, mask) multiplies the four loads into the
// rows' accumulators a[r][0..3] (mask: the loaded elements, all but in the tail); each row's four
// sums are stored at out + r * ldo + o, after adding add + r * add_ld + o where add is not null
// (the bias, add_ld 0, or the output itself). Always inlined, so the step (a lambda with its
// caller's target) inlines too.
template <class E, int R, class Step>
__attribute__((always_inline)) HW_AVX512_TARGET inline void pass(float* out, int64_t ldo, const E* w, const float* add,
                                                                 int64_t add_ld, int64_t I, int64_t o, Step&& step) {
  constexpr int64_t kLoad = 64 / int64_t(sizeof(E));  // elements per 64-byte load
  const int64_t full = I / kLoad * kLoad;
  const uint64_t all = (uint64_t(1) << kLoad) - 1, tail = (uint64_t(1) << (I - full)) - 1;
  const E *w0 = w + o * I, *w1 = w0 + I, *w2 = w1 + I, *w3 = w2 + I;
  const char* next = reinterpret_cast<const char*>(w0 + 4 * I);
  auto masked = [tail](const E* p) HW_AVX512_TARGET {
    if constexpr (sizeof(E) == 4)
      return _mm512_castps_si512(_mm512_maskz_loadu_ps(__mmask16(tail), p));
    else
      return _mm512_maskz_loadu_epi16(__mmask32(tail), p);
  };
  __m512 a[R][4];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) a[r][0] = a[r][1] = a[r][2] = a[r][3] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i < full; i += kLoad) {
    prefetch_lines(next + 4 * int64_t(sizeof(E)) * i, /*far=*/true);
    step(a, _mm512_loadu_si512(w0 + i), _mm512_loadu_si512(w1 + i), _mm512_loadu_si512(w2 + i),
         _mm512_loadu_si512(w3 + i), i, all);
  }
  if (i < I) step(a, masked(w0 + i), masked(w1 + i), masked(w2 + i), masked(w3 + i), i, tail);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    __m128 sums = sum4(a[r][0], a[r][1], a[r][2], a[r][3]);
    if (add) sums = _mm_add_ps(_mm_loadu_ps(add + r * add_ld + o), sums);
    _mm_storeu_ps(out + r * ldo + o, sums);
  }
}

// fp32 W [O, I], x + r * ldx (not padded: its tail is a masked load), as gemv.cpp's rows_f32_dot.
template <int R>
HW_AVX512_TARGET void f32_pass(float* out, int64_t ldo, const float* x, int64_t ldx, const float* w, int64_t I,
                               int64_t o, bool accumulate) {
  pass<float, R>(out, ldo, w, accumulate ? out : nullptr, ldo, I, o,
                 [&](__m512 (&a)[R][4], __m512i l0, __m512i l1, __m512i l2, __m512i l3, int64_t i,
                     uint64_t mask) HW_AVX512_TARGET {
                   const __m512 v0 = _mm512_castsi512_ps(l0), v1 = _mm512_castsi512_ps(l1),
                                v2 = _mm512_castsi512_ps(l2), v3 = _mm512_castsi512_ps(l3);
#pragma GCC unroll 4
                   for (int r = 0; r < R; ++r) {
                     __m512 xv = _mm512_maskz_loadu_ps(__mmask16(mask), x + r * ldx + i);
                     HW_IN_REGISTER(xv);
                     a[r][0] = _mm512_fmadd_ps(v0, xv, a[r][0]);
                     a[r][1] = _mm512_fmadd_ps(v1, xv, a[r][1]);
                     a[r][2] = _mm512_fmadd_ps(v2, xv, a[r][2]);
                     a[r][3] = _mm512_fmadd_ps(v3, xv, a[r][3]);
                   }
                 });
}

// 16-bit W widened in registers, x in widen_order's layout (xs + r * ldx), as gemv.cpp's
// rows_half_widen: per load of 32 weights, the two widened vectors into one accumulator.
template <HalfType T, int R>
HW_AVX512_TARGET void widen_pass(float* out, int64_t ldo, const float* xs, int64_t ldx, const uint16_t* w,
                                 const float* bias, int64_t I, int64_t o) {
  pass<uint16_t, R>(out, ldo, w, bias, 0, I, o,
                    [&](__m512 (&a)[R][4], __m512i l0, __m512i l1, __m512i l2, __m512i l3, int64_t i,
                        uint64_t) HW_AVX512_TARGET {
                 __m512 v[4][2];
                 detail::widen32<T>(l0, v[0][0], v[0][1]);
                 detail::widen32<T>(l1, v[1][0], v[1][1]);
                 detail::widen32<T>(l2, v[2][0], v[2][1]);
                 detail::widen32<T>(l3, v[3][0], v[3][1]);
#pragma GCC unroll 4
                 for (int r = 0; r < R; ++r) {
                   __m512 x0 = _mm512_load_ps(xs + r * ldx + i), x1 = _mm512_load_ps(xs + r * ldx + i + 16);
                   HW_IN_REGISTER(x0);
                   HW_IN_REGISTER(x1);
#pragma GCC unroll 4
                   for (int j = 0; j < 4; ++j)
                     a[r][j] = _mm512_fmadd_ps(v[j][1], x1, _mm512_fmadd_ps(v[j][0], x0, a[r][j]));
                 }
               });
}

// AVX512_BF16 dot products, x rounded to bf16 (xb + r * ldx, zero-padded), as gemv.cpp's rows_bf16_dot.
template <int R>
HW_BF16_TARGET void dot_pass(float* out, int64_t ldo, const uint16_t* xb, int64_t ldx, const uint16_t* w,
                             const float* bias, int64_t I, int64_t o) {
  pass<uint16_t, R>(out, ldo, w, bias, 0, I, o,
                    [&](__m512 (&a)[R][4], __m512i l0, __m512i l1, __m512i l2, __m512i l3, int64_t i,
                        uint64_t) HW_BF16_TARGET {
#pragma GCC unroll 4
                 for (int r = 0; r < R; ++r) {
                   __m512i xi = _mm512_loadu_si512(xb + r * ldx + i);
                   HW_IN_REGISTER(xi);
                   const __m512bh xv = (__m512bh)xi;
                   a[r][0] = _mm512_dpbf16_ps(a[r][0], (__m512bh)l0, xv);
                   a[r][1] = _mm512_dpbf16_ps(a[r][1], (__m512bh)l1, xv);
                   a[r][2] = _mm512_dpbf16_ps(a[r][2], (__m512bh)l2, xv);
                   a[r][3] = _mm512_dpbf16_ps(a[r][3], (__m512bh)l3, xv);
                 }
               });
}

// Outputs lo..hi of all N rows: four outputs a pass, the rows four at a time (then 3, 2 or 1),
// the last hi - lo mod 4 outputs one at a time: tile<R>(r0, o) and one(o) do the work.
template <class Pass, class One>
void over_tiles(int64_t N, int64_t lo, int64_t hi, Pass&& tile, One&& one) {
  int64_t o = lo;
  for (; o + 4 <= hi; o += 4) {
    int64_t r = 0;
    for (; r + 4 <= N; r += 4) tile(std::integral_constant<int, 4>{}, r, o);
    switch (N - r) {
      case 3: tile(std::integral_constant<int, 3>{}, r, o); break;
      case 2: tile(std::integral_constant<int, 2>{}, r, o); break;
      case 1: tile(std::integral_constant<int, 1>{}, r, o); break;
      default: break;
    }
  }
  for (; o < hi; ++o) one(o);
}
#endif

// Without AVX-512 (or forced plain): each thread widens blocks of its share of W's rows into its
// slice of `scratch` (small enough to stay in L2) and runs every row's dot products over the block.
void few_rows_half_plain(float* out, const float* inp, const HalfMatrix& m, const float* bias, int64_t N,
                         std::vector<float>& scratch) {
  const int64_t I = m.I, O = m.O;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t rows = std::max<int64_t>(1, std::min<int64_t>(32768 / std::max<int64_t>(I, 1), kPanelRows / threads));
  const size_t need = size_t(threads) * size_t(rows * I);
  if (scratch.size() < need) scratch.resize(need);
  detail::split_outputs(O, I, [&](int64_t lo, int64_t hi) {
    float* p = scratch.data() + size_t(threads == 1 ? 0 : omp_get_thread_num()) * size_t(rows * I);
    for (int64_t b0 = lo; b0 < hi; b0 += rows) {
      const int64_t b1 = std::min(hi, b0 + rows);
      const uint16_t* src = m.w + b0 * I;
      const int64_t len = (b1 - b0) * I;
      if (m.type == HalfType::BF16)
#pragma omp simd
        for (int64_t k = 0; k < len; ++k) p[k] = bf16_to_float(src[k]);
      else
        for (int64_t k = 0; k < len; ++k) p[k] = f16_to_float(src[k]);
      for (int64_t r = 0; r < N; ++r)
        for (int64_t o = b0; o < b1; ++o) {
          float a = 0.f;
          const float* wr = p + (o - b0) * I;
          const float* x = inp + r * I;
          for (int64_t i = 0; i < I; ++i) a += wr[i] * x[i];
          out[r * O + o] = (bias ? bias[o] : 0.f) + a;
        }
    }
  });
}

}  // namespace

bool few_rows_f32(float* out, const float* x, const float* w, int64_t N, int64_t I, int64_t O, int64_t lo, int64_t hi,
                  bool accumulate) {
#if defined(HW_HAVE_X86)
  static const bool has = detail::cpu_has_avx512();
  if (!has || I < 1) return false;
  over_tiles(
      N, lo, hi,
      [&](auto R, int64_t r0, int64_t o) { f32_pass<decltype(R)::value>(out + r0 * O, O, x + r0 * I, I, w, I, o, accumulate); },
      [&](int64_t o) {
        for (int64_t r = 0; r < N; ++r) dot_rows_f32(out + r * O, x + r * I, w, I, o, o + 1, accumulate);
      });
  return true;
#else
  (void)out, (void)x, (void)w, (void)N, (void)I, (void)O, (void)lo, (void)hi, (void)accumulate;
  return false;
#endif
}

void few_rows_half(float* out, const float* inp, const HalfMatrix& m, const float* bias, int64_t N,
                   std::vector<float>& scratch) {
  const int64_t I = m.I, O = m.O;
  if (O <= 0 || N <= 0) return;
#if defined(HW_HAVE_X86)
  const detail::Chosen k = detail::choose_half_kernel(m.type, I);
  const int64_t padded = (I + 31) / 32 * 32;
  const uint16_t* w = m.w;
  if (k == detail::Chosen::Widen) {
    // every row's x in widen_order's layout, 64-byte aligned (padded is a multiple of 32 floats)
    const size_t need = size_t(N * padded + 16);
    if (scratch.size() < need) scratch.resize(need);
    float* xs = scratch.data() + (16 - (reinterpret_cast<uintptr_t>(scratch.data()) / sizeof(float)) % 16) % 16;
    for (int64_t r = 0; r < N; ++r) detail::widen_order(xs + r * padded, inp + r * I, I, padded, m.type);
    auto run = [&](auto T) {
      constexpr HalfType t = decltype(T)::value;
      detail::split_outputs(O, I, [&](int64_t lo, int64_t hi) {
        over_tiles(
            N, lo, hi,
            [&](auto R, int64_t r0, int64_t o) {
              widen_pass<t, decltype(R)::value>(out + r0 * O, O, xs + r0 * padded, padded, w, bias, I, o);
            },
            [&](int64_t o) {
              for (int64_t r = 0; r < N; ++r) detail::widen_rows(out + r * O, xs + r * padded, w, bias, I, o, o + 1, t);
            });
      });
    };
    if (m.type == HalfType::BF16)
      run(std::integral_constant<HalfType, HalfType::BF16>{});
    else
      run(std::integral_constant<HalfType, HalfType::F16>{});
    return;
  }
  if (k == detail::Chosen::Bf16Dot) {
    // every row's x rounded to bf16, its bytes copied two values to a float slot of the scratch
    // (the kernels read them through vector loads, never as floats)
    const size_t need = size_t(N * padded / 2);
    if (scratch.size() < need) scratch.resize(need);
    alignas(64) uint16_t row[detail::kMaxStackIn + 32];
    for (int64_t r = 0; r < N; ++r) {
      detail::bf16_padded(row, inp + r * I, I, padded);
      std::memcpy(scratch.data() + r * padded / 2, row, size_t(padded) * sizeof(uint16_t));
    }
    const uint16_t* xb = reinterpret_cast<const uint16_t*>(scratch.data());
    detail::split_outputs(O, I, [&](int64_t lo, int64_t hi) {
      over_tiles(
          N, lo, hi,
          [&](auto R, int64_t r0, int64_t o) {
            dot_pass<decltype(R)::value>(out + r0 * O, O, xb + r0 * padded, padded, w, bias, I, o);
          },
          [&](int64_t o) {
            for (int64_t r = 0; r < N; ++r) detail::bf16_dot_rows(out + r * O, xb + r * padded, w, bias, I, o, o + 1);
          });
    });
    return;
  }
#endif
  few_rows_half_plain(out, inp, m, bias, N, scratch);
}

}  // namespace hw::cpu
