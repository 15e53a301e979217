#pragma once
// Tensor-core static (SAF) head items with bf16 activations: the same items, tile coverage and
// ownership as the SIMT ones (attention_static.cuh), with P built in registers as mma A fragments
// (tiles/mma_static_warp.hpp) from alpha, rho and log_z staged once per tile in shared memory, and
// the products on mma.sync (bf16 operands, fp32 accumulators). As in the softmax items, the 8 warps
// are 4 row blocks x 2 column halves; the two warps of a row block add their halves once at the
// end in a fixed order (half 0 then half 1), so results stay bit-reproducible without atomics.
//   forward:  out rows of a query tile = P V over the causal key tiles (no Q or K read);
//   backward: a key tile's dV += P^T dO over the query tiles that weight it (dV only).
// The V (dO) tile and the stage are double-buffered: the next tile's rows are in flight
// (cp.async) and its stage is written while the current tile is multiplied.
// Register budget (per thread) at head_dim 128: O or dV 64 floats, P 8 words.
#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/mma_attention_warp.hpp"
#include "headwise/kernels/tiles/mma_static_warp.hpp"
#include "headwise/kernels/tiles/static_tile.hpp"
#include "kernels/cuda/attention_mma_warp.cuh"
#include "kernels/cuda/attention_params.hpp"
#include "kernels/cuda/double_buffer.cuh"

namespace hw::cuda::attn_mma {

// The parameters of tile (i0, j0) of head d into `stage` (one entry per thread).
__device__ __forceinline__ void stage_static_tile(float* stage, const AttnHeadDesc& d, int64_t i0, int64_t j0,
                                                  int64_t T) {
  const int t = static_cast<int>(threadIdx.x);
  if (t < tiles::mma::kStaticStage) stage[t] = tiles::mma::static_stage_entry(d.alpha, d.rho, d.log_z, i0, j0, T, t);
}

// Two buffers, each a V or dO word tile followed by its stage; the end-of-item exchange
// (64 x kXld floats) reuses them.
template <int HD>
constexpr int static_buffer_floats() {
  return 64 * kLdw<HD> + tiles::mma::kStaticStage;
}
template <int HD>
constexpr int static_tiles_bytes() {
  return 2 * static_buffer_floats<HD>() * int(sizeof(float));
}
template <int HD>
constexpr int static_forward_smem_bytes() {
  constexpr int x = 64 * kXld<HD> * int(sizeof(float));
  return x > static_tiles_bytes<HD>() ? x : static_tiles_bytes<HD>();
}

// Overwrites out rows [qt * 64, min(T, qt * 64 + 64)) of head h, sequence b.
template <int HD>
__device__ inline void static_forward_item(const AttnLaunchParamsT<bf16>& p, int b, int h, int qt, float* smem) {
  namespace tm = tiles::mma;
  constexpr int LDW = kLdw<HD>, XLD = kXld<HD>;
  // Buffer it % 2: the V word tile, then its stage (offsets, not pointer arrays, which a runtime
  // index would put in local memory).
  auto v_buf = [&](int32_t it) { return reinterpret_cast<uint32_t*>(smem + (it & 1) * static_buffer_floats<HD>()); };
  auto stage_buf = [&](int32_t it) { return smem + (it & 1) * static_buffer_floats<HD>() + 64 * LDW; };
  const int lane = lane_id(), rw = row_block(), half = col_half();
  const AttnHeadDesc& d = p.heads[h];
  const int64_t T = p.T, i0 = int64_t(qt) * tiles::kBr, row0 = i0 + 16 * rw;
  const bool rows_live = row0 < T;  // warp-uniform
  const tiles::TileRange kr = tiles::static_key_tiles(qt, T);
  const int32_t n_tiles = kr.hi - kr.lo;
  // Key tile number it into buffer it % 2: V rows in flight, the stage written at once.
  auto issue = [&](int32_t it) {
    const int64_t j0 = int64_t(kr.lo + it) * tiles::kBc;
    const ConstRows<bf16> v = v_rows(p, b, h);
    issue_word_rows<HD>(v_buf(it), v.ptr, v.stride, j0, T);
    stage_static_tile(stage_buf(it), d, i0, j0, T);
  };
  float o[HD / tm::kN][4];
  tm::c_zero(o);
  start_double_buffered(n_tiles, issue)([&](int32_t it) {
    const int64_t j0 = int64_t(kr.lo + it) * tiles::kBc, c0 = j0 + kHalfCols * half;
    if (rows_live && tm::static_block_live(row0, row0 + 15, c0, T)) {
      const tm::StaticTile s{stage_buf(it), i0, j0, T};
      tm::static_fwd_tile<HD, kHalfCols, DeviceWarp>(o, s, 16 * rw, kHalfCols * half,
                                                     v_buf(it) + kHalfCols * half * LDW, LDW, lane);
    }
  });
  __syncthreads();  // the tiles become the exchange
  float* xo = smem + 16 * rw * XLD;
  if (half == 1 && rows_live) tm::c_export(o, xo, XLD, lane);
  __syncthreads();
  if (half == 0 && rows_live) {
    tm::c_add(o, xo, XLD, lane);
    const Rows<bf16> out = out_rows(p, b, h);
    tm::c_store(o, out.ptr + row0 * out.stride, out.stride, static_cast<int>(tiles::min64(16, T - row0)), lane);
  }
  __syncthreads();
}

// dv_acc[r][e] (shared, [64][HD] row-major) += sum_{i >= j} P(i, j) dO_i[e] for keys
// j = kt * 64 + r < T (rows past T untouched); `smem` is separate scratch of static_tiles_bytes.
template <int HD>
__device__ inline void static_kv_tile_backward(const AttnLaunchParamsT<bf16>& p, int b, int h, int kt, float* dv_acc,
                                               float* smem) {
  namespace tm = tiles::mma;
  constexpr int LDW = kLdw<HD>;
  __syncthreads();  // the caller's last use of smem and dv_acc is done
  // Buffer it % 2: the dO word tile, then its stage (offsets; see static_forward_item).
  auto dout_buf = [&](int32_t it) {
    return reinterpret_cast<uint32_t*>(smem + (it & 1) * static_buffer_floats<HD>());
  };
  auto stage_buf = [&](int32_t it) { return smem + (it & 1) * static_buffer_floats<HD>() + 64 * LDW; };
  const int lane = lane_id(), rw = row_block(), half = col_half();
  const AttnHeadDesc& d = p.heads[h];
  const int64_t T = p.T, j0 = int64_t(kt) * tiles::kBc, krow0 = j0 + 16 * rw;
  const bool rows_live = krow0 < T;  // warp-uniform
  const tiles::TileRange qr = tiles::static_query_tiles(kt, T);
  const int32_t n_tiles = qr.hi - qr.lo;
  // Query tile number it into buffer it % 2: dO rows in flight, the stage written at once.
  auto issue = [&](int32_t it) {
    const int64_t i0 = int64_t(qr.lo + it) * tiles::kBr;
    const ConstRows<bf16> dout = dout_rows(p, b, h);
    issue_word_rows<HD>(dout_buf(it), dout.ptr, dout.stride, i0, T);
    stage_static_tile(stage_buf(it), d, i0, j0, T);
  };
  float dv[HD / tm::kN][4];
  tm::c_zero(dv);
  start_double_buffered(n_tiles, issue)([&](int32_t it) {
    const int64_t i0 = int64_t(qr.lo + it) * tiles::kBr, c0 = i0 + kHalfCols * half;
    if (rows_live && tm::static_block_live(c0, c0 + kHalfCols - 1, krow0, T)) {
      const tm::StaticTile s{stage_buf(it), i0, j0, T};
      tm::static_dv_tile<HD, kHalfCols, DeviceWarp>(dv, s, 16 * rw, kHalfCols * half,
                                                    dout_buf(it) + kHalfCols * half * LDW, LDW, lane);
    }
  });
  // Fixed order: half 0's sums, then half 1's, into the shared block.
  const int valid = rows_live ? static_cast<int>(tiles::min64(16, T - krow0)) : 0;
  if (half == 0) tm::c_add_to(dv, dv_acc + 16 * rw * HD, HD, valid, lane);
  __syncthreads();
  if (half == 1) tm::c_add_to(dv, dv_acc + 16 * rw * HD, HD, valid, lane);
  __syncthreads();
}

}  // namespace hw::cuda::attn_mma
