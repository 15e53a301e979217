// Chunked prefix-state evaluation of a feature-map kernel (feature_state.hpp).
//   forward  acc = Psi S + mask(Psi Phi^T) U,  S += Phi^T U        (U = [V, 1]; GEMMs)
//   backward G = [dO / den, -(dO . O) / den] per row;
//     pass 1 (forward over chunks): dPsi = G S^T + dK Phi, dPhi_intra = dK^T Psi, dV += K^T G,
//       with K = mask(Psi Phi^T), dK = mask(G U^T) the intra-chunk kernel and its gradient;
//     pass 2 (backward over chunks), R = sum_{later i} psi_i (x) G_i:
//       dPhi = U R^T, dV += Phi R, R += Psi^T G.
// mask keeps j <= i. Every product is a GEMM of at most 64 x max(m, 65) x 65.
#include "attention/feature_state.hpp"

#include <algorithm>
#include <cmath>

#include "attention/tile_ops.hpp"

namespace hw::attn::detail {
namespace {

constexpr int C = kTile;

template <class F>
struct FeatWs {
  int D = 0, D1 = 0, m = 0;
  F *S, *Psi, *Phi, *dPsi, *dPhi, *K, *dK, *U, *Gm, *acc, *map_ws;

  FeatWs(int D_, int m_, F* ws) {
    D = D_;
    D1 = D + 1;
    m = m_;
    F* p = ws;
    auto take = [&](int64_t n) {
      F* r = p;
      p += n;
      return r;
    };
    S = take(int64_t(m) * D1);
    Psi = take(int64_t(C) * m);
    Phi = take(int64_t(C) * m);
    dPsi = take(int64_t(C) * m);
    dPhi = take(int64_t(C) * m);
    K = take(int64_t(C) * C);
    dK = take(int64_t(C) * C);
    U = take(int64_t(C) * D1);
    Gm = take(int64_t(C) * D1);
    acc = take(int64_t(C) * D1);
    map_ws = p;
  }
  void load_u(const F* v, int64_t ldx, int64_t t0, int n) const {
    for (int a = 0; a < n; ++a) {
      const F* vr = v + (t0 + a) * ldx;
      std::copy(vr, vr + D, U + int64_t(a) * D1);
      U[int64_t(a) * D1 + D] = F(1);
    }
  }
  void load_g(const F* out, const F* dout, int64_t ldo, const F* den, int64_t t0, int n) const {
    for (int a = 0; a < n; ++a) {
      const F* o = out + (t0 + a) * ldo;
      const F* g = dout + (t0 + a) * ldo;
      const F inv = F(1) / den[t0 + a];
      F* gr = Gm + int64_t(a) * D1;
      for (int d = 0; d < D; ++d) gr[d] = g[d] * inv;
      gr[D] = -dot_lanes(g, o, D) * inv;
    }
  }
  // K[i][j] for j > i (and the unused columns >= n) to zero
  static void mask(F* X, int n) {
    for (int i = 0; i < n; ++i) std::fill(X + int64_t(i) * C + i + 1, X + int64_t(i) * C + C, F(0));
  }
};

}  // namespace

int64_t feature_scratch(int D, int m, int64_t map_ws) {
  const int64_t D1 = D + 1;
  return int64_t(m) * D1 + 4 * int64_t(C) * m + 2 * int64_t(C) * C + 3 * int64_t(C) * D1 + map_ws;
}

template <class F>
int64_t feature_forward(const FeatureMap<F>& map, const HeadFwd<F>& a) {
  FeatWs<F> w(a.D, map.n_features(), a.ws);
  const int D = a.D, D1 = w.D1, m = w.m;
  std::fill(w.S, w.S + int64_t(m) * D1, F(0));
  for (int64_t t0 = 0; t0 < a.T; t0 += C) {
    const int n = static_cast<int>(std::min<int64_t>(C, a.T - t0));
    map.features(w.Psi, a.q + t0 * a.ldx, a.ldx, n, true, w.map_ws);
    map.features(w.Phi, a.k + t0 * a.ldx, a.ldx, n, false, w.map_ws);
    w.load_u(a.v, a.ldx, t0, n);
    gemm_rm(false, false, n, D1, m, F(1), w.Psi, m, w.S, D1, F(0), w.acc, D1);
    gemm_rm(false, true, n, n, m, F(1), w.Psi, m, w.Phi, m, F(0), w.K, C);
    w.mask(w.K, n);
    gemm_rm(false, false, n, D1, n, F(1), w.K, C, w.U, D1, F(1), w.acc, D1);
    gemm_rm(true, false, m, D1, n, F(1), w.Phi, m, w.U, D1, F(1), w.S, D1);
    for (int i = 0; i < n; ++i) {
      const F den = w.acc[int64_t(i) * D1 + D];
      if (!(den > F(0)) || !std::isfinite(den)) return t0 + i;
      const F inv = F(1) / den;
      F* o = a.out + (t0 + i) * a.ldo;
      for (int d = 0; d < D; ++d) o[d] = w.acc[int64_t(i) * D1 + d] * inv;
      a.stats[t0 + i] = den;
    }
  }
  return -1;
}

template <class F>
void feature_backward(const FeatureMap<F>& map, const HeadBwd<F>& a) {
  FeatWs<F> w(a.D, map.n_features(), a.ws);
  const int D = a.D, D1 = w.D1, m = w.m;
  const int64_t n_chunks = (a.T + C - 1) / C;
  auto add_dv = [&](int64_t t0, int n) {
    for (int j = 0; j < n; ++j) {
      F* dvj = a.dv + (t0 + j) * a.ldx;
      const F* accj = w.acc + int64_t(j) * D1;
      for (int d = 0; d < D; ++d) dvj[d] += accj[d];
    }
  };
  // Pass 1: prefix state for dPsi; every intra-chunk pair.
  std::fill(w.S, w.S + int64_t(m) * D1, F(0));
  for (int64_t ci = 0; ci < n_chunks; ++ci) {
    const int64_t t0 = ci * C;
    const int n = static_cast<int>(std::min<int64_t>(C, a.T - t0));
    map.features(w.Psi, a.q + t0 * a.ldx, a.ldx, n, true, w.map_ws);
    map.features(w.Phi, a.k + t0 * a.ldx, a.ldx, n, false, w.map_ws);
    w.load_u(a.v, a.ldx, t0, n);
    w.load_g(a.out, a.dout, a.ldo, a.stats, t0, n);
    gemm_rm(false, true, n, m, D1, F(1), w.Gm, D1, w.S, D1, F(0), w.dPsi, m);
    gemm_rm(false, true, n, n, m, F(1), w.Psi, m, w.Phi, m, F(0), w.K, C);
    w.mask(w.K, n);
    gemm_rm(false, true, n, n, D1, F(1), w.Gm, D1, w.U, D1, F(0), w.dK, C);
    w.mask(w.dK, n);
    gemm_rm(false, false, n, m, n, F(1), w.dK, C, w.Phi, m, F(1), w.dPsi, m);
    gemm_rm(true, false, n, m, n, F(1), w.dK, C, w.Psi, m, F(0), w.dPhi, m);
    gemm_rm(true, false, n, D1, n, F(1), w.K, C, w.Gm, D1, F(0), w.acc, D1);
    add_dv(t0, n);
    gemm_rm(true, false, m, D1, n, F(1), w.Phi, m, w.U, D1, F(1), w.S, D1);
    map.jacobian(a.dq + t0 * a.ldx, w.dPsi, w.Psi, a.q + t0 * a.ldx, a.ldx, n, true, w.map_ws);
    map.jacobian(a.dk + t0 * a.ldx, w.dPhi, w.Phi, a.k + t0 * a.ldx, a.ldx, n, false, w.map_ws);
  }
  // Pass 2: suffix state for dPhi and the inter-chunk dV.
  F* R = w.S;
  std::fill(R, R + int64_t(m) * D1, F(0));
  for (int64_t ci = n_chunks - 1; ci >= 0; --ci) {
    const int64_t t0 = ci * C;
    const int n = static_cast<int>(std::min<int64_t>(C, a.T - t0));
    map.features(w.Psi, a.q + t0 * a.ldx, a.ldx, n, true, w.map_ws);
    map.features(w.Phi, a.k + t0 * a.ldx, a.ldx, n, false, w.map_ws);
    w.load_u(a.v, a.ldx, t0, n);
    w.load_g(a.out, a.dout, a.ldo, a.stats, t0, n);
    gemm_rm(false, true, n, m, D1, F(1), w.U, D1, R, D1, F(0), w.dPhi, m);
    gemm_rm(false, false, n, D1, m, F(1), w.Phi, m, R, D1, F(0), w.acc, D1);
    add_dv(t0, n);
    gemm_rm(true, false, m, D1, n, F(1), w.Psi, m, w.Gm, D1, F(1), R, D1);
    map.jacobian(a.dk + t0 * a.ldx, w.dPhi, w.Phi, a.k + t0 * a.ldx, a.ldx, n, false, w.map_ws);
  }
}

template int64_t feature_forward<float>(const FeatureMap<float>&, const HeadFwd<float>&);
template int64_t feature_forward<double>(const FeatureMap<double>&, const HeadFwd<double>&);
template void feature_backward<float>(const FeatureMap<float>&, const HeadBwd<float>&);
template void feature_backward<double>(const FeatureMap<double>&, const HeadBwd<double>&);

// Per token the feature maps of q and k, 2 x D M (a projection each), and the state read and
// update, 2 x 2 M (D + 1); per intra-chunk pair the kernel 2 M and the weighted [v, 1] 2 (D + 1).
double feature_flops(int64_t T, double D, double M) {
  return double(T) * (4 * D * M + 4 * M * (D + 1)) + intra_chunk_pairs(T) * (2 * M + 2 * (D + 1));
}

}  // namespace hw::attn::detail
