#include <catch2/catch.hpp>

#include "headwise/kernels/cpu.hpp"
#include "kernels/kernel_test_util.hpp"

using namespace hwtest;

// These ops have no backward of their own (accumulate IS the residual's backward); each is
// checked against a plain loop, at a size that takes the OpenMP path.
namespace {
constexpr int64_t kN = 40001;
}

TEST_CASE("residual_forward adds, also in place") {
  hw::Rng rng(41);
  const Vec a = randn(rng, kN), b = randn(rng, kN);
  Vec out(kN);
  hw::cpu::residual_forward(out.data(), a.data(), b.data(), kN);
  Vec ref(kN);
  for (int64_t i = 0; i < kN; i++) ref[i] = a[i] + b[i];
  CHECK(out == ref);
  Vec inplace = a;
  hw::cpu::residual_forward(inplace.data(), inplace.data(), b.data(), kN);
  CHECK(inplace == ref);
}

TEST_CASE("accumulate adds into the destination") {
  hw::Rng rng(42);
  const Vec dst0 = randn(rng, kN), src = randn(rng, kN);
  Vec dst = dst0;
  hw::cpu::accumulate(dst.data(), src.data(), kN);
  Vec ref(kN);
  for (int64_t i = 0; i < kN; i++) ref[i] = dst0[i] + src[i];
  CHECK(dst == ref);
}

TEST_CASE("sum_squares matches a long-double sum over several chunks") {
  hw::Rng rng(43);
  const int64_t n = 3 * (1 << 14) + 17;  // several chunks plus a partial one
  const Vec x = randn_f(rng, n);
  long double ref = 0.0L;
  for (double v : x) ref += static_cast<long double>(v) * v;
  CHECK(std::abs(hw::cpu::sum_squares(x.data(), n) - static_cast<double>(ref)) < 1e-12 * static_cast<double>(ref));
  const auto xf = cast<float>(x);
  // The float path accumulates in double too, so it agrees to double rounding.
  CHECK(std::abs(hw::cpu::sum_squares(xf.data(), n) - static_cast<double>(ref)) < 1e-12 * static_cast<double>(ref));
  CHECK(hw::cpu::sum_squares(x.data(), 0) == 0.0);
  // Deterministic: a second call gives the identical bits.
  CHECK(hw::cpu::sum_squares(xf.data(), n) == hw::cpu::sum_squares(xf.data(), n));
}

TEST_CASE("scale multiplies every element") {
  hw::Rng rng(44);
  const Vec x0 = randn(rng, kN);
  Vec x = x0;
  hw::cpu::scale(x.data(), 0.375, kN);
  Vec ref(kN);
  for (int64_t i = 0; i < kN; i++) ref[i] = x0[i] * 0.375;
  CHECK(x == ref);
  auto xf = cast<float>(x0);
  hw::cpu::scale(xf.data(), -2.5f, kN);
  std::vector<float> ref_f(kN);
  for (int64_t i = 0; i < kN; i++) ref_f[i] = static_cast<float>(x0[i]) * -2.5f;
  CHECK(xf == ref_f);
}
