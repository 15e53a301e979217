#include "headwise/methods/oal/baseline_fit.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "headwise/core/error.hpp"

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
  BaselineHead cur = start;
  const AdamFit fit = adam_fit(
      s, get_params(start), opt, seed,
      [&](int, const HeadRows& h, const std::vector<double>& theta, const int* pos, int n, const double* targets,
          double* grad) {
        set_params(cur, theta);
        baseline_loss(h, cur, pos, n, targets, grad);
      },
      [&](const std::vector<double>& theta) {
        set_params(cur, theta);
        return val_mse(s, cur);
      });
  BaselineFit res;
  res.head = start;
  set_params(res.head, fit.best);
  res.init_val_mse = fit.init_val_mse;
  res.val_mse = fit.val_mse;
  res.updates = fit.updates;
  res.best_update = fit.best_update;
  return res;
}

}  // namespace hw::oal
