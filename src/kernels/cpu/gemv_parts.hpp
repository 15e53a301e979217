#pragma once
// What the 16-bit and fp32 decode products share (gemv.cpp: one row; few_rows.cpp: a few rows at
// once): how outputs split over the threads, the next pass's prefetch, the kernel chosen for a
// matrix, and x prepared in the layout each kernel reads.
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "headwise/kernels/gemv.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HW_HAVE_X86 1
#endif

// The kernels' targets, on their lambdas too (a lambda does not take its enclosing function's).
#define HW_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512dq")))
#define HW_BF16_TARGET __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl,avx512dq")))

namespace hw::cpu::detail {

// Outputs per piece are multiples of this (a 64-byte line of fp32 outputs: no false sharing).
constexpr int64_t kAlign = 16;
// Below this many multiply-adds a product runs on the calling thread.
constexpr int64_t kMinParallelWork = int64_t(1) << 15;
// The widest x the AVX-512 kernels copy onto the stack (128 KiB as fp32); wider products take the plain path.
constexpr int64_t kMaxStackIn = 32768;
// The kernels fetch the next pass's four rows one pass ahead: into L1 while a pass fits in half
// of it, into L2 past that. Prefetched into a 32 KiB L1D (Zen 4's), the passes of a 4864-wide
// matrix (38 KiB in 16 bits, 76 in fp32) were evicted before use. bench_gemv --shape 4864x896,
// 4 alternating runs, GB/s into L1 -> into L2: one thread bf16 13.7-20.9 -> 19.6-20.4, fp16
// 10.9-12.1 -> 20.2-21.4, fp32 14.4-19.7 -> 19.5-21.7; two threads fp16 20.1-21.3 -> 31.0-34.2.
constexpr int64_t kL1PassBytes = 16384;

// fn(lo, hi) over contiguous blocks of the O outputs, one per OpenMP thread (the calling thread
// alone for a small product or inside a parallel region).
template <class Fn>
void split_outputs(int64_t O, int64_t I, Fn&& fn) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int pieces = int(std::min<int64_t>(threads, (O + kAlign - 1) / kAlign));
  if (pieces <= 1 || O * I < kMinParallelWork) {
    fn(int64_t(0), O);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(pieces)
  for (int p = 0; p < pieces; ++p) {
    const int64_t lo = O * p / pieces / kAlign * kAlign;
    const int64_t hi = p + 1 == pieces ? O : O * (p + 1) / pieces / kAlign * kAlign;
    if (hi > lo) fn(lo, hi);
  }
}

// Whether the CPU runs the AVX-512 kernels (F, DQ, BW).
bool cpu_has_avx512();

// The kernel a 16-bit product of fan-in I runs on this machine (gemv.hpp's half_kernel_name).
enum class Chosen { Plain, Widen, Bf16Dot };
Chosen choose_half_kernel(HalfType t, int64_t I);

// x for the widening kernels, zero-padded to a multiple of 32 (`padded` values): per block of 32,
// the 16 values a load's first widened vector multiplies, then the 16 of its second (bf16: the
// block's even elements, then its odd ones; fp16: in order).
void widen_order(float* xs, const float* x, int64_t I, int64_t padded, HalfType t);
// x rounded to bf16 for the AVX512_BF16 dot products, zero-padded to `padded` values.
void bf16_padded(uint16_t* xb, const float* x, int64_t I, int64_t padded);

#if defined(HW_HAVE_X86)
// Outputs lo..hi of one row by gemv.cpp's kernels (AVX-512; the few-row kernels' ragged ends):
// 16-bit W widened, x in widen_order's layout; AVX512_BF16 dot products, x as bf16_padded wrote it.
void widen_rows(float* out, const float* xs, const uint16_t* w, const float* bias, int64_t I, int64_t lo, int64_t hi,
                HalfType t);
void bf16_dot_rows(float* out, const uint16_t* xb, const uint16_t* w, const float* bias, int64_t I, int64_t lo,
                   int64_t hi);

// Four lines of the next pass, into L2 when `far` (a pass over kL1PassBytes), else into L1.
// always_inline: GCC 12 does not inline it into the kernels (their target differs), finds it
// free of side effects and drops every call, prefetches and all (the kernels then streamed at
// 12 instead of 19-24 GB/s; tests/scripts/test_kernel_prefetch.sh checks the object code).
__attribute__((always_inline)) inline void prefetch_lines(const char* p, bool far) {
  if (far) {
    _mm_prefetch(p, _MM_HINT_T1);
    _mm_prefetch(p + 64, _MM_HINT_T1);
    _mm_prefetch(p + 128, _MM_HINT_T1);
    _mm_prefetch(p + 192, _MM_HINT_T1);
  } else {
    _mm_prefetch(p, _MM_HINT_T0);
    _mm_prefetch(p + 64, _MM_HINT_T0);
    _mm_prefetch(p + 128, _MM_HINT_T0);
    _mm_prefetch(p + 192, _MM_HINT_T0);
  }
}

// A 64-byte load of 32 16-bit weights widened into two 16-lane fp32 vectors without a shuffle
// (bf16: each 32-bit lane's low half shifted up is an even element, its high half masked an odd
// one; fp16: the two 256-bit halves through vcvtph2ps), in widen_order's order.
template <HalfType T>
HW_AVX512_TARGET inline void widen32(__m512i v, __m512& w0, __m512& w1) {
  if constexpr (T == HalfType::BF16) {
    w0 = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, v, 16));
    w1 = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(int(0xffff0000u))));
  } else {
    w0 = _mm512_maskz_cvtph_ps(0xffff, _mm512_maskz_extracti64x4_epi64(0xff, v, 0));
    w1 = _mm512_maskz_cvtph_ps(0xffff, _mm512_maskz_extracti64x4_epi64(0xff, v, 1));
  }
}
#endif

}  // namespace hw::cpu::detail
