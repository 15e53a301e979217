// One-row products for decoding (gemv.hpp). A decode step is a chain of these, each bound by
// reading its weights once: the kernels keep the weights streaming (four rows / columns per
// pass, fp32 accumulators), and every thread takes one contiguous block of the outputs.
#include "headwise/kernels/gemv.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "headwise/core/error.hpp"
#include "headwise/core/host_pages.hpp"
#include "headwise/kernels/cpu.hpp"
#include "kernels/cpu/avx512_sums.hpp"
#include "kernels/cpu/gemv_parts.hpp"
#include "kernels/cpu/parallel.hpp"

namespace hw::cpu {

uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays a (quiet) NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                          // round to nearest even
  return uint16_t(u >> 16);
}

float bf16_to_float(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {                                   // below 2^-14: subnormal half (or 0)
    if (a < 0x33000000u) return uint16_t(sign);            // below half of the smallest subnormal
    // value = mant 2^(e - 150) = (mant >> (126 - e)) units of 2^-24, the subnormal step
    const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    const int shift = 126 - int(a >> 23);  // 14..24
    const uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    const uint32_t r = q + (rem > half || (rem == half && (q & 1u)) ? 1u : 0u);  // may carry into the exponent
    return uint16_t(sign | r);
  }
  uint32_t r = ((a >> 13) - (112u << 10));  // rebias exponent 127 -> 15
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return uint16_t(sign | r);
}

float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t u;
  if (e == 0) {
    if (m == 0) {
      u = sign;
    } else {  // subnormal: m * 2^-24
      float f = float(m) * (1.0f / 16777216.0f);
      std::memcpy(&u, &f, 4);
      u |= sign;
    }
  } else if (e == 31) {
    u = sign | 0x7f800000u | (m << 13);
  } else {
    u = sign | ((e + 112u) << 23) | (m << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

HalfStorage make_half_storage(int64_t values) {
  check(values >= 0 && uint64_t(values) <= (uint64_t(1) << 62) / sizeof(uint16_t), "16-bit matrix storage: bad size");
  const size_t bytes = std::max<size_t>(size_t(values) * sizeof(uint16_t), 1);
  auto* p = static_cast<uint16_t*>(map_host_pages(bytes));
  check(p != nullptr, "out of memory allocating " + std::to_string(bytes) + " bytes of 16-bit weights");
  return HalfStorage(p, [bytes](uint16_t* q) { unmap_host_pages(q, bytes); });
}

HalfMatrix HalfMatrix::from_f32(const float* w, int64_t I, int64_t O, bool w_out_in, HalfType t) {
  HalfStorage own = make_half_storage(O * I);
  uint16_t* at = own.get();
  return from_f32(w, I, O, w_out_in, t, own, at);
}

HalfMatrix HalfMatrix::from_f32(const float* w, int64_t I, int64_t O, bool w_out_in, HalfType t,
                                const HalfStorage& pool, uint16_t* at) {
  check(pool && at != nullptr, "internal: a 16-bit matrix needs storage");
  HalfMatrix m;
  m.type = t;
  m.O = O;
  m.I = I;
  m.storage = pool;
  m.w = at;
  uint16_t* d = at;
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < O; ++o)
    for (int64_t i = 0; i < I; ++i) {
      const float v = w_out_in ? w[o * I + i] : w[i * O + o];
      d[o * I + i] = t == HalfType::BF16 ? float_to_bf16(v) : float_to_f16(v);
    }
  return m;
}

namespace {

using detail::kL1PassBytes;
using detail::kMaxStackIn;
using detail::kMinParallelWork;
using detail::split_outputs;

inline float widen(uint16_t h, HalfType t) { return t == HalfType::BF16 ? bf16_to_float(h) : f16_to_float(h); }

// The plain widening path: bf16 -> fp32 is a shift the compiler vectorizes; fp16 uses F16C's
// conversion where the build has it, else the scalar one.
void rows_bf16_plain(float* out, const float* x, const uint16_t* w, const float* bias, int64_t I, int64_t lo,
                     int64_t hi) {
  int64_t o = lo;
  for (; o + 4 <= hi; o += 4) {
    const uint16_t *w0 = w + o * I, *w1 = w0 + I, *w2 = w1 + I, *w3 = w2 + I;
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
    for (int64_t i = 0; i < I; ++i) {
      const float xi = x[i];
      a0 += bf16_to_float(w0[i]) * xi;
      a1 += bf16_to_float(w1[i]) * xi;
      a2 += bf16_to_float(w2[i]) * xi;
      a3 += bf16_to_float(w3[i]) * xi;
    }
    out[o] = (bias ? bias[o] : 0.f) + a0;
    out[o + 1] = (bias ? bias[o + 1] : 0.f) + a1;
    out[o + 2] = (bias ? bias[o + 2] : 0.f) + a2;
    out[o + 3] = (bias ? bias[o + 3] : 0.f) + a3;
  }
  for (; o < hi; ++o) {
    const uint16_t* w0 = w + o * I;
    float a0 = 0.f;
#pragma omp simd reduction(+ : a0)
    for (int64_t i = 0; i < I; ++i) a0 += bf16_to_float(w0[i]) * x[i];
    out[o] = (bias ? bias[o] : 0.f) + a0;
  }
}

void rows_f16_plain(float* out, const float* x, const uint16_t* w, const float* bias, int64_t I, int64_t lo,
                    int64_t hi) {
  for (int64_t o = lo; o < hi; ++o) {
    const uint16_t* w0 = w + o * I;
    int64_t i = 0;
    float a = 0.f;
#if defined(HW_HAVE_X86) && defined(__F16C__) && defined(__FMA__) && defined(__AVX2__)
    __m256 acc = _mm256_setzero_ps();
    for (; i + 8 <= I; i += 8)
      acc = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w0 + i))),
                            _mm256_loadu_ps(x + i), acc);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    a = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
#endif
    for (; i < I; ++i) a += f16_to_float(w0[i]) * x[i];
    out[o] = (bias ? bias[o] : 0.f) + a;
  }
}

#if defined(HW_HAVE_X86)
using detail::sum1;
using detail::sum4;

HW_BF16_TARGET inline __m512bh row_load(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }

using detail::prefetch_lines;

// AVX512_BF16: x rounded to bf16 (xb, zero-padded to a multiple of 32), 32 products per
// instruction per row, four rows per pass over xb.
HW_BF16_TARGET void rows_bf16_dot(
    float* out, const uint16_t* xb, const uint16_t* w, const float* bias, int64_t I, int64_t lo, int64_t hi) {
  const int64_t full = I / 32 * 32;
  const __mmask32 tail = __mmask32((uint64_t(1) << (I - full)) - 1);
  auto tail_load = [tail](const uint16_t* p) HW_BF16_TARGET { return (__m512bh)_mm512_maskz_loadu_epi16(tail, p); };
  int64_t o = lo;
  for (; o + 4 <= hi; o += 4) {
    const uint16_t *w0 = w + o * I, *w1 = w0 + I, *w2 = w1 + I, *w3 = w2 + I;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t i = 0;
    // The next four rows (contiguous after these) are fetched while these are multiplied: four
    // lines per step, 4 I values in I / 32 steps (the hardware prefetcher alone streamed ~10 GB/s
    // of the ~18 GB/s a plain read reaches on this kind of machine). Into L1 or L2: kL1PassBytes.
    const char* next = reinterpret_cast<const char*>(w0 + 4 * I);
    const bool far = 4 * I * int64_t(sizeof(*w)) > kL1PassBytes;
    for (; i < full; i += 32) {
      const char* pf = next + 4 * 2 * i;
      prefetch_lines(pf, far);
      const __m512bh xv = (__m512bh)_mm512_loadu_si512(xb + i);
      a0 = _mm512_dpbf16_ps(a0, row_load(w0 + i), xv);
      a1 = _mm512_dpbf16_ps(a1, row_load(w1 + i), xv);
      a2 = _mm512_dpbf16_ps(a2, row_load(w2 + i), xv);
      a3 = _mm512_dpbf16_ps(a3, row_load(w3 + i), xv);
    }
    if (i < I) {
      const __m512bh xv = (__m512bh)_mm512_loadu_si512(xb + i);
      a0 = _mm512_dpbf16_ps(a0, tail_load(w0 + i), xv);
      a1 = _mm512_dpbf16_ps(a1, tail_load(w1 + i), xv);
      a2 = _mm512_dpbf16_ps(a2, tail_load(w2 + i), xv);
      a3 = _mm512_dpbf16_ps(a3, tail_load(w3 + i), xv);
    }
    __m128 sums = sum4(a0, a1, a2, a3);
    if (bias) sums = _mm_add_ps(_mm_loadu_ps(bias + o), sums);
    _mm_storeu_ps(out + o, sums);
  }
  for (; o < hi; ++o) {
    const uint16_t* w0 = w + o * I;
    __m512 a0 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i < full; i += 32) a0 = _mm512_dpbf16_ps(a0, row_load(w0 + i), (__m512bh)_mm512_loadu_si512(xb + i));
    if (i < I) a0 = _mm512_dpbf16_ps(a0, tail_load(w0 + i), (__m512bh)_mm512_loadu_si512(xb + i));
    out[o] = (bias ? bias[o] : 0.f) + sum1(a0);
  }
}

// 16-bit W widened to fp32 in registers (AVX-512F), x kept in fp32: four rows per pass, the next
// four prefetched as in rows_bf16_dot. A 64-byte load holds 32 weights; they widen into two
// 16-lane vectors without a shuffle (bf16: each 32-bit lane's low half shifted up is an even
// element, its high half masked an odd one; fp16: the two 256-bit halves through vcvtph2ps), so
// x comes as `xs`, rearranged once per call to match: per block of 32, the 16 values the first
// vector multiplies, then the 16 of the second (zero-padded to a multiple of 32).
template <HalfType T>
HW_AVX512_TARGET void rows_half_widen(float* out, const float* xs,
                                                                        const uint16_t* w, const float* bias,
                                                                        int64_t I, int64_t lo, int64_t hi) {
  const int64_t full = I / 32 * 32;
  const __mmask32 tail = __mmask32((uint64_t(1) << (I - full)) - 1);
  auto fma2 = [xs](__m512i v, int64_t i, __m512 a) HW_AVX512_TARGET {
    __m512 w0, w1;
    detail::widen32<T>(v, w0, w1);
    a = _mm512_fmadd_ps(w0, _mm512_load_ps(xs + i), a);
    return _mm512_fmadd_ps(w1, _mm512_load_ps(xs + i + 16), a);
  };
  auto tail_load = [tail](const uint16_t* p) HW_AVX512_TARGET { return _mm512_maskz_loadu_epi16(tail, p); };
  int64_t o = lo;
  for (; o + 4 <= hi; o += 4) {
    const uint16_t *w0 = w + o * I, *w1 = w0 + I, *w2 = w1 + I, *w3 = w2 + I;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    const char* next = reinterpret_cast<const char*>(w0 + 4 * I);
    const bool far = 4 * I * int64_t(sizeof(*w)) > kL1PassBytes;
    int64_t i = 0;
    for (; i < full; i += 32) {
      const char* pf = next + 4 * 2 * i;
      prefetch_lines(pf, far);
      a0 = fma2(_mm512_loadu_si512(w0 + i), i, a0);
      a1 = fma2(_mm512_loadu_si512(w1 + i), i, a1);
      a2 = fma2(_mm512_loadu_si512(w2 + i), i, a2);
      a3 = fma2(_mm512_loadu_si512(w3 + i), i, a3);
    }
    if (i < I) {
      a0 = fma2(tail_load(w0 + i), i, a0);
      a1 = fma2(tail_load(w1 + i), i, a1);
      a2 = fma2(tail_load(w2 + i), i, a2);
      a3 = fma2(tail_load(w3 + i), i, a3);
    }
    __m128 sums = sum4(a0, a1, a2, a3);
    if (bias) sums = _mm_add_ps(_mm_loadu_ps(bias + o), sums);
    _mm_storeu_ps(out + o, sums);
  }
  for (; o < hi; ++o) {
    const uint16_t* w0 = w + o * I;
    __m512 a0 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i < full; i += 32) a0 = fma2(_mm512_loadu_si512(w0 + i), i, a0);
    if (i < I) a0 = fma2(tail_load(w0 + i), i, a0);
    out[o] = (bias ? bias[o] : 0.f) + sum1(a0);
  }
}

// fp32 W [O, I] (an LM head): four rows per pass over x, the next four rows prefetched as in
// rows_bf16_dot. OpenBLAS's GEMV of this layout streamed Qwen2.5-0.5B's 151936 x 896 head at
// 17 GB/s on one thread and 27-32 on two of a 2-core EPYC, this kernel at 30 and 42-51
// (bench_gemv). I's tail is a masked load, so a row's sum has one order wherever it falls.
__attribute__((target("avx512f,avx512dq"))) void rows_f32_dot(float* out, const float* x, const float* w, int64_t I,
                                                            int64_t lo, int64_t hi, bool accumulate) {
  const int64_t full = I / 16 * 16;
  const __mmask16 tail = __mmask16((1u << (I - full)) - 1);
  int64_t o = lo;
  for (; o + 4 <= hi; o += 4) {
    const float *w0 = w + o * I, *w1 = w0 + I, *w2 = w1 + I, *w3 = w2 + I;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    const char* next = reinterpret_cast<const char*>(w0 + 4 * I);
    const bool far = 4 * I * int64_t(sizeof(*w)) > kL1PassBytes;
    int64_t i = 0;
    for (; i < full; i += 16) {
      const char* pf = next + 4 * 4 * i;
      prefetch_lines(pf, far);
      const __m512 xv = _mm512_loadu_ps(x + i);
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + i), xv, a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + i), xv, a1);
      a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + i), xv, a2);
      a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + i), xv, a3);
    }
    if (i < I) {
      const __m512 xv = _mm512_maskz_loadu_ps(tail, x + i);
      a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w0 + i), xv, a0);
      a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w1 + i), xv, a1);
      a2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w2 + i), xv, a2);
      a3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w3 + i), xv, a3);
    }
    __m128 sums = sum4(a0, a1, a2, a3);
    if (accumulate) sums = _mm_add_ps(_mm_loadu_ps(out + o), sums);
    _mm_storeu_ps(out + o, sums);
  }
  for (; o < hi; ++o) {
    const float* w0 = w + o * I;
    __m512 a0 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i < full; i += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + i), _mm512_loadu_ps(x + i), a0);
    if (i < I) a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w0 + i), _mm512_maskz_loadu_ps(tail, x + i), a0);
    out[o] = (accumulate ? out[o] : 0.f) + sum1(a0);
  }
}
#endif

bool cpu_has_avx512bf16() {
#if defined(HW_HAVE_X86)
  return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

// -1: HEADWISE_GEMV not read yet; else a HalfKernel (Auto: chosen per product).
std::atomic<int> g_forced{-1};

HalfKernel forced() {
  int p = g_forced.load(std::memory_order_relaxed);
  if (p < 0) {
    const char* env = std::getenv("HEADWISE_GEMV");
    const std::string e = env ? env : "";
    p = int(e == "plain" ? HalfKernel::Plain : e == "avx512" ? HalfKernel::Widen
                                             : e == "avx512bf16" ? HalfKernel::Bf16Dot : HalfKernel::Auto);
    g_forced.store(p, std::memory_order_relaxed);
  }
  return HalfKernel(p);
}

}  // namespace

namespace detail {

bool cpu_has_avx512() {  // what rows_half_widen and rows_f32_dot need
#if defined(HW_HAVE_X86)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
#else
  return false;
#endif
}

void widen_order(float* xs, const float* x, int64_t I, int64_t padded, HalfType t) {
  const bool bf = t == HalfType::BF16;
  for (int64_t b = 0; b < padded; b += 32)
    for (int64_t j = 0; j < 32; ++j) {
      const int64_t src = bf ? b + (j < 16 ? 2 * j : 2 * (j - 16) + 1) : b + j;
      xs[b + j] = src < I ? x[src] : 0.f;
    }
}

void bf16_padded(uint16_t* xb, const float* x, int64_t I, int64_t padded) {
  for (int64_t i = 0; i < I; ++i) xb[i] = float_to_bf16(x[i]);
  for (int64_t i = I; i < padded; ++i) xb[i] = 0;
}

#if defined(HW_HAVE_X86)
void widen_rows(float* out, const float* xs, const uint16_t* w, const float* bias, int64_t I, int64_t lo, int64_t hi,
                HalfType t) {
  if (t == HalfType::BF16)
    rows_half_widen<HalfType::BF16>(out, xs, w, bias, I, lo, hi);
  else
    rows_half_widen<HalfType::F16>(out, xs, w, bias, I, lo, hi);
}

void bf16_dot_rows(float* out, const uint16_t* xb, const uint16_t* w, const float* bias, int64_t I, int64_t lo,
                   int64_t hi) {
  rows_bf16_dot(out, xb, w, bias, I, lo, hi);
}
#endif

Chosen choose_half_kernel(HalfType t, int64_t I) {
  static const bool avx512 = detail::cpu_has_avx512(), bf16dot = cpu_has_avx512bf16();
  const HalfKernel f = forced();
  if (f == HalfKernel::Plain || I > kMaxStackIn) return Chosen::Plain;
  const bool dot_ok = t == HalfType::BF16 && bf16dot;
  if (f == HalfKernel::Bf16Dot) return dot_ok ? Chosen::Bf16Dot : avx512 ? Chosen::Widen : Chosen::Plain;
  if (f == HalfKernel::Widen) return avx512 ? Chosen::Widen : Chosen::Plain;
  if (dot_ok && I > kMaxWidenIn) return Chosen::Bf16Dot;
  return avx512 ? Chosen::Widen : Chosen::Plain;
}

}  // namespace

bool half_kernels_plain() { return forced() == HalfKernel::Plain; }

void force_plain_half_kernel(bool on) { force_half_kernel(on ? HalfKernel::Plain : HalfKernel::Auto); }

void force_half_kernel(HalfKernel k) { g_forced.store(int(k), std::memory_order_relaxed); }

std::string half_kernel_name(HalfType t, int64_t I) {
  switch (detail::choose_half_kernel(t, I)) {
    case detail::Chosen::Widen: return "avx512";
    case detail::Chosen::Bf16Dot: return "avx512bf16";
    default: return "plain";
  }
}

void gemv_half(float* out, const float* x, const HalfMatrix& m, const float* bias) {
  const int64_t I = m.I, O = m.O;
  if (O <= 0) return;
  const uint16_t* w = m.w;
#if defined(HW_HAVE_X86)
  const detail::Chosen k = detail::choose_half_kernel(m.type, I);
  const int64_t padded = (I + 31) / 32 * 32;
  if (k == detail::Chosen::Widen) {
    // x rearranged for rows_half_widen once per call, on the calling thread's stack, zero-padded.
    alignas(64) float xs[kMaxStackIn + 32];
    detail::widen_order(xs, x, I, padded, m.type);
    if (m.type == HalfType::BF16)
      split_outputs(O, I, [&](int64_t lo, int64_t hi) { rows_half_widen<HalfType::BF16>(out, xs, w, bias, I, lo, hi); });
    else
      split_outputs(O, I, [&](int64_t lo, int64_t hi) { rows_half_widen<HalfType::F16>(out, xs, w, bias, I, lo, hi); });
    return;
  }
  if (k == detail::Chosen::Bf16Dot) {
    // x in bf16 once per call, on the calling thread's stack (64 KiB at most), zero-padded.
    alignas(64) uint16_t xb[kMaxStackIn + 32];
    detail::bf16_padded(xb, x, I, padded);
    split_outputs(O, I, [&](int64_t lo, int64_t hi) { rows_bf16_dot(out, xb, w, bias, I, lo, hi); });
    return;
  }
#endif
  split_outputs(O, I, [&](int64_t lo, int64_t hi) {
    if (m.type == HalfType::BF16)
      rows_bf16_plain(out, x, w, bias, I, lo, hi);
    else
      rows_f16_plain(out, x, w, bias, I, lo, hi);
  });
}

bool dot_rows_f32(float* out, const float* x, const float* w, int64_t I, int64_t lo, int64_t hi, bool accumulate) {
#if defined(HW_HAVE_X86)
  static const bool has = detail::cpu_has_avx512();
  if (has && I >= 1) {
    rows_f32_dot(out, x, w, I, lo, hi, accumulate);
    return true;
  }
#endif
  (void)out, (void)x, (void)w, (void)I, (void)lo, (void)hi, (void)accumulate;
  return false;
}

void matmul_half(float* out, const float* inp, const HalfMatrix& m, const float* bias, int64_t N,
                 std::vector<float>& panel) {
  const int64_t I = m.I, O = m.O;
  if (N == 1) {
    gemv_half(out, inp, m, bias);
    return;
  }
  if (N <= kFewHalfRows) {  // a few rows (batched decoding): W read once for all of them
    few_rows_half(out, inp, m, bias, N, panel);
    return;
  }
  const size_t need = size_t(std::min(kPanelRows, O) * I);
  if (panel.size() < need) panel.resize(need);
  for (int64_t o0 = 0; o0 < O; o0 += kPanelRows) {
    const int64_t rows = std::min(kPanelRows, O - o0);
    float* p = panel.data();
    const uint16_t* src = m.w + o0 * I;
    const HalfType t = m.type;
    detail::parallel_for(rows * I, rows * I >= kMinParallelWork, [&](int64_t k) { p[k] = widen(src[k], t); });
    gemm_rows_wt(out + o0, O, inp, p, N, I, rows, bias ? bias + o0 : nullptr);
  }
}

}  // namespace hw::cpu
