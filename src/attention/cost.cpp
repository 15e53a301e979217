// Attention work accounting for a head plan.
//
// ACR (AAH's attention coverage ratio): per layer sum over heads of clamp(W_h, 64, T) / (H T),
// averaged over layers, with W_h = T for softmax, W for window and min(S + W, T) for
// sink_window. Heads that compute no attention scores count 0 (not clamped up to 64):
// static heads (fixed weights, no QK^T), linear heads (a kernel feature state, no score
// matrix; their cost shows in attn_flops instead) and pruned heads.
//
// attn_flops: forward multiply-adds (2 FLOPs each) the CPU kernels actually perform for one
// sequence of length T, exp/normalisation excluded:
//   softmax family: QK^T and PV over the key set only, 4 D per visible (i, j) pair;
//   static: PV only over the causal band, 2 D per pair;
//   linear: per token the prefix-state read and update, 2 x 2 Fw (D + 1) with
//     Fw = 1 + D + D(D+1)/2 packed features, plus the exact pairs inside each chunk, 2 D for
//     the group scores and 2 (D + 1) for the weighted [v, 1] (the O(G^2) kernel
//     evaluation and the feature construction are left out: small and G is not known here);
//   taylorshift: the linear kind's count (the same engine on unit-norm rows);
//   performer (M features), dijiang (M = D): per token the feature projections of q and k,
//     2 x D M, and the state read and update, 2 x 2 M (D + 1); per intra-chunk pair the
//     kernel 2 M and the weighted [v, 1] 2 (D + 1);
//   pruned: 0.
#include "headwise/attention/cost.hpp"

#include <algorithm>

#include "attention/tile_ops.hpp"

namespace hw::attn {
namespace {

// Visible (i, j) pairs of a head over T rows: row i sees min(i+1, W) window keys plus the
// sink keys j < S left of its window, max(0, min(S, i+1-W)).
double visible_pairs(int64_t T, int64_t S, int64_t W) {
  const double n = double(std::min(T, W));
  double pairs = n * (n + 1) / 2 + double(T - std::min(T, W)) * double(W);
  const int64_t nu = std::max<int64_t>(0, T - W);  // rows with keys left of the window
  if (S > 0 && nu > 0) {
    if (S >= nu) pairs += double(nu) * double(nu + 1) / 2;
    else pairs += double(S) * double(S + 1) / 2 + double(nu - S) * double(S);
  }
  return pairs;
}

double linear_flops(int64_t T, double D) {
  const double fw = 1 + D + D * (D + 1) / 2;
  const int64_t C = detail::kTile;
  const int64_t full = T / C, rest = T % C;
  const double intra_pairs = double(full) * double(C * (C + 1) / 2) + double(rest * (rest + 1) / 2);
  return double(T) * 4 * fw * (D + 1) + intra_pairs * (2 * D + 2 * (D + 1));
}

double feature_flops(int64_t T, double D, double M) {
  const int64_t C = detail::kTile;
  const int64_t full = T / C, rest = T % C;
  const double intra_pairs = double(full) * double(C * (C + 1) / 2) + double(rest * (rest + 1) / 2);
  return double(T) * (4 * D * M + 4 * M * (D + 1)) + intra_pairs * (2 * M + 2 * (D + 1));
}

double head_flops(const HeadSpec& s, int64_t T, double D) {
  const double band = double(T) * double(T + 1) / 2;
  switch (s.kind) {
    case HeadKind::Softmax: return 4 * D * band;
    case HeadKind::Window: return 4 * D * visible_pairs(T, 0, s.window);
    case HeadKind::SinkWindow: return 4 * D * visible_pairs(T, s.sink, s.window);
    case HeadKind::Static: return 2 * D * band;
    case HeadKind::Linear:
    case HeadKind::TaylorShift: return linear_flops(T, D);
    case HeadKind::Performer: return feature_flops(T, D, s.features);
    case HeadKind::DiJiang: return feature_flops(T, D, D);
    case HeadKind::Pruned: return 0;
  }
  return 0;
}

double head_coverage(const HeadSpec& s, int64_t T) {
  int64_t w = 0;
  switch (s.kind) {
    case HeadKind::Softmax: w = T; break;
    case HeadKind::Window: w = s.window; break;
    case HeadKind::SinkWindow: w = std::min<int64_t>(int64_t(s.sink) + s.window, T); break;
    default: return 0;  // static, linear and the baselines, pruned: no scores computed
  }
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
