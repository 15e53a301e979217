#pragma once
// Device side of the tensor-core (bf16) attention tiles, the block-level pieces around the
// lane-indexed routines of tiles/mma_attention_warp.hpp (their warp policy, DeviceWarp, is in
// device_warp.cuh): bf16 rows into shared word tiles (16-byte vectors when
// the rows allow it) and delta = dO . O from a word tile. Used only with bf16 activations; the
// fp32 kernels keep their SIMT tiles (attention_tile_gemm.cuh).
#include <cuda_runtime.h>

#include <cstdint>

#include "headwise/core/bf16.hpp"
#include "headwise/kernels/tiles/attention_storage.hpp"
#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/mma_fragments.hpp"
#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/attention_tile_gemm.cuh"
#include "kernels/cuda/device_warp.cuh"

namespace hw::cuda::attn_mma {

using tiles::kAttnThreads;

// Words per row of a [64][HD] bf16 tile, and the floats per row of the fp32 exchange blocks
// (HD + 8: the 8 rows of a fragment store land on distinct bank groups, at most 2-way).
template <int HD>
constexpr int kLdw = tiles::mma::ld_words(HD);
template <int HD>
constexpr int kXld = HD + 8;

// Rows [r0, r0 + 64) of a strided bf16 block into a word tile (row stride kLdw<HD>), zero at or
// past rows_end. Bits are copied, nothing rounds.
template <int HD>
__device__ __forceinline__ void load_word_rows(uint32_t* tile, const bf16* src, int64_t stride, int64_t r0,
                                               int64_t rows_end) {
  constexpr int LDW = kLdw<HD>, V = tiles::kBf16PerVec;
  static_assert(HD % V == 0 && (LDW * 4) % 16 == 0, "word tile rows take whole 16-byte vectors");
  if (tiles::rows_vec16_aligned(reinterpret_cast<uint64_t>(src), stride, int(sizeof(bf16)))) {
#pragma unroll 1
    for (int e = static_cast<int>(threadIdx.x); e < 64 * HD / V; e += kAttnThreads) {
      const tiles::VecSlot s = tiles::vec_slot(e, HD, V);
      const int64_t row = r0 + s.row;
      uint4 u = make_uint4(0u, 0u, 0u, 0u);
      if (row < rows_end) u = *reinterpret_cast<const uint4*>(src + row * stride + s.col);
      *reinterpret_cast<uint4*>(tile + s.row * LDW + s.col / 2) = u;  // little-endian: element 2w low
    }
    return;
  }
#pragma unroll 1
  for (int e = static_cast<int>(threadIdx.x); e < 64 * HD / 2; e += kAttnThreads) {
    const int r = e / (HD / 2), w = e % (HD / 2);
    const int64_t row = r0 + r;
    tile[r * LDW + w] =
        row < rows_end ? tiles::mma::bf16_pair_word(src[row * stride + 2 * w], src[row * stride + 2 * w + 1]) : 0u;
  }
}

// The same rows into a word tile without waiting for them: when every row is 16-byte aligned,
// one cp.async per 16 bytes (zeros at or past rows_end) joins the thread's open copy group, and
// the tile holds the rows once the caller has committed, waited for that group and passed a
// block barrier (async_copy.cuh). Unaligned rows take load_word_rows' element path, whose stores
// are done on return, so the same wait-then-barrier covers them.
template <int HD>
__device__ __forceinline__ void issue_word_rows(uint32_t* tile, const bf16* src, int64_t stride, int64_t r0,
                                                int64_t rows_end) {
  constexpr int LDW = kLdw<HD>, V = tiles::kBf16PerVec;
  if (!tiles::rows_vec16_aligned(reinterpret_cast<uint64_t>(src), stride, int(sizeof(bf16)))) {
    load_word_rows<HD>(tile, src, stride, r0, rows_end);
    return;
  }
#pragma unroll 1
  for (int e = static_cast<int>(threadIdx.x); e < 64 * HD / V; e += kAttnThreads) {
    const tiles::VecSlot s = tiles::vec_slot(e, HD, V);
    const int64_t row = r0 + s.row;
    const bool valid = row < rows_end;
    async_copy16(tile + s.row * LDW + s.col / 2, valid ? src + row * stride + s.col : src, valid);
  }
}

// delta[r] = dO_r . O_r for rows [r0, r0 + 64) (0 past `rows`); dO from its word tile, O from
// global memory. One warp per row, the same order as attn_tile::row_deltas.
template <int HD>
__device__ __forceinline__ void row_deltas_words(float* delta, const uint32_t* dO_tile, const bf16* out,
                                                 int64_t stride, int64_t r0, int64_t rows) {
  constexpr int LDW = kLdw<HD>;
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  for (int r = warp; r < 64; r += kAttnThreads / 32) {
    const int64_t row = r0 + r;
    float s = 0.f;
    if (row < rows)
      for (int d = lane; d < HD; d += 32)
        s = fmaf(tiles::mma::word_elem(dO_tile + r * LDW, d), tiles::load_as_float(out + row * stride + d), s);
    s = attn_tile::warp_sum(s);
    if (lane == 0) delta[r] = s;
  }
}

// The block's 8 warps as 4 row blocks x 2 column halves: warp w owns rows [16 (w % 4), +16) of the
// item's 64-row tile and columns [32 (w / 4), +32) of every 64-wide tile it walks; the two warps of a
// row block merge at the end (fixed order: half 0, then half 1).
constexpr int kHalfCols = 32;
__device__ __forceinline__ int row_block() { return (static_cast<int>(threadIdx.x) / 32) % 4; }
__device__ __forceinline__ int col_half() { return (static_cast<int>(threadIdx.x) / 32) / 4; }
__device__ __forceinline__ int lane_id() { return static_cast<int>(threadIdx.x) % 32; }

}  // namespace hw::cuda::attn_mma
