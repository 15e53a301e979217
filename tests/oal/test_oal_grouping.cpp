// Grouping on hand-made contribution vectors whose cuts are known.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/methods/oal/grouping.hpp"

using namespace hw;

namespace {

// d = 16 dims in a scrambled order: a bulk of 12 (1.00 .. 1.11, adjacent ratios ~1.01), then
// 2.0, 2.1 (cut at k = 12: ratio 2.0 / 1.11 = 1.8), then 5.0, 5.2 (cut at k = 14: 5.0 / 2.1 =
// 2.4). Tail 0.25: candidates k = 12..15; k = 13 (1.05) and k = 15 (1.04) are no jumps.
const std::vector<int> kPerm = {5, 12, 0, 9, 14, 3, 7, 1, 15, 10, 2, 6, 13, 4, 11, 8};
std::vector<double> hand_chi() {
  std::vector<double> sorted;
  for (int i = 0; i < 12; ++i) sorted.push_back(1.0 + 0.01 * i);
  for (double v : {2.0, 2.1, 5.0, 5.2}) sorted.push_back(v);
  std::vector<double> chi(16);
  for (int i = 0; i < 16; ++i) chi[size_t(kPerm[size_t(i)])] = sorted[size_t(i)];
  return chi;
}

}  // namespace

TEST_CASE("oal bootstrap grouping finds the known cuts of a hand-made vector", "[oal][grouping]") {
  const std::vector<double> chi = hand_chi();
  const std::vector<std::vector<double>> prompts(10, chi);  // identical prompts: support 1 where the ratio holds
  oal::GroupingOptions opt;
  opt.bootstrap = 200;
  const oal::Grouping g = oal::bootstrap_grouping(prompts, opt, 7);
  CHECK(g.cuts == std::vector<int>{12, 14});
  REQUIRE(g.n_groups == 3);
  CHECK(g.sizes() == std::vector<int>{12, 2, 2});
  // Group 1 is the bulk; the top two dims (perm[14], perm[15]) are group 3.
  for (int i = 0; i < 16; ++i) {
    const int expect = i < 12 ? 1 : i < 14 ? 2 : 3;
    CHECK(g.groups[size_t(kPerm[size_t(i)])] == expect);
  }
  // Candidates k = 12..15 with their ratios; only 12 and 14 natural.
  REQUIRE(g.candidates.size() == 4);
  CHECK(g.candidates[0]["k"] == 12);
  CHECK(g.candidates[0]["ratio"].get<double>() == Approx(2.0 / 1.11));
  CHECK(g.candidates[0]["support"].get<double>() == 1.0);
  CHECK(g.candidates[1]["natural"] == false);
  CHECK(g.candidates[2]["natural"] == true);
  CHECK(g.candidates[3]["natural"] == false);
}

TEST_CASE("oal bootstrap grouping: an unstable jump has low support and min_groups fills by priority", "[oal][grouping]") {
  // Bulk of 7 at 1.0 .. 1.06 and one dim that is 3.0 in half the prompts and 0.4 in the others
  // (mean 1.7: ratio 1.6 >= 1.5, but in a resample of 10 prompts its mean reaches 1.5 only
  // when >= 5 of the 10 are high: support ~0.62 < 0.9).
  std::vector<std::vector<double>> prompts;
  for (int p = 0; p < 10; ++p) {
    std::vector<double> c;
    for (int i = 0; i < 7; ++i) c.push_back(1.0 + 0.01 * i);
    c.push_back(p % 2 == 0 ? 3.0 : 0.4);
    prompts.push_back(c);
  }
  oal::GroupingOptions opt;
  opt.bootstrap = 1000;
  const oal::Grouping g = oal::bootstrap_grouping(prompts, opt, 11);
  // Tail candidates of d = 8: m = 2, k = 6, 7. k = 7 is the jump (not natural: support < 0.9).
  REQUIRE(g.candidates.size() == 2);
  const double support = g.candidates[1]["support"].get<double>();
  CHECK(support > 0.5);
  CHECK(support < 0.75);
  CHECK(g.candidates[1]["natural"] == false);
  // Still two groups (min_groups), cut by priority: the higher support wins (k = 7).
  CHECK(g.cuts == std::vector<int>{7});
  CHECK(g.sizes() == std::vector<int>{7, 1});
  // Deterministic for a seed.
  const oal::Grouping again = oal::bootstrap_grouping(prompts, opt, 11);
  CHECK(again.candidates == g.candidates);
  CHECK(again.groups == g.groups);
}

TEST_CASE("oal bootstrap grouping keeps at most max_groups groups, by priority", "[oal][grouping]") {
  // Every adjacent ratio in the tail is 2: all 6 tail cuts of d = 24 (tail 0.25) are natural and
  // tie on support and ratio, so the lowest cut indices win.
  std::vector<double> chi;
  for (int i = 0; i < 18; ++i) chi.push_back(1.0 + 0.001 * i);
  double v = 2.0 * chi.back();
  for (int i = 0; i < 6; ++i, v *= 2.0) chi.push_back(v);
  oal::GroupingOptions opt;
  opt.bootstrap = 50;
  const oal::Grouping g = oal::bootstrap_grouping({chi, chi}, opt, 1);
  CHECK(g.n_groups == 5);
  CHECK(g.cuts == std::vector<int>{18, 19, 20, 21});
  CHECK(g.sizes() == std::vector<int>{18, 1, 1, 1, 3});
}

TEST_CASE("oal fixed:G takes the G-1 largest adjacent ratios and random keeps the sizes", "[oal][grouping]") {
  const std::vector<double> chi = hand_chi();
  const oal::Grouping f2 = oal::fixed_grouping(chi, 2, 0.25);
  CHECK(f2.cuts == std::vector<int>{14});  // 2.38 beats 1.80
  const oal::Grouping f3 = oal::fixed_grouping(chi, 3, 0.25);
  CHECK(f3.cuts == std::vector<int>{12, 14});
  const oal::Grouping f1 = oal::fixed_grouping(chi, 1, 0.25);
  CHECK(f1.n_groups == 1);
  CHECK(std::all_of(f1.groups.begin(), f1.groups.end(), [](int32_t g) { return g == 1; }));
  // G - 1 = 6 > the 4 tail candidates: every cut position competes.
  const oal::Grouping f7 = oal::fixed_grouping(chi, 7, 0.25);
  CHECK(f7.n_groups == 7);
  CHECK_THROWS_AS(oal::fixed_grouping(chi, 17, 0.25), Error);

  const oal::Grouping r1 = oal::random_grouping(f3, 5), r2 = oal::random_grouping(f3, 5), r3 = oal::random_grouping(f3, 6);
  CHECK(r1.groups == r2.groups);
  CHECK(r1.groups != r3.groups);
  CHECK(r1.sizes() == f3.sizes());
}

TEST_CASE("oal grouping specs: G outside 1..head_dim is an error naming the key", "[oal][grouping]") {
  CHECK(oal::parse_grouping("fixed:4", 16, "method.grouping").n_groups == 4);
  CHECK(oal::parse_grouping("random", 16, "k").kind == oal::GroupingKind::Random);
  CHECK_THROWS_WITH(oal::parse_grouping("fixed:0", 16, "method.grouping"), Catch::Contains("method.grouping") &&
                                                                                Catch::Contains("1..head_dim"));
  CHECK_THROWS_WITH(oal::parse_grouping("fixed:17", 16, "method.grouping"), Catch::Contains("1..head_dim (16)"));
  CHECK_THROWS_WITH(oal::parse_grouping("fixed:x", 16, "method.grouping"), Catch::Contains("integer"));
  CHECK_THROWS_WITH(oal::parse_grouping("kmeans", 16, "method.grouping"), Catch::Contains("bootstrap, fixed:G or random"));
}
