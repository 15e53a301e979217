#include "headwise/methods/oal/kernel.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "headwise/core/error.hpp"
#include "methods/oal/kernel_loss_terms.hpp"

namespace hw::oal {

void softmax_output(const HeadRows& h, int i, double* out) {
  const int d = h.d;
  const double rs = 1.0 / std::sqrt(double(d));
  const float* qi = h.q + int64_t(i) * h.q_stride;
  std::vector<double> s(size_t(i + 1));
  double mx = -INFINITY;
  for (int j = 0; j <= i; ++j) {
    const float* kj = h.k + int64_t(j) * h.k_stride;
    double dot = 0.0;
    for (int r = 0; r < d; ++r) dot += double(qi[r]) * double(kj[r]);
    s[size_t(j)] = dot * rs;
    mx = std::max(mx, s[size_t(j)]);
  }
  double z = 0.0;
  for (int r = 0; r < d; ++r) out[r] = 0.0;
  for (int j = 0; j <= i; ++j) {
    const double w = std::exp(s[size_t(j)] - mx);
    z += w;
    const float* vj = h.v + int64_t(j) * h.v_stride;
    for (int r = 0; r < d; ++r) out[r] += w * double(vj[r]);
  }
  for (int r = 0; r < d; ++r) out[r] /= z;
}

namespace {

// s = [1, s_1..s_G] of the pair (i, j).
void group_scores(const HeadRows& h, const GroupedKernel& k, const float* qi, int j, double* s) {
  const int G1 = k.G + 1;
  const double rs = 1.0 / std::sqrt(double(h.d));
  std::fill(s, s + G1, 0.0);
  const float* kj = h.k + int64_t(j) * h.k_stride;
  for (int r = 0; r < h.d; ++r) s[k.groups[size_t(r)]] += double(qi[r]) * double(kj[r]);
  for (int g = 1; g < G1; ++g) s[g] *= rs;
  s[0] = 1.0;
}

// kappa = eps + ||L^T s||^2; t = L^T s (G+1).
double kappa_of(const GroupedKernel& k, const double* s, double* t) {
  const int G1 = k.G + 1;
  double sq = 0.0;
  for (int c = 0; c < G1; ++c) {
    double v = 0.0;
    for (int a = c; a < G1; ++a) v += k.L[size_t(a * G1 + c)] * s[a];  // lower triangle: a >= c
    t[c] = v;
    sq += v * v;
  }
  return k.eps + sq;
}

void check_kernel(const HeadRows& h, const GroupedKernel& k) {
  check(k.G >= 1 && k.L.size() == size_t((k.G + 1) * (k.G + 1)) && int(k.groups.size()) == h.d,
        "OAL kernel: L must be (G+1)x(G+1) and groups head_dim long");
}

}  // namespace

void kernel_output(const HeadRows& h, const GroupedKernel& k, int i, double* out, double* den) {
  check_kernel(h, k);
  const int d = h.d, G1 = k.G + 1;
  std::vector<double> s(static_cast<size_t>(G1)), t(static_cast<size_t>(G1));
  const float* qi = h.q + int64_t(i) * h.q_stride;
  double z = 0.0;
  for (int r = 0; r < d; ++r) out[r] = 0.0;
  for (int j = 0; j <= i; ++j) {
    group_scores(h, k, qi, j, s.data());
    const double w = kappa_of(k, s.data(), t.data());
    z += w;
    const float* vj = h.v + int64_t(j) * h.v_stride;
    for (int r = 0; r < d; ++r) out[r] += w * double(vj[r]);
  }
  check(z > 0.0 && std::isfinite(z), "OAL kernel: non-positive or non-finite denominator " + std::to_string(z) +
                                         " at query " + std::to_string(i));
  for (int r = 0; r < d; ++r) out[r] /= z;
  if (den) *den = z;
}

double kernel_loss(const HeadRows& h, const GroupedKernel& k, const int* positions, int n, const double* targets,
                   double* dL) {
  check_kernel(h, k);
  const int d = h.d, G1 = k.G + 1;
  std::vector<double> y(static_cast<size_t>(d)), g(static_cast<size_t>(d)), s(static_cast<size_t>(G1)), t(static_cast<size_t>(G1));
  std::vector<double> A(size_t(G1 * G1), 0.0);  // sum_ij c_ij s s^T
  std::vector<double> S;                        // the pair scores of one query, [i+1][G1]
  std::vector<double> w;
  double loss = 0.0;
  const double norm = 1.0 / (double(n) * double(d));
  for (int p = 0; p < n; ++p) {
    const int i = positions[p];
    const float* qi = h.q + int64_t(i) * h.q_stride;
    S.resize(size_t(i + 1) * size_t(G1));
    w.resize(size_t(i + 1));
    double z = 0.0;
    std::fill(y.begin(), y.end(), 0.0);
    for (int j = 0; j <= i; ++j) {
      double* sj = S.data() + size_t(j) * size_t(G1);
      group_scores(h, k, qi, j, sj);
      w[size_t(j)] = kappa_of(k, sj, t.data());
      z += w[size_t(j)];
      const float* vj = h.v + int64_t(j) * h.v_stride;
      for (int r = 0; r < d; ++r) y[size_t(r)] += w[size_t(j)] * double(vj[r]);
    }
    loss += detail::query_error(y.data(), z, targets + size_t(p) * size_t(d), d, norm, g.data(), i);
    if (!dL) continue;
    // d loss / d w_j = g . (v_j - y) / z
    double gy = 0.0;
    for (int r = 0; r < d; ++r) gy += g[size_t(r)] * y[size_t(r)];
    for (int j = 0; j <= i; ++j) {
      const float* vj = h.v + int64_t(j) * h.v_stride;
      double gv = 0.0;
      for (int r = 0; r < d; ++r) gv += g[size_t(r)] * double(vj[r]);
      const double c = (gv - gy) / z;
      const double* sj = S.data() + size_t(j) * size_t(G1);
      for (int a = 0; a < G1; ++a)
        for (int b = 0; b < G1; ++b) A[size_t(a * G1 + b)] += c * sj[a] * sj[b];
    }
  }
  if (dL) detail::add_lower_gradient(A, k.L, G1, dL);
  return loss;
}

std::vector<double> taylor_L(int G) {
  return embed_global({1.0, 0.0, 0.5, 0.5}, G);
}

std::vector<double> embed_global(const std::vector<double>& L1, int G) {
  check(L1.size() == 4 && G >= 1, "OAL: embed_global needs a 2x2 L and G >= 1");
  const int G1 = G + 1;
  std::vector<double> L(size_t(G1 * G1), 0.0);
  L[0] = L1[0];
  for (int a = 1; a < G1; ++a) {
    L[size_t(a * G1)] = L1[2];
    L[size_t(a * G1 + 1)] = L1[3];
  }
  return L;
}

}  // namespace hw::oal
