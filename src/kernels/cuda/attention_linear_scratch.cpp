// Global scratch of one linear-head item (b, head) of the CUDA attention
// (attention_linear.cuh): the prefix/suffix state [NF][D+1], the query-side feature weights
// [NF] and the per-feature totals for dL [NF]. It does not grow with T (the state is O(D^3)).
#include <cstdint>

#include "headwise/kernels/tiles/linear_chunk.hpp"
#include "kernels/cuda/attention_params.hpp"

namespace hw::cuda::attn_dev {

int64_t linear_scratch_floats(int head_dim, int64_t /*T*/) {
  const int64_t nf = tiles::linear_feature_slots(head_dim);
  return (nf * (head_dim + 1) + 2 * nf + 31) / 32 * 32;
}

}  // namespace hw::cuda::attn_dev
