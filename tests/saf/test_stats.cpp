// stats: variance score identities, Chan merge vs two-pass moments, the single-pass KL score,
// and the squared-error optimality of the post-softmax mean.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/methods/saf/stats.hpp"
#include "saf_test_util.hpp"

using hw::saf::HeadStatsAccumulator;
using hw::saf::StatsNeeds;
using saf_test::Mat;

namespace {

constexpr int T = 9;
constexpr int N = 23;

StatsNeeds all_needs() {
  StatsNeeds n;
  n.cell_variance = n.logit_mean = n.logit_variance = n.kl = true;
  return n;
}

// Two-pass per-cell mean and unbiased variance over the given matrices, in long double.
void two_pass(const std::vector<const Mat*>& xs, Mat& mean, Mat& var) {
  const size_t cells = xs[0]->size();
  mean.assign(cells, 0.0);
  var.assign(cells, 0.0);
  for (size_t c = 0; c < cells; ++c) {
    long double s = 0;
    for (const Mat* x : xs) s += (*x)[c];
    const long double m = s / xs.size();
    long double q = 0;
    for (const Mat* x : xs) q += ((*x)[c] - m) * ((*x)[c] - m);
    mean[c] = double(m);
    var[c] = double(q / (xs.size() - 1));
  }
}

std::vector<const Mat*> probs_of(const std::vector<saf_test::Sample>& s) {
  std::vector<const Mat*> v;
  for (const auto& x : s) v.push_back(&x.probs);
  return v;
}
std::vector<const Mat*> logits_of(const std::vector<saf_test::Sample>& s) {
  std::vector<const Mat*> v;
  for (const auto& x : s) v.push_back(&x.logits);
  return v;
}

Mat dense(const HeadStatsAccumulator& a, void (HeadStatsAccumulator::*f)(double*) const) {
  Mat m(size_t(a.T()) * a.T());
  (a.*f)(m.data());
  return m;
}

}  // namespace

TEST_CASE("stats: variance score equals Eq. (1) and the mean per-cell variance") {
  const auto samples = saf_test::make_samples(N, T, 0.8, 5);
  HeadStatsAccumulator acc(T, all_needs());
  for (const auto& s : samples) acc.add_sample(s.probs.data(), s.logits.data());

  Mat mean, var;
  two_pass(probs_of(samples), mean, var);
  // Eq. (1) by its definition: sum of squared Frobenius distances to the mean.
  long double frob = 0;
  for (const auto& s : samples)
    for (size_t c = 0; c < mean.size(); ++c) frob += (s.probs[c] - mean[c]) * (s.probs[c] - mean[c]);
  const double eq1 = double(frob / ((N - 1) * (long double)T * T));
  // The identity: mean over all T^2 cells of the per-cell unbiased variance.
  long double cellmean = 0;
  for (double v : var) cellmean += v;
  cellmean /= (long double)T * T;
  REQUIRE(double(cellmean) == Approx(eq1).epsilon(1e-12));

  REQUIRE(eq1 > 1e-4);  // the samples really vary
  REQUIRE(acc.variance_score() == Approx(eq1).epsilon(1e-10));
  REQUIRE(acc.variance_score_from_cells() == Approx(eq1).epsilon(1e-10));
  std::vector<const double*> ptrs;
  for (const auto& s : samples) ptrs.push_back(s.probs.data());
  REQUIRE(hw::saf::variance_score_eq1(ptrs, T) == Approx(eq1).epsilon(1e-12));
}

TEST_CASE("stats: variance and KL scores of a 2 x 2 example computed by hand") {
  // Two samples, T = 2: row 0 is always [1, 0]; row 1 is [0.2, 0.8] and [0.6, 0.4].
  const std::vector<double> a = {1, 0, 0.2, 0.8}, b = {1, 0, 0.6, 0.4};
  StatsNeeds needs;
  needs.kl = true;
  HeadStatsAccumulator acc(2, needs);
  acc.add_sample(a.data());
  acc.add_sample(b.data());
  // Mean row 1 = [0.4, 0.6]; each sample is 0.2 away in both cells: squared Frobenius distance
  // 0.08 per sample, 0.16 in all, over (N - 1) T^2 = 4.
  REQUIRE(acc.variance_score() == Approx(0.04).epsilon(1e-12));
  // KL(row || mean row), mean over 2 samples x 2 rows (row 0 contributes 0).
  const double kl_a = 0.2 * std::log(0.2 / 0.4) + 0.8 * std::log(0.8 / 0.6);
  const double kl_b = 0.6 * std::log(0.6 / 0.4) + 0.4 * std::log(0.4 / 0.6);
  REQUIRE(acc.kl_score() == Approx((kl_a + kl_b) / 4).epsilon(1e-9));
  REQUIRE(acc.kl_score() == Approx(0.0431523).epsilon(1e-6));
}

TEST_CASE("stats: Chan-merged moments equal two-pass moments on the concatenation") {
  const auto samples = saf_test::make_samples(N, T, 0.8, 6);
  // Three parts fed differently: one by one, as a stacked batch, one by one again.
  HeadStatsAccumulator a(T, all_needs()), b(T, all_needs()), c(T, all_needs());
  for (int n = 0; n < 7; ++n) a.add_sample(samples[n].probs.data(), samples[n].logits.data());
  Mat bp, bl;
  for (int n = 7; n < 15; ++n) {
    bp.insert(bp.end(), samples[n].probs.begin(), samples[n].probs.end());
    bl.insert(bl.end(), samples[n].logits.begin(), samples[n].logits.end());
  }
  b.add_batch(bp.data(), bl.data(), 8);
  for (int n = 15; n < N; ++n) c.add_sample(samples[n].probs.data(), samples[n].logits.data());
  a.merge(b);
  // c travels as a packed buffer, as between MPI ranks.
  std::vector<double> buf(size_t(c.packed_size()));
  c.pack(buf.data());
  HeadStatsAccumulator c2(T, all_needs());
  c2.unpack(buf.data(), int64_t(buf.size()));
  a.merge(c2);
  REQUIRE(a.count() == N);

  Mat pm, pv, lm, lv;
  two_pass(probs_of(samples), pm, pv);
  two_pass(logits_of(samples), lm, lv);
  const Mat am = dense(a, &HeadStatsAccumulator::mean_matrix);
  const Mat av = dense(a, &HeadStatsAccumulator::cell_variance_matrix);
  const Mat alm = dense(a, &HeadStatsAccumulator::logit_mean_matrix);
  const Mat als = dense(a, &HeadStatsAccumulator::logit_std_matrix);
  long double m2 = 0;
  for (size_t k = 0; k < pm.size(); ++k) {
    REQUIRE(am[k] == Approx(pm[k]).margin(1e-14));
    REQUIRE(av[k] == Approx(pv[k]).margin(1e-14));
    REQUIRE(alm[k] == Approx(lm[k]).margin(1e-13));
    REQUIRE(als[k] == Approx(std::sqrt(lv[k])).margin(1e-12));
    m2 += pv[k] * (N - 1);
  }
  REQUIRE(a.m2_total() == Approx(double(m2)).epsilon(1e-11));
  // Upper triangle is exactly zero.
  REQUIRE(am[1] == 0.0);
  REQUIRE(av[size_t(T - 1)] == 0.0);
}

TEST_CASE("stats: single-pass KL score equals the two-pass mean row KL") {
  const auto samples = saf_test::make_samples(N, T, 1.2, 7);
  StatsNeeds needs;
  needs.kl = true;
  HeadStatsAccumulator acc(T, needs);
  for (const auto& s : samples) acc.add_sample(s.probs.data());
  Mat mean, var;
  two_pass(probs_of(samples), mean, var);
  long double kl = 0;  // (1 / (N T)) sum_n sum_i KL(A_n[i] || mean[i])
  for (const auto& s : samples)
    for (int i = 0; i < T; ++i)
      for (int j = 0; j <= i; ++j) {
        const double p = s.probs[size_t(i) * T + j], q = mean[size_t(i) * T + j];
        kl += p * std::log((long double)p / q);
      }
  kl /= (long double)N * T;
  REQUIRE(double(kl) > 1e-3);
  REQUIRE(acc.kl_score() == Approx(double(kl)).epsilon(1e-9));

  // Identical samples: KL 0 exactly after the clamp, variance 0.
  HeadStatsAccumulator same(T, needs);
  for (int n = 0; n < 4; ++n) same.add_sample(samples[0].probs.data());
  REQUIRE(same.kl_score() == Approx(0.0).margin(1e-14));
  REQUIRE(same.kl_score() >= 0.0);
  REQUIRE(same.variance_score() == Approx(0.0).margin(1e-30));
}

TEST_CASE("stats: the post-softmax mean minimises the expected squared Frobenius error") {
  const auto samples = saf_test::make_samples(N, T, 0.8, 8);
  HeadStatsAccumulator acc(T, StatsNeeds{});
  for (const auto& s : samples) acc.add_sample(s.probs.data());
  const Mat M = dense(acc, &HeadStatsAccumulator::mean_matrix);
  // R(P) = (1/N) sum_n ||A_n - P||_F^2 / T^2, computed directly.
  auto risk = [&](const Mat& P) {
    long double r = 0;
    for (const auto& s : samples)
      for (size_t c = 0; c < P.size(); ++c) r += (s.probs[c] - P[c]) * (s.probs[c] - P[c]);
    return double(r / ((long double)N * T * T));
  };
  const double r_mean = risk(M);
  // Analytic minimum: R(E A) = (N - 1) / N times the variance score.
  REQUIRE(r_mean == Approx(acc.variance_score() * (N - 1) / N).epsilon(1e-10));
  hw::Rng rng(3);
  for (double scale : {1e-3, 1e-2, 0.1}) {
    Mat P = M;
    for (double& x : P) x += scale * rng.normal();
    long double dist = 0;
    for (size_t c = 0; c < P.size(); ++c) dist += (P[c] - M[c]) * (P[c] - M[c]);
    const double r = risk(P);
    REQUIRE(r > r_mean);
    // R(P) = R(E A) + ||P - E A||^2 / T^2.
    REQUIRE(r == Approx(r_mean + double(dist) / (T * T)).epsilon(1e-10));
  }
  // Any single sample, used as a fixed pattern, is worse than the mean.
  REQUIRE(risk(samples[0].probs) > r_mean);
}

TEST_CASE("stats: bad use is an error") {
  const auto samples = saf_test::make_samples(2, T, 0.8, 9);
  StatsNeeds logit;
  logit.logit_mean = true;
  HeadStatsAccumulator a(T, logit);
  REQUIRE_THROWS_AS(a.add_sample(samples[0].probs.data()), hw::Error);  // logits missing
  a.add_sample(samples[0].probs.data(), samples[0].logits.data());
  REQUIRE_THROWS_AS(a.variance_score(), hw::Error);  // one sample
  REQUIRE_THROWS_AS(a.kl_score(), hw::Error);        // not accumulated
  Mat out(size_t(T) * T);
  REQUIRE_THROWS_AS(a.cell_variance_matrix(out.data()), hw::Error);
  HeadStatsAccumulator other(T + 1, logit);
  REQUIRE_THROWS_AS(a.merge(other), hw::Error);
  std::vector<double> buf(size_t(a.packed_size()));
  a.pack(buf.data());
  HeadStatsAccumulator plain(T, StatsNeeds{});
  REQUIRE_THROWS_AS(plain.unpack(buf.data(), int64_t(buf.size())), hw::Error);
  REQUIRE_THROWS_AS(HeadStatsAccumulator(0, StatsNeeds{}), hw::Error);
}

TEST_CASE("stats: float samples accumulate like double ones") {
  const auto samples = saf_test::make_samples(5, T, 0.8, 10);
  HeadStatsAccumulator d(T, StatsNeeds{}), f(T, StatsNeeds{});
  for (const auto& s : samples) {
    std::vector<float> pf(s.probs.begin(), s.probs.end());
    d.add_sample(s.probs.data());
    f.add_sample(pf.data());
  }
  REQUIRE(f.variance_score() == Approx(d.variance_score()).epsilon(1e-5));
}
