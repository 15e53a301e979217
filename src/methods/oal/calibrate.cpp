#include "headwise/methods/oal/calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/methods/oal/kernel_moments.hpp"
#include "headwise/methods/oal/loss_moments.hpp"

namespace hw::oal {

void HeadSamples::prepare_targets() {
  auto all = [](const std::vector<HeadRows>& seqs, std::vector<std::vector<double>>& targets) {
    targets.assign(seqs.size(), {});
    for (size_t q = 0; q < seqs.size(); ++q) {
      targets[q].resize(size_t(seqs[q].T) * size_t(seqs[q].d));
      softmax_outputs(seqs[q], targets[q].data());
    }
  };
  all(fit, fit_targets);
  all(val, val_targets);
}

double validation_mse(const HeadSamples& s, const GroupedKernel& k) {
  check(s.val_targets.size() == s.val.size() && !s.val.empty(), "OAL calibration: no validation targets");
  double sum = 0.0;
  int64_t n = 0;
  for (size_t v = 0; v < s.val.size(); ++v) {
    const HeadRows& h = s.val[v];
    std::vector<int> pos(size_t(h.T));
    std::iota(pos.begin(), pos.end(), 0);
    sum += kernel_loss(h, k, pos.data(), h.T, s.val_targets[v].data(), nullptr) * double(h.T) * double(h.d);
    n += int64_t(h.T) * h.d;
  }
  return sum / double(n);
}

SampleMoments sample_moments(const HeadSamples& s, const std::vector<int32_t>& groups, int G) {
  check(s.fit_targets.size() == s.fit.size() && s.val_targets.size() == s.val.size(),
        "OAL calibration: the targets must be prepared before the moments");
  SampleMoments m;
  for (size_t q = 0; q < s.fit.size(); ++q)
    m.fit.push_back(loss_moments(kernel_moments(s.fit[q], groups, G), s.fit_targets[q].data()));
  for (size_t q = 0; q < s.val.size(); ++q)
    m.val.push_back(loss_moments(kernel_moments(s.val[q], groups, G), s.val_targets[q].data()));
  return m;
}

SampleMoments global_moments(const SampleMoments& grouped) {
  SampleMoments m;
  for (const auto& k : grouped.fit) m.fit.push_back(global_moments(k));
  for (const auto& k : grouped.val) m.val.push_back(global_moments(k));
  return m;
}

double validation_mse(const HeadSamples& s, const SampleMoments& m, const GroupedKernel& k) {
  check(s.val_targets.size() == s.val.size() && m.val.size() == s.val.size() && !s.val.empty(),
        "OAL calibration: no validation targets or moments");
  double sum = 0.0;
  int64_t n = 0;
  std::vector<int> pos;
  for (size_t v = 0; v < s.val.size(); ++v) {
    const HeadRows& h = s.val[v];
    pos.resize(size_t(h.T));
    std::iota(pos.begin(), pos.end(), 0);
    sum += moments_loss(m.val[v], k, pos.data(), h.T, nullptr) * double(h.T) * double(h.d);
    n += int64_t(h.T) * h.d;
  }
  return sum / double(n);
}

nlohmann::json FitResult::to_json() const {
  return {{"G", kernel.G},           {"L", kernel.L},           {"init_val_mse", init_val_mse},
          {"val_mse", val_mse},      {"updates", updates},      {"best_update", best_update}};
}

AdamFit adam_fit(const HeadSamples& s, std::vector<double> theta, const CalibOptions& opt, uint64_t seed,
                 const FitLoss& loss, const FitValidation& validate) {
  AdamFit res;
  res.init_val_mse = res.val_mse = validate(theta);
  res.best = theta;
  const size_t P = theta.size();
  if (P == 0) return res;
  check(!s.fit.empty() && s.fit_targets.size() == s.fit.size(), "OAL calibration: no fit sequences or targets");
  std::vector<double> m(P, 0.0), v(P, 0.0), grad(P);
  const double b1 = 0.9, b2 = 0.999, adam_eps = 1e-8;
  Rng rng(seed);
  std::vector<int> pos;
  std::vector<double> targets;
  int since_best = 0;
  for (int u = 1; u <= opt.max_updates; ++u) {
    const int seq = int(rng.below(uint64_t(s.fit.size())));
    const HeadRows& h = s.fit[size_t(seq)];
    // `positions` distinct causal query positions (all of them when the sequence is shorter).
    pos.resize(size_t(h.T));
    std::iota(pos.begin(), pos.end(), 0);
    const int n = std::min(opt.positions, h.T);
    for (int i = 0; i < n; ++i) std::swap(pos[size_t(i)], pos[size_t(i) + size_t(rng.below(uint64_t(h.T - i)))]);
    pos.resize(static_cast<size_t>(n));
    targets.resize(size_t(n) * size_t(h.d));
    const double* all = s.fit_targets[size_t(seq)].data();  // softmax_output at every position
    for (int i = 0; i < n; ++i)
      std::copy_n(all + size_t(pos[size_t(i)]) * size_t(h.d), h.d, targets.data() + size_t(i) * size_t(h.d));
    std::fill(grad.begin(), grad.end(), 0.0);
    loss(seq, h, theta, pos.data(), n, targets.data(), grad.data());
    double norm = 0.0;
    for (double g : grad) norm += g * g;
    norm = std::sqrt(norm);
    const double scale = opt.grad_clip > 0 && norm > opt.grad_clip ? opt.grad_clip / norm : 1.0;
    const double c1 = 1.0 - std::pow(b1, u), c2 = 1.0 - std::pow(b2, u);
    for (size_t e = 0; e < P; ++e) {  // an entry whose gradient stays 0 keeps its value exactly
      const double g = grad[e] * scale;
      m[e] = b1 * m[e] + (1 - b1) * g;
      v[e] = b2 * v[e] + (1 - b2) * g * g;
      theta[e] -= opt.lr * (m[e] / c1) / (std::sqrt(v[e] / c2) + adam_eps);
    }
    res.updates = u;
    since_best += 1;
    if (u % opt.val_every == 0 || u == opt.max_updates) {
      const double mse = validate(theta);
      if (mse < res.val_mse) {
        res.val_mse = mse;
        res.best = theta;
        res.best_update = u;
        since_best = 0;
      }
    }
    if (since_best >= opt.patience) break;
  }
  return res;
}

FitResult fit_kernel(const HeadSamples& s, GroupedKernel init, const CalibOptions& opt, uint64_t seed) {
  const SampleMoments mom = sample_moments(s, init.groups, init.G);
  return fit_kernel(s, mom, std::move(init), opt, seed);
}

FitResult fit_kernel(const HeadSamples& s, const SampleMoments& mom, GroupedKernel init, const CalibOptions& opt,
                     uint64_t seed) {
  const int G1 = init.G + 1;
  check(mom.fit.size() == s.fit.size(), "OAL calibration: moments of every fit sequence needed");
  init.eps = opt.eps;
  for (int a = 0; a < G1; ++a)  // the upper triangle is not a parameter (kernel_loss leaves its gradient 0)
    for (int b = a + 1; b < G1; ++b) init.L[size_t(a * G1 + b)] = 0.0;
  GroupedKernel cur = init;
  const AdamFit fit = adam_fit(
      s, init.L, opt, seed,
      [&](int seq, const HeadRows&, const std::vector<double>& L, const int* pos, int n, const double*, double* grad) {
        cur.L = L;  // (the moments hold the targets of every position)
        moments_loss(mom.fit[size_t(seq)], cur, pos, n, grad);
      },
      [&](const std::vector<double>& L) {
        cur.L = L;
        return validation_mse(s, mom, cur);
      });
  FitResult res;
  res.kernel = init;
  res.kernel.L = fit.best;
  res.init_val_mse = fit.init_val_mse;
  res.val_mse = fit.val_mse;
  res.updates = fit.updates;
  res.best_update = fit.best_update;
  return res;
}

namespace {

std::vector<double> perturbed(std::vector<double> L, int G, double std_dev, Rng& rng) {
  const int G1 = G + 1;
  for (int a = 0; a < G1; ++a)
    for (int b = 0; b <= a; ++b) L[size_t(a * G1 + b)] += std_dev * rng.normal();
  return L;
}

GroupedKernel make_kernel(int G, std::vector<double> L, std::vector<int32_t> groups, double eps) {
  GroupedKernel k;
  k.G = G;
  k.L = std::move(L);
  k.groups = std::move(groups);
  k.eps = eps;
  return k;
}

// Candidate c's fit seed and noise seed: independent streams of one head's seed.
uint64_t candidate_seed(uint64_t seed, int c) { return data::derive_seed(seed, data::Stream::OalCalibration, uint64_t(c)); }

void keep_best(HeadCalibration& out, FitResult r, const std::string& name, bool global) {
  out.candidates.push_back({{"init", name}, {"G", r.kernel.G}, {"init_val_mse", r.init_val_mse},
                            {"val_mse", r.val_mse}, {"updates", r.updates}, {"best_update", r.best_update}});
  FitResult& slot = global ? out.global : out.kernel;
  if (slot.kernel.L.empty() || r.val_mse < slot.val_mse) {
    slot = std::move(r);
    if (!global) out.chosen = name;
  }
}

}  // namespace

nlohmann::json HeadCalibration::to_json() const {
  return {{"global", global.to_json()}, {"kernel", kernel.to_json()}, {"chosen", chosen},
          {"taylor_val_mse", taylor_val_mse}, {"candidates", candidates}};
}

HeadCalibration calibrate_global(const HeadSamples& s, const CalibOptions& opt, uint64_t seed) {
  check(!s.fit.empty() && !s.val.empty(), "OAL calibration: needs fit and validation sequences");
  return calibrate_global(s, sample_moments(s, std::vector<int32_t>(size_t(s.fit.front().d), 1), 1), opt, seed);
}

HeadCalibration calibrate_global(const HeadSamples& s, const SampleMoments& mom, const CalibOptions& opt,
                                 uint64_t seed) {
  check(!s.fit.empty() && !s.val.empty(), "OAL calibration: needs fit and validation sequences");
  const int d = s.fit.front().d;
  HeadCalibration out;
  const std::vector<int32_t> ones(size_t(d), 1);
  const GroupedKernel taylor = make_kernel(1, taylor_L(1), ones, opt.eps);
  // (mom is shared by the three candidates)
  out.taylor_val_mse = validation_mse(s, mom, taylor);
  Rng noise(candidate_seed(seed, 100));
  keep_best(out, fit_kernel(s, mom, taylor, opt, candidate_seed(seed, 0)), "global:taylor", true);
  for (int c = 1; c <= 2; ++c)
    keep_best(out,
              fit_kernel(s, mom, make_kernel(1, perturbed(taylor_L(1), 1, opt.perturb_std, noise), ones, opt.eps), opt,
                         candidate_seed(seed, c)),
              "global:perturbed_taylor_" + std::to_string(c), true);
  out.kernel = out.global;
  out.chosen = "global";
  return out;
}

void calibrate_grouped(HeadCalibration& c, const HeadSamples& s, int G, const std::vector<int32_t>& groups,
                       const CalibOptions& opt, uint64_t seed) {
  check(!c.global.kernel.L.empty(), "OAL calibration: the global kernel must be fitted first");
  if (G == 1) return calibrate_grouped(c, s, SampleMoments{}, G, groups, opt, seed);
  calibrate_grouped(c, s, sample_moments(s, groups, G), G, groups, opt, seed);
}

void calibrate_grouped(HeadCalibration& c, const HeadSamples& s, const SampleMoments& mom, int G,
                       const std::vector<int32_t>& groups, const CalibOptions& opt, uint64_t seed) {
  check(!c.global.kernel.L.empty(), "OAL calibration: the global kernel must be fitted first");
  if (G == 1) {
    c.kernel = c.global;
    c.kernel.kernel.groups = groups;
    c.chosen = "global";
    return;
  }
  c.kernel = FitResult{};
  Rng noise(candidate_seed(seed, 200));
  const std::vector<double> embedded = embed_global(c.global.kernel.L, G);
  // (mom is shared by the three candidates)
  keep_best(c, fit_kernel(s, mom, make_kernel(G, embedded, groups, opt.eps), opt, candidate_seed(seed, 10)),
            "embedded_global", false);
  keep_best(c, fit_kernel(s, mom, make_kernel(G, taylor_L(G), groups, opt.eps), opt, candidate_seed(seed, 11)),
            "taylor", false);
  keep_best(c, fit_kernel(s, mom, make_kernel(G, perturbed(embedded, G, opt.perturb_std, noise), groups, opt.eps), opt,
                          candidate_seed(seed, 12)),
            "perturbed_global", false);
}

}  // namespace hw::oal
