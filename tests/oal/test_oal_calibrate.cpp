// Calibration of L on a synthetic head with known outlier dimensions, and the frozen-attention
// metrics against a hand computation.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "headwise/core/rng.hpp"
#include "headwise/methods/oal/calibrate.hpp"
#include "headwise/methods/oal/contribution.hpp"
#include "headwise/methods/oal/grouping.hpp"
#include "headwise/methods/oal/metrics.hpp"

using namespace hw;

namespace {

// Sequences of one head: q, k ~ N(0, 0.6^2) except outlier dims 3 (q and k x4) and 11 (q x5),
// which dominate q.k as in the paper's Fig. 1; v ~ N(0, 1).
struct Synthetic {
  int T = 40, d = 16;
  std::vector<std::vector<float>> q, k, v;
  explicit Synthetic(int n, uint64_t seed) {
    Rng rng(seed);
    for (int s = 0; s < n; ++s) {
      std::vector<float> qs(size_t(T * d)), ks(qs.size()), vs(qs.size());
      for (int t = 0; t < T; ++t)
        for (int r = 0; r < d; ++r) {
          const double qm = r == 3 ? 4.0 : r == 11 ? 5.0 : 1.0, km = r == 3 ? 4.0 : r == 11 ? 1.5 : 1.0;
          qs[size_t(t * d + r)] = float(0.6 * qm * rng.normal());
          ks[size_t(t * d + r)] = float(0.6 * km * rng.normal() + (r == 11 ? 0.8 : 0.0));
          vs[size_t(t * d + r)] = float(rng.normal());
        }
      q.push_back(qs);
      k.push_back(ks);
      v.push_back(vs);
    }
  }
  oal::HeadRows rows(int s) const { return {q[size_t(s)].data(), k[size_t(s)].data(), v[size_t(s)].data(), d, d, d, T, d}; }
};

// Eq. (21)-(22) on held-out rows: every position of every sequence.
oal::FrozenMetrics held_out(const Synthetic& data, int first, int n, const oal::GroupedKernel& k) {
  std::vector<oal::SequenceError> per;
  for (int s = first; s < first + n; ++s) {
    const oal::HeadRows h = data.rows(s);
    oal::SequenceError e;
    std::vector<double> y(size_t(h.d)), t(size_t(h.d));
    for (int i = 0; i < h.T; ++i) {
      oal::kernel_output(h, k, i, y.data());
      oal::softmax_output(h, i, t.data());
      e.add(y.data(), t.data(), h.d);
    }
    per.push_back(e);
  }
  return oal::aggregate(per);
}

}  // namespace

TEST_CASE("oal calibration lowers held-out RelMSE below the Taylor initialisation", "[oal][calibrate]") {
  const Synthetic data(11, 17);  // 6 fit, 2 validation, 3 held out
  oal::HeadSamples s;
  for (int i = 0; i < 6; ++i) s.fit.push_back(data.rows(i));
  for (int i = 6; i < 8; ++i) s.val.push_back(data.rows(i));
  s.prepare_targets();

  // The contribution grouping finds the outliers: dims 3 and 11 outside the bulk.
  std::vector<std::vector<double>> prompts;
  for (int i = 0; i < 8; ++i) {
    std::vector<double> chi(size_t(data.d));
    oal::prompt_contribution(data.q[size_t(i)].data(), data.d, data.k[size_t(i)].data(), data.d, data.T, data.d, chi.data());
    prompts.push_back(chi);
  }
  oal::GroupingOptions gopt;
  gopt.bootstrap = 200;
  const oal::Grouping g = oal::bootstrap_grouping(prompts, gopt, 3);
  REQUIRE(g.n_groups >= 2);
  CHECK(g.groups[3] != 1);
  CHECK(g.groups[11] != 1);
  int bulk = 0;
  for (int32_t x : g.groups) bulk += x == 1;
  CHECK(bulk == data.d - 2);

  oal::CalibOptions opt;
  opt.max_updates = 400;
  oal::HeadCalibration c = oal::calibrate_global(s, opt, 5);
  oal::calibrate_grouped(c, s, g.n_groups, g.groups, opt, 5);
  const oal::GroupedKernel taylor{1, oal::taylor_L(1), std::vector<int32_t>(size_t(data.d), 1), opt.eps};
  const oal::FrozenMetrics before = held_out(data, 8, 3, taylor);
  const oal::FrozenMetrics global = held_out(data, 8, 3, c.global.kernel);
  const oal::FrozenMetrics after = held_out(data, 8, 3, c.kernel.kernel);
  INFO("held-out RelMSE: taylor " << before.rel_mse << ", global " << global.rel_mse << ", grouped " << after.rel_mse
                                  << " (" << c.chosen << ")");
  CHECK(after.rel_mse < 0.8 * before.rel_mse);
  CHECK(after.mse < before.mse);
  // Validation MSE never gets worse than the initialisation it started from.
  CHECK(c.kernel.val_mse <= c.global.val_mse);
  CHECK(c.global.val_mse <= c.taylor_val_mse);
  CHECK(c.candidates.size() == 6);  // 3 global + 3 grouped candidates
  // Deterministic for a seed.
  oal::HeadCalibration again = oal::calibrate_global(s, opt, 5);
  oal::calibrate_grouped(again, s, g.n_groups, g.groups, opt, 5);
  CHECK(again.kernel.kernel.L == c.kernel.kernel.L);
}

TEST_CASE("oal fit stops after patience updates without improvement and keeps the best", "[oal][calibrate]") {
  const Synthetic data(3, 2);
  oal::HeadSamples s;
  s.fit = {data.rows(0), data.rows(1)};
  s.val = {data.rows(2)};
  s.prepare_targets();
  oal::CalibOptions opt;
  opt.lr = 5.0;  // far too large: the validation MSE stops improving early
  opt.val_every = 10;
  opt.patience = 40;
  opt.max_updates = 1000;
  const oal::GroupedKernel taylor{1, oal::taylor_L(1), std::vector<int32_t>(size_t(data.d), 1), opt.eps};
  const oal::FitResult r = oal::fit_kernel(s, taylor, opt, 1);
  CHECK(r.updates < 1000);
  CHECK(r.updates - r.best_update >= 40);
  CHECK(r.updates - r.best_update < 50);
  CHECK(r.val_mse <= r.init_val_mse);
  CHECK(oal::validation_mse(s, r.kernel) == Approx(r.val_mse).epsilon(1e-12));
}

TEST_CASE("oal frozen metrics match a hand computation of Eq. (21)-(22)", "[oal][metrics]") {
  // Sequence A: exact [1, 2], approx [1, 1]: err 1, energy 5, n 2.
  // Sequence B: exact [3, 0, 0, 4], approx [3, 2, 0, 4]: err 4, energy 25, n 4.
  // MSE = (1/2 + 4/4) / 2 = 0.75; RelMSE = (1/5 + 4/25) / 2 = 0.18 (not 5/30: per-sequence first).
  std::vector<oal::SequenceError> per(2);
  const double ea[] = {1, 2}, aa[] = {1, 1}, eb[] = {3, 0, 0, 4}, ab[] = {3, 2, 0, 4};
  per[0].add(aa, ea, 2);
  per[1].add(ab, eb, 2);  // pooled in two calls, as layers and heads are
  per[1].add(ab + 2, eb + 2, 2);
  const oal::FrozenMetrics m = oal::aggregate(per);
  CHECK(m.mse == Approx(0.75));
  CHECK(m.rel_mse == Approx(0.18));
  CHECK(m.sequences == 2);
  // Projection: [1, 2] x [[1, 0, 2], [3, 1, 0]] = [7, 2, 2].
  const double heads[] = {1, 2}, W[] = {1, 0, 2, 3, 1, 0};
  double out[3];
  oal::project(heads, 1, 2, W, 3, out);
  CHECK(out[0] == 7.0);
  CHECK(out[1] == 2.0);
  CHECK(out[2] == 2.0);
}
