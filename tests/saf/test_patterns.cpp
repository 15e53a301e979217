// patterns: row-stochastic causal targets, determinism by seed, Gamma/Dirichlet moments.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/methods/saf/patterns.hpp"
#include "saf_test_util.hpp"

using namespace hw::saf;
using saf_test::Mat;

namespace {

constexpr int T = 8;

HeadStatsAccumulator stats_for(PatternKind kind, int N, double noise, uint64_t seed) {
  HeadStatsAccumulator acc(T, needs_for(kind));
  for (const auto& s : saf_test::make_samples(N, T, noise, seed))
    acc.add_sample(s.probs.data(), s.logits.data());
  return acc;
}

void require_causal_stochastic(const Mat& P) {
  for (int i = 0; i < T; ++i) {
    double row = 0;
    for (int j = 0; j < T; ++j) {
      const double p = P[size_t(i) * T + j];
      if (j > i) {
        REQUIRE(p == 0.0);
      } else {
        REQUIRE(p >= 0.0);
        row += p;
      }
    }
    REQUIRE(row == Approx(1.0).margin(1e-12));
  }
}

}  // namespace

TEST_CASE("patterns: names round-trip and unknown names are errors") {
  for (auto k : {PatternKind::Mean, PatternKind::SharpMean, PatternKind::Gaussian,
                 PatternKind::Dirichlet, PatternKind::StructuredRandom})
    REQUIRE(parse_pattern(pattern_name(k)) == k);
  REQUIRE_THROWS_AS(parse_pattern("median"), hw::Error);
  REQUIRE(needs_for(PatternKind::Gaussian).logit_variance);
  REQUIRE(needs_for(PatternKind::Dirichlet).cell_variance);
  REQUIRE_FALSE(needs_for(PatternKind::Mean).logit_mean);
}

TEST_CASE("patterns: sharp mean is the causal softmax of the mean logits") {
  const int N = 6;
  const auto samples = saf_test::make_samples(N, T, 0.7, 21);
  HeadStatsAccumulator acc(T, needs_for(PatternKind::SharpMean));
  Mat mean_logits(size_t(T) * T, 0.0);
  for (const auto& s : samples) {
    acc.add_sample(s.probs.data(), s.logits.data());
    for (size_t c = 0; c < mean_logits.size(); ++c) mean_logits[c] += s.logits[c] / N;
  }
  Mat P(size_t(T) * T);
  sharp_mean_pattern(acc, P.data());
  require_causal_stochastic(P);
  const Mat ref = saf_test::naive_causal_softmax(mean_logits, T);
  for (size_t c = 0; c < P.size(); ++c) REQUIRE(P[c] == Approx(ref[c]).margin(1e-13));
  // Sharper than the post-softmax mean: lower mean row entropy.
  Mat M(size_t(T) * T);
  mean_pattern(acc, M.data());
  require_causal_stochastic(M);
  auto entropy = [](const Mat& X) {
    double h = 0;
    for (double p : X)
      if (p > 0) h -= p * std::log(p);
    return h;
  };
  REQUIRE(entropy(P) < entropy(M));
}

TEST_CASE("patterns: gaussian is seeded, and equals sharp mean without logit spread") {
  const auto acc = stats_for(PatternKind::Gaussian, 6, 0.7, 22);
  Mat a(size_t(T) * T), b(size_t(T) * T), c(size_t(T) * T);
  hw::Rng r1(5), r2(5), r3(6);
  gaussian_pattern(acc, r1, a.data());
  gaussian_pattern(acc, r2, b.data());
  gaussian_pattern(acc, r3, c.data());
  require_causal_stochastic(a);
  REQUIRE(a == b);
  REQUIRE(a != c);
  // Identical samples: the logit std is 0, so the draw changes nothing.
  const auto one = saf_test::make_samples(1, T, 0.7, 23);
  HeadStatsAccumulator same(T, needs_for(PatternKind::Gaussian));
  for (int n = 0; n < 3; ++n) same.add_sample(one[0].probs.data(), one[0].logits.data());
  Mat g(size_t(T) * T);
  gaussian_pattern(same, r1, g.data());
  const Mat ref = saf_test::naive_causal_softmax(one[0].logits, T);
  for (size_t k = 0; k < g.size(); ++k) REQUIRE(g[k] == Approx(ref[k]).margin(1e-13));
}

TEST_CASE("patterns: gaussian equals a direct draw on the logit mean and unbiased std") {
  const int N = 5;
  const auto samples = saf_test::make_samples(N, T, 0.7, 27);
  HeadStatsAccumulator acc(T, needs_for(PatternKind::Gaussian));
  for (const auto& s : samples) acc.add_sample(s.probs.data(), s.logits.data());
  // Per causal cell: mean and unbiased std of the samples' logits, then one N(0, 1) per cell
  // in row-major order from the same stream, then the textbook causal softmax.
  hw::Rng draw(41);
  Mat z(size_t(T) * T, 0.0);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j <= i; ++j) {
      const size_t c = size_t(i) * T + j;
      long double m = 0, q = 0;
      for (const auto& s : samples) m += s.logits[c];
      m /= N;
      for (const auto& s : samples) q += (s.logits[c] - m) * (s.logits[c] - m);
      const double sd = double(std::sqrt(q / (N - 1)));
      z[c] = double(m) + sd * draw.normal();
    }
  const Mat ref = saf_test::naive_causal_softmax(z, T);
  Mat g(size_t(T) * T);
  hw::Rng rng(41);
  gaussian_pattern(acc, rng, g.data());
  for (size_t c = 0; c < g.size(); ++c) REQUIRE(g[c] == Approx(ref[c]).margin(1e-12));
  // The draw is not the sharp mean (the spread really enters).
  Mat sharp(size_t(T) * T);
  HeadStatsAccumulator acc2(T, needs_for(PatternKind::SharpMean));
  for (const auto& s : samples) acc2.add_sample(s.probs.data(), s.logits.data());
  sharp_mean_pattern(acc2, sharp.data());
  double diff = 0;
  for (size_t c = 0; c < g.size(); ++c) diff = std::max(diff, std::abs(g[c] - sharp[c]));
  REQUIRE(diff > 1e-3);
}

TEST_CASE("patterns: Gamma draws have the right mean and variance") {
  for (double shape : {0.3, 1.0, 2.5, 10.0}) {
    hw::Rng rng(uint64_t(shape * 100));
    const int n = 40000;
    double s = 0, s2 = 0;
    for (int t = 0; t < n; ++t) {
      const double g = std::exp(log_gamma_draw(shape, rng));
      s += g;
      s2 += g * g;
    }
    const double mean = s / n, var = s2 / n - mean * mean;
    // Gamma(a, 1): mean a, variance a. Tolerances are about 5 standard errors.
    REQUIRE(mean == Approx(shape).margin(5 * std::sqrt(shape / n)));
    REQUIRE(var == Approx(shape).epsilon(0.06));
  }
  hw::Rng rng(1);
  for (int t = 0; t < 100; ++t) REQUIRE(std::isfinite(log_gamma_draw(1e-6, rng)));
  REQUIRE_THROWS_AS(log_gamma_draw(0.0, rng), hw::Error);
}

TEST_CASE("patterns: Dirichlet rows are stochastic, seeded, and average to the mean") {
  const auto acc = stats_for(PatternKind::Dirichlet, 12, 0.9, 24);
  Mat M(size_t(T) * T), V(size_t(T) * T);
  acc.mean_matrix(M.data());
  acc.cell_variance_matrix(V.data());
  Mat a(size_t(T) * T), b(size_t(T) * T);
  hw::Rng r1(7), r2(7);
  DirichletInfo info;
  dirichlet_pattern(acc, r1, a.data(), {}, &info);
  dirichlet_pattern(acc, r2, b.data());
  require_causal_stochastic(a);
  REQUIRE(a == b);
  REQUIRE(info.deterministic[0] == 1);  // one key
  REQUIRE(info.deterministic[T - 1] == 0);
  // Moment fit: c = (1 - ||mu||^2) / sum v - 1 for the last row, computed here.
  {
    const int i = T - 1;
    double sq = 0, vs = 0, ms = 0;
    for (int j = 0; j <= i; ++j) ms += M[size_t(i) * T + j];
    for (int j = 0; j <= i; ++j) {
      const double mu = (M[size_t(i) * T + j] + 1e-12) / (ms + 1e-12 * (i + 1));
      sq += mu * mu;
      vs += V[size_t(i) * T + j];
    }
    REQUIRE(info.concentration[i] == Approx((1 - sq) / vs - 1).epsilon(1e-9));
  }
  // Many draws: the average approaches the mean and the pooled variance matches sum v.
  const int draws = 3000;
  Mat avg(size_t(T) * T, 0.0), sq(size_t(T) * T, 0.0), P(size_t(T) * T);
  hw::Rng rng(8);
  for (int d = 0; d < draws; ++d) {
    dirichlet_pattern(M.data(), V.data(), T, rng, P.data());
    for (size_t c = 0; c < P.size(); ++c) {
      avg[c] += P[c] / draws;
      sq[c] += P[c] * P[c] / draws;
    }
  }
  for (int i = 1; i < T; ++i) {
    double var_draws = 0, var_target = 0;
    for (int j = 0; j <= i; ++j) {
      const size_t c = size_t(i) * T + j;
      // Mean of each cell, within 5 standard errors of the fitted per-cell variance.
      REQUIRE(avg[c] == Approx(M[c]).margin(5 * std::sqrt(V[c] / draws) + 1e-6));
      var_draws += sq[c] - avg[c] * avg[c];
      var_target += V[c];
    }
    REQUIRE(var_draws == Approx(var_target).epsilon(0.15));
  }
}

TEST_CASE("patterns: Dirichlet keeps the mean on deterministic rows") {
  const auto one = saf_test::make_samples(1, T, 0.7, 25);
  HeadStatsAccumulator same(T, needs_for(PatternKind::Dirichlet));
  for (int n = 0; n < 3; ++n) same.add_sample(one[0].probs.data());
  Mat P(size_t(T) * T);
  hw::Rng rng(1);
  DirichletInfo info;
  dirichlet_pattern(same, rng, P.data(), {}, &info);
  for (int i = 0; i < T; ++i) REQUIRE(info.deterministic[i] == 1);
  for (size_t c = 0; c < P.size(); ++c) REQUIRE(P[c] == Approx(one[0].probs[c]).margin(1e-11));
}

TEST_CASE("patterns: structured random draws alpha then rho from N(0, 1)") {
  const int n = 4000;
  std::vector<double> alpha, rho, alpha2, rho2;
  hw::Rng r1(31), r2(31);
  structured_random(n, r1, alpha, rho);
  structured_random(n, r2, alpha2, rho2);
  REQUIRE(alpha == alpha2);
  REQUIRE(rho == rho2);
  hw::Rng ref(31);  // alpha is the first n normals of the stream, rho the next n
  for (int t = 0; t < n; ++t) REQUIRE(alpha[size_t(t)] == ref.normal());
  for (int t = 0; t < n; ++t) REQUIRE(rho[size_t(t)] == ref.normal());
  double s = 0, s2 = 0;
  for (double x : rho) {
    s += x;
    s2 += x * x;
  }
  REQUIRE(s / n == Approx(0.0).margin(0.08));
  REQUIRE(s2 / n == Approx(1.0).margin(0.1));
  REQUIRE(head_rng(5, 0).next_u64() != head_rng(5, 1).next_u64());
  // head_rng(seed, flat) is Rng(seed ^ (0xD1B54A32D192ED03 * (flat + 1))), as documented.
  for (int flat : {0, 3, 17}) {
    hw::Rng direct(5ull ^ (0xD1B54A32D192ED03ull * (uint64_t(flat) + 1)));
    hw::Rng derived = head_rng(5, flat);
    for (int t = 0; t < 4; ++t) REQUIRE(derived.next_u64() == direct.next_u64());
  }
}
