#include "headwise/methods/oal/approximators.hpp"

#include <algorithm>
#include <cmath>

#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/model/head_extras.hpp"

namespace hw::oal {

namespace {

// M x n Gaussian rows, orthogonal within each block of n rows (Gram-Schmidt), each row then
// scaled to the norm of an independent n-dimensional Gaussian vector.
std::vector<double> orthogonal_features(int M, int n, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> W(size_t(M) * size_t(n));
  for (int b0 = 0; b0 < M; b0 += n) {
    const int rows = std::min(n, M - b0);
    for (int r = 0; r < rows; ++r) {
      double* w = W.data() + size_t(b0 + r) * size_t(n);
      for (int c = 0; c < n; ++c) w[c] = rng.normal();
      for (int p = 0; p < r; ++p) {
        const double* u = W.data() + size_t(b0 + p) * size_t(n);
        double dot = 0;
        for (int c = 0; c < n; ++c) dot += w[c] * u[c];
        for (int c = 0; c < n; ++c) w[c] -= dot * u[c];
      }
      double nn = 0;
      for (int c = 0; c < n; ++c) nn += w[c] * w[c];
      nn = std::sqrt(std::max(nn, 1e-300));
      for (int c = 0; c < n; ++c) w[c] /= nn;  // unit for the next rows' projections
    }
    for (int r = 0; r < rows; ++r) {
      double g = 0;
      for (int c = 0; c < n; ++c) {
        const double x = rng.normal();
        g += x * x;
      }
      double* w = W.data() + size_t(b0 + r) * size_t(n);
      for (int c = 0; c < n; ++c) w[c] *= std::sqrt(g);
    }
  }
  return W;
}

// log phi(x) per feature (the 1/sqrt(M) factors cancel in the normalisation).
void log_features(const std::vector<double>& W, int M, const std::vector<double>& x, double* out) {
  const int n = int(x.size());
  double sq = 0;
  for (double v : x) sq += v * v;
  for (int m = 0; m < M; ++m) {
    double dot = 0;
    for (int c = 0; c < n; ++c) dot += W[size_t(m) * size_t(n) + size_t(c)] * x[size_t(c)];
    out[m] = dot - 0.5 * sq;
  }
}

void performer_weights(const HeadRows& h, const std::vector<int>& S, int i, uint64_t seed, int features, double* w) {
  const int n = int(S.size()), M = features;
  const std::vector<double> W = orthogonal_features(M, n, seed);
  const double sc = 1.0 / std::pow(double(h.d), 0.25);
  std::vector<double> x(static_cast<size_t>(n)), lq(static_cast<size_t>(M)), lk(static_cast<size_t>(M));
  for (int c = 0; c < n; ++c) x[size_t(c)] = sc * double(h.q[int64_t(i) * h.q_stride + S[size_t(c)]]);
  log_features(W, M, x, lq.data());
  for (int j = 0; j <= i; ++j) {
    for (int c = 0; c < n; ++c) x[size_t(c)] = sc * double(h.k[int64_t(j) * h.k_stride + S[size_t(c)]]);
    log_features(W, M, x, lk.data());
    double s = 0;
    for (int m = 0; m < M; ++m) s += std::exp(lq[size_t(m)] + lk[size_t(m)]);
    w[j] = s / double(M);
  }
}

void taylor_weights(const HeadRows& h, const std::vector<int>& S, int i, uint64_t, int, double* w) {
  const double rs = 1.0 / std::sqrt(double(h.d));
  for (int j = 0; j <= i; ++j) {
    double s = 0;
    for (int r : S) s += double(h.q[int64_t(i) * h.q_stride + r]) * double(h.k[int64_t(j) * h.k_stride + r]);
    s *= rs;
    w[j] = 1.0 + s + 0.5 * s * s;
  }
}

// x_S' = x_S / d^(1/4) of row t (d the head's full dimension, as the exact part's 1/sqrt(d)).
std::vector<double> subset_row(const float* x, int64_t stride, int t, const std::vector<int>& S, int d) {
  const double sc = 1.0 / std::pow(double(d), 0.25);
  std::vector<double> r(S.size());
  for (size_t c = 0; c < S.size(); ++c) r[c] = sc * double(x[int64_t(t) * stride + S[c]]);
  return r;
}

// softmax(C x) with C the orthonormal n x n DCT-II (n = |S|).
std::vector<double> dct_softmax(const std::vector<double>& x) {
  const int n = int(x.size());
  const double pi = std::acos(-1.0);
  std::vector<double> a(static_cast<size_t>(n));
  double mx = -INFINITY;
  for (int f = 0; f < n; ++f) {
    double z = 0;
    for (int c = 0; c < n; ++c) z += std::sqrt((f == 0 ? 1.0 : 2.0) / n) * std::cos(pi * (c + 0.5) * f / n) * x[size_t(c)];
    a[size_t(f)] = z;
    mx = std::max(mx, z);
  }
  double sum = 0;
  for (double& e : a) sum += (e = std::exp(e - mx));
  for (double& e : a) e /= sum;
  return a;
}

// dijiang on S: sum_m w_m a_m(q_S) a_m(k_S), a = softmax(C x_S'), the |S| weights at their start 1.
void dijiang_weights(const HeadRows& h, const std::vector<int>& S, int i, uint64_t, int, double* w) {
  const std::vector<double> aq = dct_softmax(subset_row(h.q, h.q_stride, i, S, h.d));
  for (int j = 0; j <= i; ++j) {
    const std::vector<double> ak = dct_softmax(subset_row(h.k, h.k_stride, j, S, h.d));
    double s = 0;
    for (size_t m = 0; m < aq.size(); ++m) s += aq[m] * ak[m];
    w[j] = s;
  }
}

// taylorshift on S: 1 + s + s^2/2, s = tau q_S.k_S / (|q_S| |k_S|), tau at its start 1 (a zero
// subset row gives s = 0).
void taylorshift_weights(const HeadRows& h, const std::vector<int>& S, int i, uint64_t, int, double* w) {
  auto unit = [](std::vector<double> x) {
    double n = 0;
    for (double e : x) n += e * e;
    n = std::sqrt(n);
    for (double& e : x) e = n > 0 ? e / n : 0.0;
    return x;
  };
  const double tau = double(default_taylorshift_values().tau);
  const std::vector<double> q = unit(subset_row(h.q, h.q_stride, i, S, h.d));
  for (int j = 0; j <= i; ++j) {
    const std::vector<double> k = unit(subset_row(h.k, h.k_stride, j, S, h.d));
    double s = 0;
    for (size_t c = 0; c < q.size(); ++c) s += q[c] * k[c];
    s *= tau;
    w[j] = 1.0 + s + 0.5 * s * s;
  }
}

}  // namespace

const std::vector<SubsetApprox>& subset_approximators() {
  static const std::vector<SubsetApprox> table = {{"performer", true, &performer_weights},
                                                  {"taylor2", false, &taylor_weights},
                                                  {"dijiang", false, &dijiang_weights},
                                                  {"taylorshift", false, &taylorshift_weights}};
  return table;
}

void mixed_weights(const HeadRows& h, const SubsetApprox& a, const std::vector<int>& S, int i, uint64_t seed,
                   int features, double* w) {
  std::vector<char> in_s(size_t(h.d), 0);
  for (int r : S) in_s[size_t(r)] = 1;
  const double rs = 1.0 / std::sqrt(double(h.d));
  std::vector<double> rest(size_t(i + 1), 0.0);
  double mx = -INFINITY;
  for (int j = 0; j <= i; ++j) {
    double s = 0;
    for (int r = 0; r < h.d; ++r)
      if (!in_s[size_t(r)]) s += double(h.q[int64_t(i) * h.q_stride + r]) * double(h.k[int64_t(j) * h.k_stride + r]);
    rest[size_t(j)] = s * rs;
    mx = std::max(mx, rest[size_t(j)]);
  }
  if (S.empty()) {
    for (int j = 0; j <= i; ++j) w[j] = std::exp(rest[size_t(j)] - mx);
    return;
  }
  a.weights(h, S, i, seed, features, w);
  for (int j = 0; j <= i; ++j) w[j] *= std::exp(rest[size_t(j)] - mx);
}

}  // namespace hw::oal
