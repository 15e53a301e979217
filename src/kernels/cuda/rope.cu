// Rotary position embedding in place (rotate-half pairs), forward and its inverse for the
// gradient. One thread per (row, pair index): it evaluates the pair's angle once, in double
// as the CPU reference (tiles/rope_angle.hpp), and rotates that pair in every head of the row;
// adjacent threads touch adjacent elements of each head. x is float or bf16 (S: each rotated
// element is computed in fp32 from the stored pair and rounded once).
#include <string>

#include "headwise/core/error.hpp"
#include "headwise/kernels/tiles/ops_grid.hpp"
#include "headwise/kernels/tiles/rope_angle.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launch_kernel.cuh"
#include "kernels/cuda/launch_ops.hpp"
#include "kernels/cuda/ops_device.cuh"

namespace hw::cuda {

namespace {

template <class S>
__global__ void rope_kernel(S* x, int64_t rows, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads,
                            int64_t hd, double theta, double direction) {
  const int64_t half = hd / 2;
  const int64_t stride = dev::grid_threads();
  for (int64_t item = dev::global_thread(); item < rows * half; item += stride) {
    const int64_t bt = item / half, i = item - bt * half;
    float c, s;
    tiles::rope_cos_sin(bt % T, i, hd, theta, direction, c, s);
    for (int64_t h = 0; h < n_heads; h++) {
      S* lo = x + tiles::rope_pair_offset(bt, h, i, row_stride, col0, hd);
      const float x1 = dev::load1(lo, 0), x2 = dev::load1(lo, half);
      dev::store1(lo, 0, x1 * c - x2 * s);
      dev::store1(lo, half, x2 * c + x1 * s);
    }
  }
}

template <class S>
void launch_rope(cudaStream_t stream, S* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0,
                 int64_t n_heads, int64_t hd, double theta, double direction) {
  check(hd > 0 && hd % 2 == 0, "rope: head width hd=" + std::to_string(hd) + " must be positive and even");
  check(theta > 0.0, "rope: theta=" + std::to_string(theta) + " must be positive");
  const int64_t rows = B * T;
  if (rows <= 0 || n_heads <= 0) return;
  const int64_t blocks = tiles::stride_grid_blocks(rows * (hd / 2), tiles::kOpThreads, tiles::kOpMaxBlocks);
  launch_kernel(rope_kernel<S>, static_cast<unsigned>(blocks), tiles::kOpThreads, 0, stream, x, rows, T, row_stride,
                col0, n_heads, hd, theta, direction);
  check_launch("rope_kernel");
}

}  // namespace

void launch_rope_forward(cudaStream_t stream, float* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0,
                         int64_t n_heads, int64_t hd, double theta) {
  launch_rope(stream, x, B, T, row_stride, col0, n_heads, hd, theta, 1.0);
}

// The rotation is orthogonal: its transpose (the gradient map) rotates by -angle.
void launch_rope_backward(cudaStream_t stream, float* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0,
                          int64_t n_heads, int64_t hd, double theta) {
  launch_rope(stream, dx, B, T, row_stride, col0, n_heads, hd, theta, -1.0);
}

void launch_rope_forward(cudaStream_t stream, bf16* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0,
                         int64_t n_heads, int64_t hd, double theta) {
  launch_rope(stream, x, B, T, row_stride, col0, n_heads, hd, theta, 1.0);
}

void launch_rope_backward(cudaStream_t stream, bf16* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0,
                          int64_t n_heads, int64_t hd, double theta) {
  launch_rope(stream, dx, B, T, row_stride, col0, n_heads, hd, theta, -1.0);
}

}  // namespace hw::cuda
