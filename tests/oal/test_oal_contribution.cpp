// Contribution statistics: the O(T d) prefix form against the definition (a double loop over
// every causal pair), and the mean over prompts.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "headwise/core/rng.hpp"
#include "headwise/methods/oal/contribution.hpp"

using namespace hw;

TEST_CASE("oal contribution equals the mean over causal pairs of |q_r k_r| / sqrt(d)", "[oal][contribution]") {
  const int T = 23, d = 8;
  const int64_t qs = 13, ks = 11;  // strided rows, as inside fused QKV activations
  std::vector<float> q(size_t(T * qs)), k(size_t(T * ks));
  Rng rng(3);
  for (auto& x : q) x = float(rng.normal() * 2.0);
  for (auto& x : k) x = float(rng.normal());
  std::vector<double> chi(static_cast<size_t>(d));
  oal::prompt_contribution(q.data(), qs, k.data(), ks, T, d, chi.data());
  for (int r = 0; r < d; ++r) {
    long double sum = 0;
    int64_t pairs = 0;
    for (int i = 0; i < T; ++i)
      for (int j = 0; j <= i; ++j) {
        sum += std::fabs((long double)q[size_t(i * qs + r)] * (long double)k[size_t(j * ks + r)]) / std::sqrt((long double)d);
        ++pairs;
      }
    CHECK(chi[size_t(r)] == Approx(double(sum / pairs)).epsilon(1e-12));
  }
}

TEST_CASE("oal contribution: chi is the plain mean over prompts, and mean |q| is per position", "[oal][contribution]") {
  oal::HeadContribution c;
  c.per_prompt = {{1.0, 4.0}, {3.0, 0.0}, {2.0, 2.0}};
  const std::vector<double> chi = c.chi();
  CHECK(chi[0] == Approx(2.0));
  CHECK(chi[1] == Approx(2.0));
  const std::vector<float> x = {1.f, -2.f, -3.f, 4.f};  // 2 rows of 2
  std::vector<double> m(2, 0.0);
  oal::add_mean_abs(x.data(), 2, 2, 2, m.data());
  CHECK(m[0] == Approx(2.0));
  CHECK(m[1] == Approx(3.0));
}
