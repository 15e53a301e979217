// The error measures the numerical tests bound (tests/support/rel_err.hpp and the helpers built
// on it): a NaN or an infinity planted in the result or in the reference must give an infinite
// error, never a small one (a running maximum written with std::max skips a NaN), and a normal
// case must give the number worked out by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "dist/rank_floats.hpp"
#include "kernels/kernel_test_util.hpp"
#include "kernels/mma_emulation.hpp"
#include "support/rel_err.hpp"

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Every way to plant a non-finite value at position `at` of (got, ref): NaN or +-inf, in either.
struct Plant {
  const char* what;
  bool in_got;
  double value;
};
const Plant kPlants[] = {{"NaN in got", true, kNan},  {"NaN in ref", false, kNan},  {"+inf in got", true, kInf},
                         {"-inf in got", true, -kInf}, {"+inf in ref", false, kInf}, {"-inf in ref", false, -kInf}};

// Runs f(got, ref) with each plant at each position and requires an infinite result.
template <class F>
void require_infinite_for_every_plant(const std::vector<double>& got, const std::vector<double>& ref, F f) {
  for (const Plant& p : kPlants)
    for (size_t at = 0; at < ref.size(); ++at) {
      INFO(p.what << " at " << at);
      std::vector<double> g = got, r = ref;
      (p.in_got ? g : r)[at] = p.value;
      const double e = f(g, r);
      REQUIRE(std::isinf(e));
      REQUIRE(e > 0);
    }
}

// got = ref + (0.1, -0.3, 0.2): max |got - ref| = 0.3, max |ref| = 4, elementwise
// |got - ref| / max(|ref|, 1) = (0.1 / 1, 0.3 / 4, 0.2 / 2) -> 0.1.
const std::vector<double> kRef = {0.5, -4.0, 2.0};
const std::vector<double> kGot = {0.6, -4.3, 2.2};

}  // namespace

TEST_CASE("abs_err, worse, bigger_scale and ratio: a non-finite operand is an infinite error") {
  using namespace hw::test;
  CHECK(abs_err(1.5, -0.5) == 2.0);
  CHECK(std::isinf(abs_err(kNan, 1.0)));
  CHECK(std::isinf(abs_err(1.0, kNan)));
  CHECK(std::isinf(abs_err(kInf, kInf)));  // inf - inf is NaN, not 0
  CHECK(std::isinf(abs_err(1.0, -kInf)));
  CHECK(worse(0.25, 0.5) == 0.5);
  CHECK(worse(0.5, 0.25) == 0.5);
  CHECK(std::isinf(worse(0.5, kNan)));  // std::max(0.5, NaN) would give 0.5
  CHECK(std::isinf(worse(kNan, 0.5)));
  CHECK(std::isinf(worse(0.5, kInf)));
  CHECK(bigger_scale(2.0, -3.0) == 3.0);
  CHECK(std::isnan(bigger_scale(2.0, kNan)));
  CHECK(std::isnan(bigger_scale(2.0, kInf)));
  CHECK(ratio(0.3, 4.0) == Approx(0.075));
  CHECK(ratio(0.3, 0.0) == 0.3);  // an all-zero scale: the error itself
  CHECK(std::isinf(ratio(kNan, 4.0)));
  CHECK(std::isinf(ratio(0.3, kNan)));
  CHECK(std::isinf(ratio(0.3, kInf)));
}

TEST_CASE("max_rel_err, max_rel_err_floor and max_elem_err: hand-worked values, planted NaN and infinity") {
  using namespace hw::test;
  CHECK(max_rel_err(kGot, kRef) == Approx(0.3 / 4.0));
  CHECK(max_rel_err(std::vector<float>{1.0f, 3.0f}, std::vector<double>{1.0, 2.0}) == Approx(0.5));
  CHECK(max_rel_err(std::vector<double>{0.25}, std::vector<double>{0.0}) == 0.25);  // zero reference: absolute
  CHECK(max_rel_err_floor(kGot, kRef, 1.0) == Approx(0.3 / 4.0));
  CHECK(max_rel_err_floor(kGot, kRef, 10.0) == Approx(0.3 / 10.0));  // the floor above max |ref|
  CHECK(max_elem_err(kGot, kRef) == Approx(0.1));
  CHECK(max_elem_err(kGot, kRef, 0.25) == Approx(0.2));  // 0.1 / max(0.5, 0.25)
  CHECK(std::isinf(max_rel_err(std::vector<double>{1.0}, kRef)));  // size mismatch
  CHECK(std::isinf(max_rel_err_floor(std::vector<double>{1.0}, kRef, 1.0)));
  CHECK(std::isinf(max_elem_err(std::vector<double>{1.0}, kRef)));
  require_infinite_for_every_plant(kGot, kRef, [](const auto& g, const auto& r) { return max_rel_err(g, r); });
  require_infinite_for_every_plant(kGot, kRef,
                                   [](const auto& g, const auto& r) { return max_rel_err_floor(g, r, 1.0); });
  require_infinite_for_every_plant(kGot, kRef, [](const auto& g, const auto& r) { return max_elem_err(g, r); });
  // A NaN after a large finite error, and before it: both orders are infinite.
  CHECK(std::isinf(max_rel_err(std::vector<double>{9.0, kNan}, std::vector<double>{1.0, 1.0})));
  CHECK(std::isinf(max_rel_err(std::vector<double>{kNan, 9.0}, std::vector<double>{1.0, 1.0})));
  // float results: a float NaN is caught too.
  CHECK(std::isinf(max_rel_err(std::vector<float>{1.0f, std::nanf("")}, std::vector<double>{1.0, 2.0})));
}

TEST_CASE("kernel test helpers fd_err, rel_diff and max_err: hand-worked values, planted NaN and infinity") {
  // fd_err: |a - fd| / max(|a|, |fd|, floor): (0.1 / 0.6, 0.3 / 4.3, 0.2 / 2.2) -> 1/6.
  CHECK(hwtest::fd_err(kGot, kRef) == Approx(0.1 / 0.6));
  CHECK(hwtest::fd_err({1e-4}, {0.0}) == Approx(1e-2));  // below the 1e-2 floor: absolute / floor
  CHECK(hwtest::rel_diff(kGot, kRef) == Approx(0.3 / 4.0));
  CHECK(hwtest::max_err(kGot, kRef) == Approx(0.1));
  CHECK(std::isinf(hwtest::fd_err({1.0}, kRef)));  // size mismatch
  require_infinite_for_every_plant(kGot, kRef, [](const auto& g, const auto& r) { return hwtest::fd_err(g, r); });
  require_infinite_for_every_plant(kGot, kRef, [](const auto& g, const auto& r) { return hwtest::rel_diff(g, r); });
  require_infinite_for_every_plant(kGot, kRef, [](const auto& g, const auto& r) { return hwtest::max_err(g, r); });
}

TEST_CASE("row_block_err (mma emulation) and max_rel_diff (rank floats): planted NaN and infinity") {
  // Two rows of HD = 2 out of T = 2: block max |ref| 4 (above 5% of the whole), max error 0.3.
  const std::vector<double> ref = {0.5, -4.0, 2.0, 1.0};
  const std::vector<float> got = {0.6f, -4.3f, 2.2f, 1.0f};
  CHECK(hw_test_mma::row_block_err(got, ref, 2, 2, 0) == Approx(0.3 / 4.0).epsilon(1e-6));
  for (size_t at = 0; at < ref.size(); ++at) {
    INFO("plant at " << at);
    std::vector<float> g = got;
    g[at] = std::nanf("");
    CHECK(std::isinf(hw_test_mma::row_block_err(g, ref, 2, 2, 0)));
    std::vector<double> r = ref;
    r[at] = kNan;
    CHECK(std::isinf(hw_test_mma::row_block_err(got, r, 2, 2, 0)));
    r[at] = kInf;
    CHECK(std::isinf(hw_test_mma::row_block_err(got, r, 2, 2, 0)));
  }
  // max_rel_diff: |a - b| / max(|b|, 1e-3): (0.5 - 0.25) / 0.5 = 0.5 beats 1e-4 / 1e-3 = 0.1.
  const std::vector<float> a = {0.25f, 1e-4f}, b = {0.5f, 0.0f};
  CHECK(hw::dist::test::max_rel_diff(a, b) == Approx(0.5));
  for (size_t at = 0; at < a.size(); ++at)
    for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
      INFO("plant " << bad << " at " << at);
      std::vector<float> x = a, y = b;
      x[at] = bad;
      CHECK(std::isinf(hw::dist::test::max_rel_diff(x, b)));
      y[at] = bad;
      CHECK(std::isinf(hw::dist::test::max_rel_diff(a, y)));
    }
}
