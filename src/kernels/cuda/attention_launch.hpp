#pragma once
// The CUDA attention of a whole layer under its head plan (the GPU counterpart of
// attn::layer_forward / layer_backward, same arguments and meaning, all pointers on the
// device): one forward launch and one main backward launch per layer handle every head kind,
// with work proportional to each head's coverage, scheduled longest item first. Deterministic
// (no float atomics). Storage fp32 or bf16 (activations), accumulation fp32.
//
// Differences from the CPU reference, each refused or documented rather than silent:
//   - head_dim must be 64 or 128 (template instantiations); other sizes throw hw::Error
//     naming head_dim. At most 64 query heads.
//   - static heads compute no alpha/rho gradients (training never asks for them): non-null
//     dalpha/drho throw hw::Error in the backward.
//   - linear heads' denominators are not checked after the forward (that would need a
//     device-to-host synchronisation); a non-positive one shows up as inf/NaN downstream.
//   - linear parameters (groups) live on the device and are not validated on the host.
#include <cuda_runtime.h>

#include <cstdint>

#include "headwise/attention/attention.hpp"
#include "headwise/attention/head_plan.hpp"
#include "headwise/core/bf16.hpp"

namespace hw::cuda {

// Device scratch (floats) one layer's forward and backward need: per (sequence, linear head)
// a slot for its dK/dV contributions, its dL partial and its chunk state, and per (sequence, KV
// group mixing linear heads with softmax-family or static ones) fp32 dK/dV staging (used by
// the bf16 backward, which thus rounds each dK/dV element once). 0 without linear heads.
int64_t attention_workspace_floats(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                   const attn::AttnDims& dims);

// out [B*T, out_width] and row_stats [B, n_head, T] are overwritten (zeros for static and
// pruned heads' statistics). Enqueued on `stream`; returns before the work runs.
void launch_attention_forward(cudaStream_t stream, const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                              const attn::AttnDims& dims, const attn::LayerHeadParams<float>& params,
                              const float* qkv, float* out, float* row_stats, float* workspace);

// dqkv [B*T, qkv_width] is OVERWRITTEN (every column the layout has); linear heads' dL
// accumulates (summed over the batch in a fixed order).
void launch_attention_backward(cudaStream_t stream, const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                               const attn::AttnDims& dims, const attn::LayerHeadParams<float>& params,
                               const float* qkv, const float* out, const float* row_stats, const float* dout,
                               float* dqkv, float* workspace);

// Mixed precision: bf16 qkv, out, dout and dqkv; fp32 row statistics, head parameters,
// workspace and every accumulation. Same semantics; every bf16 output element is rounded to
// nearest even once. Same kernels and schedule as fp32 (templated on storage), except that the
// softmax-family tile products run on tensor cores (mma.sync bf16, fp32 accumulators; sm_80+)
// with P and dS rounded to bf16 as operands, as in FlashAttention-2 (attention_mma_*.cuh).
void launch_attention_forward(cudaStream_t stream, const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                              const attn::AttnDims& dims, const attn::LayerHeadParams<float>& params,
                              const bf16* qkv, bf16* out, float* row_stats, float* workspace);
void launch_attention_backward(cudaStream_t stream, const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                               const attn::AttnDims& dims, const attn::LayerHeadParams<float>& params,
                               const bf16* qkv, const bf16* out, const float* row_stats, const bf16* dout,
                               bf16* dqkv, float* workspace);

}  // namespace hw::cuda
