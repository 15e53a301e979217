// The emulated attention launches (emulated_attention.hpp). The device code is the kernels'
// own (attention_items.cuh and what it includes), compiled here as host C++ against
// shim/cuda_runtime.h; only the launch loop is this file's.
#include "emulated/emulated_attention.hpp"

#include <cstdint>
#include <string>

#include "headwise/core/bf16.hpp"
#include "headwise/core/error.hpp"
#include "kernels/cuda/attention_items.cuh"
#include "kernels/cuda/attention_setup.hpp"

namespace hw_emu {
namespace {

using hw::cuda::AttnLaunchParamsT;
namespace tiles = hw::tiles;
namespace items = hw::cuda::attn_items;

// Parameter blocks are large (the schedule is inline); one per storage type, reused.
template <class St>
AttnLaunchParamsT<St>& params_block() {
  static AttnLaunchParamsT<St> p;
  p = AttnLaunchParamsT<St>{};
  return p;
}

template <class St>
bool prepare(AttnLaunchParamsT<St>& p, const hw::attn::LayerPlan& plan, const hw::attn::LayerLayout& layout,
             const hw::attn::AttnDims& dims, const hw::attn::LayerHeadParams<float>& params, float* workspace,
             bool backward) {
  hw::cuda::check_attention_layer(plan, layout, dims, params, backward);
  if (dims.B == 0 || dims.T == 0) return false;
  hw::cuda::fill_attention_params(p, plan, layout, dims, params, backward);
  p.workspace = workspace;
  return true;
}

template <int HD, class St>
void forward_blocks(BlockEmulator& emu, const AttnLaunchParamsT<St>& p) {
  const int smem = items::attention_forward_smem_bytes<HD, St>(p.schedule);
  for (int32_t i = 0; i < p.schedule.n_items; ++i)
    emu.run(static_cast<unsigned>(i), 0, 0, smem, [&](float* sm) {
      items::attention_forward_item<HD, St>(p, tiles::decode_item(p.schedule, static_cast<int32_t>(blockIdx.x)), sm);
    });
}

template <int HD, class St>
void backward_blocks(BlockEmulator& emu, const AttnLaunchParamsT<St>& p) {
  const int smem = items::attention_backward_smem_bytes<HD, St>(p);
  for (int32_t i = 0; i < p.schedule.n_items; ++i)
    emu.run(static_cast<unsigned>(i), 0, 0, smem, [&](float* sm) {
      items::attention_backward_item<HD, St>(p, tiles::decode_item(p.schedule, static_cast<int32_t>(blockIdx.x)), sm);
    });
}

void unsupported(int head_dim) {
  hw::fail("attention (emulated): head_dim " + std::to_string(head_dim) + " is not supported (64 or 128)");
}

}  // namespace

template <class St>
void emulate_attention_forward(BlockEmulator& emu, const hw::attn::LayerPlan& plan, const hw::attn::LayerLayout& layout,
                               const hw::attn::AttnDims& dims, const hw::attn::LayerHeadParams<float>& params,
                               const St* qkv, St* out, float* row_stats, float* workspace) {
  AttnLaunchParamsT<St>& p = params_block<St>();
  if (!prepare(p, plan, layout, dims, params, workspace, false)) return;
  p.qkv = qkv;
  p.out = out;
  p.row_stats = row_stats;
  // Pruned heads do no work; the launcher zeroes their row statistics (cudaMemset2DAsync).
  for (int h = 0; h < layout.n_head; ++h)
    if (plan[static_cast<size_t>(h)].kind == hw::attn::HeadKind::Pruned)
      for (int64_t b = 0; b < dims.B; ++b)
        for (int64_t t = 0; t < dims.T; ++t) row_stats[(b * layout.n_head + h) * dims.T + t] = 0.f;
  if (p.schedule.n_items == 0) return;
  switch (p.head_dim) {
    case 64: forward_blocks<64>(emu, p); break;
    case 128: forward_blocks<128>(emu, p); break;
    default: unsupported(p.head_dim);
  }
}

template <class St>
void emulate_attention_backward(BlockEmulator& emu, const hw::attn::LayerPlan& plan,
                                const hw::attn::LayerLayout& layout, const hw::attn::AttnDims& dims,
                                const hw::attn::LayerHeadParams<float>& params, const St* qkv, const St* out,
                                const float* row_stats, const St* dout, St* dqkv, float* workspace) {
  AttnLaunchParamsT<St>& p = params_block<St>();
  if (!prepare(p, plan, layout, dims, params, workspace, true)) return;
  p.qkv = qkv;
  p.out_in = out;
  p.row_stats_in = row_stats;
  p.dout = dout;
  p.dqkv = dqkv;
  if (p.schedule.n_items == 0) return;
  switch (p.head_dim) {
    case 64: backward_blocks<64>(emu, p); break;
    case 128: backward_blocks<128>(emu, p); break;
    default: unsupported(p.head_dim);
  }
  if (p.n_linear == 0) return;
  // The two reductions after the main launch, grids as in enqueue_attention_backward.
  const auto gx = static_cast<unsigned>(tiles::ceil_div(int64_t(p.T) * p.head_dim, tiles::kAttnThreads));
  for (unsigned z = 0; z < static_cast<unsigned>(p.B); ++z)
    for (unsigned y = 0; y < static_cast<unsigned>(p.n_kv_head); ++y)
      for (unsigned x = 0; x < gx; ++x)
        emu.run(x, y, z, 0, [&](float*) {
          items::combine_linear_dkv_block(p, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
                                          static_cast<int>(blockIdx.z));
        });
  for (unsigned h = 0; h < static_cast<unsigned>(p.n_head); ++h)
    emu.run(h, 0, 0, 0, [&](float*) { items::linear_dL_block(p, static_cast<int>(blockIdx.x)); });
}

#define HW_EMU_INSTANTIATE(St)                                                                                     \
  template void emulate_attention_forward<St>(BlockEmulator&, const hw::attn::LayerPlan&,                         \
                                              const hw::attn::LayerLayout&, const hw::attn::AttnDims&,             \
                                              const hw::attn::LayerHeadParams<float>&, const St*, St*, float*,     \
                                              float*);                                                             \
  template void emulate_attention_backward<St>(BlockEmulator&, const hw::attn::LayerPlan&,                        \
                                               const hw::attn::LayerLayout&, const hw::attn::AttnDims&,            \
                                               const hw::attn::LayerHeadParams<float>&, const St*, const St*,      \
                                               const float*, const St*, St*, float*);
HW_EMU_INSTANTIATE(float)
HW_EMU_INSTANTIATE(hw::bf16)

}  // namespace hw_emu
