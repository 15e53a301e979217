#pragma once
// Deterministic column sums over rows (CUDA only): out_k[c] += sum over n of term(n, c)_k,
// accumulated in double. Geometry in tiles/ops_grid.hpp (kColumnSumCols columns x
// kColumnSumRowLanes row lanes per block); lane r adds rows r, r + lanes, ... in order and the
// lanes meet in a fixed shared-memory tree, so the result depends only on N and C.
#include <cuda_runtime.h>

#include <cstdint>

#include "headwise/kernels/tiles/ops_grid.hpp"

namespace hw::cuda::dev {

// Term: a device functor void(int64_t n, int64_t c, float (&t)[K]). out[k] may be null (skip).
template <int K, class Term>
__global__ void column_sum_kernel(float* out0, float* out1, int64_t N, int64_t C, Term term) {
  constexpr int kCols = tiles::kColumnSumCols, kLanes = tiles::kColumnSumRowLanes;
  __shared__ double part[K][kLanes][kCols];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kCols + tx;
  double acc[K] = {};
  if (c < C) {
    for (int64_t n = ty; n < N; n += kLanes) {
      float t[K];
      term(n, c, t);
      for (int k = 0; k < K; k++) acc[k] += static_cast<double>(t[k]);
    }
  }
  for (int k = 0; k < K; k++) part[k][ty][tx] = acc[k];
  __syncthreads();
  for (int stride = kLanes / 2; stride > 0; stride >>= 1) {
    if (ty < stride)
      for (int k = 0; k < K; k++) part[k][ty][tx] += part[k][ty + stride][tx];
    __syncthreads();
  }
  if (ty == 0 && c < C) {
    float* outs[2] = {out0, out1};
    for (int k = 0; k < K; k++)
      if (outs[k]) outs[k][c] += static_cast<float>(part[k][0][tx]);
  }
}

inline dim3 column_sum_block() { return dim3(tiles::kColumnSumCols, tiles::kColumnSumRowLanes); }
inline unsigned column_sum_grid(int64_t C) {
  return static_cast<unsigned>((C + tiles::kColumnSumCols - 1) / tiles::kColumnSumCols);
}

}  // namespace hw::cuda::dev
