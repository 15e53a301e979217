#pragma once
// Enqueue functions of the attention kernels (attention_forward.cu, attention_backward.cu),
// called by the launcher (attention_launch.cu) once it has built the parameter block.
#include <cuda_runtime.h>

#include "kernels/cuda/attention_params.hpp"

namespace hw::cuda {

// One launch: every item of p.schedule (softmax family, static, linear). p.head_dim is 64 or 128.
// St: float or hw::bf16 (instantiated in attention_forward.cu).
template <class St>
void enqueue_attention_forward(cudaStream_t stream, const AttnLaunchParamsT<St>& p);

// One main launch over p.schedule (dQ items, dK/dV items, linear heads), then, when the layer
// has linear heads, a fixed-order combine of their dK/dV partials into dQKV and the dL
// reduction over the batch. St: float or hw::bf16 (instantiated in attention_backward.cu).
template <class St>
void enqueue_attention_backward(cudaStream_t stream, const AttnLaunchParamsT<St>& p);

}  // namespace hw::cuda
