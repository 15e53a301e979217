// fp32 -> bf16, round to nearest even (hw::to_bf16, the host's rounding bit for bit, NaN kept
// a NaN): the GEMMs' bf16 copy of the fp32 master weights, refreshed before every forward of
// a mixed-precision step. A float4 in, 4 bf16 (8 bytes) out when both arrays are aligned for
// it, a scalar loop for the tail (or everything).
#include "headwise/kernels/tiles/ops_grid.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launch_kernel.cuh"
#include "kernels/cuda/launch_ops.hpp"
#include "kernels/cuda/ops_device.cuh"

namespace hw::cuda {

namespace {

__global__ void round_to_bf16_kernel(bf16* dst, const float* src, int64_t n, tiles::Vec4Split split) {
  const int64_t stride = dev::grid_threads();
  for (int64_t i = dev::global_thread(); i < split.vec_items; i += stride) dev::store4(dst, i, dev::load4(src, i));
  for (int64_t i = split.tail_begin + dev::global_thread(); i < n; i += stride) dev::store1(dst, i, src[i]);
}

}  // namespace

void launch_round_to_bf16(cudaStream_t stream, bf16* dst, const float* src, int64_t n) {
  if (n <= 0) return;
  const auto split = tiles::vec4_split(n, tiles::vec4_aligned(dst) && tiles::vec4_aligned(src));
  const int64_t blocks = tiles::stride_grid_blocks(tiles::vec4_loop_items(split, n), tiles::kOpThreads,
                                                   tiles::kOpMaxBlocks);
  launch_kernel(round_to_bf16_kernel, static_cast<unsigned>(blocks), tiles::kOpThreads, 0, stream, dst, src, n, split);
  check_launch("round_to_bf16_kernel");
}

}  // namespace hw::cuda
