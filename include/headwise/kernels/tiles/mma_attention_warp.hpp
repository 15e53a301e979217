#pragma once
// Warp-level tile routines of the bf16 (tensor-core) attention, FlashAttention-2 style: one warp
// owns a 16-row block (query rows in the forward and the dQ items, key rows in the dK/dV items)
// and walks the columns of a key (or query) tile held in shared memory as bf16 word tiles
// (mma_fragments.hpp). Every routine is lane-indexed and takes the warp's collective operations
// from a policy W with these static functions,
//   W::mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])   d += A B (m16n8k16 bf16)
//   W::shfl_xor(float v, int mask)                                          v of lane ^ mask
//   W::ldsm_x4(uint32_t (&r)[4], const uint32_t* row)         ldmatrix .x4 (row: the lane's address)
//   W::ldsm_x4_trans(uint32_t (&r)[4], const uint32_t* row)   ldmatrix .x4 .trans
// The CUDA kernels pass the hardware instructions (src/kernels/cuda/attention_mma_warp.cuh); the
// CPU tests pass an emulation that runs the 32 lanes as threads, so they run this very code.
// Block-level work (tile loads, barriers, the exchange between the two warps that share a row
// block) stays in the kernels; the per-lane halves of the exchange are here.
#include <cmath>
#include <cstdint>

#include "headwise/kernels/tiles/attention_storage.hpp"
#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/mma_fragments.hpp"
#include "headwise/kernels/tiles/online_softmax.hpp"
#include "headwise/kernels/tiles/static_unroll.hpp"

namespace hw::tiles::mma {

// Where a warp's 16 x n score block sits: global index of its row 0 and column 0, and whether
// its pairs need the per-element mask (tile_needs_mask of the enclosing tile). transposed: rows
// are keys and columns queries (the dK/dV items compute S^T = K Q^T).
struct ScoreBlock {
  int64_t row0 = 0, col0 = 0, T = 0;
  KeyRule rule;
  bool masked = true;
  bool transposed = false;
};

HW_HOST_DEVICE bool block_visible(const ScoreBlock& s, int r, int c) {
  if (!s.masked) return true;
  const int64_t i = s.transposed ? s.col0 + c : s.row0 + r;
  const int64_t j = s.transposed ? s.row0 + r : s.col0 + c;
  return i < s.T && j < s.T && key_visible(s.rule, i, j);
}

template <class W>
HW_HOST_DEVICE float quad_max(float v) {
  v = fmaxf(v, W::shfl_xor(v, kQuadXor0));
  return fmaxf(v, W::shfl_xor(v, kQuadXor1));
}
template <class W>
HW_HOST_DEVICE float quad_sum(float v) {
  v += W::shfl_xor(v, kQuadXor0);
  return v + W::shfl_xor(v, kQuadXor1);
}

// The two products of one ldmatrix load of B: acc0 += A B0 and acc1 += A B1 (registers b[0..1] and
// b[2..3], the two n-tiles of ldsm_b_nk_source / ldsm_b_kn_source).
template <class W>
HW_HOST_DEVICE void mma_pair(float (&acc0)[4], float (&acc1)[4], const uint32_t (&af)[4], const uint32_t (&b)[4]) {
  const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
  W::mma(acc0, af, b0);
  W::mma(acc1, af, b1);
}

// acc (16 x 8 NT) += A B^T: A rows from word tile `a` (16 rows x 16 KS columns), B^T's rows (the
// output's columns) from word tile `b` (8 NT rows x 16 KS columns); both row stride ldw, both
// 16-byte aligned. One ldmatrix per A fragment and per pair of n-tiles.
template <int NT, int KS, class W>
HW_HOST_DEVICE void gemm_abt(float (&acc)[NT][4], const uint32_t* a, const uint32_t* b, int ldw, int lane) {
  static_assert(NT % 2 == 0, "B fragments come two n-tiles per ldmatrix");
  const Coord sa = ldsm_a_source(lane), sb = ldsm_b_nk_source(lane);
  unroll<KS>([&](auto kk) {
    uint32_t af[4];
    W::ldsm_x4(af, ldsm_address(a, ldw, 0, kk * kK, sa));
    unroll<NT / 2>([&](auto jp) {
      uint32_t bf[4];
      W::ldsm_x4(bf, ldsm_address(b, ldw, jp * 2 * kN, kk * kK, sb));
      mma_pair<W>(acc[2 * jp], acc[2 * jp + 1], af, bf);
    });
  });
}

// acc (16 x 8 NT) += A B: A (16 x 16 KS) given as register fragments, B's rows from word tile `b`
// (16 KS rows x 8 NT columns, row stride ldw, 16-byte aligned), read transposed by ldmatrix.
template <int NT, int KS, class W>
HW_HOST_DEVICE void gemm_ab(float (&acc)[NT][4], const uint32_t (&af)[KS][4], const uint32_t* b, int ldw, int lane) {
  static_assert(NT % 2 == 0, "B fragments come two n-tiles per ldmatrix");
  const Coord sb = ldsm_b_kn_source(lane);
  unroll<KS>([&](auto kk) {
    unroll<NT / 2>([&](auto np) {
      uint32_t bf[4];
      W::ldsm_x4_trans(bf, ldsm_address(b, ldw, kk * kK, np * 2 * kN, sb));
      mma_pair<W>(acc[2 * np], acc[2 * np + 1], af[kk], bf);
    });
  });
}

// C blocks [2 kk, 2 kk + 1] of a 16 x 8 NT result as the A fragments of the next product (bf16).
template <int NT>
HW_HOST_DEVICE void c_to_a(const float (&c)[NT][4], uint32_t (&a)[NT / 2][4]) {
  unroll<NT / 2>([&](auto kk) { pack_a_from_c(c[2 * kk], c[2 * kk + 1], a[kk]); });
}

// ---- per-lane access to a 16 x 8 NT accumulator as rows of a float array (row stride ld) ----
template <int NT>
HW_HOST_DEVICE void c_zero(float (&c)[NT][4]) {
  for (int n = 0; n < NT; ++n)
    for (int e = 0; e < 4; ++e) c[n][e] = 0.f;
}
template <int NT>
HW_HOST_DEVICE void c_export(const float (&c)[NT][4], float* x, int ld, int lane) {
  for (int n = 0; n < NT; ++n)
    for (int e = 0; e < 4; ++e) {
      const Coord p = c_coord(lane, e);
      x[p.row * ld + n * kN + p.col] = c[n][e];
    }
}
template <int NT>
HW_HOST_DEVICE void c_add(float (&c)[NT][4], const float* x, int ld, int lane) {
  for (int n = 0; n < NT; ++n)
    for (int e = 0; e < 4; ++e) {
      const Coord p = c_coord(lane, e);
      c[n][e] += x[p.row * ld + n * kN + p.col];
    }
}
// Rows [0, valid_rows) to a strided activation block (row stride `stride`), each value rounded
// once when St is bf16.
template <int NT, class St>
HW_HOST_DEVICE void c_store(const float (&c)[NT][4], St* out, int64_t stride, int valid_rows, int lane) {
  for (int n = 0; n < NT; ++n)
    for (int e = 0; e < 4; ++e) {
      const Coord p = c_coord(lane, e);
      if (p.row < valid_rows) store_from_float(out + p.row * stride + n * kN + p.col, c[n][e]);
    }
}

// ================= forward =================
// A lane's share of a 16-row block's online softmax: its two rows' running max and sum (equal in
// the four lanes of a quad) and its elements of the 16 x HD output accumulator.
template <int HD>
struct FwdRows {
  float o[HD / kN][4];
  float m[2], l[2];
};

template <int HD>
HW_HOST_DEVICE void fwd_init(FwdRows<HD>& st) {
  c_zero(st.o);
  for (int h = 0; h < 2; ++h) {
    st.m[h] = -INFINITY;
    st.l[h] = 0.f;
  }
}

// One key block of NK keys: S = Q K^T (scaled, masked), the online softmax on the fragments,
// O = O corr + P V with P rounded to bf16. q: the block's 16 query rows, k and v: its NK key rows
// (word tiles, row stride ldw, HD columns).
template <int HD, int NK, class W>
HW_HOST_DEVICE void fwd_tile(FwdRows<HD>& st, const uint32_t* q, const uint32_t* k, const uint32_t* v, int ldw,
                             const ScoreBlock& sb, float scale, int lane) {
  constexpr int NT = NK / kN;
  float s[NT][4];
  c_zero(s);
  gemm_abt<NT, HD / kK, W>(s, q, k, ldw, lane);
  float mx[2] = {-INFINITY, -INFINITY};
  for (int j = 0; j < NT; ++j)
    for (int e = 0; e < 4; ++e) {
      const Coord p = c_coord(lane, e);
      const float x = block_visible(sb, p.row, j * kN + p.col) ? s[j][e] * scale : -INFINITY;
      s[j][e] = x;
      mx[c_row_half(e)] = fmaxf(mx[c_row_half(e)], x);
    }
  float m_new[2], sum[2] = {0.f, 0.f};
  for (int h = 0; h < 2; ++h) m_new[h] = online_new_max(st.m[h], quad_max<W>(mx[h]));
  for (int j = 0; j < NT; ++j)
    for (int e = 0; e < 4; ++e) {
      const float pr = online_prob(s[j][e], m_new[c_row_half(e)]);
      s[j][e] = pr;
      sum[c_row_half(e)] += pr;
    }
  float corr[2];
  for (int h = 0; h < 2; ++h) {
    corr[h] = online_correction(st.m[h], m_new[h]);
    OnlineRow r{st.m[h], st.l[h]};
    online_commit(r, m_new[h], corr[h], quad_sum<W>(sum[h]));
    st.m[h] = r.m;
    st.l[h] = r.l;
  }
  for (int n = 0; n < HD / kN; ++n)
    for (int e = 0; e < 4; ++e) st.o[n][e] *= corr[c_row_half(e)];
  uint32_t pa[NT / 2][4];
  c_to_a(s, pa);
  gemm_ab<HD / kN, NT / 2, W>(st.o, pa, v, ldw, lane);
}

// The exchange between the two warps of a row block (each saw half of every key tile): the
// partner writes its state (o: 16 rows of x, row stride ld; m, l: 16 entries each), the owner
// merges it into its own, rescaling both to the common max (fixed order: owner, then partner).
template <int HD>
HW_HOST_DEVICE void fwd_export(const FwdRows<HD>& st, float* xo, int ld, float* xm, float* xl, int lane) {
  c_export(st.o, xo, ld, lane);
  if (thread_in_group(lane) == 0)
    for (int h = 0; h < 2; ++h) {
      xm[owned_row(lane, h)] = st.m[h];
      xl[owned_row(lane, h)] = st.l[h];
    }
}
template <int HD>
HW_HOST_DEVICE void fwd_merge(FwdRows<HD>& st, const float* xo, int ld, const float* xm, const float* xl, int lane) {
  float ca[2], cb[2];
  for (int h = 0; h < 2; ++h) {
    const int row = owned_row(lane, h);
    const float m_new = online_new_max(st.m[h], xm[row]);
    ca[h] = online_correction(st.m[h], m_new);
    cb[h] = online_correction(xm[row], m_new);
    st.l[h] = st.l[h] * ca[h] + xl[row] * cb[h];
    st.m[h] = m_new;
  }
  for (int n = 0; n < HD / kN; ++n)
    for (int e = 0; e < 4; ++e) {
      const Coord p = c_coord(lane, e);
      st.o[n][e] = st.o[n][e] * ca[c_row_half(e)] + xo[p.row * ld + n * kN + p.col] * cb[c_row_half(e)];
    }
}

// O / l for rows [0, valid_rows) to `out` (row stride `stride`), and the rows' log-sum-exp to
// lse[0, valid_rows) (what the SIMT kernel saves in row_stats).
template <int HD, class St>
HW_HOST_DEVICE void fwd_store(FwdRows<HD>& st, St* out, int64_t stride, float* lse, int valid_rows, int lane) {
  float inv[2];
  for (int h = 0; h < 2; ++h) inv[h] = 1.f / st.l[h];  // every row < T sees its own key: l > 0
  for (int n = 0; n < HD / kN; ++n)
    for (int e = 0; e < 4; ++e) st.o[n][e] *= inv[c_row_half(e)];
  c_store(st.o, out, stride, valid_rows, lane);
  if (thread_in_group(lane) == 0)
    for (int h = 0; h < 2; ++h)
      if (owned_row(lane, h) < valid_rows) lse[owned_row(lane, h)] = online_lse(OnlineRow{st.m[h], st.l[h]});
}

// ================= backward =================
// dQ item: the lane's elements of the 16 x HD dQ block and its two rows' lse and delta = dO . O.
template <int HD>
struct DqRows {
  float dq[HD / kN][4];
  float lse[2], delta[2];
};

// lse and delta of the block's 16 rows (arrays indexed by the block's row).
template <int HD>
HW_HOST_DEVICE void dq_init(DqRows<HD>& st, const float* lse, const float* delta, int lane) {
  c_zero(st.dq);
  for (int h = 0; h < 2; ++h) {
    st.lse[h] = lse[owned_row(lane, h)];
    st.delta[h] = delta[owned_row(lane, h)];
  }
}

// One key block of NK keys: S = Q K^T and dP = dO V^T, P = exp(S scale - lse) (masked 0),
// dS = P (dP - delta) scale, dQ += dS K with dS rounded to bf16. q, dO: the block's 16 query
// rows; k, v: its NK key rows.
template <int HD, int NK, class W>
HW_HOST_DEVICE void dq_tile(DqRows<HD>& st, const uint32_t* q, const uint32_t* dO, const uint32_t* k,
                            const uint32_t* v, int ldw, const ScoreBlock& sb, float scale, int lane) {
  constexpr int NT = NK / kN;
  float s[NT][4], dp[NT][4];
  c_zero(s);
  c_zero(dp);
  gemm_abt<NT, HD / kK, W>(s, q, k, ldw, lane);
  gemm_abt<NT, HD / kK, W>(dp, dO, v, ldw, lane);
  for (int j = 0; j < NT; ++j)
    for (int e = 0; e < 4; ++e) {
      const Coord p = c_coord(lane, e);
      const int h = c_row_half(e);
      const float pr = block_visible(sb, p.row, j * kN + p.col) ? prob_from_lse(s[j][e] * scale, st.lse[h]) : 0.f;
      dp[j][e] = score_grad(pr, dp[j][e], st.delta[h], scale);
    }
  uint32_t da[NT / 2][4];
  c_to_a(dp, da);
  gemm_ab<HD / kN, NT / 2, W>(st.dq, da, k, ldw, lane);
}

// dK/dV item: the lane's elements of the 16 x HD dK and dV blocks of 16 key rows.
template <int HD>
struct DkvRows {
  float dk[HD / kN][4];
  float dv[HD / kN][4];
};

template <int HD>
HW_HOST_DEVICE void dkv_init(DkvRows<HD>& st) {
  c_zero(st.dk);
  c_zero(st.dv);
}

// One query block of NQ queries seen from 16 keys: S^T = K Q^T, dP^T = V dO^T, P^T from the
// queries' lse (columns), dS^T = P^T (dP^T - delta) scale, then dV += P^T dO and dK += dS^T Q with
// P^T and dS^T rounded to bf16. k, v: the 16 key rows; q, dO: the NQ query rows; lse, delta:
// the NQ queries' values.
template <int HD, int NQ, class W>
HW_HOST_DEVICE void dkv_tile(DkvRows<HD>& st, const uint32_t* k, const uint32_t* v, const uint32_t* q,
                             const uint32_t* dO, int ldw, const float* lse, const float* delta, const ScoreBlock& sb,
                             float scale, int lane) {
  constexpr int NT = NQ / kN;
  float s[NT][4], dp[NT][4];
  c_zero(s);
  c_zero(dp);
  gemm_abt<NT, HD / kK, W>(s, k, q, ldw, lane);
  gemm_abt<NT, HD / kK, W>(dp, v, dO, ldw, lane);
  for (int j = 0; j < NT; ++j)
    for (int e = 0; e < 4; ++e) {
      const Coord p = c_coord(lane, e);
      const int col = j * kN + p.col;
      const float pr = block_visible(sb, p.row, col) ? prob_from_lse(s[j][e] * scale, lse[col]) : 0.f;
      s[j][e] = pr;
      dp[j][e] = score_grad(pr, dp[j][e], delta[col], scale);
    }
  uint32_t pa[NT / 2][4], da[NT / 2][4];
  c_to_a(s, pa);
  c_to_a(dp, da);
  gemm_ab<HD / kN, NT / 2, W>(st.dv, pa, dO, ldw, lane);
  gemm_ab<HD / kN, NT / 2, W>(st.dk, da, q, ldw, lane);
}

}  // namespace hw::tiles::mma
