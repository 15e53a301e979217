#pragma once
// Linear (OAL) heads on the GPU, host+device: the feature layout and the chunk math of the
// exact chunked evaluation (a reformulation of the kernel, not an approximation).
//
// The kernel (as src/attention/linear_head.cpp) is kappa(q, k) = eps + ||L_low^T s||^2 with
// s = [1, s_1..s_G], s_g = sum_{r in g} q_r k_r / sqrt(D). It is a quadratic form in q*k, so
// kappa = sum_f psi_f(q) phi_f(k) = sum_f w_f X_f(q) X_f(k) over the features
//   const (X = 1, w = eps + M_00), single r (X = x_r, w = 2 M_{0,g(r)} / sqrt(D)),
//   pair r <= c (X = x_r x_c, w = (2 - [r == c]) M_{g(r),g(c)} / D),      M = L_low L_low^T.
// Causal sums run chunk by chunk (kLinChunk tokens): the chunk's queries read the exclusive
// prefix state S[f] = sum_{earlier j} phi_f(k_j) [v_j, 1]; pairs inside the chunk use the
// masked chunk kernel matrix Kap = Psi^T Phi. Everything is a product of small matrices, so
// the GPU runs it as tile GEMMs.
//
// Feature slots are laid out so that each block of `linear_feature_block(D)` slots maps to
// a few rows of the pair matrix (then a thread owning dq[i][c] finds its terms in O(1)):
//   head part  [0, H0): const, single 0..D-1, diagonal pairs (r, r) for r >= D/2, zero padding;
//   pair part, block b in [0, D/2) of D slots: pairs (b, c) for c >= b, then (D-1-b, c) for
//              c > D-1-b ("two half rows make one full row").
// Zero-padding slots have X = 0 and w = 0, so they add nothing.
//
// Backward (G_i = [dO_i, -(dO_i . O_i)] / den_i, dkappa_ij = G_i . [v_j, 1]):
//   pass 1, chunks forward: dPsi[f][i] = S_excl[f] . G_i + sum_{j<=i in chunk} Phi[f][j] dkappa_ij
//           (the whole derivative of the loss w.r.t. psi_f(q_i)) -> dq by the feature Jacobian,
//           and the per-feature totals T_f = sum_i dPsi[f][i] X_f(q_i) that give dL's A matrix;
//   pass 2, chunks backward with the suffix state R[f] = sum_{later i} psi_f(q_i) G_i:
//           dPhi[f][j] = R_excl[f] . [v_j, 1] + sum_{i>=j in chunk} Psi[f][i] dkappa_ij -> dk,
//           dv_j = sum_f Phi[f][j] R_excl[f] + sum_{i>=j in chunk} Kap[i][j] G_i.
// The chunk functions below are the serial form (CPU tests chain them); the device code
// (src/kernels/cuda/attention_linear.cuh) computes the same buffers with a thread block.
#include <cstdint>

#include "headwise/kernels/tiles/host_device.hpp"

namespace hw::tiles {

constexpr int kLinChunk = 32;  // tokens per chunk

// Feature slots per block: divides D and the head part (64 for D = 64, 32 for D = 128,
// which keeps the GPU's shared-memory state tile near 16 KiB).
HW_HOST_DEVICE constexpr int linear_feature_block(int D) { return D >= 128 ? 32 : (D < 64 ? D : 64); }
// Slots of the head part (const, singles, upper-half diagonals, padding).
HW_HOST_DEVICE constexpr int linear_head_slots(int D) {
  return (1 + D + D / 2 + linear_feature_block(D) - 1) / linear_feature_block(D) * linear_feature_block(D);
}
// All slots (a multiple of the block).
HW_HOST_DEVICE constexpr int linear_feature_slots(int D) { return linear_head_slots(D) + D * D / 2; }
HW_HOST_DEVICE constexpr int linear_feature_blocks(int D) { return linear_feature_slots(D) / linear_feature_block(D); }
// The GPU splits a head's feature slots over a chain of work items ("stages"), each owning
// kLinStageBlocks consecutive feature blocks whose state stays in its shared memory for the
// whole sequence; their partial sums meet in a fixed stage order (attention_linear.cuh).
constexpr int kLinStageBlocks = 2;
// Stages of one head (the last may own fewer blocks).
HW_HOST_DEVICE constexpr int linear_stage_count(int D) {
  return (linear_feature_blocks(D) + kLinStageBlocks - 1) / kLinStageBlocks;
}

enum LinFeatureKind : uint8_t { kLinPad = 0, kLinConst = 1, kLinSingle = 2, kLinPair = 3 };

struct LinFeature {
  uint8_t kind = kLinPad;
  int r = 0, c = 0;  // single: r; pair: r <= c
};

HW_HOST_DEVICE LinFeature linear_feature(int D, int f) {
  const int h0 = linear_head_slots(D);
  LinFeature ft;
  if (f < h0) {
    if (f == 0) {
      ft.kind = kLinConst;
    } else if (f <= D) {
      ft.kind = kLinSingle;
      ft.r = ft.c = f - 1;
    } else if (f <= D + D / 2) {
      ft.kind = kLinPair;
      ft.r = ft.c = D / 2 + (f - D - 1);
    }
    return ft;
  }
  const int b = (f - h0) / D, s = (f - h0) % D;
  ft.kind = kLinPair;
  if (s < D - b) {
    ft.r = b;
    ft.c = b + s;
  } else {
    ft.r = D - 1 - b;
    ft.c = ft.r + 1 + (s - (D - b));
  }
  return ft;
}

HW_HOST_DEVICE int linear_single_slot(int r) { return 1 + r; }

// Slot of pair (r, c), r <= c.
HW_HOST_DEVICE int linear_pair_slot(int D, int r, int c) {
  const int h0 = linear_head_slots(D);
  if (r < D / 2) return h0 + r * D + (c - r);
  if (r == c) return 1 + D + (r - D / 2);
  const int b = D - 1 - r;
  return h0 + b * D + (D - b) + (c - r - 1);
}

// (L_low L_low^T)[a][b]; L is G1 x G1 row-major, its upper triangle ignored.
template <class F>
HW_HOST_DEVICE F linear_gram(const F* L, int G1, int a, int b) {
  const int m = a < b ? a : b;
  F s = F(0);
  for (int c = 0; c <= m; ++c) s += L[a * G1 + c] * L[b * G1 + c];
  return s;
}

// Query-side weight w_f (psi_f = w_f X_f(q)); groups[r] in 1..G1-1, rs = 1/sqrt(D).
template <class F>
HW_HOST_DEVICE F linear_weight(const LinFeature& ft, const F* L, int G1, const int32_t* groups, F eps, F rs) {
  switch (ft.kind) {
    case kLinConst: return eps + linear_gram(L, G1, 0, 0);
    case kLinSingle: return F(2) * linear_gram(L, G1, 0, groups[ft.r]) * rs;
    case kLinPair:
      return (ft.r == ft.c ? F(1) : F(2)) * linear_gram(L, G1, groups[ft.r], groups[ft.c]) * (rs * rs);
    default: return F(0);
  }
}

// Unweighted feature value X_f(x).
template <class F>
HW_HOST_DEVICE F linear_x(const LinFeature& ft, const F* x) {
  switch (ft.kind) {
    case kLinConst: return F(1);
    case kLinSingle: return x[ft.r];
    case kLinPair: return x[ft.r] * x[ft.c];
    default: return F(0);
  }
}

// ---- feature Jacobian (dX = d loss / d feature value -> d loss / d x) ----

// The two pair rows a pair block serves (first indices b and bp = D-1-b).
struct LinPairRows {
  int b = 0, bp = 0;
};
HW_HOST_DEVICE LinPairRows linear_pair_rows(int D, int f0) {
  LinPairRows pr;
  pr.b = (f0 - linear_head_slots(D)) / D;
  pr.bp = D - 1 - pr.b;
  return pr;
}

// What column c of row x receives from the slots [f0, f0 + fb): `own` goes to dx[c]; red_b and
// red_bp are c's terms of the sums that go to dx[b] and dx[bp] (pair blocks only). dX[s * ld]
// and w[s] are slot f0 + s of this row (w null: weight 1, the key side).
template <class F>
struct LinJacTerms {
  F own = F(0), red_b = F(0), red_bp = F(0);
};

template <class F>
HW_HOST_DEVICE LinJacTerms<F> linear_jacobian_terms(int D, int f0, int fb, int c, const F* dX, int ld, const F* w,
                                                  const F* x) {
  LinJacTerms<F> t;
  const int h0 = linear_head_slots(D);
  if (f0 < h0) {
    const int fs = linear_single_slot(c) - f0;  // d(w x_c)/dx_c = w
    if (fs >= 0 && fs < fb) t.own += dX[fs * ld] * (w ? w[fs] : F(1));
    if (c >= D / 2) {  // d(w x_c^2)/dx_c = 2 w x_c
      const int fd = linear_pair_slot(D, c, c) - f0;
      if (fd >= 0 && fd < fb) t.own += F(2) * dX[fd * ld] * (w ? w[fd] : F(1)) * x[c];
    }
    return t;
  }
  const LinPairRows pr = linear_pair_rows(D, f0);
  // pair (b, c): d/dx_c = w x_b (own), d/dx_b = w x_c (to the row-b sum); for c == b both
  // halves add up to 2 w x_b.
  if (c >= pr.b) {
    const int s = linear_pair_slot(D, pr.b, c) - f0;
    if (s >= 0 && s < fb) {
      const F d = dX[s * ld] * (w ? w[s] : F(1));
      t.own += d * x[pr.b];
      t.red_b = d * x[c];
    }
  }
  if (c > pr.bp) {  // (bp, bp) lives in the head part
    const int s = linear_pair_slot(D, pr.bp, c) - f0;
    if (s >= 0 && s < fb) {
      const F d = dX[s * ld] * (w ? w[s] : F(1));
      t.own += d * x[pr.bp];
      t.red_bp = d * x[c];
    }
  }
  return t;
}

// ---- dL: per-feature totals T_f -> A = sum over pairs of dkappa s s^T ----

// Tpair(r, c) for any order of r and c.
template <class F>
HW_HOST_DEVICE F linear_pair_total(int D, const F* Tt, int r, int c) {
  return r <= c ? Tt[linear_pair_slot(D, r, c)] : Tt[linear_pair_slot(D, c, r)];
}

// Brow(r, y) = sum_{c in group y} Tpair(r, c), y >= 1.
template <class F>
HW_HOST_DEVICE F linear_A_rowsum(int D, const F* Tt, const int32_t* groups, int r, int y) {
  F s = F(0);
  for (int c = 0; c < D; ++c)
    if (groups[c] == y) s += linear_pair_total(D, Tt, r, c);
  return s;
}

// A[x][y] (G1 x G1, symmetric) from the totals; Brow[r * ldb + y] as linear_A_rowsum.
template <class F>
HW_HOST_DEVICE F linear_A_entry(int D, const F* Tt, const F* Brow, int ldb, const int32_t* groups, F rs, int x,
                                int y) {
  if (x == 0 && y == 0) return Tt[0];
  F s = F(0);
  if (x == 0 || y == 0) {
    const int g = x > y ? x : y;
    for (int r = 0; r < D; ++r)
      if (groups[r] == g) s += Tt[linear_single_slot(r)];
    return s * rs;
  }
  for (int r = 0; r < D; ++r)
    if (groups[r] == x) s += Brow[r * ldb + y];
  return s * (rs * rs);
}

// dL += 2 A L_low on the lower triangle (A summed over sequences), as the CPU entry point.
template <class F>
HW_HOST_DEVICE F linear_dL_entry(const F* A, const F* L, int G1, int r, int c) {
  F s = F(0);
  for (int e = c; e < G1; ++e) s += A[r * G1 + e] * L[e * G1 + c];
  return F(2) * s;
}

// ---- chunk math (serial form). Chunk rows are i (queries) / j (keys) in [0, C), valid
// below n; feature arrays are slot-major (PsiT[s * ld + i]); U rows are [v_j, 1] and G rows
// G_i, both D + 1 wide, zero past n. S / R hold the block's D + 1 columns per slot. ----

// PsiT[s][i] = w[f0 + s] X(q_i) (w null: unweighted), PhiT[s][i] = X(k_i); zero for i >= n.
// Either output may be null.
template <class F>
HW_HOST_DEVICE void linear_chunk_features(F* PsiT, F* PhiT, int ld, int D, int f0, int fb, const F* w, const F* q,
                                          const F* k, int64_t ldx, int n, int C) {
  for (int s = 0; s < fb; ++s) {
    const LinFeature ft = linear_feature(D, f0 + s);
    const F wf = w ? w[f0 + s] : F(1);
    for (int i = 0; i < C; ++i) {
      if (PsiT) PsiT[s * ld + i] = i < n ? wf * linear_x(ft, q + i * ldx) : F(0);
      if (PhiT) PhiT[s * ld + i] = i < n ? linear_x(ft, k + i * ldx) : F(0);
    }
  }
}

// Earlier chunks: acc[i][e] += sum_s PsiT[s][i] S[s][e] (e < D); den[i] += sum_s PsiT[s][i] S[s][D].
template <class F>
HW_HOST_DEVICE void linear_chunk_inter(F* acc, int lda, F* den, const F* PsiT, int ld, const F* S, int lds, int fb,
                                       int D, int C) {
  for (int i = 0; i < C; ++i) {
    for (int e = 0; e < D; ++e) {
      F a = F(0);
      for (int s = 0; s < fb; ++s) a += PsiT[s * ld + i] * S[s * lds + e];
      acc[i * lda + e] += a;
    }
    F z = F(0);
    for (int s = 0; s < fb; ++s) z += PsiT[s * ld + i] * S[s * lds + D];
    den[i] += z;
  }
}

// Chunk kernel matrix, accumulated over blocks: Kap[i][j] += sum_s PsiT[s][i] PhiT[s][j].
template <class F>
HW_HOST_DEVICE void linear_chunk_kappa(F* Kap, int ldk, const F* PsiT, const F* PhiT, int ld, int fb, int C) {
  for (int i = 0; i < C; ++i)
    for (int j = 0; j < C; ++j) {
      F a = F(0);
      for (int s = 0; s < fb; ++s) a += PsiT[s * ld + i] * PhiT[s * ld + j];
      Kap[i * ldk + j] += a;
    }
}

// Prefix state: S[s][e] += sum_{j<n} PhiT[s][j] U[j][e], e <= D.
template <class F>
HW_HOST_DEVICE void linear_state_update(F* S, int lds, const F* PhiT, int ld, const F* U, int ldu, int fb, int D,
                                        int n) {
  for (int s = 0; s < fb; ++s)
    for (int e = 0; e <= D; ++e) {
      F a = F(0);
      for (int j = 0; j < n; ++j) a += PhiT[s * ld + j] * U[j * ldu + e];
      S[s * lds + e] += a;
    }
}

// Same chunk: acc[i][e] += sum_{j<=i} Kap[i][j] U[j][e]; den[i] += sum_{j<=i} Kap[i][j] (i < n).
template <class F>
HW_HOST_DEVICE void linear_chunk_intra(F* acc, int lda, F* den, const F* Kap, int ldk, const F* U, int ldu, int D,
                                       int n) {
  for (int i = 0; i < n; ++i) {
    for (int e = 0; e < D; ++e) {
      F a = F(0);
      for (int j = 0; j <= i; ++j) a += Kap[i * ldk + j] * U[j * ldu + e];
      acc[i * lda + e] += a;
    }
    F z = F(0);
    for (int j = 0; j <= i; ++j) z += Kap[i * ldk + j];
    den[i] += z;
  }
}

// G[i] = [dO_i / den_i, -(dO_i . O_i) / den_i] for i < n, zero rows after.
template <class F>
HW_HOST_DEVICE void linear_chunk_grad_rows(F* G, int ldg, const F* out, const F* dout, int64_t ldo, const F* den, int D,
                                           int n, int C) {
  for (int i = 0; i < C; ++i) {
    if (i >= n) {
      for (int e = 0; e <= D; ++e) G[i * ldg + e] = F(0);
      continue;
    }
    const F inv = F(1) / den[i];
    F od = F(0);
    for (int e = 0; e < D; ++e) {
      G[i * ldg + e] = dout[i * ldo + e] * inv;
      od += dout[i * ldo + e] * out[i * ldo + e];
    }
    G[i * ldg + D] = -od * inv;
  }
}

// dKT[j][i] = dkappa_ij = G_i . U_j for j <= i < n, else 0 (stored key-major).
template <class F>
HW_HOST_DEVICE void linear_chunk_dkappa(F* dKT, int ldk, const F* G, int ldg, const F* U, int ldu, int D, int n, int C) {
  for (int j = 0; j < C; ++j)
    for (int i = 0; i < C; ++i) {
      F a = F(0);
      if (j <= i && i < n)
        for (int e = 0; e <= D; ++e) a += G[i * ldg + e] * U[j * ldu + e];
      dKT[j * ldk + i] = a;
    }
}

// Pass 1: dX[s][i] = S[s] . G_i + sum_j PhiT[s][j] dKT[j][i] (overwrites).
template <class F>
HW_HOST_DEVICE void linear_chunk_dpsi(F* dX, int ldx, const F* S, int lds, const F* G, int ldg, const F* PhiT, int ld,
                                      const F* dKT, int ldk, int fb, int D, int C) {
  for (int s = 0; s < fb; ++s)
    for (int i = 0; i < C; ++i) {
      F a = F(0);
      for (int e = 0; e <= D; ++e) a += S[s * lds + e] * G[i * ldg + e];
      for (int j = 0; j < C; ++j) a += PhiT[s * ld + j] * dKT[j * ldk + i];
      dX[s * ldx + i] = a;
    }
}

// Pass 2: dX[s][j] = R[s] . U_j + sum_i PsiT[s][i] dKT[j][i] (overwrites).
template <class F>
HW_HOST_DEVICE void linear_chunk_dphi(F* dX, int ldx, const F* R, int lds, const F* U, int ldu, const F* PsiT, int ld,
                                      const F* dKT, int ldk, int fb, int D, int C) {
  for (int s = 0; s < fb; ++s)
    for (int j = 0; j < C; ++j) {
      F a = F(0);
      for (int e = 0; e <= D; ++e) a += R[s * lds + e] * U[j * ldu + e];
      for (int i = 0; i < C; ++i) a += PsiT[s * ld + i] * dKT[j * ldk + i];
      dX[s * ldx + j] = a;
    }
}

// Totals for dL: Tt[s] += sum_i dX[s][i] XqT[s][i] (XqT: unweighted query features).
template <class F>
HW_HOST_DEVICE void linear_totals_update(F* Tt, const F* dX, int ldx, const F* XqT, int ld, int fb, int C) {
  for (int s = 0; s < fb; ++s) {
    F a = F(0);
    for (int i = 0; i < C; ++i) a += dX[s * ldx + i] * XqT[s * ld + i];
    Tt[s] += a;
  }
}

// dx[i] += the Jacobian of slots [f0, f0 + fb) applied to dX[.][i], for rows i < n of x
// (ldxr-strided). w: the block's weights (query side) or null (key side).
template <class F>
HW_HOST_DEVICE void linear_chunk_jacobian(F* dx, int64_t lddx, int D, int f0, int fb, const F* dX, int ldx, const F* w,
                                          const F* x, int64_t ldxr, int n) {
  for (int i = 0; i < n; ++i) {
    F rb = F(0), rbp = F(0);
    for (int c = 0; c < D; ++c) {
      const LinJacTerms<F> t = linear_jacobian_terms(D, f0, fb, c, dX + i, ldx, w, x + i * ldxr);
      dx[i * lddx + c] += t.own;
      rb += t.red_b;
      rbp += t.red_bp;
    }
    if (f0 >= linear_head_slots(D)) {
      const LinPairRows pr = linear_pair_rows(D, f0);
      dx[i * lddx + pr.b] += rb;
      dx[i * lddx + pr.bp] += rbp;
    }
  }
}

// Pass 2, earlier-chunk part of dU: dU[j][e] += sum_s PhiT[s][j] R[s][e] (e < D).
template <class F>
HW_HOST_DEVICE void linear_chunk_du_inter(F* dU, int ldd, const F* PhiT, int ld, const F* R, int lds, int fb, int D,
                                          int C) {
  for (int j = 0; j < C; ++j)
    for (int e = 0; e < D; ++e) {
      F a = F(0);
      for (int s = 0; s < fb; ++s) a += PhiT[s * ld + j] * R[s * lds + e];
      dU[j * ldd + e] += a;
    }
}

// Suffix state: R[s][e] += sum_{i<n} PsiT[s][i] G[i][e], e <= D.
template <class F>
HW_HOST_DEVICE void linear_suffix_update(F* R, int lds, const F* PsiT, int ld, const F* G, int ldg, int fb, int D,
                                         int n) {
  for (int s = 0; s < fb; ++s)
    for (int e = 0; e <= D; ++e) {
      F a = F(0);
      for (int i = 0; i < n; ++i) a += PsiT[s * ld + i] * G[i * ldg + e];
      R[s * lds + e] += a;
    }
}

// Same chunk: dU[j][e] += sum_{j<=i<n} Kap[i][j] G[i][e] (e < D).
template <class F>
HW_HOST_DEVICE void linear_chunk_du_intra(F* dU, int ldd, const F* Kap, int ldk, const F* G, int ldg, int D, int n) {
  for (int j = 0; j < n; ++j)
    for (int e = 0; e < D; ++e) {
      F a = F(0);
      for (int i = j; i < n; ++i) a += Kap[i * ldk + j] * G[i * ldg + e];
      dU[j * ldd + e] += a;
    }
}

}  // namespace hw::tiles
