#pragma once
// Device building blocks of the attention kernels: the one tile-product primitive and the
// tile loads and stores (activations fp32 or bf16, tiles always fp32). Every tile product of
// the softmax family goes through tile_gemm_acc (SIMT fp32 FMAs today), so a tensor-core
// (bf16/tf32 mma) version can replace it in one place.
//
// Thread layout of an accumulator: the block's 256 threads form a 16 x 16 grid (ty, tx) =
// (tid / 16, tid % 16); thread (ty, tx) owns output rows ty + 16 a and columns tx + 16 c.
// Strided ownership keeps a warp's shared-memory reads to two broadcast rows of A and 16
// distinct banks of B. Shared tiles have odd row strides (kLd) for the same reason.
#include <cuda_runtime.h>

#include <cstdint>

#include "headwise/core/bf16.hpp"
#include "headwise/kernels/tiles/attention_storage.hpp"
#include "headwise/kernels/tiles/attention_tiles.hpp"

namespace hw::cuda::attn_tile {

using tiles::kAttnThreads;
using tiles::kBc;
using tiles::kBr;

static_assert(kAttnThreads == 256 && kBr == 64 && kBc == 64, "the 16x16 thread grid assumes 64-row tiles");

// Row stride of a [64][HD] tile in shared memory, and of a [kBr][kBc] score tile.
template <int HD>
constexpr int kLd = HD + 1;
constexpr int kLdS = kBc + 1;

__device__ __forceinline__ int tid_y() { return static_cast<int>(threadIdx.x) / 16; }
__device__ __forceinline__ int tid_x() { return static_cast<int>(threadIdx.x) % 16; }

template <int M, int N>
struct Acc {
  float v[M / 16][N / 16];
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int a = 0; a < M / 16; ++a)
#pragma unroll
      for (int c = 0; c < N / 16; ++c) v[a][c] = 0.f;
  }
};

// acc[m][n] += sum_k A(m, k) B(k, n) with A(m, k) = A[m * ARS + k * ACS] and
// B(k, n) = B[k * BRS + n * BCS], all in shared memory; fixed summation order (k ascending),
// so results are bit-reproducible.
template <int M, int N, int K, int ARS, int ACS, int BRS, int BCS>
__device__ __forceinline__ void tile_gemm_acc(Acc<M, N>& acc, const float* A, const float* B) {
  const int ty = tid_y(), tx = tid_x();
#pragma unroll 4
  for (int k = 0; k < K; ++k) {
    float a[M / 16], b[N / 16];
#pragma unroll
    for (int i = 0; i < M / 16; ++i) a[i] = A[(ty + 16 * i) * ARS + k * ACS];
#pragma unroll
    for (int j = 0; j < N / 16; ++j) b[j] = B[k * BRS + (tx + 16 * j) * BCS];
#pragma unroll
    for (int i = 0; i < M / 16; ++i)
#pragma unroll
      for (int j = 0; j < N / 16; ++j) acc.v[i][j] = fmaf(a[i], b[j], acc.v[i][j]);
  }
}

// Rows [r0, r0 + R) x HD columns of a strided global block into shared dst[r * ldd + c] as
// fp32; rows at or past `rows_end` are zero (so a masked weight of 0 never meets uninitialised
// memory). fp32: one element per thread and step. bf16: eight elements (one 16-byte load) per
// thread and step when every row is 16-byte aligned (tiles::rows_vec16_aligned; the layout's
// column blocks are multiples of 64 elements, so only the base pointer decides), else one.
template <int R, int HD>
__device__ __forceinline__ void load_tile(float* dst, int ldd, const float* src, int64_t stride, int64_t r0,
                                          int64_t rows_end) {
  for (int e = static_cast<int>(threadIdx.x); e < R * HD; e += kAttnThreads) {
    const int r = e / HD, d = e % HD;
    const int64_t row = r0 + r;
    dst[r * ldd + d] = row < rows_end ? src[row * stride + d] : 0.f;
  }
}
template <int R, int HD>
__device__ __forceinline__ void load_tile(float* dst, int ldd, const bf16* src, int64_t stride, int64_t r0,
                                          int64_t rows_end) {
  constexpr int V = tiles::kBf16PerVec;
  static_assert(HD % V == 0, "bf16 rows load in 16-byte vectors");
  if (tiles::rows_vec16_aligned(reinterpret_cast<uint64_t>(src), stride, int(sizeof(bf16)))) {
#pragma unroll 1
    for (int e = static_cast<int>(threadIdx.x); e < R * HD / V; e += kAttnThreads) {
      const tiles::VecSlot s = tiles::vec_slot(e, HD, V);
      const int64_t row = r0 + s.row;
      float x[V];
      if (row < rows_end) {
        const uint4 u = *reinterpret_cast<const uint4*>(src + row * stride + s.col);
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
        tiles::unpack_bf16x8(w, x);
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) x[k] = 0.f;
      }
      float* out = dst + s.row * ldd + s.col;
#pragma unroll
      for (int k = 0; k < V; ++k) out[k] = x[k];
    }
    return;
  }
  for (int e = static_cast<int>(threadIdx.x); e < R * HD; e += kAttnThreads) {
    const int r = e / HD, d = e % HD;
    const int64_t row = r0 + r;
    dst[r * ldd + d] = row < rows_end ? tiles::load_as_float(src + row * stride + d) : 0.f;
  }
}

// Rows [r0, r0 + 64) of a strided global block into a [64][kLd<HD>] shared tile, zero at or
// past `rows`.
template <int HD, class St>
__device__ __forceinline__ void load_rows(float* tile, const St* src, int64_t stride, int64_t r0, int64_t rows) {
  load_tile<64, HD>(tile, kLd<HD>, src, stride, r0, rows);
}

// Writes an accumulator [64][HD] (times per-row factors, if given) to rows [r0, r0 + 64) of a
// strided global block, skipping rows at or past `rows`. Overwrites; a bf16 store rounds once.
template <int HD, class St>
__device__ __forceinline__ void store_rows(St* dst, int64_t stride, int64_t r0, int64_t rows, const Acc<64, HD>& acc,
                                           const float* row_factor) {
  const int ty = tid_y(), tx = tid_x();
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const int r = ty + 16 * a;
    const int64_t row = r0 + r;
    if (row >= rows) continue;
    const float f = row_factor ? row_factor[r] : 1.f;
#pragma unroll
    for (int c = 0; c < HD / 16; ++c) tiles::store_from_float(dst + row * stride + tx + 16 * c, acc.v[a][c] * f);
  }
}

// Warp reductions in a fixed butterfly order (every lane gets the same value).
__device__ __forceinline__ float warp_max(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// delta[r] = dO_r . O_r for rows [r0, r0 + 64) (FlashAttention-2's D term), 0 past `rows`;
// dO comes from its shared tile, O from global memory. One warp per row.
template <int HD, class St>
__device__ __forceinline__ void row_deltas(float* delta, const float* dO_tile, const St* out, int64_t stride,
                                           int64_t r0, int64_t rows) {
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  for (int r = warp; r < 64; r += kAttnThreads / 32) {
    const int64_t row = r0 + r;
    float s = 0.f;
    if (row < rows)
      for (int d = lane; d < HD; d += 32)
        s = fmaf(dO_tile[r * kLd<HD> + d], tiles::load_as_float(out + row * stride + d), s);
    s = warp_sum(s);
    if (lane == 0) delta[r] = s;
  }
}

}  // namespace hw::cuda::attn_tile
