// Softmax cross-entropy fused with its gradient, one block per row at a time: the first pass
// reads the row once for its running max and exp-sum (tiles/crossentropy_stat.hpp), the
// second writes (softmax - onehot) * dloss, as the CPU reference: exp(x - max) * (dloss / sum)
// then dloss subtracted at the target. dlogits may alias logits: every read of a row's first
// pass (and of its target logit) happens before the block barrier that precedes any write.
// Row losses are added per block in row order, then across blocks in a fixed order. Logits
// and dlogits are float or bf16 (T; each gradient rounded once when stored); losses, the row
// statistics and the total stay fp32/double.
#include <cmath>

#include "headwise/kernels/cpu.hpp"
#include "headwise/kernels/tiles/ops_grid.hpp"
#include "headwise/kernels/tiles/reduction_partials.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launch_kernel.cuh"
#include "kernels/cuda/launch_ops.hpp"
#include "kernels/cuda/ops_device.cuh"
#include "kernels/cuda/ops_partials.hpp"

namespace hw::cuda {

namespace {

__device__ __forceinline__ float ce_grad(float x, float max, float scale, bool is_target, float dl) {
  const float d = expf(x - max) * scale;
  return is_target ? d - dl : d;
}

// Block b handles rows b, b + gridDim.x, ...; partials[b] = the sum of their losses.
template <class T>
__global__ void crossentropy_kernel(float* losses, T* dlogits, const T* logits, const int32_t* targets,
                                    int64_t N, int64_t V, double dloss, bool vec, double* partials) {
  __shared__ tiles::SoftmaxStat shared[32];
  double total = 0.0;  // meaningful in thread 0
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* row = logits + n * V;
    T* drow = dlogits ? dlogits + n * V : nullptr;
    const int32_t target = targets[n];
    double loss = 0.0;
    if (target == cpu::kIgnoreTarget) {  // no loss, zero gradient
      if (drow)
        for (int64_t v = threadIdx.x; v < V; v += blockDim.x) dev::store1(drow, v, 0.0f);
    } else {
      const bool bad = target < 0 || target >= V;
      const float target_logit = bad ? NAN : dev::load1(row, target);
      const tiles::Vec4Split split = tiles::vec4_split(V, vec);
      tiles::SoftmaxStat st = tiles::softmax_stat_empty();
      for (int64_t i = threadIdx.x; i < split.vec_items; i += blockDim.x) {
        const float4 x = dev::load4(row, i);
        tiles::softmax_stat_push(st, x.x);
        tiles::softmax_stat_push(st, x.y);
        tiles::softmax_stat_push(st, x.z);
        tiles::softmax_stat_push(st, x.w);
      }
      for (int64_t v = split.tail_begin + threadIdx.x; v < V; v += blockDim.x)
        tiles::softmax_stat_push(st, dev::load1(row, v));
      st = dev::block_merge(st, shared);  // barrier: the row is fully read from here on
      loss = bad ? static_cast<double>(NAN)
                 : static_cast<double>(st.max) + log(st.sum) - static_cast<double>(target_logit);
      if (drow) {
        const float scale = bad ? NAN : static_cast<float>(dloss / st.sum);
        const float dl = static_cast<float>(dloss);
        for (int64_t i = threadIdx.x; i < split.vec_items; i += blockDim.x) {
          const float4 x = dev::load4(row, i);
          const int64_t v = 4 * i;
          dev::store4(drow, i,
                      make_float4(ce_grad(x.x, st.max, scale, v == target, dl),
                                  ce_grad(x.y, st.max, scale, v + 1 == target, dl),
                                  ce_grad(x.z, st.max, scale, v + 2 == target, dl),
                                  ce_grad(x.w, st.max, scale, v + 3 == target, dl)));
        }
        for (int64_t v = split.tail_begin + threadIdx.x; v < V; v += blockDim.x)
          dev::store1(drow, v, ce_grad(dev::load1(row, v), st.max, scale, v == target, dl));
      }
    }
    if (threadIdx.x == 0) {
      if (losses) losses[n] = static_cast<float>(loss);
      total += loss;
    }
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

template <class T>
void launch_crossentropy_t(cudaStream_t stream, float* losses, T* dlogits, const T* logits, const int32_t* targets,
                           int64_t N, int64_t V, double dloss, const ReductionScratch& scratch) {
  const int64_t blocks = tiles::row_partials_blocks(N, kReductionPartials);
  if (blocks > 0) {
    const bool vec = tiles::rows_vec4(V, tiles::vec4_aligned(logits) && tiles::vec4_aligned(dlogits));
    launch_kernel(crossentropy_kernel<T>, static_cast<unsigned>(blocks), tiles::crossentropy_threads(V), 0, stream,
                  losses, dlogits, logits, targets, N, V, dloss, vec, scratch.partials);
    check_launch("crossentropy_kernel");
  }
  launch_partials_total(stream, scratch.partials, blocks, scratch.result);
}

}  // namespace

void launch_crossentropy_forward_backward(cudaStream_t stream, float* losses, float* dlogits, const float* logits,
                                          const int32_t* targets, int64_t N, int64_t V, double dloss,
                                          const ReductionScratch& scratch) {
  launch_crossentropy_t(stream, losses, dlogits, logits, targets, N, V, dloss, scratch);
}

void launch_crossentropy_forward_backward(cudaStream_t stream, float* losses, bf16* dlogits, const bf16* logits,
                                          const int32_t* targets, int64_t N, int64_t V, double dloss,
                                          const ReductionScratch& scratch) {
  launch_crossentropy_t(stream, losses, dlogits, logits, targets, N, V, dloss, scratch);
}

}  // namespace hw::cuda
