// Chunked evaluation of the grouped quadratic kernel (quad_state.hpp) with GEMMs.
//
// kappa is a quadratic form in the elementwise product x*y, so it splits into a query side
// psi(x) = w (.) X(x) and a key side X(y), X(x) = [1, x_r, x_r x_c (r <= c)] (symmetric pair
// packing, the OAL paper's compressed "HD" state, Fw = 1 + D + D(D+1)/2 features), with
//   w_0 = eps + M_00,  w_r = 2 M_{0,g(r)} scale,  w_rc = (2 - [r==c]) M_{g(r),g(c)} scale^2,
// M = L_low L_low^T. Tokens run in chunks of C = 64 with token-major feature blocks [C x Fw]:
//   forward   acc = Psi S (GEMM) + the exact pairs inside the chunk; S += X_k^T [V, 1] (GEMM),
// so S is always the exclusive prefix state of the chunk being read. Backward with
// G_i = [dO_i / den_i, -(dO_i . O_i) / den_i] (the gradient of [num_i, den_i]):
//   pass 1 (forward over chunks)  dPsi = G S^T (GEMM) -> dq and the totals for A, plus every
//                                  intra-chunk pair (dq, dk, dv, A);
//   pass 2 (backward over chunks) with the suffix state R = sum_{later i} psi_i (x) G_i:
//                                  dX_k = [V, 1] R^T and dV = X_k R (GEMMs), R += Psi^T G.
// Memory: S (or R) and three feature blocks, independent of T. Exact, not an approximation.
#include "attention/quad_state.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "attention/tile_ops.hpp"

namespace hw::attn::detail {
namespace {

constexpr int C = kTile;  // chunk length

template <class F>
struct QuadWs {
  int D = 0, D1 = 0, P = 0, Fw = 0, G1 = 0;
  F eps = F(0), sc = F(0);
  bool unit = false;
  const int32_t* grp = nullptr;
  std::vector<int32_t> one_group;  // groups == nullptr: every dimension in group 1
  F *S, *X1, *X2, *X3, *Tt, *U, *Gm, *acc, *Qb, *Kb, *dQb, *dKb, *qn, *kn, *w, *Ll, *M, *s, *t, *ds;

  QuadWs(const QuadKernel<F>& k, int D_, F* ws) {
    D = D_;
    D1 = D + 1;
    P = D * (D + 1) / 2;
    Fw = 1 + D + P;
    G1 = k.n_groups + 1;
    eps = F(k.eps);
    sc = F(k.scale);
    unit = k.unit_norm;
    grp = k.groups;
    if (!grp) {
      one_group.assign(size_t(D), 1);
      grp = one_group.data();
    }
    F* p = ws;
    auto take = [&](int64_t n) {
      F* r = p;
      p += n;
      return r;
    };
    S = take(int64_t(Fw) * D1);
    X1 = take(int64_t(C) * Fw);
    X2 = take(int64_t(C) * Fw);
    X3 = take(int64_t(C) * Fw);
    Tt = take(Fw);
    U = take(int64_t(C) * D1);
    Gm = take(int64_t(C) * D1);
    acc = take(int64_t(C) * D1);
    Qb = take(int64_t(C) * D);
    Kb = take(int64_t(C) * D);
    dQb = take(int64_t(C) * D);
    dKb = take(int64_t(C) * D);
    qn = take(C);
    kn = take(C);
    w = take(Fw);
    Ll = take(G1 * G1);
    M = take(G1 * G1);
    s = take(G1);
    t = take(G1);
    ds = take(G1);
    // Only L's lower triangle is a parameter; the upper triangle is ignored.
    for (int a = 0; a < G1; ++a)
      for (int b = 0; b < G1; ++b) Ll[a * G1 + b] = b <= a ? k.L[a * G1 + b] : F(0);
    quad_query_weights(k, D, M, w);
  }

  // Working rows of the chunk: copies of q (k) rows, normalised when `unit` (norms kept).
  void load_rows(F* dst, F* norms, const F* src, int64_t ldx, int64_t t0, int n) const {
    for (int a = 0; a < n; ++a) {
      const F* x = src + (t0 + a) * ldx;
      F* y = dst + int64_t(a) * D;
      std::copy(x, x + D, y);
      if (!unit) continue;
      const F nr = std::sqrt(dot_lanes(x, x, D));
      norms[a] = nr;
      const F inv = nr > F(0) ? F(1) / nr : F(0);  // a zero row stays zero (kernel 1, no gradient)
      for (int d = 0; d < D; ++d) y[d] *= inv;
    }
  }
  // Add a chunk's working-row gradients into the head's gradient rows (through the normalisation).
  void store_grad(F* dst, int64_t ldx, const F* rows, const F* norms, const F* g, int64_t t0, int n) const {
    for (int a = 0; a < n; ++a) {
      F* o = dst + (t0 + a) * ldx;
      const F* gi = g + int64_t(a) * D;
      if (!unit) {
        for (int d = 0; d < D; ++d) o[d] += gi[d];
        continue;
      }
      if (!(norms[a] > F(0))) continue;
      const F* xh = rows + int64_t(a) * D;
      const F proj = dot_lanes(xh, gi, D), inv = F(1) / norms[a];
      for (int d = 0; d < D; ++d) o[d] += (gi[d] - xh[d] * proj) * inv;
    }
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
  // Raw features X(x) of n working rows into a token-major block; with `weighted`, psi = w (.) X.
  void features(F* X, const F* rows, int n, bool weighted) const {
    for (int a = 0; a < n; ++a) {
      F* f = X + int64_t(a) * Fw;
      quad_features(f, rows + int64_t(a) * D, D);
      if (weighted)
        for (int e = 0; e < Fw; ++e) f[e] *= w[e];
    }
  }
  // dx += (dX . dX(x)/dx) for one row: the Jacobian of the raw features.
  void jacobian(F* dx, const F* dX, const F* x) const {
    for (int r = 0; r < D; ++r) dx[r] += dX[1 + r];
    const F* dp = dX + 1 + D;
    for (int r = 0; r < D; ++r) {
      const int len = D - r;
      dx[r] += dot_lanes(dp, x + r, len);
      const F xr = x[r];
      for (int c = 0; c < len; ++c) dx[r + c] += dp[c] * xr;
      dp += len;
    }
  }
  // Exact kernel of one pair; leaves s and t = L_low^T s in scratch for the backward.
  F kappa(const F* x, const F* y) const {
    s[0] = F(1);
    for (int g = 1; g < G1; ++g) s[g] = F(0);
    for (int r = 0; r < D; ++r) s[grp[r]] += x[r] * y[r];
    for (int g = 1; g < G1; ++g) s[g] *= sc;
    F k = eps;
    for (int c = 0; c < G1; ++c) {
      F tc = F(0);
      for (int e = c; e < G1; ++e) tc += Ll[e * G1 + c] * s[e];
      t[c] = tc;
      k += tc * tc;
    }
    return k;
  }
};

}  // namespace

int64_t quad_scratch(int D, int n_groups) {
  const int64_t D1 = D + 1, P = int64_t(D) * (D + 1) / 2, Fw = 1 + D + P, G1 = n_groups + 1;
  return Fw * D1 + 3 * C * Fw + Fw + 3 * C * D1 + 4 * int64_t(C) * D + 2 * C + Fw + 2 * G1 * G1 + 3 * G1;
}

template <class F>
int64_t quad_forward(const QuadKernel<F>& kq, const HeadFwd<F>& a) {
  QuadWs<F> w(kq, a.D, a.ws);
  const int D = a.D, D1 = w.D1, Fw = w.Fw;
  F* Psi = w.X1;
  F* Xk = w.X2;
  std::fill(w.S, w.S + int64_t(Fw) * D1, F(0));
  for (int64_t t0 = 0; t0 < a.T; t0 += C) {
    const int n = static_cast<int>(std::min<int64_t>(C, a.T - t0));
    w.load_rows(w.Qb, w.qn, a.q, a.ldx, t0, n);
    w.load_rows(w.Kb, w.kn, a.k, a.ldx, t0, n);
    w.load_u(a.v, a.ldx, t0, n);
    w.features(Psi, w.Qb, n, true);
    w.features(Xk, w.Kb, n, false);
    // earlier chunks through the exclusive prefix state, then this chunk joins the state
    gemm_rm(false, false, n, D1, Fw, F(1), Psi, Fw, w.S, D1, F(0), w.acc, D1);
    gemm_rm(true, false, Fw, D1, n, F(1), Xk, Fw, w.U, D1, F(1), w.S, D1);
    // same chunk: exact pairwise kernel
    for (int i = 0; i < n; ++i) {
      const F* qi = w.Qb + int64_t(i) * D;
      F* ai = w.acc + int64_t(i) * D1;
      for (int j = 0; j <= i; ++j) {
        const F kap = w.kappa(qi, w.Kb + int64_t(j) * D);
        const F* uj = w.U + int64_t(j) * D1;
        for (int d = 0; d < D1; ++d) ai[d] += kap * uj[d];
      }
    }
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
void quad_backward(const QuadKernel<F>& kq, const HeadBwd<F>& a, F* A) {
  QuadWs<F> w(kq, a.D, a.ws);
  const int D = a.D, D1 = w.D1, G1 = w.G1, Fw = w.Fw;
  const int64_t n_chunks = (a.T + C - 1) / C;
  F* Xq = w.X1;
  F* Xk = w.X2;
  F* dX = w.X3;

  // Pass 1, forward over chunks: dpsi = S_excl G -> dq, totals Tt = sum_i dpsi_i (.) X(q_i); intra pairs.
  std::fill(w.S, w.S + int64_t(Fw) * D1, F(0));
  std::fill(w.Tt, w.Tt + Fw, F(0));
  for (int64_t ci = 0; ci < n_chunks; ++ci) {
    const int64_t t0 = ci * C;
    const int n = static_cast<int>(std::min<int64_t>(C, a.T - t0));
    w.load_rows(w.Qb, w.qn, a.q, a.ldx, t0, n);
    w.load_rows(w.Kb, w.kn, a.k, a.ldx, t0, n);
    w.load_u(a.v, a.ldx, t0, n);
    w.load_g(a.out, a.dout, a.ldo, a.stats, t0, n);
    w.features(Xq, w.Qb, n, false);
    w.features(Xk, w.Kb, n, false);
    gemm_rm(false, true, n, Fw, D1, F(1), w.Gm, D1, w.S, D1, F(0), dX, Fw);
    gemm_rm(true, false, Fw, D1, n, F(1), Xk, Fw, w.U, D1, F(1), w.S, D1);
    std::fill(w.dQb, w.dQb + int64_t(n) * D, F(0));
    std::fill(w.dKb, w.dKb + int64_t(n) * D, F(0));
    for (int i = 0; i < n; ++i) {
      F* dpsi = dX + int64_t(i) * Fw;
      const F* xq = Xq + int64_t(i) * Fw;
      for (int e = 0; e < Fw; ++e) {
        w.Tt[e] += dpsi[e] * xq[e];
        dpsi[e] *= w.w[e];  // now dX(q_i)
      }
      w.jacobian(w.dQb + int64_t(i) * D, dpsi, w.Qb + int64_t(i) * D);
    }
    // intra-chunk pairs, exact kernel: dkappa_ij = G_i . [v_j, 1]
    for (int i = 0; i < n; ++i) {
      const F* qi = w.Qb + int64_t(i) * D;
      F* dqi = w.dQb + int64_t(i) * D;
      const F* gi = w.Gm + int64_t(i) * D1;
      for (int j = 0; j <= i; ++j) {
        const F* kj = w.Kb + int64_t(j) * D;
        F* dkj = w.dKb + int64_t(j) * D;
        const F kap = w.kappa(qi, kj);
        const F dkap = dot_lanes(gi, w.U + int64_t(j) * D1, D1);
        F* dvj = a.dv + (t0 + j) * a.ldx;
        for (int d = 0; d < D; ++d) dvj[d] += kap * gi[d];
        for (int e = 1; e < G1; ++e) {  // ds = 2 dkappa L t (s_0 = 1 is constant)
          F lt = F(0);
          for (int c = 0; c <= e; ++c) lt += w.Ll[e * G1 + c] * w.t[c];
          w.ds[e] = F(2) * dkap * lt * w.sc;
        }
        for (int r = 0; r < D; ++r) {
          const F f = w.ds[w.grp[r]];
          dqi[r] += f * kj[r];
          dkj[r] += f * qi[r];
        }
        for (int e = 0; e < G1; ++e)
          for (int c = 0; c < G1; ++c) A[e * G1 + c] += dkap * w.s[e] * w.s[c];
      }
    }
    w.store_grad(a.dq, a.ldx, w.Qb, w.qn, w.dQb, t0, n);
    w.store_grad(a.dk, a.ldx, w.Kb, w.kn, w.dKb, t0, n);
  }
  // A from the totals: dkappa/dM of the prefix part (M symmetric, so each off-diagonal half).
  A[0] += w.Tt[0];
  for (int r = 0; r < D; ++r) {
    const int g = w.grp[r];
    const F x = w.Tt[1 + r] * w.sc;
    A[g] += x;
    A[g * G1] += x;
  }
  {
    const F sc2 = w.sc * w.sc;
    const F* tp = w.Tt + 1 + D;
    for (int r = 0, e = 0; r < D; ++r)
      for (int c = r; c < D; ++c, ++e) {
        const F x = tp[e] * sc2;
        const int gr = w.grp[r], gc = w.grp[c];
        if (r == c) {
          A[gr * G1 + gr] += x;
        } else {
          A[gr * G1 + gc] += x;
          A[gc * G1 + gr] += x;
        }
      }
  }

  // Pass 2, backward over chunks: dX(k_j) = [v_j, 1] R_excl^T, dU_j = X(k_j) R_excl.
  F* R = w.S;
  F* Psi = w.X1;
  std::fill(R, R + int64_t(Fw) * D1, F(0));
  for (int64_t ci = n_chunks - 1; ci >= 0; --ci) {
    const int64_t t0 = ci * C;
    const int n = static_cast<int>(std::min<int64_t>(C, a.T - t0));
    w.load_rows(w.Qb, w.qn, a.q, a.ldx, t0, n);
    w.load_rows(w.Kb, w.kn, a.k, a.ldx, t0, n);
    w.load_u(a.v, a.ldx, t0, n);
    w.load_g(a.out, a.dout, a.ldo, a.stats, t0, n);
    w.features(Psi, w.Qb, n, true);
    w.features(Xk, w.Kb, n, false);
    gemm_rm(false, true, n, Fw, D1, F(1), w.U, D1, R, D1, F(0), dX, Fw);
    gemm_rm(false, false, n, D1, Fw, F(1), Xk, Fw, R, D1, F(0), w.acc, D1);
    gemm_rm(true, false, Fw, D1, n, F(1), Psi, Fw, w.Gm, D1, F(1), R, D1);
    std::fill(w.dKb, w.dKb + int64_t(n) * D, F(0));
    for (int j = 0; j < n; ++j) {
      F* dvj = a.dv + (t0 + j) * a.ldx;
      const F* accj = w.acc + int64_t(j) * D1;
      for (int d = 0; d < D; ++d) dvj[d] += accj[d];
      w.jacobian(w.dKb + int64_t(j) * D, dX + int64_t(j) * Fw, w.Kb + int64_t(j) * D);
    }
    w.store_grad(a.dk, a.ldx, w.Kb, w.kn, w.dKb, t0, n);
  }
}

template int64_t quad_forward<float>(const QuadKernel<float>&, const HeadFwd<float>&);
template int64_t quad_forward<double>(const QuadKernel<double>&, const HeadFwd<double>&);
template void quad_backward<float>(const QuadKernel<float>&, const HeadBwd<float>&, float*);
template void quad_backward<double>(const QuadKernel<double>&, const HeadBwd<double>&, double*);

// Per token the prefix-state read and update, 2 x 2 Fw (D + 1) with Fw = 1 + D + D(D+1)/2
// packed features, plus the exact pairs inside each chunk, 2 D for the group scores and
// 2 (D + 1) for the weighted [v, 1] (the O(G^2) kernel evaluation and the feature construction
// are left out: small, and G is not known to the count). Independent of G.
double quad_flops(int64_t T, double D) {
  const double fw = 1 + D + D * (D + 1) / 2;
  return double(T) * 4 * fw * (D + 1) + intra_chunk_pairs(T) * (2 * D + 2 * (D + 1));
}

}  // namespace hw::attn::detail
