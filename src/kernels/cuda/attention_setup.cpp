// Host side of the CUDA attention (attention_setup.hpp): checks, head descriptors, workspace
// slots and schedules. Schedules are cached per (plan, sizes), so a training step builds none
// after the first.
#include "kernels/cuda/attention_setup.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "headwise/core/bf16.hpp"
#include "headwise/core/device_memory.hpp"
#include "headwise/core/error.hpp"
#include "headwise/kernels/tiles/attention_schedule.hpp"

namespace hw::cuda {
namespace {


using attn::HeadKind;

std::string head_name(int h) { return "attention (CUDA): head " + std::to_string(h); }

// The kernels index L's rows with groups[d]: the values are checked (attn::check_linear_groups)
// on the host copy the first time a (device pointer, G, head_dim) is seen. Values reach the
// device only through the model, which checks them too; this keeps a blocking copy out of every
// step after the first.
void check_groups_once(const int32_t* groups, int head_dim, int n_groups, const std::string& who) {
  static std::mutex mutex;
  static std::set<std::tuple<const int32_t*, int, int>> checked;
  const std::lock_guard<std::mutex> lock(mutex);
  if (checked.count({groups, head_dim, n_groups})) return;
  std::vector<int32_t> host(static_cast<size_t>(head_dim));
  device::copy_to_host(host.data(), groups, host.size() * sizeof(int32_t));
  attn::check_linear_groups(host.data(), head_dim, n_groups, who);
  checked.insert({groups, head_dim, n_groups});
}

void check_shape(const attn::LayerPlan& plan, const attn::LayerLayout& layout, const attn::AttnDims& dims) {
  check(plan.size() == static_cast<size_t>(layout.n_head), "attention (CUDA): plan has " +
                                                                   std::to_string(plan.size()) + " heads, layout has " +
                                                                   std::to_string(layout.n_head));
  check(layout.n_head >= 1 && layout.n_head <= kMaxHeads,
        "attention (CUDA): n_head " + std::to_string(layout.n_head) + " outside 1.." + std::to_string(kMaxHeads));
  check(layout.n_kv_head >= 1 && layout.n_head % layout.n_kv_head == 0,
        "attention (CUDA): n_kv_head " + std::to_string(layout.n_kv_head) + " does not divide n_head");
  check(layout.head_dim == 64 || layout.head_dim == 128,
        "attention (CUDA): head_dim " + std::to_string(layout.head_dim) + " is not supported (64 or 128)");
  check(dims.B >= 0 && dims.T >= 0, "attention (CUDA): negative batch or sequence length");
  // Item indices and per-sequence row counts are 32-bit on the device.
  check(dims.T <= std::numeric_limits<int32_t>::max() / 2 && dims.B <= std::numeric_limits<int32_t>::max() / 2,
        "attention (CUDA): batch " + std::to_string(dims.B) + " x sequence " + std::to_string(dims.T) + " too large");
  for (int h = 0; h < layout.n_head; ++h) {
    const attn::HeadSpec& s = plan[static_cast<size_t>(h)];
    if (const std::string why = s.invalid_reason(); !why.empty()) fail(head_name(h) + ": " + why);
    // Checked when the model sizes its workspace (startup), not at the first step.
    if (s.baseline_linear())
      fail(head_name(h) + " has kind '" + s.str() +
           "', which has no CUDA kernel (the CPU backend runs it; no fallback)");
  }
}

void check_params(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                  const attn::LayerHeadParams<float>& params, bool backward) {
  for (int h = 0; h < layout.n_head; ++h) {
    const attn::HeadSpec& s = plan[static_cast<size_t>(h)];
    if (s.kind == HeadKind::Static) {
      check(params.statics.size() > static_cast<size_t>(h), head_name(h) + " is static but has no parameters");
      const auto& p = params.statics[static_cast<size_t>(h)];
      check(p.alpha && p.rho && p.log_z, head_name(h) + " is static but alpha, rho or log_z is null");
      if (backward)
        check(!p.dalpha && !p.drho, head_name(h) + " asks for static alpha/rho gradients, which CUDA does not compute");
    }
    if (s.kind == HeadKind::Linear) {
      check(params.linears.size() > static_cast<size_t>(h), head_name(h) + " is linear but has no parameters");
      const auto& p = params.linears[static_cast<size_t>(h)];
      check(p.L && p.groups, head_name(h) + " is linear but L or groups is null");
      check(p.n_groups >= 1 && p.n_groups <= layout.head_dim,
            head_name(h) + " has n_groups " + std::to_string(p.n_groups) + " (must be 1..head_dim)");
      check_groups_once(p.groups, layout.head_dim, p.n_groups, head_name(h));
      check(params.linear_eps > 0 && std::isfinite(params.linear_eps),
            "attention (CUDA): linear_eps must be positive and finite");
    }
  }
}

int count_linear(const attn::LayerPlan& plan) {
  int n = 0;
  for (const attn::HeadSpec& s : plan) n += s.kind == HeadKind::Linear;
  return n;
}

// KV groups whose dK/dV sum linear heads' partials with a kBwdDkv item's result (softmax-family
// or static heads in the same group): with bf16 storage they get an fp32 staging slot.
bool group_is_mixed(const attn::LayerPlan& plan, const attn::LayerLayout& layout, int g) {
  const int per_group = layout.n_head / layout.n_kv_head;
  bool linear = false, other = false;
  for (int h = g * per_group; h < (g + 1) * per_group; ++h) {
    const HeadKind k = plan[static_cast<size_t>(h)].kind;
    linear = linear || k == HeadKind::Linear;
    other = other || (k != HeadKind::Linear && k != HeadKind::Pruned);
  }
  return linear && other;
}

int count_mixed_groups(const attn::LayerPlan& plan, const attn::LayerLayout& layout) {
  int n = 0;
  for (int g = 0; g < layout.n_kv_head; ++g) n += group_is_mixed(plan, layout, g);
  return n;
}

int64_t linear_slot_floats(int head_dim, int64_t T) {
  const int64_t n = linear_dA_floats(head_dim) + 2 * T * head_dim + attn_dev::linear_scratch_floats(head_dim, T);
  return (n + 31) / 32 * 32;
}

tiles::ScheduleInput schedule_input(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                    const attn::AttnDims& dims) {
  tiles::ScheduleInput in;
  in.n_kv_head = layout.n_kv_head;
  in.B = static_cast<int>(dims.B);
  in.T = dims.T;
  in.head_dim = layout.head_dim;
  for (const attn::HeadSpec& s : plan) in.heads.push_back({attn::kind_byte(s.kind), s.sink, s.window});
  return in;
}

// The schedules of the plans seen recently (a model has one per distinct layer plan), so a
// step does no sorting and no allocation once warm. Per thread: each backend thread keeps its own.
struct CachedSchedule {
  attn::LayerPlan plan;
  int n_kv_head = 0, head_dim = 0;
  int64_t B = 0, T = 0;
  bool backward = false;
  tiles::WorkSchedule schedule;
};

const tiles::WorkSchedule& schedule_for(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                        const attn::AttnDims& dims, bool backward) {
  thread_local std::vector<CachedSchedule> cache;
  for (const CachedSchedule& c : cache)
    if (c.backward == backward && c.B == dims.B && c.T == dims.T && c.n_kv_head == layout.n_kv_head &&
        c.head_dim == layout.head_dim && c.plan == plan)
      return c.schedule;
  if (cache.size() >= 128) cache.clear();
  const tiles::ScheduleInput in = schedule_input(plan, layout, dims);
  cache.push_back(CachedSchedule{plan, layout.n_kv_head, layout.head_dim, dims.B, dims.T, backward,
                                 backward ? tiles::build_backward_schedule(in) : tiles::build_forward_schedule(in)});
  return cache.back().schedule;
}

// Head descriptors, sizes and workspace slots; pointers to activations are set by the caller.
template <class St>
void fill_head_params(AttnLaunchParamsT<St>& p, const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                      const attn::AttnDims& dims, const attn::LayerHeadParams<float>& params) {
  p.qkv_stride = layout.qkv_width();
  p.out_stride = layout.out_width();
  p.B = static_cast<int32_t>(dims.B);
  p.T = static_cast<int32_t>(dims.T);
  p.n_head = layout.n_head;
  p.n_kv_head = layout.n_kv_head;
  p.head_dim = layout.head_dim;
  p.scale = 1.0f / std::sqrt(static_cast<float>(layout.head_dim));  // as the CPU reference
  p.linear_eps = static_cast<float>(params.linear_eps);
  p.n_linear = count_linear(plan);
  p.linear_sync_floats = linear_sync_floats(dims.B, p.n_linear, layout.head_dim);
  p.linear_slot_floats = p.n_linear > 0 ? linear_slot_floats(layout.head_dim, dims.T) : 0;
  int linear_slot = 0;
  for (int h = 0; h < layout.n_head; ++h) {
    const attn::HeadSpec& s = plan[static_cast<size_t>(h)];
    AttnHeadDesc& d = p.heads[h];
    d = AttnHeadDesc{};
    d.kind = attn::kind_byte(s.kind);
    const int g = layout.kv_head_of(h);
    d.kv_head = g;
    const tiles::KeyRule rule = tiles::key_rule_of({attn::kind_byte(s.kind), s.sink, s.window}, dims.T);
    d.sink = static_cast<int32_t>(rule.sink);
    d.window = static_cast<int32_t>(tiles::min64(rule.window, std::numeric_limits<int32_t>::max()));
    d.q_col = layout.q_slot[static_cast<size_t>(h)] >= 0 ? layout.q_col(h) : -1;
    d.k_col = layout.k_slot[static_cast<size_t>(g)] >= 0 ? layout.k_col(g) : -1;
    d.v_col = layout.v_slot[static_cast<size_t>(g)] >= 0 ? layout.v_col(g) : -1;
    d.out_col = layout.o_slot[static_cast<size_t>(h)] >= 0 ? layout.out_col(h) : -1;
    if (s.kind == HeadKind::Static) {
      const auto& sp = params.statics[static_cast<size_t>(h)];
      d.alpha = sp.alpha;
      d.rho = sp.rho;
      d.log_z = sp.log_z;
    }
    if (s.kind == HeadKind::Linear) {
      const auto& lp = params.linears[static_cast<size_t>(h)];
      d.L = lp.L;
      d.dL = lp.dL;
      d.groups = lp.groups;
      d.n_groups = lp.n_groups;
      d.linear_slot = linear_slot++;
    }
  }
  // fp32 storage adds the linear partials to its dQKV values directly; bf16 stages those in fp32.
  p.n_stage = 0;
  p.stage_offset = p.linear_sync_floats + dims.B * p.n_linear * p.linear_slot_floats;
  if constexpr (kStagesDkv<St>) {
    const int per_group = layout.n_head / layout.n_kv_head;
    for (int g = 0; g < layout.n_kv_head; ++g)
      if (group_is_mixed(plan, layout, g)) p.heads[g * per_group].stage_slot = p.n_stage++;
  }
}

}  // namespace

void check_attention_layer(const attn::LayerPlan& plan, const attn::LayerLayout& layout, const attn::AttnDims& dims,
                           const attn::LayerHeadParams<float>& params, bool backward) {
  check_shape(plan, layout, dims);
  check_params(plan, layout, params, backward);
}

template <class St>
void fill_attention_params(AttnLaunchParamsT<St>& p, const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                           const attn::AttnDims& dims, const attn::LayerHeadParams<float>& params, bool backward) {
  fill_head_params(p, plan, layout, dims, params);
  p.schedule = schedule_for(plan, layout, dims, backward);
}

template void fill_attention_params<float>(AttnLaunchParams&, const attn::LayerPlan&, const attn::LayerLayout&,
                                           const attn::AttnDims&, const attn::LayerHeadParams<float>&, bool);
template void fill_attention_params<bf16>(AttnLaunchParamsBf16&, const attn::LayerPlan&, const attn::LayerLayout&,
                                          const attn::AttnDims&, const attn::LayerHeadParams<float>&, bool);

int64_t attention_workspace_floats(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                   const attn::AttnDims& dims) {
  check_shape(plan, layout, dims);
  const int n_linear = count_linear(plan);
  if (n_linear == 0) return 0;
  // The staging of mixed groups is used by bf16 storage only, but the size has no storage type.
  return linear_sync_floats(dims.B, n_linear, layout.head_dim) +
         dims.B * n_linear * linear_slot_floats(layout.head_dim, dims.T) +
         dims.B * count_mixed_groups(plan, layout) * 2 * dims.T * layout.head_dim;
}

}  // namespace hw::cuda
