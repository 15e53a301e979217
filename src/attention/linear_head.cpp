// Linear heads (OAL): weights kappa(q_i, k_j) / sum_{j'<=i} kappa(q_i, k_j') with the grouped
// quadratic kernel kappa(q, k) = eps + ||L^T s||^2, s = [1, s_1..s_G], s_g = sum_{r in g} q_r k_r / sqrt(D).
//
// kappa is a quadratic form in the elementwise product q*k, so it splits into a query side
// psi(q) and a key side phi(k) = [1, k_r, k_r k_c (r <= c)] (symmetric pair packing, the OAL
// paper's compressed "HD" state): kappa = psi(q) . phi(k) with
//   psi_0 = eps + M_00,  psi_r = 2 M_{0,g(r)} q_r / sqrt(D),  psi_rc = (2 - [r==c]) M_{g(r),g(c)} q_r q_c / D,
// M = L_low L_low^T. The causal sums run chunk by chunk (kTile tokens): tokens of earlier
// chunks are read from the exclusive prefix state S = sum_j phi(k_j) (x) [v_j, 1], tokens of
// the same chunk pair up directly with the exact kernel. Exact (not an approximation), O(T)
// time and O(D^3) memory independent of T.
//
// Backward with G_i = [dO_i / den_i, -(dO_i . O_i) / den_i] (the gradient of [num_i, den_i]):
// pass 1 runs forward over chunks with the prefix state for dpsi(q) and the intra-chunk
// terms; pass 2 runs backward with the suffix state R = sum_i psi(q_i) (x) G_i for dphi(k)
// and the inter-chunk dV.
#include <algorithm>
#include <cmath>

#include "attention/head_kernels.hpp"
#include "attention/tile_ops.hpp"

namespace hw::attn::detail {
namespace {

constexpr int C = kTile;  // chunk length

template <class F>
inline void axpy(F* y, F a, const F* x, int n) {
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
}

// Scratch of one thread, carved from its workspace slice.
template <class F>
struct LinearWs {
  int D = 0, D1 = 0, P = 0, Fw = 0, G1 = 0;
  F eps = F(0), a0 = F(0), rs = F(0);
  const int32_t* grp = nullptr;
  F *S, *PsiT, *PhiT, *dT, *acc, *U, *Gm, *lin, *wp, *Ll, *s, *t, *ds;

  LinearWs(const LinearHeadParams<F>& p, double eps_, int D_, F* w) {
    D = D_;
    D1 = D + 1;
    P = D * (D + 1) / 2;
    Fw = 1 + D + P;
    G1 = p.n_groups + 1;
    eps = F(eps_);
    rs = F(1) / std::sqrt(F(D));
    grp = p.groups;
    S = w;
    PsiT = S + int64_t(Fw) * D1;
    PhiT = PsiT + int64_t(Fw) * C;
    dT = PhiT + int64_t(Fw) * C;
    acc = dT + int64_t(Fw) * C;
    U = acc + int64_t(C) * D1;
    Gm = U + int64_t(C) * D1;
    lin = Gm + int64_t(C) * D1;
    wp = lin + D;
    Ll = wp + P;
    F* M = Ll + G1 * G1;
    s = M + G1 * G1;
    t = s + G1;
    ds = t + G1;
    // Only L's lower triangle is a parameter; the upper triangle is ignored.
    for (int a = 0; a < G1; ++a)
      for (int b = 0; b < G1; ++b) Ll[a * G1 + b] = b <= a ? p.L[a * G1 + b] : F(0);
    for (int a = 0; a < G1; ++a)
      for (int b = 0; b < G1; ++b) {
        F m = F(0);
        for (int c = 0; c <= std::min(a, b); ++c) m += Ll[a * G1 + c] * Ll[b * G1 + c];
        M[a * G1 + b] = m;
      }
    a0 = eps + M[0];
    for (int r = 0; r < D; ++r) lin[r] = F(2) * M[grp[r]] * rs;
    const F inv_d = rs * rs;
    for (int r = 0, k = 0; r < D; ++r)
      for (int c = r; c < D; ++c, ++k) wp[k] = (r == c ? F(1) : F(2)) * M[grp[r] * G1 + grp[c]] * inv_d;
  }

  // U rows [v_j, 1] of the chunk
  void load_u(const F* v, int64_t ldx, int64_t t0, int n) {
    for (int a = 0; a < n; ++a) {
      const F* vr = v + (t0 + a) * ldx;
      std::copy(vr, vr + D, U + a * D1);
      U[a * D1 + D] = F(1);
    }
  }
  // PsiT / PhiT: features of the chunk's queries / keys, feature-major [Fw][C]
  void load_psi(const F* q, int64_t ldx, int64_t t0, int n) {
    for (int a = 0; a < n; ++a) {
      const F* x = q + (t0 + a) * ldx;
      PsiT[a] = a0;
      for (int r = 0; r < D; ++r) PsiT[(1 + r) * C + a] = lin[r] * x[r];
      F* pp = PsiT + int64_t(1 + D) * C + a;
      for (int r = 0, k = 0; r < D; ++r)
        for (int c = r; c < D; ++c, ++k) pp[int64_t(k) * C] = wp[k] * x[r] * x[c];
    }
  }
  void load_phi(const F* kx, int64_t ldx, int64_t t0, int n) {
    for (int a = 0; a < n; ++a) {
      const F* x = kx + (t0 + a) * ldx;
      PhiT[a] = F(1);
      for (int r = 0; r < D; ++r) PhiT[(1 + r) * C + a] = x[r];
      F* pp = PhiT + int64_t(1 + D) * C + a;
      for (int r = 0, k = 0; r < D; ++r)
        for (int c = r; c < D; ++c, ++k) pp[int64_t(k) * C] = x[r] * x[c];
    }
  }
  // G rows of the chunk from dO, O and the saved denominators
  void load_g(const F* out, const F* dout, int64_t ldo, const F* den, int64_t t0, int n) {
    for (int a = 0; a < n; ++a) {
      const F* o = out + (t0 + a) * ldo;
      const F* g = dout + (t0 + a) * ldo;
      const F inv = F(1) / den[t0 + a];
      F od = F(0);
      for (int d = 0; d < D; ++d) {
        Gm[a * D1 + d] = g[d] * inv;
        od += g[d] * o[d];
      }
      Gm[a * D1 + D] = -od * inv;
    }
  }
  // Exact kernel of one pair; leaves s and t = L_low^T s in scratch for the backward.
  F kappa(const F* x, const F* y) {
    s[0] = F(1);
    for (int g = 1; g < G1; ++g) s[g] = F(0);
    for (int r = 0; r < D; ++r) s[grp[r]] += x[r] * y[r];
    for (int g = 1; g < G1; ++g) s[g] *= rs;
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

int64_t linear_scratch(int D, int n_groups) {
  const int64_t D1 = D + 1, P = int64_t(D) * (D + 1) / 2, Fw = 1 + D + P, G1 = n_groups + 1;
  return Fw * D1 + 3 * Fw * C + 3 * C * D1 + D + P + 2 * G1 * G1 + 3 * G1;
}

template <class F>
int64_t linear_forward(const LinearHeadParams<F>& p, double eps, const HeadFwd<F>& a) {
  LinearWs<F> w(p, eps, a.D, a.ws);
  const int D1 = w.D1;
  std::fill(w.S, w.S + int64_t(w.Fw) * D1, F(0));
  for (int64_t t0 = 0; t0 < a.T; t0 += C) {
    const int n = static_cast<int>(std::min<int64_t>(C, a.T - t0));
    w.load_u(a.v, a.ldx, t0, n);
    w.load_psi(a.q, a.ldx, t0, n);
    w.load_phi(a.k, a.ldx, t0, n);
    std::fill(w.acc, w.acc + int64_t(n) * D1, F(0));
    // earlier chunks: read the exclusive prefix state, then add this chunk to it
    for (int f = 0; f < w.Fw; ++f) {
      F* Sf = w.S + int64_t(f) * D1;
      const F* psi = w.PsiT + int64_t(f) * C;
      const F* phi = w.PhiT + int64_t(f) * C;
      for (int i = 0; i < n; ++i)
        if (psi[i] != F(0)) axpy(w.acc + i * D1, psi[i], Sf, D1);
      for (int i = 0; i < n; ++i)
        if (phi[i] != F(0)) axpy(Sf, phi[i], w.U + i * D1, D1);
    }
    // same chunk: exact pairwise kernel
    for (int i = 0; i < n; ++i) {
      const F* qi = a.q + (t0 + i) * a.ldx;
      for (int j = 0; j <= i; ++j) axpy(w.acc + i * D1, w.kappa(qi, a.k + (t0 + j) * a.ldx), w.U + j * D1, D1);
    }
    for (int i = 0; i < n; ++i) {
      const F den = w.acc[i * D1 + a.D];
      if (!(den > F(0)) || !std::isfinite(den)) return t0 + i;
      const F inv = F(1) / den;
      F* o = a.out + (t0 + i) * a.ldo;
      for (int d = 0; d < a.D; ++d) o[d] = w.acc[i * D1 + d] * inv;
      a.stats[t0 + i] = den;
    }
  }
  return -1;
}

template <class F>
void linear_backward(const LinearHeadParams<F>& p, double eps, const HeadBwd<F>& a, F* A) {
  LinearWs<F> w(p, eps, a.D, a.ws);
  const int D = a.D, D1 = w.D1, G1 = w.G1;
  const F inv_d = w.rs * w.rs;
  const int64_t n_chunks = (a.T + C - 1) / C;

  // Pass 1, forward over chunks: dpsi(q_i) = S_excl G_i, and the intra-chunk pairs.
  std::fill(w.S, w.S + int64_t(w.Fw) * D1, F(0));
  for (int64_t ci = 0; ci < n_chunks; ++ci) {
    const int64_t t0 = ci * C;
    const int n = static_cast<int>(std::min<int64_t>(C, a.T - t0));
    w.load_u(a.v, a.ldx, t0, n);
    w.load_phi(a.k, a.ldx, t0, n);
    w.load_g(a.out, a.dout, a.ldo, a.stats, t0, n);
    for (int f = 0; f < w.Fw; ++f) {
      F* Sf = w.S + int64_t(f) * D1;
      F* dpsi = w.dT + int64_t(f) * C;
      const F* phi = w.PhiT + int64_t(f) * C;
      for (int i = 0; i < n; ++i) dpsi[i] = dot_lanes(Sf, w.Gm + i * D1, D1);
      for (int i = 0; i < n; ++i)
        if (phi[i] != F(0)) axpy(Sf, phi[i], w.U + i * D1, D1);
    }
    for (int i = 0; i < n; ++i) {
      const F* qi = a.q + (t0 + i) * a.ldx;
      F* dqi = a.dq + (t0 + i) * a.ldx;
      A[0] += w.dT[i];
      for (int r = 0; r < D; ++r) {
        const F d = w.dT[(1 + r) * C + i];
        const int g = w.grp[r];
        dqi[r] += d * w.lin[r];
        const F x = d * qi[r] * w.rs;
        A[g] += x;
        A[g * G1] += x;
      }
      const F* dp = w.dT + int64_t(1 + D) * C + i;
      for (int r = 0, k = 0; r < D; ++r) {
        const int gr = w.grp[r];
        for (int c = r; c < D; ++c, ++k) {
          const F d = dp[int64_t(k) * C];
          const F dw = d * w.wp[k];
          dqi[r] += dw * qi[c];
          dqi[c] += dw * qi[r];
          const F x = d * qi[r] * qi[c] * inv_d;
          const int gc = w.grp[c];
          if (r == c) {
            A[gr * G1 + gr] += x;
          } else {
            A[gr * G1 + gc] += x;
            A[gc * G1 + gr] += x;
          }
        }
      }
    }
    // intra-chunk pairs, exact kernel: dkappa_ij = G_i . [v_j, 1]
    for (int i = 0; i < n; ++i) {
      const F* qi = a.q + (t0 + i) * a.ldx;
      F* dqi = a.dq + (t0 + i) * a.ldx;
      const F* gi = w.Gm + i * D1;
      for (int j = 0; j <= i; ++j) {
        const F* kj = a.k + (t0 + j) * a.ldx;
        F* dkj = a.dk + (t0 + j) * a.ldx;
        const F kap = w.kappa(qi, kj);
        const F dkap = dot_lanes(gi, w.U + j * D1, D1);
        axpy(a.dv + (t0 + j) * a.ldx, kap, gi, D);
        for (int e = 1; e < G1; ++e) {  // ds = 2 dkappa L t (s_0 = 1 is constant)
          F lt = F(0);
          for (int c = 0; c <= e; ++c) lt += w.Ll[e * G1 + c] * w.t[c];
          w.ds[e] = F(2) * dkap * lt * w.rs;
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
  }

  // Pass 2, backward over chunks: dphi(k_j) = R_excl^T [v_j, 1], dU_j = R_excl^T phi(k_j).
  F* R = w.S;
  std::fill(R, R + int64_t(w.Fw) * D1, F(0));
  for (int64_t ci = n_chunks - 1; ci >= 0; --ci) {
    const int64_t t0 = ci * C;
    const int n = static_cast<int>(std::min<int64_t>(C, a.T - t0));
    w.load_u(a.v, a.ldx, t0, n);
    w.load_psi(a.q, a.ldx, t0, n);
    w.load_phi(a.k, a.ldx, t0, n);
    w.load_g(a.out, a.dout, a.ldo, a.stats, t0, n);
    std::fill(w.acc, w.acc + int64_t(n) * D1, F(0));
    for (int f = 0; f < w.Fw; ++f) {
      F* Rf = R + int64_t(f) * D1;
      F* dphi = w.dT + int64_t(f) * C;
      const F* phi = w.PhiT + int64_t(f) * C;
      const F* psi = w.PsiT + int64_t(f) * C;
      for (int j = 0; j < n; ++j) {
        dphi[j] = dot_lanes(Rf, w.U + j * D1, D1);
        if (phi[j] != F(0)) axpy(w.acc + j * D1, phi[j], Rf, D1);
      }
      for (int i = 0; i < n; ++i)
        if (psi[i] != F(0)) axpy(Rf, psi[i], w.Gm + i * D1, D1);
    }
    for (int j = 0; j < n; ++j) {
      const F* kj = a.k + (t0 + j) * a.ldx;
      F* dkj = a.dk + (t0 + j) * a.ldx;
      axpy(a.dv + (t0 + j) * a.ldx, F(1), w.acc + j * D1, D);
      for (int r = 0; r < D; ++r) dkj[r] += w.dT[(1 + r) * C + j];
      const F* dp = w.dT + int64_t(1 + D) * C + j;
      for (int r = 0, k = 0; r < D; ++r)
        for (int c = r; c < D; ++c, ++k) {
          const F d = dp[int64_t(k) * C];
          dkj[r] += d * kj[c];
          dkj[c] += d * kj[r];
        }
    }
  }
}

template int64_t linear_forward<float>(const LinearHeadParams<float>&, double, const HeadFwd<float>&);
template int64_t linear_forward<double>(const LinearHeadParams<double>&, double, const HeadFwd<double>&);
template void linear_backward<float>(const LinearHeadParams<float>&, double, const HeadBwd<float>&, float*);
template void linear_backward<double>(const LinearHeadParams<double>&, double, const HeadBwd<double>&, double*);

}  // namespace hw::attn::detail
