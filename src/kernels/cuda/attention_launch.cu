// Enqueues the CUDA attention of a layer (attention_launch.hpp): checks and the parameter
// block come from attention_setup, the kernels from attention_forward.cu / attention_backward.cu.
// fp32 and bf16 activations share every step (the storage type is a template parameter).
#include <cuda_runtime.h>

#include <cstdint>

#include "headwise/core/error.hpp"
#include "kernels/cuda/attention_kernels.hpp"
#include "kernels/cuda/attention_launch.hpp"
#include "kernels/cuda/attention_params.hpp"
#include "kernels/cuda/attention_setup.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace hw::cuda {

namespace {
// The checks and parameter block both directions share; false when there is nothing to do.
template <class St>
bool prepare(cudaStream_t stream, AttnLaunchParamsT<St>& p, const attn::LayerPlan& plan,
             const attn::LayerLayout& layout, const attn::AttnDims& dims,
             const attn::LayerHeadParams<float>& params, float* workspace, bool backward) {
  check_attention_layer(plan, layout, dims, params, backward);
  if (dims.B == 0 || dims.T == 0) return false;
  check(workspace || attention_workspace_floats(plan, layout, dims) == 0,
        "attention (CUDA): the layer has linear heads but no workspace");
  fill_attention_params(p, plan, layout, dims, params, backward);
  p.workspace = workspace;
  // The linear heads' item ticket and chain counters start at zero in every launch.
  if (p.linear_sync_floats > 0)
    HW_CUDA_CHECK(cudaMemsetAsync(workspace, 0, sizeof(float) * static_cast<size_t>(p.linear_sync_floats), stream));
  return true;
}

template <class St>
void forward(cudaStream_t stream, const attn::LayerPlan& plan, const attn::LayerLayout& layout,
             const attn::AttnDims& dims, const attn::LayerHeadParams<float>& params, const St* qkv, St* out,
             float* row_stats, float* workspace) {
  AttnLaunchParamsT<St> p;
  if (!prepare(stream, p, plan, layout, dims, params, workspace, false)) return;
  p.qkv = qkv;
  p.out = out;
  p.row_stats = row_stats;
  // Pruned heads do no work; their row statistics are zero, as the CPU reference's.
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(dims.T);
  for (int h = 0; h < layout.n_head; ++h)
    if (plan[static_cast<size_t>(h)].kind == attn::HeadKind::Pruned)
      HW_CUDA_CHECK(cudaMemset2DAsync(row_stats + int64_t(h) * dims.T, row_bytes * static_cast<size_t>(layout.n_head),
                                      0, row_bytes, static_cast<size_t>(dims.B), stream));
  enqueue_attention_forward(stream, p);
}

template <class St>
void backward(cudaStream_t stream, const attn::LayerPlan& plan, const attn::LayerLayout& layout,
              const attn::AttnDims& dims, const attn::LayerHeadParams<float>& params, const St* qkv, const St* out,
              const float* row_stats, const St* dout, St* dqkv, float* workspace) {
  AttnLaunchParamsT<St> p;
  if (!prepare(stream, p, plan, layout, dims, params, workspace, true)) return;
  p.qkv = qkv;
  p.out_in = out;
  p.row_stats_in = row_stats;
  p.dout = dout;
  p.dqkv = dqkv;
  enqueue_attention_backward(stream, p);
}
}  // namespace

void launch_attention_forward(cudaStream_t stream, const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                              const attn::AttnDims& dims, const attn::LayerHeadParams<float>& params,
                              const float* qkv, float* out, float* row_stats, float* workspace) {
  forward(stream, plan, layout, dims, params, qkv, out, row_stats, workspace);
}

void launch_attention_backward(cudaStream_t stream, const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                               const attn::AttnDims& dims, const attn::LayerHeadParams<float>& params,
                               const float* qkv, const float* out, const float* row_stats, const float* dout,
                               float* dqkv, float* workspace) {
  backward(stream, plan, layout, dims, params, qkv, out, row_stats, dout, dqkv, workspace);
}

void launch_attention_forward(cudaStream_t stream, const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                              const attn::AttnDims& dims, const attn::LayerHeadParams<float>& params,
                              const bf16* qkv, bf16* out, float* row_stats, float* workspace) {
  forward(stream, plan, layout, dims, params, qkv, out, row_stats, workspace);
}

void launch_attention_backward(cudaStream_t stream, const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                               const attn::AttnDims& dims, const attn::LayerHeadParams<float>& params,
                               const bf16* qkv, const bf16* out, const float* row_stats, const bf16* dout,
                               bf16* dqkv, float* workspace) {
  backward(stream, plan, layout, dims, params, qkv, out, row_stats, dout, dqkv, workspace);
}

}  // namespace hw::cuda
