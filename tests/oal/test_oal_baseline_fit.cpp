// The fit of the baselines' learnable values (baseline_fit.cpp): the loss gradient against
// central finite differences in double, the loss against Table 2's dense evaluation, and a fit
// that lowers the validation error from the starting values.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "headwise/core/rng.hpp"
#include "headwise/methods/oal/baseline_fit.hpp"

using namespace hw;

namespace {

struct RandomHead {
  int T = 24, d = 8;
  std::vector<float> q, k, v;
  oal::HeadRows rows;
  RandomHead(uint64_t seed, double q_scale) {
    Rng rng(seed);
    q.resize(size_t(T * d));
    k.resize(q.size());
    v.resize(q.size());
    for (auto& x : q) x = float(q_scale * rng.normal());
    for (auto& x : k) x = float(rng.normal());
    for (auto& x : v) x = float(rng.normal());
    rows = {q.data(), k.data(), v.data(), d, d, d, T, d};
  }
};

std::vector<double> softmax_targets(const oal::HeadRows& h, const std::vector<int>& pos) {
  std::vector<double> t(pos.size() * size_t(h.d));
  for (size_t p = 0; p < pos.size(); ++p) oal::softmax_output(h, pos[p], t.data() + p * size_t(h.d));
  return t;
}

}  // namespace

TEST_CASE("oal baseline_loss: value is Table 2's output error, gradient is finite differences", "[oal][baseline_fit]") {
  RandomHead h(4, 1.5);
  const std::vector<int> pos = {0, 3, 9, 17, 23};
  const std::vector<double> tg = softmax_targets(h.rows, pos);
  for (const std::string name : {"dijiang", "taylorshift"}) {
    INFO(name);
    oal::BaselineHead b = oal::baseline_head(oal::parse_kernel(name, "k"), h.d, 1, 1, 0, 0, 1);
    // exactly representable values away from the start, so float storage does not blur the differences
    for (size_t m = 0; m < b.dijiang.log_w.size(); ++m) b.dijiang.log_w[m] = float(int(m % 5) - 2) / 8.f;
    b.taylorshift.tau = 2.5f;
    std::vector<double> all(size_t(h.T * h.d));
    oal::baseline_outputs(h.rows, b, all.data());
    double want = 0;
    for (size_t p = 0; p < pos.size(); ++p)
      for (int c = 0; c < h.d; ++c) {
        const double e = all[size_t(pos[p] * h.d + c)] - tg[p * size_t(h.d) + size_t(c)];
        want += e * e;
      }
    want /= double(pos.size() * size_t(h.d));
    const int P = oal::baseline_params(b);
    std::vector<double> grad(size_t(P), 0.0);
    CHECK(oal::baseline_loss(h.rows, b, pos.data(), int(pos.size()), tg.data(), grad.data()) == Approx(want).epsilon(1e-12));
    const float step = 1.f / 256.f;
    for (int p = 0; p < P; ++p) {
      oal::BaselineHead up = b, dn = b;
      if (name == "dijiang") {
        up.dijiang.log_w[size_t(p)] += step;
        dn.dijiang.log_w[size_t(p)] -= step;
      } else {
        up.taylorshift.tau += step;
        dn.taylorshift.tau -= step;
      }
      const double fd = (oal::baseline_loss(h.rows, up, pos.data(), int(pos.size()), tg.data(), nullptr) -
                         oal::baseline_loss(h.rows, dn, pos.data(), int(pos.size()), tg.data(), nullptr)) /
                        (2.0 * step);
      CHECK(grad[size_t(p)] == Approx(fd).epsilon(2e-3).margin(1e-9));
    }
  }
}

TEST_CASE("oal fit_baseline lowers the validation error from the starting values", "[oal][baseline_fit]") {
  // Large q: the softmax is much sharper than tau = 1 can follow. DiJiang's weights have no such
  // global knob (scaling every w cancels), and on independent random heads the best relative
  // weights are the uniform start; so the validation head is one of the fit heads, which the
  // fit must then do better on.
  std::vector<RandomHead> heads;
  for (uint64_t s = 0; s < 3; ++s) heads.emplace_back(10 + s, 3.0);
  oal::HeadSamples smp;
  for (const RandomHead& h : heads) smp.fit.push_back(h.rows);
  smp.val.push_back(heads[1].rows);
  smp.prepare_targets();
  oal::CalibOptions opt;
  opt.max_updates = 300;
  opt.val_every = 50;
  opt.patience = 200;
  for (const std::string name : {"dijiang", "taylorshift"}) {
    INFO(name);
    const oal::BaselineHead start = oal::baseline_head(oal::parse_kernel(name, "k"), 8, 1, 1, 0, 0, 1);
    const oal::BaselineFit f = oal::fit_baseline(smp, start, opt, 3);
    CHECK(f.val_mse < f.init_val_mse);
    CHECK(f.best_update > 0);
    if (name == "taylorshift") {
      CHECK(f.val_mse < 0.9 * f.init_val_mse);
      CHECK(f.head.taylorshift.tau > 1.f);  // sharper than the start
    }
  }
  // Performer has nothing to fit: the start comes back.
  const oal::BaselineHead p = oal::baseline_head(oal::KernelKind::Performer, 8, 16, 1, 0, 0, 1);
  const oal::BaselineFit f = oal::fit_baseline(smp, p, opt, 3);
  CHECK(f.updates == 0);
  CHECK(f.head.performer.W == p.performer.W);
}
