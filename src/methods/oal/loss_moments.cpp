#include "headwise/methods/oal/loss_moments.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "headwise/core/error.hpp"
#include "methods/oal/kernel_loss_terms.hpp"

namespace hw::oal {

namespace {

// Where H^pq (p <= q) sits in one position's packed row: row p starts after the rows r < p,
// NP - r entries each.
int packed(int p, int q, int NP) { return p * (2 * NP - p + 1) / 2 + (q - p); }

}  // namespace

LossMoments loss_moments(const KernelMoments& m, const double* targets) {
  const int T = m.T, d = m.d, NP = m.pairs, NH = NP * (NP + 1) / 2;
  check(m.Z.size() == size_t(T) * size_t(NP) && m.P.size() == m.Z.size() * size_t(d),
        "OAL moments: kernel moments of the wrong size");
  LossMoments l;
  l.T = T;
  l.d = d;
  l.G = m.G;
  l.pairs = NP;
  l.groups = m.groups;
  l.Z = m.Z;
  l.H.assign(size_t(T) * size_t(NH), 0.0);
  std::vector<double> D(size_t(NP) * size_t(d));
  for (int i = 0; i < T; ++i) {
    const double* t = targets + size_t(i) * size_t(d);
    const double* P = m.P.data() + size_t(i) * size_t(NP) * size_t(d);
    const double* Z = m.Z.data() + size_t(i) * size_t(NP);
    for (int p = 0; p < NP; ++p)
      for (int r = 0; r < d; ++r) D[size_t(p) * size_t(d) + size_t(r)] = P[size_t(p) * size_t(d) + size_t(r)] - Z[p] * t[r];
    double* h = l.H.data() + size_t(i) * size_t(NH);
    for (int p = 0; p < NP; ++p)
      for (int q = p; q < NP; ++q) {
        const double* dp = D.data() + size_t(p) * size_t(d);
        const double* dq = D.data() + size_t(q) * size_t(d);
        double s = 0.0;
        for (int r = 0; r < d; ++r) s += dp[r] * dq[r];
        *h++ = s;
      }
  }
  return l;
}

double moments_loss(const LossMoments& m, const GroupedKernel& k, const int* positions, int n, double* dL) {
  const int G1 = k.G + 1, NP = m.pairs, NH = NP * (NP + 1) / 2;
  check(k.G == m.G && k.groups == m.groups && k.L.size() == size_t(G1 * G1),
        "OAL moments: the kernel's grouping is not the one the moments were computed for");
  // m_ab of M = L L^T (L lower triangular), doubled off the diagonal; eps joins the (0,0) pair.
  std::vector<double> coef(static_cast<size_t>(NP));
  std::vector<int> pa, pb;
  for (int a = 0, p = 0; a < G1; ++a)
    for (int b = a; b < G1; ++b, ++p) {
      double M = 0.0;
      for (int c = 0; c <= a; ++c) M += k.L[size_t(a * G1 + c)] * k.L[size_t(b * G1 + c)];
      coef[size_t(p)] = (a == b ? 1.0 : 2.0) * M + (a == 0 && b == 0 ? k.eps : 0.0);
      pa.push_back(a);
      pb.push_back(b);
    }
  std::vector<double> Hc(static_cast<size_t>(NP)), A(static_cast<size_t>(G1 * G1), 0.0);
  double loss = 0.0;
  const double norm = 1.0 / (double(n) * double(m.d));
  for (int q = 0; q < n; ++q) {
    const int i = positions[q];
    check(i >= 0 && i < m.T, "OAL moments: query position " + std::to_string(i) + " is outside the sequence");
    const double* Zi = m.Z.data() + size_t(i) * size_t(NP);
    const double* Hi = m.H.data() + size_t(i) * size_t(NH);
    double z = 0.0;
    for (int p = 0; p < NP; ++p) z += coef[size_t(p)] * Zi[p];
    check(z > 0.0 && std::isfinite(z), "OAL kernel: non-positive or non-finite denominator at query " + std::to_string(i));
    std::fill(Hc.begin(), Hc.end(), 0.0);
    for (int p = 0, e = 0; p < NP; ++p)
      for (int r = p; r < NP; ++r, ++e) {
        Hc[size_t(p)] += Hi[e] * coef[size_t(r)];
        if (r != p) Hc[size_t(r)] += Hi[e] * coef[size_t(p)];
      }
    double cHc = 0.0;
    for (int p = 0; p < NP; ++p) cHc += coef[size_t(p)] * Hc[size_t(p)];
    const double e2 = cHc / (z * z);  // ||y_i / z_i - t_i||^2
    loss += norm * e2;
    if (!dL) continue;
    // d e2 / d c_p = 2 (H c)_p / z^2 - 2 e2 Z_p / z, into A = sum_j (d loss / d kappa_ij) s s^T
    // pair by pair (kernel_loss).
    for (int p = 0; p < NP; ++p) {
      const double c = 2.0 * norm * (Hc[size_t(p)] / (z * z) - e2 * Zi[p] / z);
      A[size_t(pa[size_t(p)] * G1 + pb[size_t(p)])] += c;
      if (pa[size_t(p)] != pb[size_t(p)]) A[size_t(pb[size_t(p)] * G1 + pa[size_t(p)])] += c;
    }
  }
  if (dL) detail::add_lower_gradient(A, k.L, G1, dL);
  return loss;
}

LossMoments global_moments(const LossMoments& g) {
  const int G1 = g.G + 1, NP = g.pairs, NH = NP * (NP + 1) / 2, T = g.T;
  LossMoments m;
  m.T = T;
  m.d = g.d;
  m.G = 1;
  m.pairs = 3;
  m.groups.assign(size_t(g.d), 1);
  // Where each grouped pair (a <= b) lands: (0,0) -> (0,0); (0,b) -> (0,1); (a,b), a >= 1 ->
  // (1,1), twice off the diagonal (s_a s_b and s_b s_a).
  std::vector<int> to(static_cast<size_t>(NP));
  std::vector<double> w(static_cast<size_t>(NP));
  for (int a = 0, p = 0; a < G1; ++a)
    for (int b = a; b < G1; ++b, ++p) {
      to[size_t(p)] = a == 0 ? (b == 0 ? 0 : 1) : 2;
      w[size_t(p)] = a >= 1 && a != b ? 2.0 : 1.0;
    }
  m.Z.assign(size_t(T) * 3, 0.0);
  m.H.assign(size_t(T) * 6, 0.0);
  for (int i = 0; i < T; ++i) {
    for (int p = 0; p < NP; ++p) m.Z[size_t(i) * 3 + size_t(to[size_t(p)])] += w[size_t(p)] * g.Z[size_t(i) * size_t(NP) + size_t(p)];
    // D^q = sum_{p -> q} w_p D^p, so H^qq' = sum w_p w_p' H^pp' over both orders of each p != p'.
    double Hg[3][3] = {};
    const double* Hi = g.H.data() + size_t(i) * size_t(NH);
    for (int p = 0, e = 0; p < NP; ++p)
      for (int r = p; r < NP; ++r, ++e) {
        const double v = w[size_t(p)] * w[size_t(r)] * Hi[e];
        Hg[to[size_t(p)]][to[size_t(r)]] += v;
        if (r != p) Hg[to[size_t(r)]][to[size_t(p)]] += v;
      }
    double* h = m.H.data() + size_t(i) * 6;
    for (int a = 0; a < 3; ++a)
      for (int b = a; b < 3; ++b) h[packed(a, b, 3)] = Hg[a][b];
  }
  return m;
}

}  // namespace hw::oal
