#include "headwise/methods/oal/baseline_fit.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"

namespace hw::oal {

int baseline_params(const BaselineHead& b) {
  switch (b.kind) {
    case KernelKind::DiJiang: return int(b.dijiang.log_w.size());
    case KernelKind::TaylorShift: return 1;
    default: return 0;
  }
}

namespace {

std::vector<double> get_params(const BaselineHead& b) {
  if (b.kind == KernelKind::DiJiang) return {b.dijiang.log_w.begin(), b.dijiang.log_w.end()};
  if (b.kind == KernelKind::TaylorShift) return {double(b.taylorshift.tau)};
  return {};
}

void set_params(BaselineHead& b, const std::vector<double>& p) {
  if (b.kind == KernelKind::DiJiang)
    for (size_t m = 0; m < p.size(); ++m) b.dijiang.log_w[m] = float(p[m]);
  if (b.kind == KernelKind::TaylorShift) b.taylorshift.tau = float(p[0]);
}

double val_mse(const HeadSamples& s, const BaselineHead& b) {
  double sum = 0;
  int64_t n = 0;
  for (size_t v = 0; v < s.val.size(); ++v) {
    const HeadRows& h = s.val[v];
    std::vector<int> pos(static_cast<size_t>(h.T));
    std::iota(pos.begin(), pos.end(), 0);
    sum += baseline_loss(h, b, pos.data(), h.T, s.val_targets[v].data(), nullptr) * double(h.T) * h.d;
    n += int64_t(h.T) * h.d;
  }
  return sum / double(std::max<int64_t>(1, n));
}

}  // namespace

// y_i = sum_j kappa_ij v_j / sum_j kappa_ij, so dy_i / dkappa_ij = (v_j - y_i) / den_i and
// dLoss / dtheta = sum_i sum_j (2 (y_i - t_i) / (n d)) . (v_j - y_i) / den_i * dkappa_ij / dtheta, with
// dijiang: kappa = sum_m w_m a_m(q) a_m(k), dkappa / dlog_w_m = w_m a_m(q) a_m(k) (the query rows
// carry w already); taylorshift: kappa = 1 + tau c + tau^2 c^2 / 2, dkappa / dtau = c + tau c^2.
double baseline_loss(const HeadRows& h, const BaselineHead& b, const int* positions, int n, const double* targets,
                     double* grad) {
  const int d = h.d;
  const std::vector<std::vector<double>> fq = baseline_rows(h, b, true), fk = baseline_rows(h, b, false);
  const int P = baseline_params(b);
  const double tau = double(b.taylorshift.tau);
  double loss = 0;
  std::vector<double> y(static_cast<size_t>(d)), kap, dk(static_cast<size_t>(std::max(P, 1)));
  for (int p = 0; p < n; ++p) {
    const int i = positions[p];
    const std::vector<double>& a = fq[size_t(i)];
    kap.assign(size_t(i + 1), 0.0);
    std::fill(y.begin(), y.end(), 0.0);
    double den = 0;
    for (int j = 0; j <= i; ++j) {
      double c = 0;
      for (size_t m = 0; m < a.size(); ++m) c += a[m] * fk[size_t(j)][m];
      kap[size_t(j)] = b.kind == KernelKind::TaylorShift ? 1.0 + tau * c + 0.5 * tau * tau * c * c : c;
      den += kap[size_t(j)];
      for (int e = 0; e < d; ++e) y[size_t(e)] += kap[size_t(j)] * double(h.v[int64_t(j) * h.v_stride + e]);
    }
    check(den > 0 && std::isfinite(den), "OAL: the " + kernel_name(b.kind) + " kernel gave a non-positive or non-finite "
                                         "denominator at position " + std::to_string(i));
    std::vector<double> g(static_cast<size_t>(d));
    for (int e = 0; e < d; ++e) {
      y[size_t(e)] /= den;
      const double r = y[size_t(e)] - targets[int64_t(p) * d + e];
      loss += r * r;
      g[size_t(e)] = 2.0 * r / (double(n) * d);
    }
    if (!grad || P == 0) continue;
    for (int j = 0; j <= i; ++j) {
      double gk = 0;  // dLoss / dkappa_ij
      for (int e = 0; e < d; ++e) gk += g[size_t(e)] * (double(h.v[int64_t(j) * h.v_stride + e]) - y[size_t(e)]);
      gk /= den;
      if (b.kind == KernelKind::TaylorShift) {
        double c = 0;
        for (size_t m = 0; m < a.size(); ++m) c += a[m] * fk[size_t(j)][m];
        grad[0] += gk * (c + tau * c * c);
      } else {
        for (int m = 0; m < P; ++m) grad[m] += gk * a[size_t(m)] * fk[size_t(j)][size_t(m)];
      }
    }
  }
  return loss / (double(n) * d);
}

BaselineFit fit_baseline(const HeadSamples& s, const BaselineHead& start, const CalibOptions& opt, uint64_t seed) {
  check(!s.fit.empty() && !s.val.empty(), "OAL baseline fit: needs fit and validation sequences");
  BaselineFit res;
  res.head = start;
  res.init_val_mse = res.val_mse = val_mse(s, start);
  const int P = baseline_params(start);
  if (P == 0) return res;
  BaselineHead cur = start;
  std::vector<double> theta = get_params(start), m(static_cast<size_t>(P), 0.0), v(static_cast<size_t>(P), 0.0), grad(static_cast<size_t>(P));
  const double b1 = 0.9, b2 = 0.999, adam_eps = 1e-8;
  Rng rng(seed);
  std::vector<int> pos;
  std::vector<double> targets;
  int since_best = 0;
  for (int u = 1; u <= opt.max_updates; ++u) {
    const HeadRows& h = s.fit[size_t(rng.below(uint64_t(s.fit.size())))];
    pos.resize(size_t(h.T));
    std::iota(pos.begin(), pos.end(), 0);
    const int n = std::min(opt.positions, h.T);
    for (int i = 0; i < n; ++i) std::swap(pos[size_t(i)], pos[size_t(i) + size_t(rng.below(uint64_t(h.T - i)))]);
    pos.resize(static_cast<size_t>(n));
    targets.resize(size_t(n) * size_t(h.d));
    for (int i = 0; i < n; ++i) softmax_output(h, pos[size_t(i)], targets.data() + size_t(i) * size_t(h.d));
    std::fill(grad.begin(), grad.end(), 0.0);
    baseline_loss(h, cur, pos.data(), n, targets.data(), grad.data());
    double norm = 0;
    for (double g : grad) norm += g * g;
    norm = std::sqrt(norm);
    const double scale = opt.grad_clip > 0 && norm > opt.grad_clip ? opt.grad_clip / norm : 1.0;
    const double c1 = 1.0 - std::pow(b1, u), c2 = 1.0 - std::pow(b2, u);
    for (int p = 0; p < P; ++p) {
      const double g = grad[size_t(p)] * scale;
      m[size_t(p)] = b1 * m[size_t(p)] + (1 - b1) * g;
      v[size_t(p)] = b2 * v[size_t(p)] + (1 - b2) * g * g;
      theta[size_t(p)] -= opt.lr * (m[size_t(p)] / c1) / (std::sqrt(v[size_t(p)] / c2) + adam_eps);
    }
    set_params(cur, theta);
    res.updates = u;
    since_best += 1;
    if (u % opt.val_every == 0 || u == opt.max_updates) {
      const double mse = val_mse(s, cur);
      if (mse < res.val_mse) {
        res.val_mse = mse;
        res.head = cur;
        res.best_update = u;
        since_best = 0;
      }
    }
    if (since_best >= opt.patience) break;
  }
  return res;
}

}  // namespace hw::oal
