// Forward of a whole layer in one launch: each block runs one item of the schedule (block i
// item i, or ticket order when the layer has linear heads: attention_items.cuh), whatever its
// head kind (the item bodies: attention_items.cuh). Softmax-family items follow
// FlashAttention-2: a query tile stays in shared memory while the block walks only the key
// tiles that intersect the head's key set (tiles outside a window are never loaded), with an
// online softmax; O is written once. Static and linear items run the device code in
// attention_static.cuh and attention_linear.cuh.
// Instantiated for fp32 and bf16 activations (tiles hold fp32 either way).
#include <cuda_runtime.h>

#include <string>

#include "headwise/core/error.hpp"
#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/work_schedule.hpp"
#include "kernels/cuda/attention_items.cuh"
#include "kernels/cuda/attention_kernels.hpp"
#include "kernels/cuda/attention_params.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/dynamic_smem.cuh"
#include "kernels/cuda/launch_kernel.cuh"

namespace hw::cuda {
namespace {

using tiles::kAttnThreads;

template <int HD, class St>
__global__ void __launch_bounds__(tiles::kAttnThreads)
    attention_forward_kernel(const __grid_constant__ AttnLaunchParamsT<St> p) {
  attn_items::attention_forward_item<HD, St>(p, tiles::decode_item(p.schedule, attn_items::launch_item(p)),
                                             dynamic_smem_floats());
}

template <int HD, class St>
void enqueue_forward(cudaStream_t stream, const AttnLaunchParamsT<St>& p) {
  const int smem = attn_items::attention_forward_smem_bytes<HD, St>(p.schedule);
  HW_CUDA_CHECK(
      cudaFuncSetAttribute(attention_forward_kernel<HD, St>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  launch_kernel(attention_forward_kernel<HD, St>, static_cast<unsigned>(p.schedule.n_items), tiles::kAttnThreads, smem,
                stream, p);
  check_launch("attention_forward_kernel");
}

}  // namespace

static_assert(sizeof(AttnLaunchParams) <= 32764, "kernel parameter block over CUDA's 32 KiB limit");
static_assert(sizeof(AttnLaunchParamsBf16) <= 32764, "kernel parameter block over CUDA's 32 KiB limit");

template <class St>
void enqueue_attention_forward(cudaStream_t stream, const AttnLaunchParamsT<St>& p) {
  if (p.schedule.n_items == 0) return;
  switch (p.head_dim) {
    case 64: enqueue_forward<64>(stream, p); break;
    case 128: enqueue_forward<128>(stream, p); break;
    default: fail("attention (CUDA): head_dim " + std::to_string(p.head_dim) + " is not supported (64 or 128)");
  }
}

template void enqueue_attention_forward<float>(cudaStream_t, const AttnLaunchParams&);
template void enqueue_attention_forward<bf16>(cudaStream_t, const AttnLaunchParamsBf16&);

}  // namespace hw::cuda
