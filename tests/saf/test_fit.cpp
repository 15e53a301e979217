// fit: the marginal loss and its gradient against a dense row-wise cross-entropy built here
// with an explicit T x T matrix; recovery of an exactly representable target; determinism.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/methods/saf/fit.hpp"
#include "saf_test_util.hpp"

using namespace hw::saf;
using saf_test::Mat;

namespace {

// Pn as methods.md: clamp at 1e-9 on causal cells, rows renormalised.
Mat normalise_target(const Mat& P, int T) {
  Mat Pn(size_t(T) * T, 0.0);
  for (int i = 0; i < T; ++i) {
    long double s = 0;
    for (int j = 0; j <= i; ++j) s += std::max(P[size_t(i) * T + j], 1e-9);
    for (int j = 0; j <= i; ++j) Pn[size_t(i) * T + j] = double(std::max(P[size_t(i) * T + j], 1e-9) / s);
  }
  return Pn;
}

// log P_fit(i, j) for the compact form, via an explicit long-double log-sum-exp per row.
std::vector<long double> dense_log_fit(const std::vector<double>& a, const std::vector<double>& r,
                                       int T) {
  std::vector<long double> lp(size_t(T) * T, 0.0L);
  for (int i = 0; i < T; ++i) {
    long double m = -INFINITY;
    for (int j = 0; j <= i; ++j) m = std::max(m, (long double)a[j] + r[i - j]);
    long double s = 0;
    for (int j = 0; j <= i; ++j) s += std::exp((long double)a[j] + r[i - j] - m);
    for (int j = 0; j <= i; ++j) lp[size_t(i) * T + j] = (long double)a[j] + r[i - j] - m - std::log(s);
  }
  return lp;
}

// sum_i sum_j Pn_ij * -log P_fit(i, j) / T.
double dense_ce(const Mat& Pn, const std::vector<double>& a, const std::vector<double>& r, int T) {
  const auto lp = dense_log_fit(a, r, T);
  long double ce = 0;
  for (int i = 0; i < T; ++i)
    for (int j = 0; j <= i; ++j) ce -= Pn[size_t(i) * T + j] * lp[size_t(i) * T + j];
  return double(ce / T);
}

// Mean row KL(Pn || P_fit).
double dense_kl(const Mat& Pn, const std::vector<double>& a, const std::vector<double>& r, int T) {
  const auto lp = dense_log_fit(a, r, T);
  long double kl = 0;
  for (int i = 0; i < T; ++i)
    for (int j = 0; j <= i; ++j) {
      const long double p = Pn[size_t(i) * T + j];
      kl += p * (std::log(p) - lp[size_t(i) * T + j]);
    }
  return double(kl / T);
}

Mat random_target(int T, uint64_t seed) {
  return saf_test::make_samples(1, T, 1.5, seed)[0].probs;
}

std::vector<double> normals(int n, hw::Rng& rng, double scale) {
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = scale * rng.normal();
  return v;
}

void check_loss_and_gradient(const Mat& P, int T, const std::vector<double>& alpha,
                             const std::vector<double>& rho) {
  const Marginals m = marginals(P.data(), T);
  const Mat Pn = normalise_target(P, T);
  LossWorkspace ws;
  ws.resize(T);
  std::vector<double> ga(static_cast<size_t>(T)), gr(static_cast<size_t>(T));
  const double loss = marginal_loss(alpha.data(), rho.data(), m, ga.data(), gr.data(), ws);
  REQUIRE(loss == Approx(dense_ce(Pn, alpha, rho, T)).epsilon(1e-11));
  REQUIRE(m.neg_entropy + loss == Approx(dense_kl(Pn, alpha, rho, T)).epsilon(1e-9).margin(1e-12));
  // Central finite differences of the dense cross-entropy.
  const double h = 1e-5;
  for (int which = 0; which < 2; ++which)
    for (int t = 0; t < T; ++t) {
      auto a = alpha, r = rho;
      auto& v = which == 0 ? a : r;
      v[t] += h;
      const double up = dense_ce(Pn, a, r, T);
      v[t] -= 2 * h;
      const double down = dense_ce(Pn, a, r, T);
      const double fd = (up - down) / (2 * h);
      const double g = which == 0 ? ga[t] : gr[t];
      REQUIRE(g == Approx(fd).margin(1e-9));
    }
}

}  // namespace

TEST_CASE("fit: marginals equal the dense column and distance sums") {
  const int T = 11;
  Mat P = random_target(T, 41);
  P[size_t(5) * T + 2] = 0.0;  // a zero cell is clamped to 1e-9
  const Marginals m = marginals(P.data(), T);
  const Mat Pn = normalise_target(P, T);
  double csum = 0, dsum = 0;
  for (int t = 0; t < T; ++t) {
    long double c = 0, d = 0;
    for (int i = 0; i < T; ++i)
      for (int j = 0; j <= i; ++j) {
        if (j == t) c += Pn[size_t(i) * T + j];
        if (i - j == t) d += Pn[size_t(i) * T + j];
      }
    REQUIRE(m.c[t] == Approx(double(c)).margin(1e-14));
    REQUIRE(m.d[t] == Approx(double(d)).margin(1e-14));
    csum += m.c[t];
    dsum += m.d[t];
  }
  REQUIRE(csum == Approx(T));
  REQUIRE(dsum == Approx(T));
  P[size_t(4) * T + 3] = NAN;  // a causal cell
  REQUIRE_THROWS_AS(marginals(P.data(), T), hw::Error);
}

// marginals() reads row by row in blocks of 64 columns (issue 55); each sum must still add its
// terms in increasing row order, as the column loops it replaced did: the same sums at a length
// of several blocks, to the last bits (the vectorised row walks fuse their multiply-adds where
// the scalar column loops rounded the product first), and marginals_packed bit for bit what
// marginals gives for the same matrix.
TEST_CASE("fit: marginals by rows equal the column loops, dense and packed alike") {
  const int T = 150;
  Mat P = random_target(T, 43);
  std::vector<double> inv(static_cast<size_t>(T));
  for (int i = 0; i < T; ++i) {
    double s = 0.0;
    for (int j = 0; j <= i; ++j) s += std::max(P[size_t(i) * T + j], 1e-9);
    inv[size_t(i)] = 1.0 / s;
  }
  auto pn = [&](int i, int j) { return std::max(P[size_t(i) * T + j], 1e-9) * inv[size_t(i)]; };
  const Marginals m = marginals(P.data(), T);
  std::vector<double> packed;
  for (int i = 0; i < T; ++i)
    for (int j = 0; j <= i; ++j) packed.push_back(P[size_t(i) * T + j]);
  const Marginals mp = marginals_packed(packed.data(), T);
  for (int t = 0; t < T; ++t) {
    double c = 0.0, d = 0.0;
    for (int i = t; i < T; ++i) c += pn(i, t);
    for (int j = 0; j + t < T; ++j) d += pn(j + t, j);
    INFO("t = " << t);
    REQUIRE(m.c[size_t(t)] == Approx(c).epsilon(1e-14));
    REQUIRE(m.d[size_t(t)] == Approx(d).epsilon(1e-14));
  }
  REQUIRE(mp.c == m.c);
  REQUIRE(mp.d == m.d);
  REQUIRE(mp.neg_entropy == m.neg_entropy);
}

TEST_CASE("fit: marginal loss equals the dense cross-entropy, and its gradient matches differences") {
  const int T = 13;
  hw::Rng rng(42);
  const Mat P = random_target(T, 43);
  check_loss_and_gradient(P, T, normals(T, rng, 1.0), normals(T, rng, 1.0));
  check_loss_and_gradient(P, T, normals(T, rng, 3.0), normals(T, rng, 0.3));
}

TEST_CASE("fit: the exact log-space path takes over when products would underflow") {
  const int T = 9;
  hw::Rng rng(44);
  const Mat P = random_target(T, 45);
  auto alpha = normals(T, rng, 1.0), rho = normals(T, rng, 1.0);
  alpha[0] = -900.0;  // row 0's only term is e^-900 below the global maximum
  check_loss_and_gradient(P, T, alpha, rho);
  alpha[0] = 0.0;
  rho[0] = 800.0;  // rows far from the diagonal maximum
  rho[1] = -800.0;
  check_loss_and_gradient(P, T, alpha, rho);
}

TEST_CASE("fit: recovers alpha and rho of an exactly representable target") {
  const int T = 24;
  hw::Rng rng(46);
  const auto a0 = normals(T, rng, 1.0), r0 = normals(T, rng, 1.0);
  Mat P(size_t(T) * T);
  const auto lp = dense_log_fit(a0, r0, T);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j) P[size_t(i) * T + j] = j <= i ? double(std::exp(lp[size_t(i) * T + j])) : 0.0;
  FitOptions opt;
  opt.steps = 2000;
  const CompactFit f = fit_compact(P.data(), T, opt);
  const Mat Pn = normalise_target(P, T);
  REQUIRE(f.kl == Approx(dense_kl(Pn, f.alpha, f.rho, T)).margin(1e-12));
  REQUIRE(f.kl < 1e-6);
  REQUIRE(f.kl > -1e-12);
  // Gauge: alpha_j + a + b j, rho_k + c + b k give the same pattern. Compare the canonical
  // representatives with alpha_0 = rho_0 = 0 and rho_1 - rho_0 = 0.
  auto canon = [T](std::vector<double> a, std::vector<double> r) {
    const double b = r[1] - r[0], a0v = a[0], r0v = r[0];
    for (int t = 0; t < T; ++t) {
      a[t] -= a0v + b * t;
      r[t] -= r0v + b * t;
    }
    a.insert(a.end(), r.begin(), r.end());
    return a;
  };
  const auto want = canon(a0, r0), got = canon(f.alpha, f.rho);
  for (size_t t = 0; t < want.size(); ++t) REQUIRE(got[t] == Approx(want[t]).margin(2e-2));
  // The default 400 steps also pass the 0.2 KL gate comfortably on such a target.
  REQUIRE(fit_compact(P.data(), T).kl < 1e-2);
}

TEST_CASE("fit: rho initialisation and the first Adam steps by hand") {
  // T = 2, target rows [1] and [0.25, 0.75]: d_0 = 1 + 0.75, d_1 = 0.25.
  const int T = 2;
  const Mat P = {1.0, 0.0, 0.25, 0.75};
  FitOptions zero;
  zero.steps = 0;
  const CompactFit init = fit_compact(P.data(), T, zero);
  REQUIRE(init.alpha == std::vector<double>{0.0, 0.0});
  REQUIRE(init.rho[0] == Approx(std::log(1.75 / 2)).epsilon(1e-15));  // log(d_0 / (T - 0))
  REQUIRE(init.rho[1] == Approx(std::log(0.25 / 1)).epsilon(1e-15));  // log(d_1 / (T - 1))
  // Row 1 at the init: weights 0.25 : 0.875 = 2/9 : 7/9, so every gradient entry is +-1/72:
  // d alpha = (1 + 2/9 - 1.25, 7/9 - 0.75) / 2, d rho = (1 + 7/9 - 1.75, 2/9 - 0.25) / 2.
  // Adam's first step is lr g / (|g| + eps) per entry (m_hat = g, v_hat = g^2).
  FitOptions one;
  one.steps = 1;
  const CompactFit f1 = fit_compact(P.data(), T, one);
  const double g = 1.0 / 72, step = 0.05 * g / (g + 1e-8);
  REQUIRE(f1.alpha[0] == Approx(step).epsilon(1e-12));
  REQUIRE(f1.alpha[1] == Approx(-step).epsilon(1e-12));
  REQUIRE(f1.rho[0] == Approx(std::log(0.875) - step).epsilon(1e-12));
  REQUIRE(f1.rho[1] == Approx(std::log(0.25) + step).epsilon(1e-12));
  // The loss after the step, from the dense cross-entropy.
  REQUIRE(f1.loss == Approx(dense_ce(normalise_target(P, T), f1.alpha, f1.rho, T)).epsilon(1e-12));

  // T = 4: three Adam steps (PyTorch's bias-corrected form, lr 0.05, betas 0.9/0.999, eps
  // 1e-8) with the gradient of the dense cross-entropy, sum_i (W_ij - Pn_ij) / T, by hand.
  const int T4 = 4;
  const Mat P4 = random_target(T4, 49);
  const Mat Pn = normalise_target(P4, T4);
  std::vector<double> a(static_cast<size_t>(T4), 0.0), r(static_cast<size_t>(T4));
  for (int k = 0; k < T4; ++k) {
    long double d = 0;
    for (int j = 0; j + k < T4; ++j) d += Pn[size_t(j + k) * T4 + j];
    r[size_t(k)] = double(std::log(std::max(double(d) / (T4 - k), 1e-9)));
  }
  std::vector<double> ma(size_t(T4), 0), va(size_t(T4), 0), mr(size_t(T4), 0), vr(size_t(T4), 0);
  for (int t = 1; t <= 3; ++t) {
    const auto lp = dense_log_fit(a, r, T4);
    std::vector<double> ga(size_t(T4), 0.0), gr(size_t(T4), 0.0);
    for (int i = 0; i < T4; ++i)
      for (int j = 0; j <= i; ++j) {
        const double w = double(std::exp(lp[size_t(i) * T4 + j])) - Pn[size_t(i) * T4 + j];
        ga[size_t(j)] += w / T4;
        gr[size_t(i - j)] += w / T4;
      }
    auto adam = [&](double& x, double gx, double& m1, double& m2) {
      m1 = 0.9 * m1 + 0.1 * gx;
      m2 = 0.999 * m2 + 0.001 * gx * gx;
      const double mh = m1 / (1 - std::pow(0.9, t)), vh = m2 / (1 - std::pow(0.999, t));
      x -= 0.05 * mh / (std::sqrt(vh) + 1e-8);
    };
    for (int k = 0; k < T4; ++k) {
      adam(a[size_t(k)], ga[size_t(k)], ma[size_t(k)], va[size_t(k)]);
      adam(r[size_t(k)], gr[size_t(k)], mr[size_t(k)], vr[size_t(k)]);
    }
    FitOptions o;
    o.steps = t;
    const CompactFit f = fit_compact(P4.data(), T4, o);
    INFO("step " << t);
    for (int k = 0; k < T4; ++k) {
      REQUIRE(f.alpha[size_t(k)] == Approx(a[size_t(k)]).margin(1e-11));
      REQUIRE(f.rho[size_t(k)] == Approx(r[size_t(k)]).margin(1e-11));
    }
  }
}

TEST_CASE("fit: thread-count independent at a length whose steps really fan out") {
  // The Adam step only spreads over threads from T = 2048 on (kParallelStepMinT in fit.cpp).
  const int T = 2056;
  const Mat P = random_target(T, 50);
  const Marginals m = marginals(P.data(), T);
  FitOptions o;
  o.steps = 3;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const CompactFit one = fit_compact(m, o);
  omp_set_num_threads(3);
  const CompactFit three = fit_compact(m, o);
  omp_set_num_threads(saved);
  REQUIRE(one.alpha == three.alpha);
  REQUIRE(one.rho == three.rho);
  REQUIRE(one.kl == three.kl);
  FitOptions zero;
  zero.steps = 0;
  REQUIRE(three.kl < fit_compact(m, zero).kl);
}

TEST_CASE("fit: result is consistent, improves on the init, and is thread-count independent") {
  const int T = 40;
  const Mat P = random_target(T, 47);
  FitOptions zero;
  zero.steps = 0;
  const CompactFit init = fit_compact(P.data(), T, zero);
  omp_set_num_threads(1);
  const CompactFit one = fit_compact(P.data(), T);
  omp_set_num_threads(2);
  const CompactFit two = fit_compact(P.data(), T);
  REQUIRE(one.alpha == two.alpha);
  REQUIRE(one.rho == two.rho);
  REQUIRE(one.kl == two.kl);
  REQUIRE(two.kl < init.kl);
  const Mat Pn = normalise_target(P, T);
  REQUIRE(two.kl == Approx(dense_kl(Pn, two.alpha, two.rho, T)).epsilon(1e-9));
  // log_z are the row normalisers: the compact pattern rows sum to one with them.
  for (int i = 0; i < T; ++i) {
    long double s = 0;
    for (int j = 0; j <= i; ++j) s += std::exp((long double)two.alpha[j] + two.rho[i - j] - two.log_z[i]);
    REQUIRE(double(s) == Approx(1.0).margin(1e-12));
  }
  Mat Q(size_t(T) * T);
  compact_pattern(two.alpha.data(), two.rho.data(), T, Q.data());
  const auto lp = dense_log_fit(two.alpha, two.rho, T);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j)
      REQUIRE(Q[size_t(i) * T + j] ==
              Approx(j <= i ? double(std::exp(lp[size_t(i) * T + j])) : 0.0).margin(1e-14));
}

TEST_CASE("fit: extend_to_positions pads harmlessly and keeps the fitted rows") {
  const int T = 10, n = 16;
  const CompactFit f = fit_compact(random_target(T, 48).data(), T);
  auto a = f.alpha, r = f.rho, z = f.log_z;
  extend_to_positions(a, r, z, n);
  REQUIRE(a.size() == size_t(n));
  for (int t = 0; t < T; ++t) {
    REQUIRE(a[t] == f.alpha[t]);
    REQUIRE(r[t] == f.rho[t]);
    REQUIRE(z[t] == f.log_z[t]);
  }
  for (int t = T; t < n; ++t) {
    REQUIRE(a[t] == 0.0);
    REQUIRE(r[t] == f.rho[T - 1]);
    long double s = 0;
    for (int j = 0; j <= t; ++j) s += std::exp((long double)a[j] + r[t - j]);
    REQUIRE(z[t] == Approx(double(std::log(s))).margin(1e-12));
  }
  auto a2 = f.alpha, r2 = f.rho, z2 = f.log_z;
  REQUIRE_THROWS_AS(extend_to_positions(a2, r2, z2, T - 1), hw::Error);
}
