#pragma once
// Device code of a softmax-family forward item (b, head, query tile), FlashAttention-2 style:
// the query tile stays in shared memory while the block walks only the key tiles that
// intersect the head's key set (tiles outside a window are never loaded), with an online
// softmax per row; O is written once, and the row's log-sum-exp goes to row_stats.
#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/online_softmax.hpp"
#include "kernels/cuda/attention_params.hpp"
#include "kernels/cuda/attention_tile_gemm.cuh"

namespace hw::cuda::attn_items {

using attn_tile::Acc;
using attn_tile::kLd;
using attn_tile::kLdS;
using tiles::kAttnThreads;

// Shared memory of a softmax-family forward item: Q, K, V tiles, the score tile, and the
// rows' running max, sum and correction.
template <int HD>
constexpr int softmax_forward_smem_floats() {
  return 3 * 64 * kLd<HD> + 64 * kLdS + 3 * 64;
}

template <int HD, class St>
__device__ inline void softmax_forward_item(const AttnLaunchParamsT<St>& p, int b, int h, int qt, float* smem) {
  constexpr int LD = kLd<HD>;
  float* Qs = smem;
  float* Ks = Qs + 64 * LD;
  float* Vs = Ks + 64 * LD;
  float* Ss = Vs + 64 * LD;
  float* row_m = Ss + 64 * kLdS;
  float* row_l = row_m + 64;
  float* row_c = row_l + 64;
  const int tid = static_cast<int>(threadIdx.x), ty = attn_tile::tid_y(), tx = attn_tile::tid_x();
  const int lane = tid % 32, warp = tid / 32;
  const tiles::KeyRule rule{p.heads[h].sink, p.heads[h].window};
  const int64_t T = p.T, i0 = int64_t(qt) * tiles::kBr, i1 = tiles::min64(T, i0 + tiles::kBr);
  const ConstRows<St> q = q_rows(p, b, h), k = k_rows(p, b, h), v = v_rows(p, b, h);

  attn_tile::load_rows<HD>(Qs, q.ptr, q.stride, i0, T);
  if (tid < 64) {
    row_m[tid] = -INFINITY;
    row_l[tid] = 0.f;
  }
  Acc<64, HD> o;
  o.zero();
  tiles::TileRange rg[2];
  const int n_ranges = tiles::key_tile_ranges(rule, i0, i1, rg);
  for (int t = 0; t < n_ranges; ++t)
    for (int32_t kt = rg[t].lo; kt < rg[t].hi; ++kt) {
      const int64_t j0 = int64_t(kt) * tiles::kBc;
      __syncthreads();  // the previous tile's P V is done with Ks, Vs and Ss
      attn_tile::load_rows<HD>(Ks, k.ptr, k.stride, j0, T);
      attn_tile::load_rows<HD>(Vs, v.ptr, v.stride, j0, T);
      __syncthreads();
      Acc<64, 64> s;
      s.zero();
      attn_tile::tile_gemm_acc<64, 64, HD, LD, 1, 1, LD>(s, Qs, Ks);  // S = Q K^T
      const bool masked = tiles::tile_needs_mask(rule, i0, j0, T);
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int r = ty + 16 * a, col = tx + 16 * c;
          const int64_t j = j0 + col;
          const bool vis = !masked || (j < T && tiles::key_visible(rule, i0 + r, j));
          Ss[r * kLdS + col] = vis ? s.v[a][c] * p.scale : -INFINITY;
        }
      __syncthreads();
      // Online softmax, one warp per row: the row's tile max and sum by butterfly reductions.
      for (int r = warp; r < 64; r += kAttnThreads / 32) {
        float* row = Ss + r * kLdS;
        const float x0 = row[lane], x1 = row[lane + 32];
        const float m_old = row_m[r];
        const float m_new = tiles::online_new_max(m_old, attn_tile::warp_max(fmaxf(x0, x1)));
        const float p0 = tiles::online_prob(x0, m_new), p1 = tiles::online_prob(x1, m_new);
        const float sum = attn_tile::warp_sum(p0 + p1);
        row[lane] = p0;
        row[lane + 32] = p1;
        if (lane == 0) {
          const float corr = tiles::online_correction(m_old, m_new);
          tiles::OnlineRow st{m_old, row_l[r]};
          tiles::online_commit(st, m_new, corr, sum);
          row_m[r] = st.m;
          row_l[r] = st.l;
          row_c[r] = corr;
        }
      }
      __syncthreads();
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        const float corr = row_c[ty + 16 * a];
#pragma unroll
        for (int c = 0; c < HD / 16; ++c) o.v[a][c] *= corr;
      }
      attn_tile::tile_gemm_acc<64, HD, 64, kLdS, 1, LD, 1>(o, Ss, Vs);  // O += P V
    }
  __syncthreads();
  if (tid < 64) {
    row_c[tid] = 1.f / row_l[tid];  // every row sees its own key: l > 0 for rows < T
    if (i0 + tid < T) row_stats_out(p, b, h)[i0 + tid] = tiles::online_lse(tiles::OnlineRow{row_m[tid], row_l[tid]});
  }
  __syncthreads();
  const Rows<St> out = out_rows(p, b, h);
  attn_tile::store_rows<HD>(out.ptr, out.stride, i0, T, o, row_c);
  __syncthreads();
}

}  // namespace hw::cuda::attn_items
