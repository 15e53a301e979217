// Attention work accounting for a head plan.
//
// ACR (AAH's attention coverage ratio): per layer sum over heads of clamp(W_h, 64, T) / (H T),
// averaged over layers, with W_h = T for softmax, W for window and min(S + W, T) for
// sink_window. Heads that compute no attention scores count 0 (not clamped up to 64):
// static heads (fixed weights, no QK^T), linear heads (a kernel feature state, no score
// matrix; their cost shows in attn_flops instead) and pruned heads.
//
// attn_flops: forward multiply-adds (2 FLOPs each) the CPU kernels actually perform for one
// sequence of length T, exp/normalisation excluded: each kind's count is its entry's flops() in
// the CPU table (kind_table.hpp), documented there (softmax family: 4 D per visible pair; static:
// 2 D per causal pair; the prefix-state engines: quad_state.cpp, feature_state.cpp; pruned: 0).
// The coverage's W_h is the entry's score_keys() (0 for kinds that compute no scores).
#include "headwise/attention/cost.hpp"

#include <algorithm>

#include "attention/kind_table.hpp"

namespace hw::attn {
namespace {

double head_flops(const HeadSpec& s, int64_t T, double D) { return detail::cpu_kind(s.kind).flops(s, T, D); }

// clamp(W_h, 64, T), or 0 for a head that computes no scores
double head_coverage(const HeadSpec& s, int64_t T) {
  const int64_t w = detail::cpu_kind(s.kind).score_keys(s, T);
  if (w <= 0) return 0;
  return double(std::min<int64_t>(std::max<int64_t>(w, 64), T));
}

}  // namespace

PlanCost plan_cost(const HeadPlan& plan, int64_t T, int head_dim) {
  PlanCost c;
  if (T <= 0 || plan.layers.empty()) return c;
  const double D = head_dim;
  double acr_sum = 0;
  for (const LayerPlan& layer : plan.layers) {
    double cover = 0;
    for (const HeadSpec& s : layer) {
      cover += head_coverage(s, T);
      c.attn_flops += head_flops(s, T, D);
      c.attn_flops_softmax += head_flops(HeadSpec{}, T, D);
    }
    if (!layer.empty()) acr_sum += cover / (double(layer.size()) * double(T));
  }
  c.acr = acr_sum / double(plan.layers.size());
  return c;
}

}  // namespace hw::attn
