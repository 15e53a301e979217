#pragma once
// Tensor-core forward item (b, head, query tile) of a softmax-family head with bf16 activations:
// the same item, key-tile coverage and online softmax as the SIMT item (attention_softmax_forward.cuh),
// with the tile products on mma.sync (bf16 operands, fp32 accumulators) as in FlashAttention-2.
// Q, K and V tiles sit in shared memory as bf16 words; each warp holds 16 query rows of S, P and O
// in registers. With 8 warps and 64 query rows, two warps share a row block, each taking 32 of the
// 64 keys of every tile; their running (max, sum, O) merge once at the end. P is rounded to bf16
// for P V (as FlashAttention); row sums, max and O stay fp32. K and V are double-buffered: the
// next key tile's rows are in flight (cp.async) while the current one is multiplied.
// Register budget (per thread): O is HD / 2 floats (64 at head_dim 128), S 16, P 8.
#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/mma_attention_warp.hpp"
#include "kernels/cuda/attention_mma_warp.cuh"
#include "kernels/cuda/attention_params.hpp"
#include "kernels/cuda/double_buffer.cuh"

namespace hw::cuda::attn_mma {

// Word tiles Q, K[2], V[2] (buffer it % 2 holds key tile number it); the end-of-item exchange
// (64 x kXld floats of O, 64 max, 64 sums) reuses them.
template <int HD>
constexpr int forward_smem_bytes() {
  return 5 * 64 * kLdw<HD> * int(sizeof(uint32_t));
}
static_assert((64 * kXld<64> + 128) * 4 <= forward_smem_bytes<64>(), "forward exchange fits the tiles");
static_assert((64 * kXld<128> + 128) * 4 <= forward_smem_bytes<128>(), "forward exchange fits the tiles");

template <int HD>
__device__ inline void softmax_forward_item(const AttnLaunchParamsT<bf16>& p, int b, int h, int qt, float* smem) {
  namespace tm = tiles::mma;
  constexpr int LDW = kLdw<HD>, XLD = kXld<HD>;
  uint32_t* Qs = reinterpret_cast<uint32_t*>(smem);
  // Buffer it % 2 of K and V (offsets, not pointer arrays: a runtime index would put an array in
  // local memory).
  auto k_buf = [&](int32_t it) { return Qs + (1 + (it & 1)) * 64 * LDW; };
  auto v_buf = [&](int32_t it) { return Qs + (3 + (it & 1)) * 64 * LDW; };
  const int lane = lane_id(), rw = row_block(), half = col_half();
  const tiles::KeyRule rule{p.heads[h].sink, p.heads[h].window};
  const int64_t T = p.T, i0 = int64_t(qt) * tiles::kBr, i1 = tiles::min64(T, i0 + tiles::kBr);
  const int64_t row0 = i0 + 16 * rw;
  const bool rows_live = row0 < T;  // warp-uniform: a ragged tile's empty row blocks skip the math
  const ConstRows<bf16> q = q_rows(p, b, h), k = k_rows(p, b, h), v = v_rows(p, b, h);

  tiles::TileRange rg[2];
  const int n_ranges = tiles::key_tile_ranges(rule, i0, i1, rg);
  const tiles::TileWalk walk = tiles::tile_walk(rg, n_ranges);
  // The walk's tile it is key tile kt, counted separately by the loads and by the use (each is
  // called once per tile, in order).
  int32_t issue_kt = walk.first, use_kt = walk.first;
  issue_word_rows<HD>(Qs, q.ptr, q.stride, i0, T);  // Q travels with the first key tile
  tm::FwdRows<HD> st;
  tm::fwd_init(st);
  start_double_buffered(walk.count, [&](int32_t it) {
    issue_word_rows<HD>(k_buf(it), k.ptr, k.stride, int64_t(issue_kt) * tiles::kBc, T);
    issue_word_rows<HD>(v_buf(it), v.ptr, v.stride, int64_t(issue_kt) * tiles::kBc, T);
    issue_kt = tiles::tile_after(walk, issue_kt);
  })([&](int32_t it) {
    const int64_t j0 = int64_t(use_kt) * tiles::kBc, c0 = j0 + kHalfCols * half;
    use_kt = tiles::tile_after(walk, use_kt);
    if (rows_live && c0 < T) {
      const tm::ScoreBlock sb{row0, c0, T, rule, tiles::tile_needs_mask(rule, i0, j0, T), false};
      tm::fwd_tile<HD, kHalfCols, DeviceWarp>(st, Qs + 16 * rw * LDW, k_buf(it) + kHalfCols * half * LDW,
                                              v_buf(it) + kHalfCols * half * LDW, LDW, sb, p.scale, lane);
    }
  });
  __syncthreads();  // the tiles become the exchange
  float* xo = smem + 16 * rw * XLD;
  float* xm = smem + 64 * XLD + 16 * rw;
  float* xl = smem + 64 * XLD + 64 + 16 * rw;
  if (half == 1 && rows_live) tm::fwd_export(st, xo, XLD, xm, xl, lane);
  __syncthreads();
  if (half == 0 && rows_live) {
    tm::fwd_merge(st, xo, XLD, xm, xl, lane);
    const Rows<bf16> out = out_rows(p, b, h);
    const int valid = static_cast<int>(tiles::min64(16, T - row0));
    tm::fwd_store(st, out.ptr + row0 * out.stride, out.stride, row_stats_out(p, b, h) + row0, valid, lane);
  }
  __syncthreads();
}

}  // namespace hw::cuda::attn_mma
