#include "headwise/methods/aoh/spectrum.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "headwise/core/error.hpp"

namespace hw::aoh {

namespace {
constexpr int kMaxSweeps = 100;
constexpr double kEps = 1e-15;  // relative size at which an off-diagonal entry counts as zero
}  // namespace

std::vector<double> symmetric_eigenvalues(std::vector<double> a, int n) {
  check(n >= 0 && a.size() == size_t(n) * size_t(n), "symmetric_eigenvalues: matrix is not n x n");
  auto at = [&](int i, int j) -> double& { return a[size_t(i) * size_t(n) + size_t(j)]; };
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    double off = 0.0, diag = 0.0;
    for (int i = 0; i < n; ++i) {
      diag += at(i, i) * at(i, i);
      for (int j = i + 1; j < n; ++j) off += at(i, j) * at(i, j);
    }
    if (off <= kEps * kEps * diag || off == 0.0) break;
    for (int p = 0; p < n; ++p)
      for (int q = p + 1; q < n; ++q) {
        const double apq = at(p, q);
        if (apq == 0.0) continue;
        // Rotation that zeroes a_pq (Golub & Van Loan, Algorithm 8.4.1).
        const double tau = (at(q, q) - at(p, p)) / (2.0 * apq);
        const double t = (tau >= 0 ? 1.0 : -1.0) / (std::abs(tau) + std::sqrt(1.0 + tau * tau));
        const double c = 1.0 / std::sqrt(1.0 + t * t), s = t * c;
        for (int k = 0; k < n; ++k) {  // columns p, q
          const double akp = at(k, p), akq = at(k, q);
          at(k, p) = c * akp - s * akq;
          at(k, q) = s * akp + c * akq;
        }
        for (int k = 0; k < n; ++k) {  // rows p, q
          const double apk = at(p, k), aqk = at(q, k);
          at(p, k) = c * apk - s * aqk;
          at(q, k) = s * apk + c * aqk;
        }
        at(p, q) = at(q, p) = 0.0;
      }
  }
  std::vector<double> ev(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ev[size_t(i)] = at(i, i);
  std::sort(ev.begin(), ev.end(), std::greater<>());
  return ev;
}

std::vector<double> singular_values(std::vector<double> a, int rows, int cols) {
  check(rows >= 0 && cols >= 0 && a.size() == size_t(rows) * size_t(cols), "singular_values: wrong matrix size");
  // Work on the side with fewer columns: sigma(A) = sigma(A^T).
  if (cols > rows) {
    std::vector<double> t(a.size());
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) t[size_t(j) * size_t(rows) + size_t(i)] = a[size_t(i) * size_t(cols) + size_t(j)];
    a.swap(t);
    std::swap(rows, cols);
  }
  auto at = [&](int i, int j) -> double& { return a[size_t(i) * size_t(cols) + size_t(j)]; };
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    bool rotated = false;
    for (int p = 0; p < cols; ++p)
      for (int q = p + 1; q < cols; ++q) {
        double alpha = 0.0, beta = 0.0, gamma = 0.0;
        for (int i = 0; i < rows; ++i) {
          alpha += at(i, p) * at(i, p);
          beta += at(i, q) * at(i, q);
          gamma += at(i, p) * at(i, q);
        }
        if (gamma == 0.0 || std::abs(gamma) <= kEps * std::sqrt(alpha * beta)) continue;
        rotated = true;
        // Rotation that makes columns p and q orthogonal.
        const double zeta = (beta - alpha) / (2.0 * gamma);
        const double t = (zeta >= 0 ? 1.0 : -1.0) / (std::abs(zeta) + std::sqrt(1.0 + zeta * zeta));
        const double c = 1.0 / std::sqrt(1.0 + t * t), s = c * t;
        for (int i = 0; i < rows; ++i) {
          const double ap = at(i, p), aq = at(i, q);
          at(i, p) = c * ap - s * aq;
          at(i, q) = s * ap + c * aq;
        }
      }
    if (!rotated) break;
  }
  std::vector<double> sv(static_cast<size_t>(cols));
  for (int j = 0; j < cols; ++j) {
    double n2 = 0.0;
    for (int i = 0; i < rows; ++i) n2 += at(i, j) * at(i, j);
    sv[size_t(j)] = std::sqrt(n2);
  }
  std::sort(sv.begin(), sv.end(), std::greater<>());
  return sv;
}

std::vector<double> qr_r_factor(std::vector<double> a, int rows, int cols) {
  check(rows >= cols && cols >= 0 && a.size() == size_t(rows) * size_t(cols), "qr_r_factor: need rows >= cols");
  // Worked on column by column: the columns are made contiguous first (a 2048 x 64 row-major
  // matrix walked down its columns touched one cache line per element). Every sum still runs
  // down its column in row order.
  std::vector<double> col(a.size());
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) col[size_t(j) * size_t(rows) + size_t(i)] = a[size_t(i) * size_t(cols) + size_t(j)];
  auto at = [&](int i, int j) -> double& { return col[size_t(j) * size_t(rows) + size_t(i)]; };
  std::vector<double> v(static_cast<size_t>(rows));
  for (int k = 0; k < cols; ++k) {
    const double* ck = &at(0, k);
    double norm2 = 0.0;
    for (int i = k; i < rows; ++i) norm2 += ck[i] * ck[i];
    const double norm = std::sqrt(norm2);
    if (norm == 0.0) continue;  // column already zero below the diagonal
    const double alpha = ck[k] > 0 ? -norm : norm;
    // v = x - alpha e1; H = I - 2 v v^T / (v^T v)
    double vv = 0.0;
    for (int i = k; i < rows; ++i) {
      v[size_t(i)] = ck[i] - (i == k ? alpha : 0.0);
      vv += v[size_t(i)] * v[size_t(i)];
    }
    if (vv == 0.0) continue;
    for (int j = k; j < cols; ++j) {
      double* cj = &at(0, j);
      double d = 0.0;
      for (int i = k; i < rows; ++i) d += v[size_t(i)] * cj[i];
      const double f = 2.0 * d / vv;
      for (int i = k; i < rows; ++i) cj[i] -= f * v[size_t(i)];
    }
  }
  std::vector<double> r(size_t(cols) * size_t(cols), 0.0);
  for (int i = 0; i < cols; ++i)
    for (int j = i; j < cols; ++j) r[size_t(i) * size_t(cols) + size_t(j)] = at(i, j);
  return r;
}

std::vector<double> qk_singular_values(const std::vector<double>& wq_t, const std::vector<double>& wk_t, int d_model,
                                       int d_head) {
  check(d_model >= d_head && d_head > 0, "qk_singular_values: need d_model >= d_head > 0");
  return qk_singular_values_from_r(qr_r_factor(wq_t, d_model, d_head), qr_r_factor(wk_t, d_model, d_head), d_head);
}

std::vector<double> qk_singular_values_from_r(const std::vector<double>& rq, const std::vector<double>& rk, int d_head) {
  check(d_head > 0 && rq.size() == size_t(d_head) * size_t(d_head) && rk.size() == rq.size(),
        "qk_singular_values_from_r: R factors must be d_head x d_head");
  // B = R_K R_Q^T
  const size_t d = size_t(d_head);
  std::vector<double> b(d * d, 0.0);
  for (size_t i = 0; i < d; ++i)
    for (size_t j = 0; j < d; ++j) {
      double s = 0.0;
      for (size_t k = 0; k < d; ++k) s += rk[i * d + k] * rq[j * d + k];
      b[i * d + j] = s;
    }
  return singular_values(std::move(b), d_head, d_head);
}

double effective_rank(const std::vector<double>& sigma) {
  double sum = 0.0;
  for (double s : sigma) {
    check(s >= 0.0 && std::isfinite(s), "effective_rank: singular values must be finite and >= 0");
    sum += s;
  }
  if (sum == 0.0) return 0.0;
  double h = 0.0;
  for (double s : sigma) {
    const double p = s / sum;
    if (p > 0.0) h -= p * std::log(p);
  }
  return std::exp(h);
}

}  // namespace hw::aoh
