#include "headwise/methods/saf/fit.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "headwise/core/error.hpp"

namespace hw::saf {

namespace {

constexpr double kProbFloor = 1e-9;  // target clamp and rho init floor (methods.md)
// The fast path is trusted while every shifted row sum stays far above underflow.
constexpr double kMinShiftedZ = 1e-200;
// A step at T = 1024 is ~1.5M multiply-adds (well under a millisecond): a thread team per step
// costs more than it saves, badly so on a loaded machine. Callers fitting many heads should
// parallelise over heads instead; the step itself only fans out for long sequences.
constexpr int kParallelStepMinT = 2048;

// Fixed-order dot product with 8 independent partial sums: vectorisable, and the same result
// on every run and thread count.
double dot(const double* a, const double* b, int n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

double log_normaliser_row(const double* alpha, const double* rho, int i) {
  double m = -INFINITY;
  for (int j = 0; j <= i; ++j) m = std::max(m, alpha[j] + rho[i - j]);
  double s = 0.0;
  for (int j = 0; j <= i; ++j) s += std::exp(alpha[j] + rho[i - j] - m);
  return m + std::log(s);
}

// Fast path. Returns false (outputs undefined) if a shifted row sum leaves the safe range.
bool normalisers_by_products(const double* alpha, const double* rho, int T, LossWorkspace& ws) {
  double A = -INFINITY, R = -INFINITY;
  for (int t = 0; t < T; ++t) {
    A = std::max(A, alpha[t]);
    R = std::max(R, rho[t]);
  }
  for (int t = 0; t < T; ++t) {
    ws.ea[t] = std::exp(alpha[t] - A);
    ws.er[t] = std::exp(rho[t] - R);
    ws.er_rev[T - 1 - t] = ws.er[t];
  }
  int bad = 0;  // counted, not early-exited, so the loop stays a plain static for
#pragma omp parallel for schedule(static, 16) reduction(+ : bad) if (T >= kParallelStepMinT)
  for (int i = 0; i < T; ++i) {
    // Z_i = sum_j ea_j er_{i-j}; er_{i-j} = er_rev[T-1-i+j] keeps the access contiguous.
    const double z = dot(ws.ea.data(), ws.er_rev.data() + (T - 1 - i), i + 1);
    if (!(z >= kMinShiftedZ) || !std::isfinite(z)) {
      ++bad;
      continue;
    }
    ws.inv_z[i] = 1.0 / z;
    ws.log_z[i] = std::log(z) + A + R;
  }
  return bad == 0;
}

}  // namespace

void LossWorkspace::resize(int T) {
  for (auto* v : {&ea, &er, &er_rev, &inv_z, &log_z}) v->assign(size_t(T), 0.0);
}

namespace {

// marginals() over rows given by row(i) (its cells j <= i). Everything is read row by row: the
// column and distance sums are split by column (distance) blocks over the threads, each block
// walking the rows that reach it, so a thread streams row segments instead of striding down
// columns (a column of a dense 4096 x 4096 matrix touches one cache line per 32 KB). Each sum
// adds its terms in increasing row order, as the column-wise loops did.
template <class RowOf>
Marginals marginals_by_rows(const RowOf& row, int T) {
  check(T >= 1, "saf::marginals: T must be >= 1");
  Marginals m;
  m.T = T;
  m.c.assign(size_t(T), 0.0);
  m.d.assign(size_t(T), 0.0);
  std::vector<double> inv_row(static_cast<size_t>(T)), row_negent(static_cast<size_t>(T));
  int bad = 0;
#pragma omp parallel for schedule(dynamic, 16) reduction(+ : bad)
  for (int i = 0; i < T; ++i) {
    const double* p = row(i);
    double s = 0.0;
    for (int j = 0; j <= i; ++j) {
      if (!std::isfinite(p[j])) ++bad;
      s += std::max(p[j], kProbFloor);
    }
    inv_row[i] = 1.0 / s;
    double h = 0.0;
    for (int j = 0; j <= i; ++j) {
      const double q = std::max(p[j], kProbFloor) * inv_row[i];
      h += q * std::log(q);
    }
    row_negent[i] = h;
  }
  check(bad == 0, "saf::marginals: the target pattern has non-finite cells");
  constexpr int kBlock = 64;
  const int blocks = (T + kBlock - 1) / kBlock;
  // c_j = sum_{i >= j} pn(i, j); d_k = sum_{i >= k} pn(i, i - k).
#pragma omp parallel for schedule(dynamic, 1)
  for (int task = 0; task < 2 * blocks; ++task) {
    const int b0 = (task % blocks) * kBlock, b1 = std::min(T, b0 + kBlock);
    const bool columns = task < blocks;
    double* out = columns ? m.c.data() : m.d.data();
    for (int i = b0; i < T; ++i) {
      const double* p = row(i);
      const double inv = inv_row[size_t(i)];
      const int e = std::min(b1, i + 1);
      if (columns)
        for (int j = b0; j < e; ++j) out[j] += std::max(p[j], kProbFloor) * inv;
      else
        for (int k = b0; k < e; ++k) out[k] += std::max(p[i - k], kProbFloor) * inv;
    }
  }
  double h = 0.0;
  for (int i = 0; i < T; ++i) h += row_negent[i];
  m.neg_entropy = h / T;
  return m;
}

}  // namespace

Marginals marginals(const double* P, int T) {
  return marginals_by_rows([P, T](int i) { return P + int64_t(i) * T; }, T);
}

Marginals marginals_packed(const double* packed, int T) {
  return marginals_by_rows([packed](int i) { return packed + int64_t(i) * (i + 1) / 2; }, T);
}

void log_normalisers(const double* alpha, const double* rho, int n, double* log_z) {
#pragma omp parallel for schedule(static, 16)
  for (int i = 0; i < n; ++i) log_z[i] = log_normaliser_row(alpha, rho, i);
}

double marginal_loss(const double* alpha, const double* rho, const Marginals& m,
                     double* grad_alpha, double* grad_rho, LossWorkspace& ws) {
  const int T = m.T;
  check(int(ws.ea.size()) == T, "saf::marginal_loss: workspace not sized for T");
  const bool fast = normalisers_by_products(alpha, rho, T, ws);
  if (!fast) log_normalisers(alpha, rho, T, ws.log_z.data());
  double lin = 0.0, zsum = 0.0;
  for (int t = 0; t < T; ++t) {
    zsum += ws.log_z[t];
    lin += m.c[t] * alpha[t] + m.d[t] * rho[t];
  }
  const double loss = (zsum - lin) / T;
  if (!std::isfinite(loss)) fail("saf::marginal_loss: non-finite loss (alpha/rho not finite)");
  if (!grad_alpha && !grad_rho) return loss;
  const double invT = 1.0 / T;
  // Softmax weights W_ij = e^{alpha_j + rho_{i-j} - log_z_i}; gradient = (W marginals - c, d)/T.
  if (fast) {
    const double* iz = ws.inv_z.data();
    if (grad_alpha) {
#pragma omp parallel for schedule(static, 16) if (T >= kParallelStepMinT)
      for (int j = 0; j < T; ++j)  // sum_{i>=j} W_ij = ea_j sum_k er_k / Z_{j+k}
        grad_alpha[j] = (ws.ea[j] * dot(ws.er.data(), iz + j, T - j) - m.c[j]) * invT;
    }
    if (grad_rho) {
#pragma omp parallel for schedule(static, 16) if (T >= kParallelStepMinT)
      for (int k = 0; k < T; ++k)  // sum_{i-j=k} W_ij = er_k sum_j ea_j / Z_{j+k}
        grad_rho[k] = (ws.er[k] * dot(ws.ea.data(), iz + k, T - k) - m.d[k]) * invT;
    }
  } else {
    const double* lz = ws.log_z.data();
    if (grad_alpha) {
#pragma omp parallel for schedule(static, 16)
      for (int j = 0; j < T; ++j) {
        double s = 0.0;
        for (int i = j; i < T; ++i) s += std::exp(alpha[j] + rho[i - j] - lz[i]);
        grad_alpha[j] = (s - m.c[j]) * invT;
      }
    }
    if (grad_rho) {
#pragma omp parallel for schedule(static, 16)
      for (int k = 0; k < T; ++k) {
        double s = 0.0;
        for (int j = 0; j + k < T; ++j) s += std::exp(alpha[j] + rho[k] - lz[j + k]);
        grad_rho[k] = (s - m.d[k]) * invT;
      }
    }
  }
  return loss;
}

CompactFit fit_compact(const Marginals& m, const FitOptions& opt) {
  const int T = m.T;
  check(T >= 1 && int(m.c.size()) == T && int(m.d.size()) == T,
        "saf::fit_compact: marginals of inconsistent length");
  check(opt.steps >= 0 && opt.lr > 0 && opt.eps > 0 && opt.beta1 >= 0 && opt.beta1 < 1 &&
            opt.beta2 >= 0 && opt.beta2 < 1,
        "saf::fit_compact: invalid optimiser options");
  CompactFit f;
  f.alpha.assign(size_t(T), 0.0);
  f.rho.resize(static_cast<size_t>(T));
  for (int k = 0; k < T; ++k) f.rho[k] = std::log(std::max(m.d[k] / double(T - k), kProbFloor));
  // Parameters as one vector [alpha | rho] so Adam runs over one array.
  std::vector<double> theta(size_t(2 * T)), grad(size_t(2 * T)), m1(size_t(2 * T), 0.0),
      m2(size_t(2 * T), 0.0);
  std::copy(f.alpha.begin(), f.alpha.end(), theta.begin());
  std::copy(f.rho.begin(), f.rho.end(), theta.begin() + T);
  LossWorkspace ws;
  ws.resize(T);
  double b1t = 1.0, b2t = 1.0;
  for (int step = 0; step < opt.steps; ++step) {
    marginal_loss(theta.data(), theta.data() + T, m, grad.data(), grad.data() + T, ws);
    b1t *= opt.beta1;
    b2t *= opt.beta2;
    const double step_size = opt.lr / (1.0 - b1t);
    const double inv_sqrt_bc2 = 1.0 / std::sqrt(1.0 - b2t);
    for (size_t p = 0; p < theta.size(); ++p) {
      m1[p] = opt.beta1 * m1[p] + (1.0 - opt.beta1) * grad[p];
      m2[p] = opt.beta2 * m2[p] + (1.0 - opt.beta2) * grad[p] * grad[p];
      theta[p] -= step_size * m1[p] / (std::sqrt(m2[p]) * inv_sqrt_bc2 + opt.eps);
    }
  }
  std::copy(theta.begin(), theta.begin() + T, f.alpha.begin());
  std::copy(theta.begin() + T, theta.end(), f.rho.begin());
  f.log_z.resize(static_cast<size_t>(T));
  log_normalisers(f.alpha.data(), f.rho.data(), T, f.log_z.data());
  double zsum = 0.0, lin = 0.0;
  for (int t = 0; t < T; ++t) {
    zsum += f.log_z[t];
    lin += m.c[t] * f.alpha[t] + m.d[t] * f.rho[t];
  }
  f.loss = (zsum - lin) / T;
  f.kl = m.neg_entropy + f.loss;
  return f;
}

CompactFit fit_compact(const double* P, int T, const FitOptions& opt) {
  return fit_compact(marginals(P, T), opt);
}

void compact_pattern(const double* alpha, const double* rho, int T, double* out) {
#pragma omp parallel for schedule(static, 16)
  for (int i = 0; i < T; ++i) {
    const double lz = log_normaliser_row(alpha, rho, i);
    double* row = out + int64_t(i) * T;
    for (int j = 0; j <= i; ++j) row[j] = std::exp(alpha[j] + rho[i - j] - lz);
    for (int j = i + 1; j < T; ++j) row[j] = 0.0;
  }
}

void extend_to_positions(std::vector<double>& alpha, std::vector<double>& rho,
                         std::vector<double>& log_z, int n_positions) {
  const int T = int(alpha.size());
  check(T >= 1 && int(rho.size()) == T && int(log_z.size()) == T,
        "saf::extend_to_positions: alpha, rho and log_z must have the same non-zero length");
  check(n_positions >= T, "saf::extend_to_positions: n_positions (" +
                              std::to_string(n_positions) + ") is below the fitted length (" +
                              std::to_string(T) + ")");
  pad_to_positions(alpha, rho, n_positions);
  log_z.resize(static_cast<size_t>(n_positions));
#pragma omp parallel for schedule(static, 16)
  for (int i = T; i < n_positions; ++i) log_z[i] = log_normaliser_row(alpha.data(), rho.data(), i);
}

}  // namespace hw::saf

namespace hw::saf {

void pad_to_positions(std::vector<double>& alpha, std::vector<double>& rho, int n_positions) {
  const int T = int(alpha.size());
  check(T >= 1 && int(rho.size()) == T, "saf::pad_to_positions: alpha and rho must have the same non-zero length");
  check(n_positions >= T, "saf::pad_to_positions: n_positions (" + std::to_string(n_positions) +
                              ") is below the fitted length (" + std::to_string(T) + ")");
  const double rho_last = rho[size_t(T - 1)];
  alpha.resize(size_t(n_positions), 0.0);
  rho.resize(size_t(n_positions), rho_last);
}

}  // namespace hw::saf
