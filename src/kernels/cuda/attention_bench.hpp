#pragma once
// Timing of one layer's CUDA attention (forward, backward) under a head plan, for the GPU
// check script and `headwise bench`: synthetic inputs, CUDA events, the mean over `reps`
// calls after one warm-up. Allocates its own buffers (not for use inside a training step).
#include <cstdint>

#include "headwise/attention/head_plan.hpp"

namespace hw::cuda {

struct AttentionTiming {
  double forward_ms = 0, backward_ms = 0;
};

// bf16: time the mixed-precision overloads (bf16 qkv/out/dout/dqkv) instead of fp32.
AttentionTiming time_attention_ms(const attn::LayerPlan& plan, int n_kv_head, int head_dim, int64_t B, int64_t T,
                                  int reps = 10, bool bf16 = false);

}  // namespace hw::cuda
