#pragma once
// Device-side building blocks of the op kernels (CUDA only, included by the .cu files):
// grid-stride indices, element and 4-element access to float or bf16 storage, and warp/block
// reductions whose combination order is fixed by the block shape alone, so every reduction is
// bit-reproducible.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "headwise/core/bf16.hpp"
#include "headwise/kernels/tiles/bf16_pack.hpp"
#include "headwise/kernels/tiles/crossentropy_stat.hpp"

namespace hw::cuda::dev {

constexpr unsigned kFullMask = 0xffffffffU;

__device__ __forceinline__ int64_t global_thread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Storage access for kernels templated on the storage type T (float or bf16): elements are
// read as float, and float results are rounded once, to nearest even, when stored to bf16.
// For float every access is the plain load or store, so a float instantiation computes
// exactly what the float-only kernel did. The 4-element forms move a float4 (16 bytes) or 4
// bf16 packed in a uint2 (8 bytes, tiles/bf16_pack.hpp); i4 counts groups of 4 elements.
__device__ __forceinline__ float load1(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load1(const bf16* p, int64_t i) { return to_float(p[i]); }
__device__ __forceinline__ void store1(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store1(bf16* p, int64_t i, float v) { p[i] = to_bf16(v); }

__device__ __forceinline__ float4 load4(const float* p, int64_t i4) { return reinterpret_cast<const float4*>(p)[i4]; }
__device__ __forceinline__ void store4(float* p, int64_t i4, float4 v) { reinterpret_cast<float4*>(p)[i4] = v; }
__device__ __forceinline__ float4 load4(const bf16* p, int64_t i4) {
  const uint2 u = reinterpret_cast<const uint2*>(p)[i4];
  return make_float4(tiles::bf16_word_lo(u.x), tiles::bf16_word_hi(u.x), tiles::bf16_word_lo(u.y),
                     tiles::bf16_word_hi(u.y));
}
__device__ __forceinline__ void store4(bf16* p, int64_t i4, float4 v) {
  reinterpret_cast<uint2*>(p)[i4] = make_uint2(tiles::bf16_word(v.x, v.y), tiles::bf16_word(v.z, v.w));
}

// v as a store to T leaves it (identity for float): for a kernel that stores a value and
// keeps using it, so later arithmetic sees what a reader of the stored array would.
template <class T>
__device__ __forceinline__ float as_stored(float v) {
  if constexpr (std::is_same_v<T, bf16>)
    return to_float(to_bf16(v));
  else
    return v;
}

// Butterfly reductions: every lane ends with the same value, combined in the same order.
__device__ __forceinline__ double warp_sum(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFullMask, v, off);
  return v;
}
__device__ __forceinline__ tiles::SoftmaxStat warp_merge(tiles::SoftmaxStat s) {
  for (int off = 16; off > 0; off >>= 1) {
    tiles::SoftmaxStat o;
    o.max = __shfl_xor_sync(kFullMask, s.max, off);
    o.sum = __shfl_xor_sync(kFullMask, s.sum, off);
    s = tiles::softmax_stat_merge(s, o);
  }
  return s;
}

// Block-wide sum (blockDim.x a multiple of 32, at most 1024): warps reduce, then warp 0
// reduces the warp totals. Every thread returns the total. `shared` holds 32 doubles; the
// trailing barrier lets the caller reuse it at once.
__device__ __forceinline__ double block_sum(double v, double* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  double t = lane < warps ? shared[lane] : 0.0;
  t = warp_sum(t);
  __syncthreads();
  return t;
}

__device__ __forceinline__ tiles::SoftmaxStat block_merge(tiles::SoftmaxStat s, tiles::SoftmaxStat* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  s = warp_merge(s);
  if (lane == 0) shared[warp] = s;
  __syncthreads();
  tiles::SoftmaxStat t = lane < warps ? shared[lane] : tiles::softmax_stat_empty();
  t = warp_merge(t);
  __syncthreads();
  return t;
}

}  // namespace hw::cuda::dev
