#pragma once
// Tensor-core backward items of the softmax family with bf16 activations: the same items, tile
// coverage, schedule and ownership as the SIMT ones (attention_softmax_backward.cuh), with the tile
// products on mma.sync (bf16 operands, fp32 accumulators), FlashAttention-2 style:
//   dq_item  (b, head, query tile): each warp holds 16 query rows; per key tile S = Q K^T and
//            dP = dO V^T in registers, dS = P (dP - delta) scale, dQ += dS K (dS rounded to bf16).
//   dkv_item (b, KV group, key tile): each warp holds 16 key rows and computes S^T = K Q^T and
//            dP^T = V dO^T, then dV += P^T dO and dK += dS^T Q (P^T, dS^T rounded to bf16).
// Two warps share each 16-row block, each taking half of every 64-wide tile they walk; the halves'
// sums are added once at the end in a fixed order (half 0 + half 1), so results stay bit-reproducible
// without atomics. The tiles an item walks (K and V in dq_item; Q, dO and lse in dkv_item) are
// double-buffered: the next tile's rows are in flight (cp.async) while the current one is used.
// Static heads of a dK/dV item seed dV as in the SIMT item (their shared fp32 block is read into
// half 0's registers).
// Register budget (per thread) at head_dim 128: dQ 64 floats; dK and dV 128 floats (the largest).
#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/mma_attention_warp.hpp"
#include "kernels/cuda/attention_mma_warp.cuh"
#include "kernels/cuda/attention_params.hpp"
#include "kernels/cuda/attention_softmax_backward.cuh"
#include "kernels/cuda/attention_static.cuh"
#include "kernels/cuda/double_buffer.cuh"

namespace hw::cuda::attn_mma {

// Six word tiles (dq_item: Q, dO, K[2], V[2]; dkv_item: K, V, Q[2], dO[2]), then 3 x 64 floats
// (dq_item: lse, delta; dkv_item: lse[2], delta). The end-of-item exchange (two 64 x kXld fp32
// blocks at most) reuses the tiles.
template <int HD>
constexpr int backward_smem_bytes() {
  return 6 * 64 * kLdw<HD> * int(sizeof(uint32_t)) + 3 * 64 * int(sizeof(float));
}
static_assert(2 * 64 * kXld<64> <= 4 * 64 * kLdw<64>, "dK/dV exchange fits the tiles");
static_assert(2 * 64 * kXld<128> <= 4 * 64 * kLdw<128>, "dK/dV exchange fits the tiles");

// Q and dO word tiles of query rows [i0, i0 + 64) of head h, their saved lse (+inf past T, so P
// is 0 there) and delta = dO . O.
template <int HD>
__device__ __forceinline__ void load_query_side(const AttnLaunchParamsT<bf16>& p, int b, int h, int64_t i0,
                                                uint32_t* Qs, uint32_t* dOs, float* lse, float* delta) {
  const int64_t T = p.T;
  const ConstRows<bf16> q = q_rows(p, b, h), g = dout_rows(p, b, h), o = out_in_rows(p, b, h);
  load_word_rows<HD>(Qs, q.ptr, q.stride, i0, T);
  load_word_rows<HD>(dOs, g.ptr, g.stride, i0, T);
  if (threadIdx.x < 64) {
    const int64_t i = i0 + threadIdx.x;
    lse[threadIdx.x] = i < T ? row_stats_in(p, b, h)[i] : INFINITY;
  }
  __syncthreads();
  row_deltas_words<HD>(delta, dOs, o.ptr, o.stride, i0, T);
}

template <int HD>
__device__ inline void dq_item(const AttnLaunchParamsT<bf16>& p, int b, int h, int qt, float* smem) {
  namespace tm = tiles::mma;
  constexpr int LDW = kLdw<HD>, XLD = kXld<HD>;
  uint32_t* Qs = reinterpret_cast<uint32_t*>(smem);
  uint32_t* dOs = Qs + 64 * LDW;
  // Buffer it % 2 of K and V (offsets, not pointer arrays, which a runtime index would put in
  // local memory).
  auto k_buf = [&](int32_t it) { return Qs + (2 + (it & 1)) * 64 * LDW; };
  auto v_buf = [&](int32_t it) { return Qs + (4 + (it & 1)) * 64 * LDW; };
  float* lse = reinterpret_cast<float*>(Qs + 6 * 64 * LDW);
  float* delta = lse + 64;
  const int lane = lane_id(), rw = row_block(), half = col_half();
  const tiles::KeyRule rule{p.heads[h].sink, p.heads[h].window};
  const int64_t T = p.T, i0 = int64_t(qt) * tiles::kBr, i1 = tiles::min64(T, i0 + tiles::kBr);
  const int64_t row0 = i0 + 16 * rw;
  const bool rows_live = row0 < T;
  const ConstRows<bf16> k = k_rows(p, b, h), v = v_rows(p, b, h);
  tiles::TileRange rg[2];
  const int n_ranges = tiles::key_tile_ranges(rule, i0, i1, rg);
  const tiles::TileWalk walk = tiles::tile_walk(rg, n_ranges);
  // The walk's tile it is key tile kt, counted separately by the loads and by the use (each is
  // called once per tile, in order).
  int32_t issue_kt = walk.first, use_kt = walk.first;
  auto walk_kv = start_double_buffered(walk.count, [&](int32_t it) {  // tile 0 in flight during the query side
    issue_word_rows<HD>(k_buf(it), k.ptr, k.stride, int64_t(issue_kt) * tiles::kBc, T);
    issue_word_rows<HD>(v_buf(it), v.ptr, v.stride, int64_t(issue_kt) * tiles::kBc, T);
    issue_kt = tiles::tile_after(walk, issue_kt);
  });
  load_query_side<HD>(p, b, h, i0, Qs, dOs, lse, delta);
  __syncthreads();
  tm::DqRows<HD> st;
  tm::dq_init(st, lse + 16 * rw, delta + 16 * rw, lane);
  walk_kv([&](int32_t it) {
    const int64_t j0 = int64_t(use_kt) * tiles::kBc, c0 = j0 + kHalfCols * half;
    use_kt = tiles::tile_after(walk, use_kt);
    if (rows_live && c0 < T) {
      const tm::ScoreBlock sb{row0, c0, T, rule, tiles::tile_needs_mask(rule, i0, j0, T), false};
      tm::dq_tile<HD, kHalfCols, DeviceWarp>(st, Qs + 16 * rw * LDW, dOs + 16 * rw * LDW,
                                             k_buf(it) + kHalfCols * half * LDW, v_buf(it) + kHalfCols * half * LDW,
                                             LDW, sb, p.scale, lane);
    }
  });
  __syncthreads();  // the tiles become the exchange
  float* xq = smem + 16 * rw * XLD;
  if (half == 1 && rows_live) tm::c_export(st.dq, xq, XLD, lane);
  __syncthreads();
  if (half == 0 && rows_live) {
    tm::c_add(st.dq, xq, XLD, lane);
    const Rows<bf16> dst = dq_rows(p, b, h);
    tm::c_store(st.dq, dst.ptr + row0 * dst.stride, dst.stride, static_cast<int>(tiles::min64(16, T - row0)), lane);
  }
  __syncthreads();
}

template <int HD>
__device__ inline void dkv_item(const AttnLaunchParamsT<bf16>& p, int b, int g, int kt, float* smem) {
  namespace tm = tiles::mma;
  constexpr int LDW = kLdw<HD>, XLD = kXld<HD>;
  const int per_group = p.n_head / p.n_kv_head, h0 = g * per_group;
  const int lane = lane_id(), rw = row_block(), half = col_half();
  const int64_t T = p.T, j0 = int64_t(kt) * tiles::kBc, j1 = tiles::min64(T, j0 + tiles::kBc);
  const int64_t krow0 = j0 + 16 * rw;
  const bool rows_live = krow0 < T;
  tm::DkvRows<HD> st;
  tm::dkv_init(st);
  bool any_static = false, any_softmax = false;
  for (int h = h0; h < h0 + per_group; ++h) {
    any_static = any_static || p.heads[h].kind == kStatic;
    any_softmax = any_softmax || attn_items::is_softmax_family(p.heads[h].kind);
  }
  // 1. Static heads (head order) add P^T dO into a shared fp32 [64][HD] block; it seeds half 0's dV.
  if (any_static) {
    float* dv_acc = smem;
    for (int e = static_cast<int>(threadIdx.x); e < 64 * HD; e += kAttnThreads) dv_acc[e] = 0.f;
    __syncthreads();
    for (int h = h0; h < h0 + per_group; ++h)
      if (p.heads[h].kind == kStatic) attn_dev::static_kv_tile_backward<HD>(p, b, h, kt, dv_acc, smem + 64 * HD);
    __syncthreads();
    if (half == 0) tm::c_add(st.dv, dv_acc + 16 * rw * HD, HD, lane);
    __syncthreads();
  }
  // 2. Softmax-family heads (head order), each over the query tiles that see this key tile.
  if (any_softmax) {
    uint32_t* Ks = reinterpret_cast<uint32_t*>(smem);
    uint32_t* Vs = Ks + 64 * LDW;
    // Buffer it % 2 of Q, dO and lse (offsets, not pointer arrays; see dq_item).
    auto q_buf = [&](int32_t it) { return Ks + (2 + (it & 1)) * 64 * LDW; };
    auto dout_buf = [&](int32_t it) { return Ks + (4 + (it & 1)) * 64 * LDW; };
    float* const lse0 = reinterpret_cast<float*>(Ks + 6 * 64 * LDW);
    auto lse_buf = [&](int32_t it) { return lse0 + (it & 1) * 64; };
    float* delta = lse0 + 2 * 64;
    const ConstRows<bf16> k = k_rows(p, b, h0), v = v_rows(p, b, h0);
    load_word_rows<HD>(Ks, k.ptr, k.stride, j0, T);  // (the first wait-then-barrier below covers these)
    load_word_rows<HD>(Vs, v.ptr, v.stride, j0, T);
    for (int h = h0; h < h0 + per_group; ++h) {
      if (!attn_items::is_softmax_family(p.heads[h].kind)) continue;
      const tiles::KeyRule rule{p.heads[h].sink, p.heads[h].window};
      const tiles::TileRange qr = tiles::query_tile_range(rule, j0, j1, T);
      const int32_t n_tiles = qr.hi - qr.lo;
      // Query tile number it into buffer it % 2: Q and dO rows in flight, the saved lse (+inf past
      // T, so P is 0 there) stored at once. The row blocks are rebuilt from the launch parameters
      // (constant memory) at each use rather than kept live across the loop: at head_dim 128 the
      // dK and dV accumulators leave no registers for them.
      auto issue_query_side = [&](int32_t it) {
        const ConstRows<bf16> q = q_rows(p, b, h), dout = dout_rows(p, b, h);
        const int64_t i0 = int64_t(qr.lo + it) * tiles::kBr;
        issue_word_rows<HD>(q_buf(it), q.ptr, q.stride, i0, T);
        issue_word_rows<HD>(dout_buf(it), dout.ptr, dout.stride, i0, T);
        if (threadIdx.x < 64) {
          const int64_t i = i0 + threadIdx.x;
          lse_buf(it)[threadIdx.x] = i < T ? row_stats_in(p, b, h)[i] : INFINITY;
        }
      };
      // The previous head's walk ended with its buffers free.
      start_double_buffered(n_tiles, issue_query_side)([&](int32_t it) {
        const int64_t i0 = int64_t(qr.lo + it) * tiles::kBr, c0 = i0 + kHalfCols * half;
        const ConstRows<bf16> o = out_in_rows(p, b, h);
        row_deltas_words<HD>(delta, dout_buf(it), o.ptr, o.stride, i0, T);
        __syncthreads();
        if (rows_live && c0 < T) {
          const tm::ScoreBlock sb{krow0, c0, T, rule, tiles::tile_needs_mask(rule, i0, j0, T), true};
          tm::dkv_tile<HD, kHalfCols, DeviceWarp>(st, Ks + 16 * rw * LDW, Vs + 16 * rw * LDW,
                                                  q_buf(it) + kHalfCols * half * LDW,
                                                  dout_buf(it) + kHalfCols * half * LDW, LDW,
                                                  lse_buf(it) + kHalfCols * half, delta + kHalfCols * half, sb,
                                                  p.scale, lane);
        }
      });
    }
  }
  // 3. Half 1 hands its sums to half 0, which writes the group's dK/dV rows of this key tile
  // (overwrite; zeros where no head contributed), or their fp32 staging rows when the group
  // mixes linear heads with others (the combine adds the linear partials and rounds once).
  __syncthreads();
  float* xk = smem + 16 * rw * XLD;
  float* xv = smem + 64 * XLD + 16 * rw * XLD;
  if (half == 1 && rows_live) {
    tm::c_export(st.dk, xk, XLD, lane);
    tm::c_export(st.dv, xv, XLD, lane);
  }
  __syncthreads();
  if (half == 0 && rows_live) {
    tm::c_add(st.dk, xk, XLD, lane);
    tm::c_add(st.dv, xv, XLD, lane);
    const int valid = static_cast<int>(tiles::min64(16, T - krow0));
    if (stages_dkv(p, h0)) {
      const Rows<float> sk = stage_dk_rows(p, b, h0), sv = stage_dv_rows(p, b, h0);
      if (p.heads[h0].k_col >= 0) tm::c_store(st.dk, sk.ptr + krow0 * sk.stride, sk.stride, valid, lane);
      if (p.heads[h0].v_col >= 0) tm::c_store(st.dv, sv.ptr + krow0 * sv.stride, sv.stride, valid, lane);
    } else {
      if (p.heads[h0].k_col >= 0) {
        const Rows<bf16> dst = dk_rows(p, b, h0);
        tm::c_store(st.dk, dst.ptr + krow0 * dst.stride, dst.stride, valid, lane);
      }
      if (p.heads[h0].v_col >= 0) {
        const Rows<bf16> dst = dv_rows(p, b, h0);
        tm::c_store(st.dv, dst.ptr + krow0 * dst.stride, dst.stride, valid, lane);
      }
    }
  }
  __syncthreads();
}

}  // namespace hw::cuda::attn_mma
