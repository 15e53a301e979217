// GELU (tanh approximation) forward and accumulating backward, elementwise, on float or bf16
// storage with fp32 arithmetic; the math is tiles/pointwise_math.hpp, shared with the CPU tests.
#include "headwise/kernels/tiles/ops_grid.hpp"
#include "headwise/kernels/tiles/pointwise_math.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launch_kernel.cuh"
#include "kernels/cuda/launch_ops.hpp"
#include "kernels/cuda/ops_device.cuh"

namespace hw::cuda {

namespace {

template <class T>
__global__ void gelu_forward_kernel(T* out, const T* inp, int64_t n, tiles::Vec4Split split) {
  const int64_t stride = dev::grid_threads();
  for (int64_t i = dev::global_thread(); i < split.vec_items; i += stride) {
    const float4 x = dev::load4(inp, i);
    dev::store4(out, i,
                make_float4(tiles::gelu_value(x.x), tiles::gelu_value(x.y), tiles::gelu_value(x.z),
                            tiles::gelu_value(x.w)));
  }
  for (int64_t i = split.tail_begin + dev::global_thread(); i < n; i += stride)
    dev::store1(out, i, tiles::gelu_value(dev::load1(inp, i)));
}

// dinp += dout * gelu'(inp); dinp may alias dout (each element is read before it is written).
template <class T>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, int64_t n, tiles::Vec4Split split) {
  const int64_t stride = dev::grid_threads();
  for (int64_t i = dev::global_thread(); i < split.vec_items; i += stride) {
    const float4 x = dev::load4(inp, i), dy = dev::load4(dout, i);
    float4 d = dev::load4(dinp, i);
    d.x += dy.x * tiles::gelu_slope(x.x);
    d.y += dy.y * tiles::gelu_slope(x.y);
    d.z += dy.z * tiles::gelu_slope(x.z);
    d.w += dy.w * tiles::gelu_slope(x.w);
    dev::store4(dinp, i, d);
  }
  for (int64_t i = split.tail_begin + dev::global_thread(); i < n; i += stride)
    dev::store1(dinp, i, dev::load1(dinp, i) + dev::load1(dout, i) * tiles::gelu_slope(dev::load1(inp, i)));
}

template <class T>
void launch_gelu_forward_t(cudaStream_t stream, T* out, const T* inp, int64_t n) {
  if (n <= 0) return;
  const auto split = tiles::vec4_split(n, tiles::vec4_aligned(out) && tiles::vec4_aligned(inp));
  const int64_t blocks = tiles::stride_grid_blocks(tiles::vec4_loop_items(split, n), tiles::kOpThreads,
                                                   tiles::kOpMaxBlocks);
  launch_kernel(gelu_forward_kernel<T>, static_cast<unsigned>(blocks), tiles::kOpThreads, 0, stream, out, inp, n,
                split);
  check_launch("gelu_forward_kernel");
}

template <class T>
void launch_gelu_backward_t(cudaStream_t stream, T* dinp, const T* inp, const T* dout, int64_t n) {
  if (n <= 0) return;
  const auto split = tiles::vec4_split(
      n, tiles::vec4_aligned(dinp) && tiles::vec4_aligned(inp) && tiles::vec4_aligned(dout));
  const int64_t blocks = tiles::stride_grid_blocks(tiles::vec4_loop_items(split, n), tiles::kOpThreads,
                                                   tiles::kOpMaxBlocks);
  launch_kernel(gelu_backward_kernel<T>, static_cast<unsigned>(blocks), tiles::kOpThreads, 0, stream, dinp, inp, dout,
                n, split);
  check_launch("gelu_backward_kernel");
}

}  // namespace

void launch_gelu_forward(cudaStream_t stream, float* out, const float* inp, int64_t n) {
  launch_gelu_forward_t(stream, out, inp, n);
}
void launch_gelu_backward(cudaStream_t stream, float* dinp, const float* inp, const float* dout, int64_t n) {
  launch_gelu_backward_t(stream, dinp, inp, dout, n);
}

void launch_gelu_forward(cudaStream_t stream, bf16* out, const bf16* inp, int64_t n) {
  launch_gelu_forward_t(stream, out, inp, n);
}
void launch_gelu_backward(cudaStream_t stream, bf16* dinp, const bf16* inp, const bf16* dout, int64_t n) {
  launch_gelu_backward_t(stream, dinp, inp, dout, n);
}

}  // namespace hw::cuda
