// The A-B-B-A protocol's bookkeeping against hand-worked examples: which plan each process
// times, which processes pair up, and the median of the per-pair ratios.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "headwise/core/error.hpp"
#include "headwise/experiment/update_speed_abba.hpp"

using namespace hw;

TEST_CASE("A-B-B-A: process order, pairs and the median of per-pair ratios by hand", "[abba]") {
  // Two rounds: A B B A A B B A.
  std::vector<int> sides;
  for (int k = 0; k < 8; ++k) sides.push_back(abba_side(k));
  CHECK(sides == std::vector<int>{0, 1, 1, 0, 0, 1, 1, 0});
  // Process means (ms) in that order: A=10 B=8 B=9 A=12 | A=11 B=10 B=7 A=10.
  const std::vector<double> ms = {10, 8, 9, 12, 11, 10, 7, 10};
  const auto pairs = abba_pairs(ms);
  REQUIRE(pairs.size() == 4);
  // Adjacent A and B: (10, 8), (12, 9), (11, 10), (10, 7).
  CHECK(pairs[0] == std::pair<double, double>{10, 8});
  CHECK(pairs[1] == std::pair<double, double>{12, 9});
  CHECK(pairs[2] == std::pair<double, double>{11, 10});
  CHECK(pairs[3] == std::pair<double, double>{10, 7});
  // Ratios 1.25, 1.3333, 1.1, 1.4286; sorted 1.1, 1.25, 1.3333, 1.4286: median (1.25 + 4/3) / 2.
  CHECK(median_pair_ratio(pairs) == Approx((1.25 + 4.0 / 3.0) / 2.0).epsilon(1e-15));
  // An odd count takes the middle one: ratios 2, 0.5, 1.5 -> 1.5.
  CHECK(median_pair_ratio({{2, 1}, {1, 2}, {3, 2}}) == 1.5);
  // A stall of one A process (110 ms instead of 11): the ratios' mean jumps to 3.75, the median
  // only moves to the next middle pair, (4/3 + 10/7) / 2.
  CHECK(median_pair_ratio({{10, 8}, {12, 9}, {110, 10}, {10, 7}}) == Approx((4.0 / 3.0 + 10.0 / 7.0) / 2.0).epsilon(1e-15));
  // Malformed input is an error naming the problem.
  CHECK_THROWS_WITH(abba_pairs({1, 2, 3}), Catch::Contains("whole rounds of 4"));
  CHECK_THROWS_WITH(median_pair_ratio({}), Catch::Contains("no pairs"));
  CHECK_THROWS_WITH(median_pair_ratio({{1, 0}}), Catch::Contains("non-positive"));
}

TEST_CASE("A-B-B-A: a binary that cannot start is one error naming it", "[abba]") {
  AbbaOptions o;
  o.exe = "/nonexistent/headwise";
  o.config = "x.json";
  o.rounds = 1;
  o.work_dir = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/headwise_abba_unit";
  CHECK_THROWS_WITH(run_abba(o, "softmax", "softmax"), Catch::Contains("/nonexistent/headwise"));
}
