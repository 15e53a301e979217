#pragma once
// Internal helpers shared by the CPU kernels.
//
// vexp: an exp that g++ can vectorize inside `#pragma omp simd` loops (in targets built with
// -fno-trapping-math, see CMakeLists.txt: trapping math keeps the clamp below a branch). Without -ffast-math,
// glibc's expf is an opaque scalar call, which makes softmax over a 50k vocabulary and GELU
// several times slower than the rest of the step. The float version is branch-free:
// Cody-Waite reduction x = n*ln2 + r with |r| <= ln2/2, then the degree-7 Taylor series of
// exp(r) (truncation error < 5e-9, below float rounding), then scaling by 2^n built in the
// exponent bits. Error is about 1 ulp on [-87, 88]. Outside that range the input is clamped,
// so the result saturates at exp(-87) ~ 1.6e-38 and exp(88) ~ 1.7e38 instead of reaching 0
// or inf: invisible to softmax (x <= 0 after max subtraction, so 1.6e-38 is 0 next to a sum
// >= 1) and to GELU (x / (1 + exp(-2u)) is then x or ~0 either way). Saturating instead of
// selecting 0/inf matters for speed: g++ sinks the polynomial into the branch of such a
// select and then fails to vectorize the loop. NaN propagates. The double version is
// std::exp: double is the test path, where exactness matters more than speed.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace hw::cpu::detail {

inline float vexp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  // ln2 split so that n * kLn2Hi is exact for |n| <= 2^8 (kLn2Hi has 16 significant bits).
  constexpr float kLn2Hi = 0.693145751953125f;
  constexpr float kLn2Lo = 1.428606765330187045e-06f;
  // Below kLo 2^n would be subnormal, above kHi it would overflow the exponent field.
  constexpr float kLo = -87.0f;
  constexpr float kHi = 88.0f;
  // Written as comparisons that are false for NaN, so NaN passes through the clamp.
  float xc = x < kLo ? kLo : x;
  xc = xc > kHi ? kHi : xc;
  // n = round(xc / ln2) by adding 1.5*2^23, which leaves n in the low mantissa bits
  // (std::floor does not vectorize without -ffast-math, which also keeps t - kRound intact).
  // Reading n from those bits avoids a float-to-int conversion, undefined for NaN.
  constexpr float kRound = 12582912.0f;
  const float t = xc * kLog2e + kRound;
  const float n = t - kRound;
  uint32_t t_bits, round_bits;
  std::memcpy(&t_bits, &t, sizeof t);
  std::memcpy(&round_bits, &kRound, sizeof kRound);
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const uint32_t bits = (t_bits - round_bits + 127u) << 23;  // unsigned: wraps, never UB
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

inline double vexp(double x) { return std::exp(x); }

}  // namespace hw::cpu::detail
