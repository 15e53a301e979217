#pragma once
// Static heads (SAF) on the GPU, the math of one tile, host+device: the fixed weights
// P(i, j) = exp(alpha[j] + rho[i-j] - log_z[i]) (j <= i, else 0) are rebuilt per tile from
// the parameters, so a static head reads only V (forward: out += P V) and dO (backward:
// dV += P^T dO), never Q or K. The device code (src/kernels/cuda/attention_static.cuh)
// calls static_weight and the tile ranges; the tile products below are the serial form of
// what its thread block computes, run by the CPU tests (tests/attention/test_static_tile.cpp).
#include <cmath>
#include <cstdint>

#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/host_device.hpp"

namespace hw::tiles {

// exp(x), exactly zero below the smallest normal result (as attn::detail::exp_or_zero): a
// weight under 1e-38 cannot change an output, and this keeps host and device bit-compatible
// in what they flush.
HW_HOST_DEVICE float exp_flush(float x) { return x < -87.0f ? 0.0f : ::expf(x); }
HW_HOST_DEVICE double exp_flush(double x) { return x < -708.0 ? 0.0 : ::exp(x); }

// P(i, j) of a static head; alpha, rho and log_z have at least i + 1 entries.
template <class F>
HW_HOST_DEVICE F static_weight(const F* alpha, const F* rho, const F* log_z, int64_t i, int64_t j) {
  return j <= i ? exp_flush(alpha[j] + rho[i - j] - log_z[i]) : F(0);
}

// Causal key rule of a static head (every earlier key, as softmax).
HW_HOST_DEVICE KeyRule static_key_rule(int64_t T) { return {0, T > 1 ? T : 1}; }

// Key tiles query tile q_tile reads: [0, last tile holding a key <= its last row).
HW_HOST_DEVICE TileRange static_key_tiles(int32_t q_tile, int64_t T) {
  const int64_t i1 = min64(T, int64_t(q_tile + 1) * kBr);
  return {0, static_cast<int32_t>(ceil_div(i1, kBc))};
}

// Query tiles whose rows weight some key of key tile k_tile: from the tile holding its first
// key to the end of the sequence.
HW_HOST_DEVICE TileRange static_query_tiles(int32_t k_tile, int64_t T) {
  const int64_t j0 = int64_t(k_tile) * kBc;
  return query_tile_range(static_key_rule(T), j0, min64(T, j0 + kBc), T);
}

// Rows of tile `tile` of size `size` that lie inside [0, T).
HW_HOST_DEVICE int tile_rows(int64_t tile, int size, int64_t T) {
  return static_cast<int>(min64(size, T - tile * size));
}

// P[r * ldp + c] = P(i0 + r, j0 + c) for r < m, c < n.
template <class F>
HW_HOST_DEVICE void static_p_tile(F* P, int ldp, const F* alpha, const F* rho, const F* log_z, int64_t i0, int m,
                                  int64_t j0, int n) {
  for (int r = 0; r < m; ++r)
    for (int c = 0; c < n; ++c) P[r * ldp + c] = static_weight(alpha, rho, log_z, i0 + r, j0 + c);
}

// out[m x D] += P[m x n] V[n x D] (rows strided by ldo, ldv).
template <class F>
HW_HOST_DEVICE void static_pv_acc(F* out, int64_t ldo, const F* P, int ldp, const F* V, int64_t ldv, int m, int n,
                                  int D) {
  for (int r = 0; r < m; ++r)
    for (int d = 0; d < D; ++d) {
      F s = F(0);
      for (int c = 0; c < n; ++c) s += P[r * ldp + c] * V[c * ldv + d];
      out[r * ldo + d] += s;
    }
}

// dv[n x D] += P[m x n]^T dO[m x D] (rows strided by lddv, lddo).
template <class F>
HW_HOST_DEVICE void static_ptdo_acc(F* dv, int64_t lddv, const F* P, int ldp, const F* dO, int64_t lddo, int m, int n,
                                    int D) {
  for (int c = 0; c < n; ++c)
    for (int d = 0; d < D; ++d) {
      F s = F(0);
      for (int r = 0; r < m; ++r) s += P[r * ldp + c] * dO[r * lddo + d];
      dv[c * lddv + d] += s;
    }
}

}  // namespace hw::tiles
