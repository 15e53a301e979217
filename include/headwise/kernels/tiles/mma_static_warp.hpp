#pragma once
// Warp-level tile routines of static heads (SAF) on tensor cores, bf16 activations: the fixed
// weights P(i, j) = exp(alpha[j] + rho[i-j] - log_z[i]) (j <= i, i < T, j < T; else 0) are built
// straight into the A fragments of the m16n8k16 mma (mma_fragments.hpp) from parameters staged
// once per 64 x 64 tile in shared memory, then
//   forward:  O  += P V     (a warp owns 16 query rows, A(r, c) = P(query r, key c))
//   backward: dV += P^T dO  (a warp owns 16 key rows,   A(r, c) = P(query c, key r))
// with P rounded once to bf16 as the softmax path rounds its P. No Q, K, softmax or row
// statistics. Lane-indexed with the policy W of mma_attention_warp.hpp (W::mma), so the CPU tests
// (tests/kernels/test_mma_static.cpp) run this very code on an emulated warp.
#include <cstdint>

#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/mma_attention_warp.hpp"
#include "headwise/kernels/tiles/mma_fragments.hpp"
#include "headwise/kernels/tiles/static_tile.hpp"
#include "headwise/kernels/tiles/static_unroll.hpp"

namespace hw::tiles::mma {

// ---- the parameters of one 64 x 64 tile (query rows i0.., keys j0..), staged as fp32 ----
// Layout of the stage (kStaticStage floats): alpha[j0 + c] at c (64), rho[i0 - j0 - 63 + t] at
// 64 + t (128: every difference i - j of the tile), log_z[i0 + r] at 192 + r (64). One entry
// per thread of a 256-thread block.
constexpr int kStaticAlpha = 0, kStaticRho = kBc, kStaticLogZ = kBc + 2 * kBc, kStaticStage = 2 * kBc + 2 * kBr;
static_assert(kStaticLogZ + kBr == kStaticStage, "stage layout");
static_assert(kStaticStage <= kAttnThreads, "one stage entry per thread");

// Entry t of the stage; 0 where the index leaves [0, T) (those weights are masked, never read).
HW_HOST_DEVICE float static_stage_entry(const float* alpha, const float* rho, const float* log_z, int64_t i0,
                                        int64_t j0, int64_t T, int t) {
  if (t < kStaticRho) {
    const int64_t j = j0 + t;
    return j < T ? alpha[j] : 0.f;
  }
  if (t < kStaticLogZ) {
    const int64_t d = i0 - j0 - (kBc - 1) + (t - kStaticRho);
    return d >= 0 && d < T ? rho[d] : 0.f;
  }
  const int64_t i = i0 + (t - kStaticLogZ);
  return i < T ? log_z[i] : 0.f;
}

// A staged tile: `stage` as above, plus where the tile sits.
struct StaticTile {
  const float* stage = nullptr;
  int64_t i0 = 0, j0 = 0, T = 0;
};

// P(i0 + r, j0 + c) from the stage (r, c in [0, 64)), the sum in static_weight's order.
HW_HOST_DEVICE float static_tile_weight(const StaticTile& s, int r, int c) {
  const int64_t i = s.i0 + r, j = s.j0 + c;
  if (j > i || i >= s.T || j >= s.T) return 0.f;
  return exp_flush(s.stage[kStaticAlpha + c] + s.stage[kStaticRho + r - c + (kBc - 1)] - s.stage[kStaticLogZ + r]);
}

// Whether a block of query rows [i_lo, i_hi] (inclusive) and keys from j_lo holds any nonzero
// weight: a warp whose block lies wholly above the diagonal (or past T) skips its products.
HW_HOST_DEVICE bool static_block_live(int64_t i_lo, int64_t i_hi, int64_t j_lo, int64_t T) {
  return i_lo < T && j_lo < T && j_lo <= i_hi;
}

// The KS A fragments (16 x 16 KS) of P for a warp's block, each value rounded once to bf16.
// transposed = false: A(r, c) = P(tile row r0 + r, tile key c0 + c) (forward);
// transposed = true:  A(r, c) = P(tile row c0 + c, tile key r0 + r) (backward, P^T).
template <int KS>
HW_HOST_DEVICE void static_p_frags(uint32_t (&a)[KS][4], const StaticTile& s, int r0, int c0, bool transposed,
                                   int lane) {
  unroll<KS>([&](auto kk) {
    for (int reg = 0; reg < 4; ++reg) {
      const Coord p = a_coord(lane, 2 * reg);  // element 2 reg + 1 is the next column, same row
      const int r = r0 + p.row, c = c0 + kk * kK + p.col;
      const float lo = transposed ? static_tile_weight(s, c, r) : static_tile_weight(s, r, c);
      const float hi = transposed ? static_tile_weight(s, c + 1, r) : static_tile_weight(s, r, c + 1);
      a[kk][reg] = bf16_word(lo, hi);
    }
  });
}

// Forward, one warp: o (16 x HD) += P V over NK keys [k_off, k_off + NK) of the tile for query
// rows [q_off, q_off + 16); v: V's word tile rows from key k_off (row stride ldw).
template <int HD, int NK, class W>
HW_HOST_DEVICE void static_fwd_tile(float (&o)[HD / kN][4], const StaticTile& s, int q_off, int k_off,
                                    const uint32_t* v, int ldw, int lane) {
  uint32_t pa[NK / kK][4];
  static_p_frags<NK / kK>(pa, s, q_off, k_off, false, lane);
  gemm_ab<HD / kN, NK / kK, W>(o, pa, v, ldw, lane);
}

// Backward, one warp: dv (16 x HD) += P^T dO for tile keys [k_off, k_off + 16) over NQ query
// rows [q_off, q_off + NQ) of the tile; dO: its word tile rows from query q_off (row stride ldw).
template <int HD, int NQ, class W>
HW_HOST_DEVICE void static_dv_tile(float (&dv)[HD / kN][4], const StaticTile& s, int k_off, int q_off,
                                   const uint32_t* dO, int ldw, int lane) {
  uint32_t pa[NQ / kK][4];
  static_p_frags<NQ / kK>(pa, s, k_off, q_off, true, lane);
  gemm_ab<HD / kN, NQ / kK, W>(dv, pa, dO, ldw, lane);
}

// x (rows [0, valid_rows), row stride ld) += the lane's elements of c: a warp adds its block into
// a shared fp32 block (the static dV of a dK/dV item).
template <int NT>
HW_HOST_DEVICE void c_add_to(const float (&c)[NT][4], float* x, int ld, int valid_rows, int lane) {
  for (int n = 0; n < NT; ++n)
    for (int e = 0; e < 4; ++e) {
      const Coord p = c_coord(lane, e);
      if (p.row < valid_rows) x[p.row * ld + n * kN + p.col] += c[n][e];
    }
}

}  // namespace hw::tiles::mma
