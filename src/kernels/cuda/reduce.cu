// Sum of squares (gradient-norm clipping) in double, deterministic: contiguous ranges fixed by
// n alone (tiles/reduction_partials.hpp) give per-block partials, and one block adds them in a
// fixed order. Also that final stage, shared with the cross-entropy's loss total.
#include "headwise/kernels/tiles/ops_grid.hpp"
#include "headwise/kernels/tiles/reduction_partials.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launch_kernel.cuh"
#include "kernels/cuda/launch_ops.hpp"
#include "kernels/cuda/ops_device.cuh"
#include "kernels/cuda/ops_partials.hpp"

namespace hw::cuda {

namespace {

constexpr int kSumSquaresThreads = 512;
constexpr int64_t kSumSquaresMinPerBlock = 4096;  // below this, more blocks only add partials

// Block b adds x[i]^2 over its range (float4 when the array is aligned: ranges start at
// multiples of 4) into partials[b].
__global__ void sum_squares_kernel(const float* x, int64_t n, int64_t per_block, bool vec, double* partials) {
  __shared__ double shared[32];
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * per_block;
  const int64_t len = (n - begin < per_block ? n - begin : per_block);
  const float* r = x + begin;
  const tiles::Vec4Split split = tiles::vec4_split(len, vec);
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < split.vec_items; i += blockDim.x) {
    const float4 v = dev::load4(r, i);
    s += static_cast<double>(v.x) * v.x + static_cast<double>(v.y) * v.y + static_cast<double>(v.z) * v.z +
         static_cast<double>(v.w) * v.w;
  }
  for (int64_t i = split.tail_begin + threadIdx.x; i < len; i += blockDim.x) s += static_cast<double>(r[i]) * r[i];
  s = dev::block_sum(s, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

// One block: thread t adds partials t, t + threads, ... in order, then the block tree.
__global__ void partials_total_kernel(const double* partials, int64_t count, double* result) {
  __shared__ double shared[32];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) s += partials[i];
  s = dev::block_sum(s, shared);
  if (threadIdx.x == 0) *result = s;
}

}  // namespace

void launch_partials_total(cudaStream_t stream, const double* partials, int64_t count, double* result) {
  launch_kernel(partials_total_kernel, 1, tiles::kPartialsFinishThreads, 0, stream, partials, count, result);
  check_launch("partials_total_kernel");
}

void launch_sum_squares(cudaStream_t stream, const float* x, int64_t n, const ReductionScratch& scratch) {
  const tiles::PartialsPlan plan = tiles::plan_partials(n, kReductionPartials, kSumSquaresMinPerBlock);
  if (plan.blocks > 0) {
    launch_kernel(sum_squares_kernel, static_cast<unsigned>(plan.blocks), kSumSquaresThreads, 0, stream, x, n,
                  plan.per_block, tiles::aligned16(x), scratch.partials);
    check_launch("sum_squares_kernel");
  }
  launch_partials_total(stream, scratch.partials, plan.blocks, scratch.result);
}

}  // namespace hw::cuda
