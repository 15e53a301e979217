// AAH's seeded policy: the MLP against hand values, the 29 controller inputs against a hand
// computation, determinism for a seed, and the parent constraint at every level.
#include <catch2/catch.hpp>
#include <cmath>

#include "headwise/core/rng.hpp"
#include "headwise/methods/aah/policy.hpp"

using namespace hw;
using namespace hw::aah;

namespace {
Vec f(double a, double b) { return {a, b, 0, 0, 0, 0, 0, 0, 0}; }

// Parent of each node of level l (< top) in h.
std::vector<int> parents(const Hierarchy& h, int l) {
  std::vector<int> p(h.levels[size_t(l)].size(), -1);
  for (int q = 0; q < int(h.levels[size_t(l + 1)].size()); ++q)
    for (int c : h.levels[size_t(l + 1)][size_t(q)]) p[size_t(c)] = q;
  return p;
}
}  // namespace

TEST_CASE("aah: the MLP is x -> W2 gelu(W1 x + b1) + b2 with the exact GELU", "[aah][policy]") {
  // Phi(1) = 0.8413447460685429: gelu(1) = 0.8413447460685429, gelu(-1) = -0.1586552539314571.
  CHECK(gelu(1.0) == Approx(0.8413447460685429).epsilon(1e-15));
  CHECK(gelu(-1.0) == Approx(-0.1586552539314571).epsilon(1e-14));
  Mlp m;
  m.in = 2, m.hidden = 2, m.out = 1;
  m.w1 = {1, 0, 0, 1};
  m.b1 = {0, 0};
  m.w2 = {1, 1};
  m.b2 = {0.5};
  CHECK(m.forward({1, -1})[0] == Approx(0.8413447460685429 - 0.1586552539314571 + 0.5).epsilon(1e-14));
  // Seeded init: PyTorch's nn.Linear bounds, the same for a seed, different across seeds.
  const Mlp a = Mlp::seeded(29, 16, 4, 11), b = Mlp::seeded(29, 16, 4, 11), c = Mlp::seeded(29, 16, 4, 12);
  CHECK(a.w1 == b.w1);
  CHECK(a.b2 == b.b2);
  CHECK(a.w1 != c.w1);
  for (double w : a.w1) CHECK(std::fabs(w) <= 1 / std::sqrt(29.0));
  for (double w : a.w2) CHECK(std::fabs(w) <= 1 / std::sqrt(16.0));
}

TEST_CASE("aah: the controller's 29 inputs for the hand-worked hierarchy", "[aah][policy]") {
  // Level 0 {0, 3} -> (.98, .14), {1, 2} -> (.7, .7); level 1 root (.84, .42).
  const std::vector<Vec> heads = {f(1, 0), f(.6, .8), f(.8, .6), f(.96, .28)};
  Hierarchy h;
  h.levels = {Groups{{0, 3}, {1, 2}}, Groups{{0, 1}}};
  const auto in = Policy::controller_inputs(heads, h);
  REQUIRE(in.size() == 2);
  REQUIRE(in[0].size() == 2);
  const Vec& u = in[0][0];
  REQUIRE(u.size() == 29);
  const double expected[29] = {.98, .14, 0, 0, 0, 0, 0, 0, 0,   // features
                               0,                               // level
                               .14, -.28, 0, 0, 0, 0, 0, 0, 0,  // minus the parent (.84, .42)
                               .14, -.28, 0, 0, 0, 0, 0, 0, 0,  // minus the level mean (.84, .42)
                               1};                              // norm over the level's mean norm
  for (int i = 0; i < 29; ++i) {
    INFO("input " << i);
    CHECK(u[size_t(i)] == Approx(expected[i]).margin(1e-12));
  }
  const Vec& root = in[1][0];
  CHECK(root[0] == Approx(.84));
  CHECK(root[9] == 1);                       // level 1
  for (int i = 10; i < 28; ++i) CHECK(root[size_t(i)] == Approx(0).margin(1e-15));  // no parent; alone
  CHECK(root[28] == 1);
}

TEST_CASE("aah: two siblings are scored jointly: controller logits plus their half of the pair scorer", "[aah][policy]") {
  const std::vector<Vec> heads = {f(1, 0), f(.6, .8), f(.8, .6), f(.96, .28)};
  Hierarchy h;
  h.levels = {Groups{{0, 3}, {1, 2}}};
  for (uint64_t seed : {0u, 1u, 2u, 3u, 4u}) {
    const Policy p(seed, 4);
    const auto in = Policy::controller_inputs(heads, h);
    // By hand from the two MLPs: x = [u_a, u_b, u_a - u_b].
    Vec x(in[0][0]);
    x.insert(x.end(), in[0][1].begin(), in[0][1].end());
    for (int d = 0; d < 29; ++d) x.push_back(in[0][0][size_t(d)] - in[0][1][size_t(d)]);
    const Vec pair = p.joint().forward(x);
    int expect[2];
    for (int a = 0; a < 2; ++a) {
      const Vec c = p.controller().forward(in[0][size_t(a)]);
      int best = 0;
      for (int k = 1; k < 4; ++k)
        if (c[size_t(k)] + pair[size_t(4 * a + k)] > c[size_t(best)] + pair[size_t(4 * a + best)]) best = k;
      expect[a] = best;
    }
    const Selection s = p.select(heads, h, /*joint=*/true, /*parent_constraint=*/true);
    CHECK(s.node_index[0] == std::vector<int>{expect[0], expect[1]});
    CHECK(s.head_index == std::vector<int>{expect[0], expect[1], expect[1], expect[0]});
    // Independent scoring: the controller's argmax alone.
    const Selection ind = p.select(heads, h, false, true);
    for (int a = 0; a < 2; ++a) {
      const Vec c = p.controller().forward(in[0][size_t(a)]);
      CHECK(ind.node_index[0][size_t(a)] == int(std::max_element(c.begin(), c.end()) - c.begin()));
    }
  }
}

TEST_CASE("aah: the parent constraint holds at every level, and selection is deterministic", "[aah][policy]") {
  int violations_without = 0;
  for (uint64_t trial = 0; trial < 60; ++trial) {
    Rng rng(100 + trial);
    std::vector<Vec> heads(12, Vec(9));
    for (auto& v : heads)
      for (double& x : v) x = rng.normal() * (1 + 0.3 * rng.uniform());
    // A fixed 3-level tree over 12 heads: 6 pairs, 3 pairs of pairs, one root.
    Hierarchy h;
    h.levels = {Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}}, Groups{{0, 1}, {2, 3}, {4, 5}},
                Groups{{0, 1, 2}}};
    const Policy p(trial, 4);
    const Selection s = p.select(heads, h, true, true);
    CHECK(s.node_index == Policy(trial, 4).select(heads, h, true, true).node_index);
    for (int l = 0; l + 1 < h.depth(); ++l) {
      const auto par = parents(h, l);
      for (size_t c = 0; c < par.size(); ++c) CHECK(s.node_index[size_t(l)][c] <= s.node_index[size_t(l + 1)][size_t(par[c])]);
    }
    for (int head = 0; head < 12; ++head) CHECK(s.head_index[size_t(head)] == s.node_index[0][size_t(head / 2)]);
    const Selection free = p.select(heads, h, true, false);
    for (int l = 0; l + 1 < h.depth(); ++l) {
      const auto par = parents(h, l);
      for (size_t c = 0; c < par.size(); ++c)
        violations_without += free.node_index[size_t(l)][c] > free.node_index[size_t(l + 1)][size_t(par[c])];
    }
  }
  CHECK(violations_without > 0);  // the constraint binds: without it children pick larger windows
}
