// Backward of a whole layer in one main launch, deterministic without float atomics: every
// output element has exactly one owner item that sums its terms in a fixed order.
//   kBwdDq  (b, head, query tile): rebuilds P from the saved log-sum-exp over the head's key
//           tiles and accumulates dQ in registers; writes the head's dQ rows.
//   kBwdDkv (b, KV group, key tile): owns the group's dK/dV rows of that key tile. Adds, in
//           this order, the static heads' dV (static_kv_tile_backward, into shared
//           memory), then for each softmax-family head of the group (head order) the query
//           tiles that see the key tile: dV += P^T dO, dK += dS^T Q, in registers.
//   kBwdLinearDq / kBwdLinearDkv (b, head, stage): one stage of a linear head's two chains
//           (attention_linear.cuh); the dQ chain's last stage writes dQ and dA, the dK/dV
//           chain leaves the head's dK/dV contributions in its workspace slot.
// Two small kernels follow when the layer has linear heads: the combine adds the linear heads'
// dK/dV partials to dQKV in head order (or writes them where the group has no other head),
// and the dL reduction sums dA over the batch in b order and adds dL += 2 A L_lower, as the
// CPU reference. Determinism costs recomputing P in both item kinds (as FlashAttention-2)
// plus delta = rowsum(dO * O) per (key tile, query tile) visit, and one extra read of the
// linear heads' dK/dV. With bf16 activations a KV group that mixes linear heads with
// others has its kBwdDkv item leave fp32 dK/dV in workspace staging, so the combine rounds
// the whole sum once. Instantiated for fp32 and bf16 activations.
#include <cuda_runtime.h>

#include <string>

#include "headwise/core/error.hpp"
#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/work_schedule.hpp"
#include "kernels/cuda/attention_items.cuh"
#include "kernels/cuda/attention_kernels.hpp"
#include "kernels/cuda/attention_params.hpp"
#include "kernels/cuda/attention_softmax_backward.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/dynamic_smem.cuh"
#include "kernels/cuda/launch_kernel.cuh"

namespace hw::cuda {
namespace {

using tiles::kAttnThreads;

template <int HD, class St>
__global__ void __launch_bounds__(tiles::kAttnThreads)
    attention_backward_kernel(const __grid_constant__ AttnLaunchParamsT<St> p) {
  attn_items::attention_backward_item<HD, St>(p, tiles::decode_item(p.schedule, attn_items::launch_item(p)),
                                             dynamic_smem_floats());
}

// The post-launch reductions of linear heads (bodies in attention_softmax_backward.cuh).
template <class St>
__global__ void __launch_bounds__(tiles::kAttnThreads)
    combine_linear_dkv_kernel(const __grid_constant__ AttnLaunchParamsT<St> p) {
  attn_items::combine_linear_dkv_block(p, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
                                       static_cast<int>(blockIdx.z));
}

template <class St>
__global__ void __launch_bounds__(tiles::kAttnThreads)
    linear_dL_kernel(const __grid_constant__ AttnLaunchParamsT<St> p) {
  attn_items::linear_dL_block(p, static_cast<int>(blockIdx.x));
}

template <int HD, class St>
void enqueue_main(cudaStream_t stream, const AttnLaunchParamsT<St>& p) {
  const int smem = attn_items::attention_backward_smem_bytes<HD, St>(p);
  HW_CUDA_CHECK(
      cudaFuncSetAttribute(attention_backward_kernel<HD, St>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  launch_kernel(attention_backward_kernel<HD, St>, static_cast<unsigned>(p.schedule.n_items), tiles::kAttnThreads, smem,
                stream, p);
  check_launch("attention_backward_kernel");
}

}  // namespace

template <class St>
void enqueue_attention_backward(cudaStream_t stream, const AttnLaunchParamsT<St>& p) {
  if (p.schedule.n_items == 0) return;
  switch (p.head_dim) {
    case 64: enqueue_main<64>(stream, p); break;
    case 128: enqueue_main<128>(stream, p); break;
    default: fail("attention (CUDA): head_dim " + std::to_string(p.head_dim) + " is not supported (64 or 128)");
  }
  if (p.n_linear == 0) return;
  const dim3 grid(static_cast<unsigned>(tiles::ceil_div(int64_t(p.T) * p.head_dim, kAttnThreads)),
                  static_cast<unsigned>(p.n_kv_head), static_cast<unsigned>(p.B));
  launch_kernel(combine_linear_dkv_kernel<St>, grid, kAttnThreads, 0, stream, p);
  check_launch("combine_linear_dkv_kernel");
  launch_kernel(linear_dL_kernel<St>, static_cast<unsigned>(p.n_head), kAttnThreads, 0, stream, p);
  check_launch("linear_dL_kernel");
}

template void enqueue_attention_backward<float>(cudaStream_t, const AttnLaunchParams&);
template void enqueue_attention_backward<bf16>(cudaStream_t, const AttnLaunchParamsBf16&);

}  // namespace hw::cuda
