#pragma once
// Host side of the CUDA attention, without CUDA: checks a layer's plan and parameters against
// what the kernels support, and fills the kernel parameter block (head descriptors, linear
// workspace slots, the cached longest-first work schedule). Plain C++, so it also runs where
// the kernels are emulated or merely inspected.
#include <cstdint>

#include "headwise/attention/attention.hpp"
#include "headwise/attention/head_plan.hpp"
#include "kernels/cuda/attention_params.hpp"

namespace hw::cuda {

// Throws hw::Error naming the culprit when the layer cannot run on the CUDA kernels (see
// attention_launch.hpp for what is refused). `backward` also refuses static alpha/rho gradients.
void check_attention_layer(const attn::LayerPlan& plan, const attn::LayerLayout& layout, const attn::AttnDims& dims,
                           const attn::LayerHeadParams<float>& params, bool backward);

// Everything but the activation pointers and the workspace (the caller sets those). St: float
// or hw::bf16 (bf16 also assigns the fp32 staging slots of KV groups mixing linear heads with others).
template <class St>
void fill_attention_params(AttnLaunchParamsT<St>& p, const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                           const attn::AttnDims& dims, const attn::LayerHeadParams<float>& params, bool backward);

// Device scratch floats of one layer (the linear heads' slots, then the bf16 staging of KV
// groups mixing linear heads with others); 0 without linear heads.
int64_t attention_workspace_floats(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                   const attn::AttnDims& dims);

}  // namespace hw::cuda
