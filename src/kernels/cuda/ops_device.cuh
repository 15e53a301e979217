#pragma once
// Device-side building blocks of the op kernels (CUDA only, included by the .cu files):
// grid-stride indices, float4 access, and warp/block reductions whose combination order is
// fixed by the block shape alone, so every reduction is bit-reproducible.
#include <cuda_runtime.h>

#include <cstdint>

#include "headwise/kernels/tiles/crossentropy_stat.hpp"

namespace hw::cuda::dev {

constexpr unsigned kFullMask = 0xffffffffU;

__device__ __forceinline__ int64_t global_thread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__device__ __forceinline__ float4 load4(const float* p, int64_t i4) { return reinterpret_cast<const float4*>(p)[i4]; }
__device__ __forceinline__ void store4(float* p, int64_t i4, float4 v) { reinterpret_cast<float4*>(p)[i4] = v; }

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
