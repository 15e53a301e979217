// AAH's hierarchical grouping against hand-worked examples (every similarity below is worked
// out in the comments; features use the first two or three of the nine dimensions).
#include <catch2/catch.hpp>
#include <set>

#include "headwise/methods/aah/grouping.hpp"

using namespace hw;
using namespace hw::aah;

namespace {
Vec f(double a, double b, double c = 0) { return {a, b, c, 0, 0, 0, 0, 0, 0}; }
}  // namespace

TEST_CASE("aah: a 4-head layer groups as worked by hand, and its upper level collapses", "[aah][grouping]") {
  // h0 = (1, 0), h1 = (.6, .8), h2 = (.8, .6), h3 = (.96, .28), all of norm 1.
  // Leader at 0.72: h0 opens G0; h1: cos(h1, G0) = .6 -> opens G1; h2: cos with G0 = .8, with G1
  // = .96 -> G1 (centroid (.7, .7)); h3: cos with G0 = .96, with G1 = .868 / .98995 = .877 -> G0.
  // Two groups: no split, no merge.
  const std::vector<Vec> heads = {f(1, 0), f(.6, .8), f(.8, .6), f(.96, .28)};
  const Groups g0 = head_groups(heads, 0.72);
  CHECK(g0 == Groups{{0, 3}, {1, 2}});
  // Upper level: pooled (.98, .14) and (.7, .7), both of norm sqrt(.98): no norm penalty,
  // cos = (.686 + .098) / .98 = .8 >= .76 -> one group; the level collapsed, depth 2.
  const Hierarchy h = build_upper(heads, g0, 0.76, 4);
  REQUIRE(h.depth() == 2);
  CHECK(h.levels[1] == Groups{{0, 1}});
  CHECK(h.heads_of(1, 0) == std::vector<int>{0, 1, 2, 3});
  CHECK(h.heads_of(0, 1) == std::vector<int>{1, 2});
  // Above .8 the two groups stay apart: a level that merges nothing is not added.
  CHECK(build_upper(heads, g0, 0.81, 4).depth() == 1);
  // Depth limit 1 (shallow freeze): level 0 only.
  CHECK(build_upper(heads, g0, 0.76, 1).depth() == 1);
}

TEST_CASE("aah: one group is split around the least similar pair", "[aah][grouping]") {
  // At 0.5 everything joins G0 (h1: .6; h2: .88 / .894 = .984; h3 likewise). Pairwise cosines:
  // (0,1) .6, (0,2) .8, (0,3) .96, (1,2) .96, (1,3) .8, (2,3) .936: least similar (0, 1).
  // h2: cos with h0 .8 < with h1 .96 -> h1's side; h3: .96 > .8 -> h0's side.
  const std::vector<Vec> heads = {f(1, 0), f(.6, .8), f(.8, .6), f(.96, .28)};
  CHECK(head_groups(heads, 0.5) == Groups{{0, 3}, {1, 2}});
  // Two heads alone: split into singletons.
  CHECK(head_groups({f(1, 0), f(1, .01)}, 0.72) == Groups{{0}, {1}});
}

TEST_CASE("aah: groups smaller than 3 merge into their most similar group while more than 2 remain",
          "[aah][grouping]") {
  // h0 = e1, h1 = e2, h2 = e3, h3 = (1, .1, 0): leader gives {0, 3}, {1}, {2} (cos(h3, e1) =
  // .995). Three groups: the first smallest, {1}, merges into the most similar centroid:
  // cos(e2, (1, .05, 0)) = .0499 > cos(e2, e3) = 0 -> {0, 1, 3}. Two groups remain: stop.
  const std::vector<Vec> heads = {f(1, 0, 0), f(0, 1, 0), f(0, 0, 1), f(1, .1, 0)};
  CHECK(head_groups(heads, 0.72) == Groups{{0, 1, 3}, {2}});
  // Pooled (2/3, 1.1/3, 0) and e3 are orthogonal: no upper level.
  CHECK(build_upper(heads, head_groups(heads, 0.72), 0.76, 4).depth() == 1);
}

TEST_CASE("aah: the norm penalty keeps groups of different norms apart", "[aah][grouping]") {
  // Same direction, norms 1 and 1.1: cos 1 - 16 x .1 / 1.1 = -0.4545...
  CHECK(norm_penalised(f(1, 0), f(1.1, 0)) == Approx(1 - 16 * 0.1 / 1.1).epsilon(1e-12));
  CHECK(cosine(f(0, 0), f(1, 0)) == 0);  // a zero vector is similar to nothing
  CHECK(upper_groups({f(1, 0), f(1.1, 0), f(1.0001, 0)}, 0.76) == Groups{{0, 2}, {1}});
}

TEST_CASE("aah: the balanced random split is a seeded partition into two halves", "[aah][grouping]") {
  for (uint64_t seed : {1u, 2u, 3u}) {
    const Groups g = balanced_random_groups(5, seed);
    REQUIRE(g.size() == 2);
    CHECK(g[0].size() + g[1].size() == 5);
    CHECK(std::abs(int(g[0].size()) - int(g[1].size())) <= 1);
    std::set<int> all(g[0].begin(), g[0].end());
    all.insert(g[1].begin(), g[1].end());
    CHECK(all == std::set<int>{0, 1, 2, 3, 4});
    CHECK(balanced_random_groups(5, seed) == g);
  }
  CHECK(balanced_random_groups(1, 7) == Groups{{0}});
}
