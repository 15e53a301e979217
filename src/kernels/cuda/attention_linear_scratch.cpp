// Global scratch of one linear head (b, head) of the CUDA attention (attention_linear.cuh):
// the partial sums its chain of stages passes along, [T][D+1], and the per-feature totals for
// dL [NF]. The prefix/suffix state itself stays in each stage's shared memory.
#include <cstdint>

#include "headwise/kernels/tiles/linear_chunk.hpp"
#include "kernels/cuda/attention_params.hpp"

namespace hw::cuda::attn_dev {

int64_t linear_scratch_floats(int head_dim, int64_t T) {
  const int64_t nf = tiles::linear_feature_slots(head_dim);
  return (T * (head_dim + 1) + nf + 31) / 32 * 32;
}

}  // namespace hw::cuda::attn_dev
