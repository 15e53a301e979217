#include <catch2/catch.hpp>

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
