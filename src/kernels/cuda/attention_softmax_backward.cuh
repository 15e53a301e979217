#pragma once
// Device code of the softmax-family backward items (see attention_backward.cu for the split):
//   dq_item  (b, head, query tile): dQ in registers over the head's key tiles;
//   dkv_item (b, KV group, key tile): the group's dK/dV rows of the key tile: static heads'
//            dV first (static_kv_tile_backward), then every softmax-family head of
//            the group over the query tiles that see the key tile, in head order.
// P is rebuilt from the saved log-sum-exp in both; delta = dO . O is recomputed per visit.
#include "headwise/kernels/tiles/attention_storage.hpp"
#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/online_softmax.hpp"
#include "kernels/cuda/attention_params.hpp"
#include "kernels/cuda/attention_static.cuh"
#include "kernels/cuda/attention_tile_gemm.cuh"

namespace hw::cuda::attn_items {

using attn_tile::Acc;
using attn_tile::kLd;
using attn_tile::kLdS;
using tiles::kAttnThreads;

HW_HOST_DEVICE bool is_softmax_family(uint8_t kind) { return kind <= kSinkWindow; }

// Shared memory of both softmax-family backward items: four [64][HD] tiles (Q, dO, K, V), the
// P and dS tiles, and the rows' log-sum-exp and delta.
template <int HD>
constexpr int softmax_backward_smem_floats() {
  return 4 * 64 * kLd<HD> + 2 * 64 * kLdS + 2 * 64;
}

// S = Q K^T (scaled), P from the saved lse, dS = P (dO V^T - delta) scale, for the tile
// query rows [i0, i0 + 64) x keys [j0, j0 + 64); P (if wanted) and dS go to shared memory.
template <int HD, class St>
__device__ __forceinline__ void score_tiles(const AttnLaunchParamsT<St>& p, const tiles::KeyRule& rule, int64_t i0,
                                            int64_t j0, const float* Qs, const float* dOs, const float* Ks,
                                            const float* Vs, const float* lse, const float* delta, float* Ps,
                                            float* dSs) {
  constexpr int LD = kLd<HD>;
  const int ty = attn_tile::tid_y(), tx = attn_tile::tid_x();
  Acc<64, 64> s, dp;
  s.zero();
  dp.zero();
  attn_tile::tile_gemm_acc<64, 64, HD, LD, 1, 1, LD>(s, Qs, Ks);    // Q K^T
  attn_tile::tile_gemm_acc<64, 64, HD, LD, 1, 1, LD>(dp, dOs, Vs);  // dO V^T
  const int64_t T = p.T;
  const bool masked = tiles::tile_needs_mask(rule, i0, j0, T);
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int r = ty + 16 * a, col = tx + 16 * c;
      const int64_t i = i0 + r, j = j0 + col;
      const bool vis = !masked || (i < T && j < T && tiles::key_visible(rule, i, j));
      const float pr = vis ? tiles::prob_from_lse(s.v[a][c] * p.scale, lse[r]) : 0.f;
      if (Ps) Ps[r * kLdS + col] = pr;
      dSs[r * kLdS + col] = tiles::score_grad(pr, dp.v[a][c], delta[r], p.scale);
    }
}

// Q and dO tiles of query rows [i0, i0 + 64) of head h, their saved lse and delta = dO . O.
// Rows past T get lse = +inf, so their weights are exactly 0.
template <int HD, class St>
__device__ __forceinline__ void load_query_side(const AttnLaunchParamsT<St>& p, int b, int h, int64_t i0, float* Qs,
                                                float* dOs, float* lse, float* delta) {
  const int64_t T = p.T;
  const ConstRows<St> q = q_rows(p, b, h), g = dout_rows(p, b, h), o = out_in_rows(p, b, h);
  attn_tile::load_rows<HD>(Qs, q.ptr, q.stride, i0, T);
  attn_tile::load_rows<HD>(dOs, g.ptr, g.stride, i0, T);
  if (threadIdx.x < 64) {
    const int64_t i = i0 + threadIdx.x;
    lse[threadIdx.x] = i < T ? row_stats_in(p, b, h)[i] : INFINITY;
  }
  __syncthreads();
  attn_tile::row_deltas<HD>(delta, dOs, o.ptr, o.stride, i0, T);
}

template <int HD, class St>
__device__ inline void dq_item(const AttnLaunchParamsT<St>& p, int b, int h, int qt, float* smem) {
  constexpr int LD = kLd<HD>;
  float* Qs = smem;
  float* dOs = Qs + 64 * LD;
  float* Ks = dOs + 64 * LD;
  float* Vs = Ks + 64 * LD;
  float* dSs = Vs + 64 * LD + 64 * kLdS;  // the P slot stays unused here
  float* lse = dSs + 64 * kLdS;
  float* delta = lse + 64;
  const tiles::KeyRule rule{p.heads[h].sink, p.heads[h].window};
  const int64_t T = p.T, i0 = int64_t(qt) * tiles::kBr, i1 = tiles::min64(T, i0 + tiles::kBr);
  const ConstRows<St> k = k_rows(p, b, h), v = v_rows(p, b, h);
  load_query_side<HD, St>(p, b, h, i0, Qs, dOs, lse, delta);
  Acc<64, HD> dq;
  dq.zero();
  tiles::TileRange rg[2];
  const int n_ranges = tiles::key_tile_ranges(rule, i0, i1, rg);
  for (int t = 0; t < n_ranges; ++t)
    for (int32_t kt = rg[t].lo; kt < rg[t].hi; ++kt) {
      const int64_t j0 = int64_t(kt) * tiles::kBc;
      __syncthreads();
      attn_tile::load_rows<HD>(Ks, k.ptr, k.stride, j0, T);
      attn_tile::load_rows<HD>(Vs, v.ptr, v.stride, j0, T);
      __syncthreads();
      score_tiles<HD, St>(p, rule, i0, j0, Qs, dOs, Ks, Vs, lse, delta, nullptr, dSs);
      __syncthreads();
      attn_tile::tile_gemm_acc<64, HD, 64, kLdS, 1, LD, 1>(dq, dSs, Ks);  // dQ += dS K
    }
  const Rows<St> dst = dq_rows(p, b, h);
  attn_tile::store_rows<HD>(dst.ptr, dst.stride, i0, T, dq, nullptr);
  __syncthreads();
}

template <int HD, class St>
__device__ inline void dkv_item(const AttnLaunchParamsT<St>& p, int b, int g, int kt, float* smem) {
  constexpr int LD = kLd<HD>;
  const int per_group = p.n_head / p.n_kv_head, h0 = g * per_group;
  const int ty = attn_tile::tid_y(), tx = attn_tile::tid_x();
  const int64_t T = p.T, j0 = int64_t(kt) * tiles::kBc, j1 = tiles::min64(T, j0 + tiles::kBc);
  Acc<64, HD> dk, dv;
  dk.zero();
  dv.zero();
  // 1. Static heads (head order) add P^T dO into a shared [64][HD] block; it seeds dV.
  bool any_static = false, any_softmax = false;
  for (int h = h0; h < h0 + per_group; ++h) {
    any_static = any_static || p.heads[h].kind == kStatic;
    any_softmax = any_softmax || is_softmax_family(p.heads[h].kind);
  }
  if (any_static) {
    float* dv_acc = smem;
    for (int e = static_cast<int>(threadIdx.x); e < 64 * HD; e += kAttnThreads) dv_acc[e] = 0.f;
    __syncthreads();
    for (int h = h0; h < h0 + per_group; ++h)
      if (p.heads[h].kind == kStatic) attn_dev::static_kv_tile_backward<HD>(p, b, h, kt, dv_acc, smem + 64 * HD);
    __syncthreads();
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int c = 0; c < HD / 16; ++c) dv.v[a][c] = dv_acc[(ty + 16 * a) * HD + tx + 16 * c];
    __syncthreads();
  }
  // 2. Softmax-family heads (head order), each over the query tiles that see this key tile.
  if (any_softmax) {
    float* Ks = smem;
    float* Vs = Ks + 64 * LD;
    float* Qs = Vs + 64 * LD;
    float* dOs = Qs + 64 * LD;
    float* Ps = dOs + 64 * LD;
    float* dSs = Ps + 64 * kLdS;
    float* lse = dSs + 64 * kLdS;
    float* delta = lse + 64;
    const ConstRows<St> k = k_rows(p, b, h0), v = v_rows(p, b, h0);
    attn_tile::load_rows<HD>(Ks, k.ptr, k.stride, j0, T);
    attn_tile::load_rows<HD>(Vs, v.ptr, v.stride, j0, T);
    for (int h = h0; h < h0 + per_group; ++h) {
      if (!is_softmax_family(p.heads[h].kind)) continue;
      const tiles::KeyRule rule{p.heads[h].sink, p.heads[h].window};
      const tiles::TileRange qr = tiles::query_tile_range(rule, j0, j1, T);
      for (int32_t qt = qr.lo; qt < qr.hi; ++qt) {
        const int64_t i0 = int64_t(qt) * tiles::kBr;
        __syncthreads();  // the previous query tile's products are done with Qs, dOs, Ps, dSs
        load_query_side<HD, St>(p, b, h, i0, Qs, dOs, lse, delta);
        __syncthreads();
        score_tiles<HD, St>(p, rule, i0, j0, Qs, dOs, Ks, Vs, lse, delta, Ps, dSs);
        __syncthreads();
        attn_tile::tile_gemm_acc<64, HD, 64, 1, kLdS, LD, 1>(dv, Ps, dOs);  // dV += P^T dO
        attn_tile::tile_gemm_acc<64, HD, 64, 1, kLdS, LD, 1>(dk, dSs, Qs);  // dK += dS^T Q
      }
    }
  }
  // 3. The group's dK/dV rows of this key tile (overwrite; zeros where no head contributed), or
  // with bf16 storage and linear heads in the group, their fp32 staging rows: the combine adds
  // the linear partials and rounds once.
  if (stages_dkv(p, h0)) {
    const Rows<float> sk = stage_dk_rows(p, b, h0), sv = stage_dv_rows(p, b, h0);
    if (p.heads[h0].k_col >= 0) attn_tile::store_rows<HD>(sk.ptr, sk.stride, j0, T, dk, nullptr);
    if (p.heads[h0].v_col >= 0) attn_tile::store_rows<HD>(sv.ptr, sv.stride, j0, T, dv, nullptr);
  } else {
    if (p.heads[h0].k_col >= 0) {
      const Rows<St> dst = dk_rows(p, b, h0);
      attn_tile::store_rows<HD>(dst.ptr, dst.stride, j0, T, dk, nullptr);
    }
    if (p.heads[h0].v_col >= 0) {
      const Rows<St> dst = dv_rows(p, b, h0);
      attn_tile::store_rows<HD>(dst.ptr, dst.stride, j0, T, dv, nullptr);
    }
  }
  __syncthreads();
}

// Block (bx, g, b) of the grid (ceil(T * HD / 256), n_kv_head, B): element (t, d) of group g's dK and dV rows of
// sequence b gets the linear heads' partials added in head order, to what the kBwdDkv items left (in dQKV, or in
// fp32 staging for bf16 storage), rounded once into dQKV.
template <class St>
__device__ inline void combine_linear_dkv_block(const AttnLaunchParamsT<St>& p, int bx, int g, int b) {
  const int per_group = p.n_head / p.n_kv_head, h0 = g * per_group, HD = p.head_dim;
  bool any_linear = false, owned = false;  // owned: a kBwdDkv item already wrote the rows
  for (int h = h0; h < h0 + per_group; ++h) {
    any_linear = any_linear || p.heads[h].kind == kLinear;
    owned = owned || attn_items::is_softmax_family(p.heads[h].kind) || p.heads[h].kind == kStatic;
  }
  const int64_t e = int64_t(bx) * kAttnThreads + threadIdx.x;
  if (!any_linear || e >= int64_t(p.T) * HD) return;
  const int64_t t = e / HD, d = e % HD;
  const bool staged = stages_dkv(p, h0);
  if (p.heads[h0].k_col >= 0) {
    const Rows<St> dst = dk_rows(p, b, h0);
    float acc = !owned ? 0.f
                : staged ? stage_dk_rows(p, b, h0).ptr[t * HD + d]
                         : tiles::load_as_float(dst.ptr + t * dst.stride + d);
    for (int h = h0; h < h0 + per_group; ++h)
      if (p.heads[h].kind == kLinear) acc += linear_dk_rows(p, b, h).ptr[t * HD + d];
    tiles::store_from_float(dst.ptr + t * dst.stride + d, acc);
  }
  if (p.heads[h0].v_col >= 0) {
    const Rows<St> dst = dv_rows(p, b, h0);
    float acc = !owned ? 0.f
                : staged ? stage_dv_rows(p, b, h0).ptr[t * HD + d]
                         : tiles::load_as_float(dst.ptr + t * dst.stride + d);
    for (int h = h0; h < h0 + per_group; ++h)
      if (p.heads[h].kind == kLinear) acc += linear_dv_rows(p, b, h).ptr[t * HD + d];
    tiles::store_from_float(dst.ptr + t * dst.stride + d, acc);
  }
}

// Block h, one per query head (linear heads with a dL only): A = sum_b dA(b) in b order (in
// place, into sequence 0's slot), then dL += 2 A L on the lower triangle (the upper one is
// not a parameter), exactly the CPU reference's reduction.
template <class St>
__device__ inline void linear_dL_block(const AttnLaunchParamsT<St>& p, int h) {
  const AttnHeadDesc& hd = p.heads[h];
  if (hd.kind != kLinear || hd.dL == nullptr) return;
  const int G1 = hd.n_groups + 1;
  float* A = linear_dA(p, 0, h);
  for (int e = static_cast<int>(threadIdx.x); e < G1 * G1; e += kAttnThreads) {
    float s = A[e];
    for (int b = 1; b < p.B; ++b) s += linear_dA(p, b, h)[e];
    A[e] = s;
  }
  __syncthreads();
  for (int e = static_cast<int>(threadIdx.x); e < G1 * G1; e += kAttnThreads) {
    const int r = e / G1, c = e % G1;
    if (c > r) continue;
    float s = 0.f;
    for (int k = c; k < G1; ++k) s += A[r * G1 + k] * hd.L[k * G1 + c];
    hd.dL[e] += 2.f * s;
  }
}

}  // namespace hw::cuda::attn_items
