// Token (+ learned position) embeddings: out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:] (wpe may be
// null: RoPE models). Elementwise over the output, 4-element vectors when rows allow it; float
// or bf16 storage (the sum in fp32, rounded once).
#include "headwise/kernels/tiles/ops_grid.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launch_kernel.cuh"
#include "kernels/cuda/launch_ops.hpp"
#include "kernels/cuda/ops_device.cuh"

namespace hw::cuda {

namespace {

// Items are 4-element groups (vec) or single elements of the [B*T, C] output; W = items per row.
template <class S, bool kVec>  // S: the storage type (float or bf16)
__global__ void encoder_forward_kernel(S* out, const int32_t* tokens, const S* wte, const S* wpe, int64_t items,
                                       int64_t W, int64_t T) {
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
      dev::store1(out, i, wpe ? dev::load1(wte, e) + dev::load1(wpe, (bt % T) * W + j) : dev::load1(wte, e));
    }
  }
}

template <class S>
void launch_encoder_forward_t(cudaStream_t stream, S* out, const int32_t* tokens, const S* wte, const S* wpe,
                              int64_t B, int64_t T, int64_t C) {
  const int64_t N = B * T;
  if (N <= 0 || C <= 0) return;
  const bool vec =
      tiles::rows_vec4(C, tiles::vec4_aligned(out) && tiles::vec4_aligned(wte) && tiles::vec4_aligned(wpe));
  const int64_t W = vec ? C / 4 : C;
  const int64_t blocks = tiles::stride_grid_blocks(N * W, tiles::kOpThreads, tiles::kOpMaxBlocks);
  if (vec)
    launch_kernel(encoder_forward_kernel<S, true>, static_cast<unsigned>(blocks), tiles::kOpThreads, 0, stream, out,
                  tokens, wte, wpe, N * W, W, T);
  else
    launch_kernel(encoder_forward_kernel<S, false>, static_cast<unsigned>(blocks), tiles::kOpThreads, 0, stream, out,
                  tokens, wte, wpe, N * W, W, T);
  check_launch("encoder_forward_kernel");
}

}  // namespace

void launch_encoder_forward(cudaStream_t stream, float* out, const int32_t* tokens, const float* wte,
                            const float* wpe, int64_t B, int64_t T, int64_t C) {
  launch_encoder_forward_t(stream, out, tokens, wte, wpe, B, T, C);
}

void launch_encoder_forward(cudaStream_t stream, bf16* out, const int32_t* tokens, const bf16* wte, const bf16* wpe,
                            int64_t B, int64_t T, int64_t C) {
  launch_encoder_forward_t(stream, out, tokens, wte, wpe, B, T, C);
}

}  // namespace hw::cuda
