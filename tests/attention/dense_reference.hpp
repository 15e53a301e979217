#pragma once
// Naive dense reference for the attention tests, in double: builds each head's explicit
// T x T weight matrix straight from the head-kind definitions (no tiles, no chunks, no
// prefix states, no LayerLayout) and forms out = P V; the backward differentiates the same
// dense formulas by hand. Tensors are per head: q[b][h], k[b][g], v[b][g], each T x D row-major.
#include <cmath>
#include <cstdint>
#include <vector>

#include "headwise/attention/head_plan.hpp"

namespace ref {

using Mat = std::vector<double>;  // T x D or T x T, row-major

struct Layer {
  int H = 0, KV = 0, D = 0;
  int64_t B = 0, T = 0;
  std::vector<hw::attn::HeadSpec> plan;
  // per query head (used by static / linear heads)
  std::vector<std::vector<double>> alpha, rho, L;
  std::vector<std::vector<int32_t>> groups;
  std::vector<int> G;
  std::vector<std::vector<double>> W;      // performer: features x D random projections
  std::vector<std::vector<double>> log_w;  // dijiang: D log-weights
  std::vector<double> tau;                 // taylorshift temperature
  double eps = 1e-6;
  // activations
  std::vector<std::vector<Mat>> q, k, v;  // q[b][h], k[b][g], v[b][g]
  int kv_of(int h) const { return h / (H / KV); }
};

inline double logsumexp_row(const std::vector<double>& x) {
  double mx = -HUGE_VAL;
  for (double e : x) mx = std::max(mx, e);
  double s = 0;
  for (double e : x) s += std::exp(e - mx);
  return mx + std::log(s);
}

// log Z(i) = log sum_{k<=i} exp(alpha[k] + rho[i-k])
inline std::vector<double> static_log_z(const std::vector<double>& alpha, const std::vector<double>& rho,
                                        int64_t T) {
  std::vector<double> z(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) {
    std::vector<double> x;
    for (int64_t k = 0; k <= i; ++k) x.push_back(alpha[size_t(k)] + rho[size_t(i - k)]);
    z[size_t(i)] = logsumexp_row(x);
  }
  return z;
}

inline bool softmax_visible(const hw::attn::HeadSpec& s, int64_t i, int64_t j) {
  using hw::attn::HeadKind;
  if (j > i) return false;
  if (s.kind == HeadKind::Softmax) return true;
  if (s.kind == HeadKind::Window) return i - s.window < j;
  return j < s.sink || i - s.window < j;  // SinkWindow
}

// The OAL kernel from its definition; also returns s and t = L_low^T s.
inline double oal_kernel(const Layer& l, int h, const double* q, const double* k, std::vector<double>& s,
                         std::vector<double>& t) {
  const int G1 = l.G[size_t(h)] + 1;
  const auto& L = l.L[size_t(h)];
  s.assign(size_t(G1), 0.0);
  s[0] = 1.0;
  for (int r = 0; r < l.D; ++r) s[size_t(l.groups[size_t(h)][size_t(r)])] += q[r] * k[r] / std::sqrt(double(l.D));
  t.assign(size_t(G1), 0.0);
  double kap = l.eps;
  for (int c = 0; c < G1; ++c) {
    for (int a = c; a < G1; ++a) t[size_t(c)] += L[size_t(a * G1 + c)] * s[size_t(a)];  // lower triangle only
    kap += t[size_t(c)] * t[size_t(c)];
  }
  return kap;
}

// The baselines' kernels straight from their definitions (docs/head-plans.md).
inline double performer_kernel(const Layer& l, int h, const double* q, const double* k) {
  const auto& W = l.W[size_t(h)];
  const int M = l.plan[size_t(h)].features, D = l.D;
  const double sc = 1.0 / std::pow(double(D), 0.25);
  double qq = 0, kk = 0;
  for (int d = 0; d < D; ++d) qq += q[d] * q[d] * sc * sc, kk += k[d] * k[d] * sc * sc;
  double kap = 0;
  for (int m = 0; m < M; ++m) {
    double wq = 0, wk = 0;
    for (int d = 0; d < D; ++d) wq += W[size_t(m * D + d)] * q[d] * sc, wk += W[size_t(m * D + d)] * k[d] * sc;
    kap += std::exp(wq - qq / 2) * std::exp(wk - kk / 2) / M;
  }
  return kap;
}

inline std::vector<double> dct_softmax(int D, const double* x) {
  const double pi = std::acos(-1.0), sc = 1.0 / std::pow(double(D), 0.25);
  std::vector<double> z(size_t(D), 0.0);
  for (int f = 0; f < D; ++f)
    for (int d = 0; d < D; ++d)
      z[size_t(f)] += std::sqrt((f == 0 ? 1.0 : 2.0) / D) * std::cos(pi * (d + 0.5) * f / D) * x[d] * sc;
  const double lse = logsumexp_row(z);
  for (auto& e : z) e = std::exp(e - lse);
  return z;
}

inline double dijiang_kernel(const Layer& l, int h, const double* q, const double* k) {
  const auto a = dct_softmax(l.D, q), b = dct_softmax(l.D, k);
  double kap = 0;
  for (int f = 0; f < l.D; ++f) kap += std::exp(l.log_w[size_t(h)][size_t(f)]) * a[size_t(f)] * b[size_t(f)];
  return kap;
}

inline double taylorshift_kernel(const Layer& l, int h, const double* q, const double* k) {
  double qk = 0, qq = 0, kk = 0;
  for (int d = 0; d < l.D; ++d) qk += q[d] * k[d], qq += q[d] * q[d], kk += k[d] * k[d];
  const double s = l.tau[size_t(h)] * qk / std::sqrt(qq * kk);
  return 1 + s + s * s / 2;
}

inline double baseline_kernel(const Layer& l, int h, const double* q, const double* k) {
  using hw::attn::HeadKind;
  switch (l.plan[size_t(h)].kind) {
    case HeadKind::Performer: return performer_kernel(l, h, q, k);
    case HeadKind::DiJiang: return dijiang_kernel(l, h, q, k);
    default: return taylorshift_kernel(l, h, q, k);
  }
}

// Explicit T x T weight matrix of head h for sequence b.
inline Mat weights(const Layer& l, int64_t b, int h) {
  using hw::attn::HeadKind;
  const int64_t T = l.T;
  const auto& spec = l.plan[size_t(h)];
  const int g = l.kv_of(h);
  Mat P(size_t(T * T), 0.0);
  if (spec.kind == HeadKind::Pruned) return P;
  for (int64_t i = 0; i < T; ++i) {
    double* row = &P[size_t(i * T)];
    if (spec.softmax_family()) {
      const double* qi = &l.q[size_t(b)][size_t(h)][size_t(i * l.D)];
      double mx = -HUGE_VAL;
      for (int64_t j = 0; j < T; ++j) {
        if (!softmax_visible(spec, i, j)) continue;
        const double* kj = &l.k[size_t(b)][size_t(g)][size_t(j * l.D)];
        double s = 0;
        for (int d = 0; d < l.D; ++d) s += qi[d] * kj[d];
        row[j] = s / std::sqrt(double(l.D));
        mx = std::max(mx, row[j]);
      }
      double z = 0;
      for (int64_t j = 0; j < T; ++j)
        if (softmax_visible(spec, i, j)) z += (row[j] = std::exp(row[j] - mx));
      for (int64_t j = 0; j < T; ++j) row[j] /= z;
    } else if (spec.kind == HeadKind::Static) {
      double z = 0;
      for (int64_t j = 0; j <= i; ++j) z += (row[j] = std::exp(l.alpha[size_t(h)][size_t(j)] + l.rho[size_t(h)][size_t(i - j)]));
      for (int64_t j = 0; j <= i; ++j) row[j] /= z;
    } else if (spec.baseline_linear()) {
      const double* qi = &l.q[size_t(b)][size_t(h)][size_t(i * l.D)];
      double z = 0;
      for (int64_t j = 0; j <= i; ++j) z += (row[j] = baseline_kernel(l, h, qi, &l.k[size_t(b)][size_t(g)][size_t(j * l.D)]));
      for (int64_t j = 0; j <= i; ++j) row[j] /= z;
    } else {  // Linear
      std::vector<double> s, t;
      const double* qi = &l.q[size_t(b)][size_t(h)][size_t(i * l.D)];
      double z = 0;
      for (int64_t j = 0; j <= i; ++j) z += (row[j] = oal_kernel(l, h, qi, &l.k[size_t(b)][size_t(g)][size_t(j * l.D)], s, t));
      for (int64_t j = 0; j <= i; ++j) row[j] /= z;
    }
  }
  return P;
}

// out[b][h] = P V (T x D); pruned heads give zeros.
inline std::vector<std::vector<Mat>> forward(const Layer& l) {
  std::vector<std::vector<Mat>> out(size_t(l.B), std::vector<Mat>(size_t(l.H), Mat(size_t(l.T * l.D), 0.0)));
  for (int64_t b = 0; b < l.B; ++b)
    for (int h = 0; h < l.H; ++h) {
      const Mat P = weights(l, b, h);
      const Mat& V = l.v[size_t(b)][size_t(l.kv_of(h))];
      for (int64_t i = 0; i < l.T; ++i)
        for (int64_t j = 0; j < l.T; ++j)
          for (int d = 0; d < l.D; ++d) out[size_t(b)][size_t(h)][size_t(i * l.D + d)] += P[size_t(i * l.T + j)] * V[size_t(j * l.D + d)];
    }
  return out;
}

struct Grads {
  std::vector<std::vector<Mat>> dq, dk, dv;      // like q, k, v
  std::vector<std::vector<double>> dalpha, drho, dL;  // per query head
};

// Gradients of sum over b, h of <out[b][h], R[b][h]>. Baseline kinds (performer, dijiang,
// taylorshift) are not differentiated here: their tests use finite differences.
inline Grads backward(const Layer& l, const std::vector<std::vector<Mat>>& R) {
  using hw::attn::HeadKind;
  const int64_t T = l.T;
  const int D = l.D;
  const double sc = 1.0 / std::sqrt(double(D));
  Grads gr;
  gr.dq.assign(size_t(l.B), std::vector<Mat>(size_t(l.H), Mat(size_t(T * D), 0.0)));
  gr.dk.assign(size_t(l.B), std::vector<Mat>(size_t(l.KV), Mat(size_t(T * D), 0.0)));
  gr.dv = gr.dk;
  gr.dalpha.assign(size_t(l.H), std::vector<double>(size_t(T), 0.0));
  gr.drho = gr.dalpha;
  gr.dL.assign(size_t(l.H), {});
  for (int h = 0; h < l.H; ++h)
    if (l.plan[size_t(h)].kind == HeadKind::Linear) gr.dL[size_t(h)].assign(size_t((l.G[size_t(h)] + 1) * (l.G[size_t(h)] + 1)), 0.0);
  for (int64_t b = 0; b < l.B; ++b)
    for (int h = 0; h < l.H; ++h) {
      const auto& spec = l.plan[size_t(h)];
      if (spec.kind == HeadKind::Pruned || spec.baseline_linear()) continue;
      const int g = l.kv_of(h);
      const Mat P = weights(l, b, h);
      const Mat& V = l.v[size_t(b)][size_t(g)];
      const Mat& dO = R[size_t(b)][size_t(h)];
      for (int64_t i = 0; i < T; ++i) {
        // dP_ij = dO_i . v_j ; the row softmax / normalisation Jacobian gives
        // dlogit (softmax, static) or dkappa * Z (linear) = P_ij (dP_ij - sum_k P_ik dP_ik)
        std::vector<double> dP(size_t(T), 0.0);
        double rowdot = 0;
        for (int64_t j = 0; j <= i; ++j) {
          for (int d = 0; d < D; ++d) dP[size_t(j)] += dO[size_t(i * D + d)] * V[size_t(j * D + d)];
          rowdot += P[size_t(i * T + j)] * dP[size_t(j)];
        }
        for (int64_t j = 0; j <= i; ++j) {
          const double p = P[size_t(i * T + j)];
          for (int d = 0; d < D; ++d) gr.dv[size_t(b)][size_t(g)][size_t(j * D + d)] += p * dO[size_t(i * D + d)];
          if (p == 0.0) continue;
          const double dl = p * (dP[size_t(j)] - rowdot);
          if (spec.softmax_family()) {
            for (int d = 0; d < D; ++d) {
              gr.dq[size_t(b)][size_t(h)][size_t(i * D + d)] += dl * sc * l.k[size_t(b)][size_t(g)][size_t(j * D + d)];
              gr.dk[size_t(b)][size_t(g)][size_t(j * D + d)] += dl * sc * l.q[size_t(b)][size_t(h)][size_t(i * D + d)];
            }
          } else if (spec.kind == HeadKind::Static) {
            gr.dalpha[size_t(h)][size_t(j)] += dl;
            gr.drho[size_t(h)][size_t(i - j)] += dl;
          } else {  // Linear: P = kappa / Z, so dkappa = dl / kappa
            std::vector<double> s, t;
            const double* qi = &l.q[size_t(b)][size_t(h)][size_t(i * D)];
            const double* kj = &l.k[size_t(b)][size_t(g)][size_t(j * D)];
            const double kap = oal_kernel(l, h, qi, kj, s, t);
            const double dk = dl / kap;
            const int G1 = l.G[size_t(h)] + 1;
            const auto& L = l.L[size_t(h)];
            // d/ds ||L^T s||^2 = 2 L t ; d/dL_ac = 2 s_a t_c (lower triangle)
            for (int r = 0; r < D; ++r) {
              const int a = l.groups[size_t(h)][size_t(r)];
              double lt = 0;
              for (int c = 0; c <= a; ++c) lt += L[size_t(a * G1 + c)] * t[size_t(c)];
              const double ds = 2 * dk * lt * sc;
              gr.dq[size_t(b)][size_t(h)][size_t(i * D + r)] += ds * kj[r];
              gr.dk[size_t(b)][size_t(g)][size_t(j * D + r)] += ds * qi[r];
            }
            for (int a = 0; a < G1; ++a)
              for (int c = 0; c <= a; ++c) gr.dL[size_t(h)][size_t(a * G1 + c)] += 2 * dk * s[size_t(a)] * t[size_t(c)];
          }
        }
      }
    }
  return gr;
}

}  // namespace ref
