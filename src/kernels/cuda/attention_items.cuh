#pragma once
// What one block of the mixed-head attention launches does with its work item, and how much
// shared memory the launch needs: the bodies of attention_forward_kernel and
// attention_backward_kernel (attention_forward.cu, attention_backward.cu), kept apart from the
// __global__ wrappers so that the CPU block emulator (tests/emulated) runs exactly the code
// the GPU runs, in schedule order, with exactly the shared memory the launch asks for.
//
// Storage St: fp32 activations take the exact SIMT tiles (parity 1e-5 with the CPU); bf16
// activations take the tensor-core tiles of the softmax family and of static heads.
#include <type_traits>

#include "headwise/core/bf16.hpp"
#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/work_schedule.hpp"
#include "kernels/cuda/attention_linear.cuh"
#include "kernels/cuda/attention_mma_backward.cuh"
#include "kernels/cuda/attention_mma_forward.cuh"
#include "kernels/cuda/attention_params.hpp"
#include "kernels/cuda/attention_softmax_backward.cuh"
#include "kernels/cuda/attention_softmax_forward.cuh"
#include "kernels/cuda/attention_static.cuh"
#include "kernels/cuda/chain_sync.cuh"

namespace hw::cuda::attn_items {

template <class St>
constexpr bool kTensorCores = std::is_same_v<St, bf16>;

// The block's item: block i runs item i, except in a launch with linear heads, whose chained
// stages need the items handed out in ticket order (chain_sync.cuh).
template <class St>
__device__ __forceinline__ int32_t launch_item(const AttnLaunchParamsT<St>& p) {
  if (p.n_linear > 0) return chain::grab_item(linear_ticket(p));
  return static_cast<int32_t>(blockIdx.x);
}

// Forward item w: softmax-family query tile, static query tile or a linear head's stage.
template <int HD, class St>
__device__ void attention_forward_item(const AttnLaunchParamsT<St>& p, const tiles::WorkItem& w, float* smem) {
  switch (w.kind) {
    case tiles::kFwdSoftmax:
      if constexpr (kTensorCores<St>) attn_mma::softmax_forward_item<HD>(p, w.b, w.unit, w.tile, smem);
      else softmax_forward_item<HD, St>(p, w.b, w.unit, w.tile, smem);
      break;
    case tiles::kFwdStatic: {
      // Static heads save no row statistics; the CPU reference writes zeros. The tensor-core
      // choice for bf16 is made inside static_item_forward.
      const int64_t i = int64_t(w.tile) * tiles::kBr + threadIdx.x;
      if (threadIdx.x < tiles::kBr && i < p.T) row_stats_out(p, w.b, w.unit)[i] = 0.f;
      attn_dev::static_item_forward<HD, St>(p, w.b, w.unit, w.tile, smem);
      break;
    }
    case tiles::kFwdLinear: attn_dev::linear_item_forward<HD, St>(p, w.b, w.unit, w.tile, smem); break;
    default: break;
  }
}

// Backward item w of the main launch: dQ tile, dK/dV tile of a KV group, or a stage of one of a
// linear head's two chains.
template <int HD, class St>
__device__ void attention_backward_item(const AttnLaunchParamsT<St>& p, const tiles::WorkItem& w, float* smem) {
  switch (w.kind) {
    case tiles::kBwdDq:
      if constexpr (kTensorCores<St>) attn_mma::dq_item<HD>(p, w.b, w.unit, w.tile, smem);
      else dq_item<HD, St>(p, w.b, w.unit, w.tile, smem);
      break;
    case tiles::kBwdDkv:
      if constexpr (kTensorCores<St>) attn_mma::dkv_item<HD>(p, w.b, w.unit, w.tile, smem);
      else dkv_item<HD, St>(p, w.b, w.unit, w.tile, smem);
      break;
    case tiles::kBwdLinearDq: attn_dev::linear_item_backward_dq<HD, St>(p, w.b, w.unit, w.tile, smem); break;
    case tiles::kBwdLinearDkv: attn_dev::linear_item_backward_dkv<HD, St>(p, w.b, w.unit, w.tile, smem); break;
    default: break;
  }
}

// Dynamic shared memory of the forward launch: the largest need over the schedule's segments.
template <int HD, class St>
int attention_forward_smem_bytes(const tiles::WorkSchedule& s) {
  int bytes = 0;
  for (int g = 0; g < s.n_segments; ++g) {
    int need = 0;
    switch (s.seg[g].kind) {
      case tiles::kFwdSoftmax:
        need = kTensorCores<St> ? attn_mma::forward_smem_bytes<HD>()
                                : softmax_forward_smem_floats<HD>() * int(sizeof(float));
        break;
      case tiles::kFwdStatic:
        need = kTensorCores<St> ? attn_mma::static_forward_smem_bytes<HD>() : attn_dev::static_forward_smem_bytes<HD>();
        break;
      case tiles::kFwdLinear: need = attn_dev::linear_forward_smem_bytes<HD, St>(); break;
      default: break;
    }
    bytes = need > bytes ? need : bytes;
  }
  return bytes;
}

// Dynamic shared memory of the backward's main launch.
template <int HD, class St>
int attention_backward_smem_bytes(const AttnLaunchParamsT<St>& p) {
  bool any_static = false;
  for (int h = 0; h < p.n_head; ++h) any_static = any_static || p.heads[h].kind == kStatic;
  const tiles::WorkSchedule& s = p.schedule;
  const int softmax_need = kTensorCores<St> ? attn_mma::backward_smem_bytes<HD>()
                                            : softmax_backward_smem_floats<HD>() * int(sizeof(float));
  int bytes = 0;
  for (int g = 0; g < s.n_segments; ++g) {
    int need = 0;
    switch (s.seg[g].kind) {
      case tiles::kBwdDq: need = softmax_need; break;
      case tiles::kBwdDkv: {
        need = softmax_need;
        // dv_acc, then the static tiles' scratch
        const int static_scratch =
            kTensorCores<St> ? attn_mma::static_tiles_bytes<HD>() : attn_dev::static_backward_smem_bytes<HD>();
        const int static_need = 64 * HD * int(sizeof(float)) + static_scratch;
        if (any_static && static_need > need) need = static_need;
        break;
      }
      case tiles::kBwdLinearDq:
      case tiles::kBwdLinearDkv: need = attn_dev::linear_backward_smem_bytes<HD, St>(); break;
      default: break;
    }
    bytes = need > bytes ? need : bytes;
  }
  return bytes;
}

}  // namespace hw::cuda::attn_items
