// MicroStepSum: the micro-step gradients of an update add up in the documented pairwise tree,
// checked against a recursive definition of that tree and a hand-worked case where the tree and
// the left-to-right sum give different floats.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/train/micro_step_sum.hpp"

using namespace hw;

namespace {

// The tree by definition: split n micro-steps at the largest power of two below n (n/2 when n
// is one), sum each part the same way, add the parts.
float tree_sum(const std::vector<float>& g, size_t lo, size_t n) {
  if (n == 1) return g[lo];
  size_t p = 1;
  while (2 * p < n) p *= 2;
  return tree_sum(g, lo, p) + tree_sum(g, lo + p, n - p);
}

// Feeds micro-step values per element through MicroStepSum as the trainer does.
std::vector<float> run(const std::vector<std::vector<float>>& per_micro) {
  const int64_t A = int64_t(per_micro.size()), n = int64_t(per_micro[0].size());
  Arena grads("grads");
  grads.declare("g", {n});
  grads.allocate();
  MicroStepSum sum(cpu_backend<float>(), grads, A);
  float* g = grads.get("g").as<float>();
  for (int64_t m = 0; m < A; ++m) {
    for (int64_t i = 0; i < n; ++i) g[i] += per_micro[size_t(m)][size_t(i)];  // grads start zeroed
    if (m + 1 < A) {
      sum.park(grads, m);
      for (int64_t i = 0; i < n; ++i) REQUIRE(g[i] == 0.0f);
    }
  }
  // The last micro-step folds in two ranges, as the per-layer hook does.
  sum.finish(g, n / 2, n);
  sum.finish(g, 0, n / 2);
  return std::vector<float>(g, g + n);
}

}  // namespace

TEST_CASE("micro-step gradients add up in the pairwise tree", "[train][accum]") {
  for (int64_t A : {1, 2, 3, 4, 5, 6, 7, 8, 13, 16}) {
    INFO("micro-steps " << A);
    Rng rng(static_cast<uint64_t>(A));
    std::vector<std::vector<float>> g(size_t(A), std::vector<float>(37));
    for (auto& row : g)
      for (auto& x : row) x = float(rng.normal() * std::ldexp(1.0, int(rng.below(40)) - 20));
    const auto got = run(g);
    for (size_t i = 0; i < got.size(); ++i) {
      std::vector<float> column;
      for (const auto& row : g) column.push_back(row[i]);
      CHECK(got[i] == tree_sum(column, 0, column.size()));  // bit for bit
    }
    Arena grads("grads");
    grads.declare("g", {37});
    grads.allocate();
    CHECK(MicroStepSum(cpu_backend<float>(), grads, A).levels() == int(std::ceil(std::log2(double(A)))));
  }
}

TEST_CASE("the tree is not the left-to-right sum: a hand-worked case", "[train][accum]") {
  // 1 + 2^-24 rounds to 1 (a tie, to even), so left to right 1, then 1, then 1; the tree adds
  // the small ones first: (1 + 2^-24) + (2^-24 + 2^-24) = 1 + 2^-23, exactly.
  const float e = std::ldexp(1.0f, -24);
  const auto got = run({{1.0f}, {e}, {e}, {e}});
  CHECK(((1.0f + e) + e) + e == 1.0f);
  CHECK(got[0] == 1.0f + 2 * e);
}

TEST_CASE("two halves of the tree are the trees of two ranks", "[train][accum]") {
  // Rank 0 sums micro-steps 0..3, rank 1 4..7; the ranks add s0 + s1: the 8-step tree exactly.
  Rng rng(9);
  std::vector<std::vector<float>> g(8, std::vector<float>(64));
  for (auto& row : g)
    for (auto& x : row) x = float(rng.normal());
  const auto all = run(g);
  const auto r0 = run({g.begin(), g.begin() + 4}), r1 = run({g.begin() + 4, g.end()});
  for (size_t i = 0; i < all.size(); ++i) CHECK(all[i] == r0[i] + r1[i]);
}
