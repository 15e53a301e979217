// Token (+ learned position) embeddings: out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:] (wpe may be
// null: RoPE models). Elementwise over the output, float4 when rows allow it.
#include "headwise/kernels/tiles/ops_grid.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launch_ops.hpp"
#include "kernels/cuda/ops_device.cuh"

namespace hw::cuda {

namespace {

// Items are float4 groups (vec) or single elements of the [B*T, C] output; W = items per row.
template <bool kVec>
__global__ void encoder_forward_kernel(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                                       int64_t items, int64_t W, int64_t T) {
  const int64_t stride = dev::grid_threads();
  for (int64_t i = dev::global_thread(); i < items; i += stride) {
    const int64_t bt = i / W, j = i - bt * W;
    const int64_t e = static_cast<int64_t>(tokens[bt]) * W + j;
    if constexpr (kVec) {
      float4 y = dev::load4(wte, e);
      if (wpe) {
        const float4 p = dev::load4(wpe, (bt % T) * W + j);
        y.x += p.x, y.y += p.y, y.z += p.z, y.w += p.w;
      }
      dev::store4(out, i, y);
    } else {
      out[i] = wpe ? wte[e] + wpe[(bt % T) * W + j] : wte[e];
    }
  }
}

}  // namespace

void launch_encoder_forward(cudaStream_t stream, float* out, const int32_t* tokens, const float* wte,
                            const float* wpe, int64_t B, int64_t T, int64_t C) {
  const int64_t N = B * T;
  if (N <= 0 || C <= 0) return;
  const bool vec = tiles::rows_vec4(C, tiles::aligned16(out) && tiles::aligned16(wte) && tiles::aligned16(wpe));
  const int64_t W = vec ? C / 4 : C;
  const int64_t blocks = tiles::stride_grid_blocks(N * W, tiles::kOpThreads, tiles::kOpMaxBlocks);
  if (vec)
    encoder_forward_kernel<true><<<static_cast<unsigned>(blocks), tiles::kOpThreads, 0, stream>>>(out, tokens, wte,
                                                                                                 wpe, N * W, W, T);
  else
    encoder_forward_kernel<false><<<static_cast<unsigned>(blocks), tiles::kOpThreads, 0, stream>>>(
        out, tokens, wte, wpe, N * W, W, T);
  check_launch("encoder_forward_kernel");
}

}  // namespace hw::cuda
