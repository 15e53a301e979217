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
//
// vexp_f64: a double exp that vectorizes, for float64 work that is not a test path but a
// method's own arithmetic (OAL's softmax targets: 25M exps a head at T 4096, a third of the
// float64 fit's time through glibc's scalar exp). The same reduction as vexp(float) with ln2
// split in fdlibm's way (n * kLn2Hi exact for |n| < 2^20), then the degree-13 Taylor series of
// exp(r) for |r| <= ln2/2 (truncation < 4e-18, below double rounding): within about 1 ulp of
// the correctly rounded exp on [-708, 709]. Outside that range the input is clamped (exp(-708)
// ~ 3.3e-308 instead of a subnormal or 0, exp(709) ~ 8.2e307 instead of inf); NaN propagates.
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

inline double vexp_f64(double x) {
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 0x3fe62e42fee00000: 32 significant bits
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  constexpr double kLo = -708.0;  // 2^n stays normal (n >= -1021)
  constexpr double kHi = 709.0;   // 2^n stays finite (n <= 1023)
  double xc = x < kLo ? kLo : x;
  xc = xc > kHi ? kHi : xc;
  constexpr double kRound = 6755399441055744.0;  // 1.5 * 2^52: n lands in the low mantissa bits
  const double t = xc * kLog2e + kRound;
  const double n = t - kRound;
  uint64_t t_bits, round_bits;
  std::memcpy(&t_bits, &t, sizeof t);
  std::memcpy(&round_bits, &kRound, sizeof kRound);
  const double r = (xc - n * kLn2Hi) - n * kLn2Lo;
  double p = 1.0 / 6227020800.0;  // 1/13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const uint64_t bits = (t_bits - round_bits + 1023u) << 52;  // unsigned: wraps, never UB
  double two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

}  // namespace hw::cpu::detail
