#include "headwise/methods/oal/kernel_moments.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "headwise/core/error.hpp"
#include "headwise/kernels/cpu.hpp"
#include "kernels/cpu/cblas.hpp"

namespace hw::oal {

namespace {

// Queries per block of softmax_outputs: S is kQueryBlock x T doubles.
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

// Pair p = (a, b) as a dot product of features: s_a(i, j) s_b(i, j) = phi_p(q_i) . psi_p(k_j),
// with s_0 = 1 and s_g = q_g . k_g, so phi and psi are 1 for (0, 0), q_b and k_b for (0, b),
// the products q_r q_s and k_r k_s (r in a, s in b) for a < b, and for a = b the products with
// r <= s, the key side doubled where r < s (the two orders of the symmetric pair). `offset` is
// the pair's first column among all pairs' features.
struct PairFeatures {
  int a = 0, b = 0, offset = 0, width = 0;
};

// One row t's features of every pair from the groups' dense rows X[g] ([T][width[g]]): the
// query side (key = false) or the key side.
void row_features(const std::vector<std::vector<double>>& X, const std::vector<int>& width,
                  const std::vector<PairFeatures>& pairs, int t, bool key, double* out) {
  for (const PairFeatures& p : pairs) {
    double* o = out + p.offset;
    if (p.a == 0 && p.b == 0) {
      o[0] = 1.0;
      continue;
    }
    const int wb = width[size_t(p.b)];
    const double* xb = X[size_t(p.b)].data() + size_t(t) * size_t(wb);
    if (p.a == 0) {
      std::copy_n(xb, wb, o);
      continue;
    }
    const int wa = width[size_t(p.a)];
    const double* xa = X[size_t(p.a)].data() + size_t(t) * size_t(wa);
    if (p.a == p.b) {
      for (int r = 0; r < wa; ++r) {
        *o++ = xa[r] * xa[r];
        const double twice = key ? 2.0 * xa[r] : xa[r];
        for (int s = r + 1; s < wa; ++s) *o++ = twice * xa[s];
      }
    } else {
      for (int r = 0; r < wa; ++r)
        for (int s = 0; s < wb; ++s) *o++ = xa[r] * xb[s];
    }
  }
}

}  // namespace

KernelMoments kernel_moments(const HeadRows& h, const std::vector<int32_t>& groups, int G, int chunk) {
  check(G >= 1 && int(groups.size()) == h.d && h.T >= 1 && chunk >= 1,
        "OAL moments: groups must be head_dim long, G >= 1 and the chunk >= 1");
  const int G1 = G + 1, T = h.T, d = h.d, D1 = d + 1;
  KernelMoments m;
  m.T = T;
  m.d = d;
  m.G = G;
  m.groups = groups;
  m.pairs = G1 * (G1 + 1) / 2;
  const int NP = m.pairs;

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
  std::vector<PairFeatures> pairs;  // p = (a, b), a <= b, in the order of m.Z's and m.P's pairs
  int F = 0;
  for (int a = 0; a < G1; ++a)
    for (int b = a; b < G1; ++b) {
      const int wa = a ? width[size_t(a)] : 1, wb = b ? width[size_t(b)] : 1;
      const int w = a == 0 ? wb : (a == b ? wa * (wa + 1) / 2 : wa * wb);
      pairs.push_back({a, b, F, w});
      F += w;
    }
  // [V | 1]: the products' extra column is each pair's weight sum Z, so the sums come out of
  // the same BLAS products as the weighted values.
  std::vector<double> V(size_t(T) * size_t(D1));
  {
    const std::vector<double> v = gather(h.v, h.v_stride, T, all_columns(d), 1.0);
    for (int t = 0; t < T; ++t) {
      std::copy_n(v.data() + size_t(t) * size_t(d), d, V.data() + size_t(t) * size_t(D1));
      V[size_t(t) * size_t(D1) + size_t(d)] = 1.0;
    }
  }

  // Chunk by chunk of `chunk` positions (queries and keys alike). A query's sum over the keys
  // j <= i splits into the keys of its own chunk, whose pair weights s_a s_b are formed from
  // the chunk's scores and multiplied ([rows x pairs, rows] x [rows, d + 1], zero above the
  // diagonal), and all earlier keys, which enter through the running sums
  // state_p = sum_j psi_p(k_j) [v_j | 1]^T ([F, d + 1] over every pair): phi_p(q_i)^T state_p.
  // That is 4 F (d + 1) flops per position (F = 1 + d + d (d + 1) / 2, whatever the grouping)
  // in place of pairs x (d + 1) x i per query of the pair-by-pair products.
  m.Z.assign(size_t(T) * size_t(NP), 0.0);
  m.P.assign(size_t(T) * size_t(NP) * size_t(d), 0.0);
  const int C = std::min(chunk, T);
  std::vector<double> PZ(size_t(C) * size_t(NP) * size_t(D1));  // [row][pair][d + 1]
  std::vector<double> S(size_t(G1) * size_t(C) * size_t(C));      // [g][row][key]
  std::vector<double> W(size_t(C) * size_t(NP) * size_t(C));      // [row][pair][key]
  std::vector<double> feat(size_t(C) * size_t(F));                // [row][F], queries' or keys'
  std::vector<double> state(size_t(F) * size_t(D1), 0.0);
  for (int c0 = 0; c0 < T; c0 += C) {
    const int rows = std::min(C, T - c0);
    for (int g = 1; g < G1; ++g) {
      double* Sg = S.data() + size_t(g) * size_t(C) * size_t(C);  // [rows][rows]
      const int w = width[size_t(g)];
      if (w == 0) {
        std::fill(Sg, Sg + size_t(rows) * size_t(rows), 0.0);
        continue;
      }
      const double* q = Qg[size_t(g)].data() + size_t(c0) * size_t(w);
      const double* k = Kg[size_t(g)].data() + size_t(c0) * size_t(w);
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, rows, w, 1.0, q, w, k, w, 0.0, Sg, rows);
    }
    auto score_row = [&](int g, int r) { return S.data() + size_t(g) * size_t(C) * size_t(C) + size_t(r) * size_t(rows); };
    for (int r = 0; r < rows; ++r)
      for (int p = 0; p < NP; ++p) {
        double* wr = W.data() + (size_t(r) * size_t(NP) + size_t(p)) * size_t(rows);
        const int a = pairs[size_t(p)].a, b = pairs[size_t(p)].b;
        const double* sa = a ? score_row(a, r) : nullptr;  // s_0 = 1
        const double* sb = b ? score_row(b, r) : nullptr;
        if (sa && sb)
          for (int j = 0; j <= r; ++j) wr[j] = sa[j] * sb[j];
        else if (sa || sb)
          std::copy_n(sa ? sa : sb, r + 1, wr);
        else
          std::fill(wr, wr + r + 1, 1.0);
        std::fill(wr + r + 1, wr + rows, 0.0);  // causal: keys after the query weigh nothing
      }
    const double* Vc = V.data() + size_t(c0) * size_t(D1);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows * NP, D1, rows, 1.0, W.data(), rows, Vc, D1, 0.0,
                PZ.data(), D1);
    if (c0 > 0) {  // the earlier chunks' keys
      for (int r = 0; r < rows; ++r) row_features(Qg, width, pairs, c0 + r, false, feat.data() + size_t(r) * size_t(F));
      for (int p = 0; p < NP; ++p) {
        const PairFeatures& pf = pairs[size_t(p)];
        if (pf.width == 0) continue;
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, D1, pf.width, 1.0, feat.data() + pf.offset, F,
                    state.data() + size_t(pf.offset) * size_t(D1), D1, 1.0, PZ.data() + size_t(p) * size_t(D1),
                    NP * D1);
      }
    }
    if (c0 + rows < T) {  // this chunk's keys join the running sums
      for (int r = 0; r < rows; ++r) row_features(Kg, width, pairs, c0 + r, true, feat.data() + size_t(r) * size_t(F));
      cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, F, D1, rows, 1.0, feat.data(), F, Vc, D1, 1.0,
                  state.data(), D1);
    }
    for (int rp = 0; rp < rows * NP; ++rp) {
      const double* src = PZ.data() + size_t(rp) * size_t(D1);
      std::copy_n(src, d, m.P.data() + (size_t(c0) * size_t(NP) + size_t(rp)) * size_t(d));
      m.Z[size_t(c0) * size_t(NP) + size_t(rp)] = src[d];
    }
  }
  return m;
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
      z[size_t(r)] = cpu::softmax_numerators_f64(s, i + 1);
      std::fill(s + i + 1, s + n, 0.0);
    }
    double* o = out + size_t(i0) * size_t(d);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, d, n, 1.0, S.data(), n, V.data(), d, 0.0, o, d);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < d; ++c) o[size_t(r) * size_t(d) + size_t(c)] /= z[size_t(r)];
  }
}

}  // namespace hw::oal
