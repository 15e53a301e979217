#pragma once
// The CUDA attention of one layer run by the block emulator: the same host setup as
// attention_launch.cu (checks, parameter block, schedule), then every block of the forward
// launch, or of the backward's main launch and its two linear-head reductions, one after the
// other in block order, with the shared memory each launch requests. St: float or hw::bf16.
#include "emulated/block_emulator.hpp"
#include "headwise/attention/attention.hpp"
#include "headwise/attention/head_plan.hpp"

namespace hw_emu {

template <class St>
void emulate_attention_forward(BlockEmulator& emu, const hw::attn::LayerPlan& plan, const hw::attn::LayerLayout& layout,
                               const hw::attn::AttnDims& dims, const hw::attn::LayerHeadParams<float>& params,
                               const St* qkv, St* out, float* row_stats, float* workspace);

template <class St>
void emulate_attention_backward(BlockEmulator& emu, const hw::attn::LayerPlan& plan,
                                const hw::attn::LayerLayout& layout, const hw::attn::AttnDims& dims,
                                const hw::attn::LayerHeadParams<float>& params, const St* qkv, const St* out,
                                const float* row_stats, const St* dout, St* dqkv, float* workspace);

}  // namespace hw_emu
