#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/vec_math.hpp"
#include "support/rel_err.hpp"

// The float exp behind softmax and GELU, against libm's double exp.
TEST_CASE("vexp(float) is within 2 ulp of exp over its whole range") {
  double worst = 0.0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    const double ref = std::exp(static_cast<double>(x));
    const double got = static_cast<double>(hw::cpu::detail::vexp(x));
    worst = hw::test::worse(worst, hw::test::ratio(hw::test::abs_err(got, ref), ref));
  }
  CHECK(worst < 1.2e-7);  // 2 ulp of float = 2^-23
  CHECK(hw::cpu::detail::vexp(0.0f) == 1.0f);
}

TEST_CASE("vexp(float) saturates outside its range and propagates NaN") {
  // Documented contract: clamped to [-87, 88] instead of reaching 0 / inf.
  CHECK(hw::cpu::detail::vexp(-100.0f) == hw::cpu::detail::vexp(-87.0f));
  CHECK(hw::cpu::detail::vexp(-100.0f) < 2e-38f);
  CHECK(hw::cpu::detail::vexp(-100.0f) > 0.0f);
  CHECK(hw::cpu::detail::vexp(100.0f) == hw::cpu::detail::vexp(88.0f));
  CHECK(std::isfinite(hw::cpu::detail::vexp(100.0f)));
  CHECK(std::isnan(hw::cpu::detail::vexp(std::numeric_limits<float>::quiet_NaN())));
}

// The double exp of OAL's float64 softmax targets, against long double expl rounded to double
// (the correctly rounded value, up to expl's own error far below a double ulp).
TEST_CASE("vexp_f64 is within 1 ulp of the correctly rounded exp over its range") {
  double worst_ulp = 0.0;
  int64_t exact = 0, n = 0;
  auto check_at = [&](double x) {
    const double ref = static_cast<double>(std::exp(static_cast<long double>(x)));
    const double got = hw::cpu::detail::vexp_f64(x);
    const double ulp = std::nextafter(ref, std::numeric_limits<double>::infinity()) - ref;
    worst_ulp = std::max(worst_ulp, std::abs(got - ref) / ulp);
    exact += got == ref;
    n += 1;
  };
  for (double x = -708.0; x <= 709.0; x += 0.0173) check_at(x);
  for (double x = -1.0; x <= 1.0; x += 1.0 / 65536.0) check_at(x);  // near 0: r = x, no reduction
  CHECK(worst_ulp <= 1.0);
  CHECK(double(exact) / double(n) > 0.9);  // most values equal the correctly rounded one
  CHECK(hw::cpu::detail::vexp_f64(0.0) == 1.0);
}

TEST_CASE("vexp_f64 saturates outside its range and propagates NaN") {
  CHECK(hw::cpu::detail::vexp_f64(-1000.0) == hw::cpu::detail::vexp_f64(-708.0));
  CHECK(hw::cpu::detail::vexp_f64(-1000.0) > 0.0);
  CHECK(hw::cpu::detail::vexp_f64(-1000.0) < 3.4e-308);
  CHECK(hw::cpu::detail::vexp_f64(1000.0) == hw::cpu::detail::vexp_f64(709.0));
  CHECK(std::isfinite(hw::cpu::detail::vexp_f64(1000.0)));
  CHECK(std::isnan(hw::cpu::detail::vexp_f64(std::numeric_limits<double>::quiet_NaN())));
}
