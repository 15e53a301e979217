#pragma once
// Device code of the static (SAF) head items, called per work item from the mixed-head
// kernels (contract: attention_params.hpp). A static head's weights are fixed:
// P(i, j) = exp(alpha[j] + rho[i-j] - log_z[i]) for j <= i. Each P tile is rebuilt in shared
// memory from alpha, rho and log_z (one exp per entry) and multiplied with V (forward) or
// dO (backward, dV += P^T dO only); Q and K are never read, no softmax is computed, and only
// the causal key tiles (static_key_tiles) / query tiles (static_query_tiles) are visited.
// The entry math is hw::tiles::static_weight (CPU-tested in tests/attention/test_static_tile).
// With bf16 activations both items run on tensor cores instead (attention_mma_static.cuh: P built
// as mma fragments from the same parameters; its shared memory fits in the SIMT sizes below).
#include <type_traits>

#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/static_tile.hpp"
#include "kernels/cuda/attention_mma_static.cuh"
#include "kernels/cuda/attention_params.hpp"
#include "kernels/cuda/attention_tile_gemm.cuh"

namespace hw::cuda::attn_dev {

// P tile of rows [i0, i0 + 64) x keys [j0, j0 + 64) into P[r * kLdS + c]; zero past T and
// above the diagonal. Thread mapping: column c = tid % 64 (a warp writes 32 consecutive
// columns of one row), rows tid / 64 + 4 s.
__device__ __forceinline__ void static_fill_p(float* P, const AttnHeadDesc& d, int64_t i0, int64_t j0, int64_t T) {
  const int tid = static_cast<int>(threadIdx.x);
  const int c = tid % tiles::kBc;
  const int64_t j = j0 + c;
  for (int r = tid / tiles::kBc; r < tiles::kBr; r += tiles::kAttnThreads / tiles::kBc) {
    const int64_t i = i0 + r;
    P[r * attn_tile::kLdS + c] = (i < T && j < T) ? tiles::static_weight(d.alpha, d.rho, d.log_z, i, j) : 0.f;
  }
}

// Shared memory: a [64][HD + 1] row tile (V or dO) and the [64][65] P tile.
template <int HD>
constexpr int static_forward_smem_bytes() {
  return static_cast<int>(sizeof(float)) * (64 * attn_tile::kLd<HD> + 64 * attn_tile::kLdS);
}
template <int HD>
constexpr int static_backward_smem_bytes() {
  return static_forward_smem_bytes<HD>();
}

// Overwrites out rows [q_tile * 64, min(T, q_tile * 64 + 64)) of head h, sequence b.
template <int HD, class St>
__device__ void static_item_forward(const AttnLaunchParamsT<St>& p, int b, int h, int q_tile, float* smem) {
  if constexpr (std::is_same_v<St, bf16>) {
    attn_mma::static_forward_item<HD>(p, b, h, q_tile, smem);
  } else {
    constexpr int LD = attn_tile::kLd<HD>;
    __syncthreads();
    float* Vs = smem;
    float* Ps = Vs + 64 * LD;
    const AttnHeadDesc& d = p.heads[h];
    const int64_t T = p.T, i0 = int64_t(q_tile) * tiles::kBr;
    const ConstRows<St> v = v_rows(p, b, h);
    attn_tile::Acc<64, HD> o;  // o[i][e], thread (ty, tx) owns rows ty + 16a, columns tx + 16c
    o.zero();
    const tiles::TileRange kr = tiles::static_key_tiles(q_tile, T);
    for (int32_t kt = kr.lo; kt < kr.hi; ++kt) {
      const int64_t j0 = int64_t(kt) * tiles::kBc;
      __syncthreads();  // the previous tile's P V is done with Vs and Ps
      attn_tile::load_rows<HD>(Vs, v.ptr, v.stride, j0, T);
      static_fill_p(Ps, d, i0, j0, T);
      __syncthreads();
      attn_tile::tile_gemm_acc<64, HD, tiles::kBc, attn_tile::kLdS, 1, LD, 1>(o, Ps, Vs);  // O += P V
    }
    const Rows<St> out = out_rows(p, b, h);
    attn_tile::store_rows<HD>(out.ptr, out.stride, i0, T, o, nullptr);
    __syncthreads();
  }
}

// dv_acc[r][e] (shared, [64][HD] row-major) += sum_{i >= j} P(i, j) dO_i[e] for keys
// j = k_tile * 64 + r < T; rows past T are untouched.
template <int HD, class St>
__device__ void static_kv_tile_backward(const AttnLaunchParamsT<St>& p, int b, int h, int k_tile, float* dv_acc,
                                        float* smem) {
  if constexpr (std::is_same_v<St, bf16>) {
    attn_mma::static_kv_tile_backward<HD>(p, b, h, k_tile, dv_acc, smem);
  } else {
    constexpr int LD = attn_tile::kLd<HD>;
    __syncthreads();
    float* Os = smem;  // dO tile
    float* Ps = Os + 64 * LD;
    const AttnHeadDesc& d = p.heads[h];
    const int64_t T = p.T, j0 = int64_t(k_tile) * tiles::kBc;
    const ConstRows<St> dout = dout_rows(p, b, h);
    attn_tile::Acc<64, HD> dv;  // dv[j][e], thread (ty, tx) owns keys ty + 16a, columns tx + 16c
    dv.zero();
    const tiles::TileRange qr = tiles::static_query_tiles(k_tile, T);
    for (int32_t qt = qr.lo; qt < qr.hi; ++qt) {
      const int64_t i0 = int64_t(qt) * tiles::kBr;
      __syncthreads();
      attn_tile::load_rows<HD>(Os, dout.ptr, dout.stride, i0, T);
      static_fill_p(Ps, d, i0, j0, T);
      __syncthreads();
      attn_tile::tile_gemm_acc<64, HD, tiles::kBr, 1, attn_tile::kLdS, LD, 1>(dv, Ps, Os);  // dV += P^T dO
    }
    const int ty = attn_tile::tid_y(), tx = attn_tile::tid_x();
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      const int r = ty + 16 * a;
      if (j0 + r >= T) continue;
#pragma unroll
      for (int c = 0; c < HD / 16; ++c) dv_acc[r * HD + tx + 16 * c] += dv.v[a][c];
    }
    __syncthreads();
  }
}

}  // namespace hw::cuda::attn_dev
