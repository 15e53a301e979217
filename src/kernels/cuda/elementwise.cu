// Elementwise ops: zero fill, scale, gradient accumulation, residual add (float or bf16
// storage, fp32 arithmetic). 4-element vector loads and stores (float4, or 4 bf16 in 8 bytes)
// when every operand is aligned for them, a scalar loop for the tail (or everything).
#include "headwise/kernels/tiles/ops_grid.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launch_kernel.cuh"
#include "kernels/cuda/launch_ops.hpp"
#include "kernels/cuda/ops_device.cuh"

namespace hw::cuda {

namespace {

__global__ void scale_kernel(float* x, float s, int64_t n, tiles::Vec4Split split) {
  const int64_t stride = dev::grid_threads();
  for (int64_t i = dev::global_thread(); i < split.vec_items; i += stride) {
    float4 v = dev::load4(x, i);
    v.x *= s, v.y *= s, v.z *= s, v.w *= s;
    dev::store4(x, i, v);
  }
  for (int64_t i = split.tail_begin + dev::global_thread(); i < n; i += stride) x[i] *= s;
}

// out = a + b (accumulate is out = out + src: the same kernel with a = out), added in fp32
// and stored as T.
template <class T>
__global__ void add_kernel(T* out, const T* a, const T* b, int64_t n, tiles::Vec4Split split) {
  const int64_t stride = dev::grid_threads();
  for (int64_t i = dev::global_thread(); i < split.vec_items; i += stride) {
    const float4 x = dev::load4(a, i), y = dev::load4(b, i);
    dev::store4(out, i, make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w));
  }
  for (int64_t i = split.tail_begin + dev::global_thread(); i < n; i += stride)
    dev::store1(out, i, dev::load1(a, i) + dev::load1(b, i));
}

template <class T>
void launch_add(cudaStream_t stream, T* out, const T* a, const T* b, int64_t n, const char* what) {
  if (n <= 0) return;
  const auto split =
      tiles::vec4_split(n, tiles::vec4_aligned(out) && tiles::vec4_aligned(a) && tiles::vec4_aligned(b));
  const int64_t blocks = tiles::stride_grid_blocks(tiles::vec4_loop_items(split, n), tiles::kOpThreads,
                                                   tiles::kOpMaxBlocks);
  launch_kernel(add_kernel<T>, static_cast<unsigned>(blocks), tiles::kOpThreads, 0, stream, out, a, b, n, split);
  check_launch(what);
}

}  // namespace

void launch_fill_zero(cudaStream_t stream, float* x, int64_t n) {
  if (n <= 0) return;
  HW_CUDA_CHECK(cudaMemsetAsync(x, 0, static_cast<size_t>(n) * sizeof(float), stream));
}

void launch_scale(cudaStream_t stream, float* x, float s, int64_t n) {
  if (n <= 0) return;
  const auto split = tiles::vec4_split(n, tiles::aligned16(x));
  const int64_t blocks = tiles::stride_grid_blocks(tiles::vec4_loop_items(split, n), tiles::kOpThreads,
                                                   tiles::kOpMaxBlocks);
  launch_kernel(scale_kernel, static_cast<unsigned>(blocks), tiles::kOpThreads, 0, stream, x, s, n, split);
  check_launch("scale_kernel");
}

void launch_accumulate(cudaStream_t stream, float* dst, const float* src, int64_t n) {
  launch_add(stream, dst, dst, src, n, "add_kernel (accumulate)");
}

void launch_residual_forward(cudaStream_t stream, float* out, const float* a, const float* b, int64_t n) {
  launch_add(stream, out, a, b, n, "add_kernel (residual_forward)");
}

void launch_fill_zero(cudaStream_t stream, bf16* x, int64_t n) {
  if (n <= 0) return;  // bf16 +0 is all zero bits
  HW_CUDA_CHECK(cudaMemsetAsync(x, 0, static_cast<size_t>(n) * sizeof(bf16), stream));
}

// dst is read as bf16, src added in fp32, the sum rounded once.
void launch_accumulate(cudaStream_t stream, bf16* dst, const bf16* src, int64_t n) {
  launch_add(stream, dst, dst, src, n, "add_kernel (bf16 accumulate)");
}

void launch_residual_forward(cudaStream_t stream, bf16* out, const bf16* a, const bf16* b, int64_t n) {
  launch_add(stream, out, a, b, n, "add_kernel (bf16 residual_forward)");
}

}  // namespace hw::cuda
