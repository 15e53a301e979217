// The 16-bit decode GEMVs (kernels/gemv.hpp) against a naive double loop, at odd shapes (tails of the
// 4-row passes, the 16-output pieces and the 32-wide bf16 vectors) and 1-3 threads; both bf16
// kernels (AVX512_BF16 dot products where the CPU has them, and the plain widening path, forced);
// the 16-bit conversions against hand-worked values and an exhaustive fp16 round trip.
#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/gemv.hpp"

using namespace hw;
using namespace hw::cpu;

namespace {

struct Shape {
  int64_t I, O;
};
// (2100 x 40: a bf16 fan-in past kMaxWidenIn, where Auto takes the AVX512_BF16 dot products.)
const Shape kShapes[] = {{1, 1}, {3, 5}, {17, 33}, {31, 7}, {33, 100}, {130, 67}, {257, 1001}, {768, 300}, {2100, 40}};

std::vector<float> randn(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = float(rng.normal());
  return v;
}

// Largest |got - ref| over the scale sum_i |x_i w_io| of each output (the error a float sum of
// those products can make is a few ulps of that scale).
double worst_scaled(const std::vector<float>& got, const std::vector<double>& ref, const std::vector<double>& scale) {
  double worst = 0;
  for (size_t o = 0; o < ref.size(); ++o)
    worst = std::max(worst, std::fabs(double(got[o]) - ref[o]) / std::max(scale[o], 1e-30));
  return worst;
}

// out[o] = bias[o] + sum_i x[i] w(i, o) in double, w given as a function of (i, o).
template <class W>
void naive(const std::vector<float>& x, W w, const float* bias, int64_t I, int64_t O, std::vector<double>& ref,
           std::vector<double>& scale) {
  ref.assign(size_t(O), 0.0);
  scale.assign(size_t(O), 0.0);
  for (int64_t o = 0; o < O; ++o) {
    double s = bias ? bias[o] : 0.0, a = bias ? std::fabs(bias[o]) : 0.0;
    for (int64_t i = 0; i < I; ++i) {
      s += double(x[size_t(i)]) * w(i, o);
      a += std::fabs(double(x[size_t(i)]) * w(i, o));
    }
    ref[size_t(o)] = s;
    scale[size_t(o)] = a;
  }
}

struct ThreadCount {
  int saved = omp_get_max_threads();
  explicit ThreadCount(int n) { omp_set_num_threads(n); }
  ~ThreadCount() { omp_set_num_threads(saved); }
};

}  // namespace

TEST_CASE("gemv: 16-bit weights, every kernel, equal a naive double loop on the widened weights", "[kernels][gemv]") {
  for (HalfType t : {HalfType::BF16, HalfType::F16})
    for (HalfKernel k : {HalfKernel::Plain, HalfKernel::Widen, HalfKernel::Bf16Dot, HalfKernel::Auto})
      for (const Shape& s : kShapes) {
        const auto w = randn(s.I * s.O, 11 + uint64_t(s.O)), x = randn(s.I, 13), b = randn(s.O, 17);
        const HalfMatrix m = HalfMatrix::from_f32(w.data(), s.I, s.O, /*w_out_in=*/false, t);
        auto wide = [&](int64_t i, int64_t o) {
          const uint16_t h = m.w[o * s.I + i];
          return double(t == HalfType::BF16 ? bf16_to_float(h) : f16_to_float(h));
        };
        force_half_kernel(k);
        // The AVX512_BF16 kernel multiplies x rounded to bf16 (exact products, fp32 sums): its
        // reference uses that x; the others multiply the fp32 x.
        const std::string name = half_kernel_name(t, s.I);
        const bool dot = name == "avx512bf16";
        std::vector<float> xr = x;
        if (dot)
          for (auto& v : xr) v = bf16_to_float(float_to_bf16(v));
        std::vector<double> ref, scale;
        naive(xr, wide, b.data(), s.I, s.O, ref, scale);
        std::vector<float> first;
        for (int threads : {1, 2, 3}) {
          ThreadCount tc(threads);
          std::vector<float> got(size_t(s.O), 123.f);
          gemv_half(got.data(), x.data(), m, b.data());
          const double err = worst_scaled(got, ref, scale);
          INFO((t == HalfType::BF16 ? "bf16 " : "fp16 ") << name << " I " << s.I << " O " << s.O
                                                         << " threads " << threads << ": " << err);
          CHECK(err <= 1e-6);
          if (first.empty()) first = got;
          CHECK(std::memcmp(first.data(), got.data(), got.size() * 4) == 0);
        }
      }
  force_half_kernel(HalfKernel::Auto);
}

TEST_CASE("gemv: Auto widens fp16 and bf16 up to kMaxWidenIn, then takes AVX512_BF16 dot products for bf16",
          "[kernels][gemv]") {
  force_half_kernel(HalfKernel::Auto);
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512bw");
  const bool bf16 = avx512 && __builtin_cpu_supports("avx512bf16");
  const std::string wide = avx512 ? "avx512" : "plain";
  CHECK(half_kernel_name(HalfType::BF16, 896) == wide);
  CHECK(half_kernel_name(HalfType::BF16, kMaxWidenIn) == wide);
  CHECK(half_kernel_name(HalfType::BF16, kMaxWidenIn + 1) == (bf16 ? "avx512bf16" : wide));
  CHECK(half_kernel_name(HalfType::F16, 4864) == wide);
  CHECK(half_kernel_name(HalfType::BF16, 40000) == "plain");  // past the stack copy of x
  force_half_kernel(HalfKernel::Plain);
  CHECK(half_kernel_name(HalfType::BF16, 896) == "plain");
  CHECK(half_kernels_plain());
  force_half_kernel(HalfKernel::Bf16Dot);
  CHECK(half_kernel_name(HalfType::F16, 896) == wide);  // no fp16 dot products: falls back
  force_half_kernel(HalfKernel::Auto);
  CHECK(!half_kernels_plain());
}

TEST_CASE("gemv: the prefill product with 16-bit weights (panels of rows) equals a naive double loop",
          "[kernels][gemv]") {
  for (HalfType t : {HalfType::BF16, HalfType::F16})
    for (const Shape& s : {Shape{33, 300}, Shape{130, 513}, Shape{5, 3}}) {
      const int64_t N = 7;
      const auto w = randn(s.I * s.O, 19), x = randn(N * s.I, 23), b = randn(s.O, 29);
      const HalfMatrix m = HalfMatrix::from_f32(w.data(), s.I, s.O, /*w_out_in=*/false, t);
      std::vector<float> panel, got(size_t(N * s.O), 5.f);
      matmul_half(got.data(), x.data(), m, b.data(), N, panel);
      CHECK(panel.size() <= size_t(kPanelRows * s.I));
      double worst = 0;
      for (int64_t r = 0; r < N; ++r) {
        std::vector<float> xr(x.begin() + r * s.I, x.begin() + (r + 1) * s.I), row(got.begin() + r * s.O,
                                                                                   got.begin() + (r + 1) * s.O);
        std::vector<double> ref, scale;
        naive(xr, [&](int64_t i, int64_t o) {
          const uint16_t h = m.w[o * s.I + i];
          return double(t == HalfType::BF16 ? bf16_to_float(h) : f16_to_float(h));
        }, b.data(), s.I, s.O, ref, scale);
        worst = std::max(worst, worst_scaled(row, ref, scale));
      }
      INFO("I " << s.I << " O " << s.O << ": " << worst);
      CHECK(worst <= 1e-6);
    }
}

TEST_CASE("gemv: a few rows at once (batched decoding) equal a naive double loop, each row bit for bit its one-row product",
          "[kernels][gemv]") {
  // N covers every pass height (4, then 3, 2 or 1 rows) and the widest few-row product; the
  // shapes, tails of I (32-wide loads), O (4-output passes, 16-output pieces) and both fan-ins
  // of Auto's bf16 choice (2100: the AVX512_BF16 dot products).
  for (HalfType t : {HalfType::BF16, HalfType::F16})
    for (HalfKernel k : {HalfKernel::Plain, HalfKernel::Widen, HalfKernel::Bf16Dot, HalfKernel::Auto})
      for (const Shape& s : {Shape{3, 5}, Shape{33, 100}, Shape{130, 67}, Shape{257, 1001}, Shape{2100, 40}})
        for (int64_t N : {int64_t(2), int64_t(3), int64_t(5), int64_t(8), int64_t(11), kFewHalfRows}) {
          const auto w = randn(s.I * s.O, 31 + uint64_t(s.O)), x = randn(N * s.I, 37 + uint64_t(N)), b = randn(s.O, 41);
          const HalfMatrix m = HalfMatrix::from_f32(w.data(), s.I, s.O, /*w_out_in=*/false, t);
          force_half_kernel(k);
          const std::string name = half_kernel_name(t, s.I);
          for (int threads : {1, 2, 3}) {
            ThreadCount tc(threads);
            std::vector<float> scratch, got(size_t(N * s.O), 123.f);
            matmul_half(got.data(), x.data(), m, b.data(), N, scratch);
            for (int64_t r = 0; r < N; ++r) {
              std::vector<float> xr(x.begin() + r * s.I, x.begin() + (r + 1) * s.I);
              std::vector<float> row(got.begin() + r * s.O, got.begin() + (r + 1) * s.O), alone(size_t(s.O), 7.f);
              gemv_half(alone.data(), xr.data(), m, b.data());
              if (name == "avx512bf16")
                for (auto& v : xr) v = bf16_to_float(float_to_bf16(v));
              std::vector<double> ref, scale;
              naive(xr, [&](int64_t i, int64_t o) {
                const uint16_t h = m.w[o * s.I + i];
                return double(t == HalfType::BF16 ? bf16_to_float(h) : f16_to_float(h));
              }, b.data(), s.I, s.O, ref, scale);
              INFO((t == HalfType::BF16 ? "bf16 " : "fp16 ") << name << " I " << s.I << " O " << s.O << " N " << N
                                                             << " row " << r << " threads " << threads);
              CHECK(worst_scaled(row, ref, scale) <= 1e-6);
              if (name != "plain") CHECK(std::memcmp(row.data(), alone.data(), row.size() * 4) == 0);
            }
          }
        }
  force_half_kernel(HalfKernel::Auto);
}

TEST_CASE("gemv: bf16 and fp16 conversions round to nearest even (hand-worked values)", "[kernels][gemv]") {
  CHECK(float_to_bf16(1.0f) == 0x3f80);
  CHECK(float_to_bf16(1.0f + 0x1p-8f) == 0x3f80);         // tie, even stays
  CHECK(float_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);     // tie, odd rounds up
  CHECK(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81);
  CHECK(float_to_bf16(-2.5f) == 0xc020);
  CHECK(bf16_to_float(0x3f81) == 1.0f + 0x1p-7f);
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  CHECK(float_to_f16(1.0f) == 0x3c00);
  CHECK(float_to_f16(0.1f) == 0x2e66);
  CHECK(float_to_f16(65504.f) == 0x7bff);
  CHECK(float_to_f16(65519.f) == 0x7bff);
  CHECK(float_to_f16(65520.f) == 0x7c00);               // rounds to inf
  CHECK(float_to_f16(0x1p-24f) == 0x0001);               // smallest subnormal
  CHECK(float_to_f16(0x1p-25f) == 0x0000);               // tie to even: 0
  CHECK(float_to_f16(3 * 0x1p-25f) == 0x0002);           // tie to even: 2
  CHECK(float_to_f16(0x1p-14f - 0x1p-25f) == 0x0400);    // rounds up into the smallest normal
  CHECK(float_to_f16(-1.0f - 0x1p-11f) == 0xbc00);       // tie, even stays
  CHECK(f16_to_float(0x0001) == 0x1p-24f);
  CHECK(f16_to_float(0xfbff) == -65504.f);
  // Every finite half survives half -> float -> half.
  int bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) continue;  // NaN payloads
    bad += float_to_f16(f16_to_float(uint16_t(h))) != h;
  }
  CHECK(bad == 0);
}
