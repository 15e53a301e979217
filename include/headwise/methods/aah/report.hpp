#pragma once
// What AAH logs about a plan (every number from attention/cost.hpp, the one place the CLI and
// tests read too): ACR (mean over layers of sum_h clamp(W_h, 64, T) / (H T)), the causal-band
// coverage and attention multiply-adds relative to full attention (PlanCost::relative(): for
// softmax and window heads the computed multiply-adds are 4 D per visible (i, j) pair, so the
// two coincide), the fraction of heads per window bucket and the group counts per level.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "headwise/attention/head_plan.hpp"
#include "headwise/methods/aah/grouping.hpp"

namespace hw::aah {

// The executed window of a head (T for softmax, W for window, 0 for heads AAH leaves alone).
int64_t head_window(const attn::HeadSpec& s, int64_t T);

// "acr", "causal_band_coverage", "attn_madds_relative", "window_fractions" ({"W": fraction of
// all heads}), "group_counts" ([layer][level] = number of nodes).
nlohmann::json plan_report(const attn::HeadPlan& plan, int64_t T, int head_dim, const std::vector<Hierarchy>& hier);

nlohmann::json to_json(const Hierarchy& h);
Hierarchy hierarchy_from_json(const nlohmann::json& j);

}  // namespace hw::aah
