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
// float64 fit's time through glibc's scalar exp). The same steps as vexp(float) (exp_clamped,
// one template over ExpConstants), with the degree-13 series: within about 1 ulp of the
// correctly rounded exp on [-708, 709]. Outside that range the input is clamped (exp(-708)
// ~ 3.3e-308 instead of a subnormal or 0, exp(709) ~ 8.2e307 instead of inf); NaN propagates.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace hw::cpu::detail {

// The two exps' constants: ln2 split so that n * kLn2Hi is exact (float: kLn2Hi has 16
// significant bits, |n| <= 2^8; double: fdlibm's 32 bits, |n| < 2^20); the clamp keeping 2^n
// normal and finite; kRound = 1.5 * 2^mantissa bits, whose addition leaves n = round(x / ln2) in
// the low mantissa bits (std::floor does not vectorize without -ffast-math, which would also
// fold t - kRound); 1/k! for the Taylor series of exp(r), |r| <= ln2/2, to kDegree (truncation
// below the type's rounding: float < 5e-9, double < 4e-18).
template <class F>
struct ExpConstants;
template <>
struct ExpConstants<float> {
  using Bits = uint32_t;
  static constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693145751953125f,
                         kLn2Lo = 1.428606765330187045e-06f, kLo = -87.0f, kHi = 88.0f, kRound = 12582912.0f;
  static constexpr int kDegree = 7, kMantissaBits = 23;
  static constexpr Bits kBias = 127;
  static constexpr float kInvFactorial[kDegree + 1] = {1.0f,         1.0f,          0.5f,          1.0f / 6.0f,
                                                       1.0f / 24.0f, 1.0f / 120.0f, 1.0f / 720.0f, 1.0f / 5040.0f};
};
template <>
struct ExpConstants<double> {
  using Bits = uint64_t;
  static constexpr double kLog2e = 1.4426950408889634, kLn2Hi = 6.93147180369123816490e-01,
                          kLn2Lo = 1.90821492927058770002e-10, kLo = -708.0, kHi = 709.0, kRound = 6755399441055744.0;
  static constexpr int kDegree = 13, kMantissaBits = 52;
  static constexpr Bits kBias = 1023;
  static constexpr double kInvFactorial[kDegree + 1] = {
      1.0,           1.0,            0.5,             1.0 / 6.0,        1.0 / 24.0,        1.0 / 120.0,
      1.0 / 720.0,   1.0 / 5040.0,   1.0 / 40320.0,   1.0 / 362880.0,   1.0 / 3628800.0,   1.0 / 39916800.0,
      1.0 / 479001600.0, 1.0 / 6227020800.0};
};

// exp(x) for x clamped to [kLo, kHi]: x = n ln2 + r, exp(r) by Horner's rule, times 2^n built in
// the exponent bits. The clamp is written as comparisons that are false for NaN, so NaN passes
// through; n is read from t's bits, not converted (a float-to-int conversion of NaN is undefined).
template <class F>
inline F exp_clamped(F x) {
  using C = ExpConstants<F>;
  using Bits = typename C::Bits;
  F xc = x < C::kLo ? C::kLo : x;
  xc = xc > C::kHi ? C::kHi : xc;
  const F t = xc * C::kLog2e + C::kRound;
  const F n = t - C::kRound;
  Bits t_bits, round_bits;
  std::memcpy(&t_bits, &t, sizeof t);
  std::memcpy(&round_bits, &C::kRound, sizeof round_bits);
  const F r = (xc - n * C::kLn2Hi) - n * C::kLn2Lo;
  F p = C::kInvFactorial[C::kDegree];
#pragma GCC unroll 16
  for (int k = C::kDegree - 1; k >= 0; --k) p = p * r + C::kInvFactorial[k];
  const Bits bits = (t_bits - round_bits + C::kBias) << C::kMantissaBits;  // unsigned: wraps, never UB
  F two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

inline float vexp(float x) { return exp_clamped(x); }

inline double vexp(double x) { return std::exp(x); }

inline double vexp_f64(double x) { return exp_clamped(x); }

}  // namespace hw::cpu::detail
