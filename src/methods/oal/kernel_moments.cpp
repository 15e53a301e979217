#include "headwise/methods/oal/kernel_moments.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "headwise/core/error.hpp"
#include "kernels/cpu/cblas.hpp"
#include "methods/oal/kernel_loss_terms.hpp"

namespace hw::oal {

namespace {

// Queries per block: the block's pair weights are kQueryBlock x pairs x T doubles (21 pairs at
// T = 4096: 22 MB).
constexpr int kQueryBlock = 32;

// Columns `cols` of T strided float rows, times `scale`, as a dense [T][cols] double matrix.
std::vector<double> gather(const float* base, int64_t stride, int T, const std::vector<int>& cols, double scale) {
  const size_t w = cols.size();
  std::vector<double> out(size_t(T) * w);
  for (int t = 0; t < T; ++t)
    for (size_t c = 0; c < w; ++c) out[size_t(t) * w + c] = scale * double(base[int64_t(t) * stride + cols[c]]);
  return out;
}

std::vector<int> all_columns(int d) {
  std::vector<int> c(static_cast<size_t>(d));
  for (int r = 0; r < d; ++r) c[size_t(r)] = r;
  return c;
}

}  // namespace

KernelMoments kernel_moments(const HeadRows& h, const std::vector<int32_t>& groups, int G) {
  check(G >= 1 && int(groups.size()) == h.d && h.T >= 1, "OAL moments: groups must be head_dim long and G >= 1");
  const int G1 = G + 1, T = h.T, d = h.d;
  KernelMoments m;
  m.T = T;
  m.d = d;
  m.G = G;
  m.groups = groups;
  m.pairs = G1 * (G1 + 1) / 2;
  const int NP = m.pairs;
  std::vector<int> pa, pb;  // pair p = (pa[p], pb[p]), a <= b
  for (int a = 0; a < G1; ++a)
    for (int b = a; b < G1; ++b) pa.push_back(a), pb.push_back(b);

  // Each group's dimensions of q (times 1/sqrt(d)) and of k, dense; s_g = q_g . k_g.
  std::vector<std::vector<double>> Qg(static_cast<size_t>(G1)), Kg(static_cast<size_t>(G1));
  std::vector<int> width(static_cast<size_t>(G1), 0);
  for (int g = 1; g < G1; ++g) {
    std::vector<int> cols;
    for (int r = 0; r < d; ++r) {
      check(groups[size_t(r)] >= 1 && groups[size_t(r)] <= G, "OAL moments: a group index is outside 1..G");
      if (groups[size_t(r)] == g) cols.push_back(r);
    }
    width[size_t(g)] = int(cols.size());
    Qg[size_t(g)] = gather(h.q, h.q_stride, T, cols, 1.0 / std::sqrt(double(d)));
    Kg[size_t(g)] = gather(h.k, h.k_stride, T, cols, 1.0);
  }
  // [V | 1]: the product's extra column is each pair's weight sum Z, so the block's sums come
  // out of the one BLAS product instead of a serial sum per row and pair beside it.
  std::vector<double> V(size_t(T) * size_t(d + 1));
  {
    const std::vector<double> v = gather(h.v, h.v_stride, T, all_columns(d), 1.0);
    for (int t = 0; t < T; ++t) {
      std::copy_n(v.data() + size_t(t) * size_t(d), d, V.data() + size_t(t) * size_t(d + 1));
      V[size_t(t) * size_t(d + 1) + size_t(d)] = 1.0;
    }
  }

  m.Z.assign(size_t(T) * size_t(NP), 0.0);
  m.P.assign(size_t(T) * size_t(NP) * size_t(d), 0.0);
  std::vector<double> PZ(size_t(std::min(kQueryBlock, T)) * size_t(NP) * size_t(d + 1));  // [row][pair][d + 1]
  const int BR = std::min(kQueryBlock, T);
  std::vector<double> S(size_t(G1) * size_t(BR) * size_t(T));  // [g][row][key], leading dimension n
  std::vector<double> W(size_t(BR) * size_t(NP) * size_t(T));  // [row][pair][key]
  for (int i0 = 0; i0 < T; i0 += BR) {
    const int rows = std::min(BR, T - i0), n = i0 + rows;  // the block's queries see keys 0..n-1
    for (int g = 1; g < G1; ++g) {
      double* Sg = S.data() + size_t(g) * size_t(BR) * size_t(T);  // [rows][n]
      const int w = width[size_t(g)];
      if (w == 0) {
        std::fill(Sg, Sg + size_t(rows) * size_t(n), 0.0);
        continue;
      }
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, w, 1.0, Qg[size_t(g)].data() + size_t(i0) * size_t(w),
                  w, Kg[size_t(g)].data(), w, 0.0, Sg, n);
    }
    auto score_row = [&](int g, int r) { return S.data() + size_t(g) * size_t(BR) * size_t(T) + size_t(r) * size_t(n); };
    for (int r = 0; r < rows; ++r) {
      const int i = i0 + r;
      for (int p = 0; p < NP; ++p) {
        double* wr = W.data() + (size_t(r) * size_t(NP) + size_t(p)) * size_t(n);
        const double* sa = pa[size_t(p)] ? score_row(pa[size_t(p)], r) : nullptr;  // s_0 = 1
        const double* sb = pb[size_t(p)] ? score_row(pb[size_t(p)], r) : nullptr;
        if (sa && sb)
          for (int j = 0; j <= i; ++j) wr[j] = sa[j] * sb[j];
        else if (sa || sb)
          std::copy_n(sa ? sa : sb, i + 1, wr);
        else
          std::fill(wr, wr + i + 1, 1.0);
        std::fill(wr + i + 1, wr + n, 0.0);  // causal: keys after the query weigh nothing
      }
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows * NP, d + 1, n, 1.0, W.data(), n, V.data(), d + 1, 0.0,
                PZ.data(), d + 1);
    for (int rp = 0; rp < rows * NP; ++rp) {
      const double* src = PZ.data() + size_t(rp) * size_t(d + 1);
      std::copy_n(src, d, m.P.data() + (size_t(i0) * size_t(NP) + size_t(rp)) * size_t(d));
      m.Z[size_t(i0) * size_t(NP) + size_t(rp)] = src[d];
    }
  }
  return m;
}

double moments_loss(const KernelMoments& m, const GroupedKernel& k, const int* positions, int n, const double* targets,
                    double* dL) {
  const int G1 = k.G + 1, NP = m.pairs, d = m.d;
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
  std::vector<double> y(static_cast<size_t>(d)), g(static_cast<size_t>(d)), A(static_cast<size_t>(G1 * G1), 0.0);
  double loss = 0.0;
  const double norm = 1.0 / (double(n) * double(d));
  for (int q = 0; q < n; ++q) {
    const int i = positions[q];
    check(i >= 0 && i < m.T, "OAL moments: query position " + std::to_string(i) + " is outside the sequence");
    const double* Zi = m.Z.data() + size_t(i) * size_t(NP);
    const double* Pi = m.P.data() + size_t(i) * size_t(NP) * size_t(d);
    double z = 0.0;
    std::fill(y.begin(), y.end(), 0.0);
    for (int p = 0; p < NP; ++p) {
      z += coef[size_t(p)] * Zi[p];
      const double* Pp = Pi + size_t(p) * size_t(d);
      for (int r = 0; r < d; ++r) y[size_t(r)] += coef[size_t(p)] * Pp[r];
    }
    loss += detail::query_error(y.data(), z, targets + size_t(q) * size_t(d), d, norm, g.data(), i);
    if (!dL) continue;
    // A = sum_j c_j s s^T with c_j = g . (v_j - y) / z (kernel_loss), pair by pair.
    double gy = 0.0;
    for (int r = 0; r < d; ++r) gy += g[size_t(r)] * y[size_t(r)];
    for (int p = 0; p < NP; ++p) {
      const double* Pp = Pi + size_t(p) * size_t(d);
      double gp = 0.0;
      for (int r = 0; r < d; ++r) gp += g[size_t(r)] * Pp[r];
      const double c = (gp - gy * Zi[p]) / z;
      A[size_t(pa[size_t(p)] * G1 + pb[size_t(p)])] += c;
      if (pa[size_t(p)] != pb[size_t(p)]) A[size_t(pb[size_t(p)] * G1 + pa[size_t(p)])] += c;
    }
  }
  if (dL) detail::add_lower_gradient(A, k.L, G1, dL);
  return loss;
}

void softmax_outputs(const HeadRows& h, double* out) {
  const int T = h.T, d = h.d;
  const std::vector<int> cols = all_columns(d);
  const std::vector<double> Q = gather(h.q, h.q_stride, T, cols, 1.0 / std::sqrt(double(d)));
  const std::vector<double> K = gather(h.k, h.k_stride, T, cols, 1.0);
  const std::vector<double> V = gather(h.v, h.v_stride, T, cols, 1.0);
  const int BR = std::min(kQueryBlock, T);
  std::vector<double> S(size_t(BR) * size_t(T)), z(static_cast<size_t>(BR));
  for (int i0 = 0; i0 < T; i0 += BR) {
    const int rows = std::min(BR, T - i0), n = i0 + rows;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, d, 1.0, Q.data() + size_t(i0) * size_t(d), d, K.data(),
                d, 0.0, S.data(), n);
    for (int r = 0; r < rows; ++r) {
      const int i = i0 + r;
      double* s = S.data() + size_t(r) * size_t(n);
      const double mx = *std::max_element(s, s + i + 1);
      double sum = 0.0;
      for (int j = 0; j <= i; ++j) sum += (s[j] = std::exp(s[j] - mx));
      std::fill(s + i + 1, s + n, 0.0);
      z[size_t(r)] = sum;
    }
    double* o = out + size_t(i0) * size_t(d);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, d, n, 1.0, S.data(), n, V.data(), d, 0.0, o, d);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < d; ++c) o[size_t(r) * size_t(d) + size_t(c)] /= z[size_t(r)];
  }
}

}  // namespace hw::oal
