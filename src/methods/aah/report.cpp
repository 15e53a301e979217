#include "headwise/methods/aah/report.hpp"

#include <algorithm>
#include <map>

#include "headwise/attention/cost.hpp"

namespace hw::aah {

int64_t head_window(const attn::HeadSpec& s, int64_t T) {
  switch (s.kind) {
    case attn::HeadKind::Softmax: return T;
    case attn::HeadKind::Window: return std::min<int64_t>(s.window, T);
    default: return 0;
  }
}

nlohmann::json plan_report(const attn::HeadPlan& plan, int64_t T, int head_dim, const std::vector<Hierarchy>& hier) {
  const attn::PlanCost cost = attn::plan_cost(plan, T, head_dim);
  std::map<int64_t, int64_t> buckets;
  int64_t heads = 0;
  for (const auto& layer : plan.layers)
    for (const auto& s : layer) {
      ++buckets[head_window(s, T)];
      ++heads;
    }
  nlohmann::json fractions = nlohmann::json::object();
  for (const auto& [w, n] : buckets) fractions[std::to_string(w)] = double(n) / double(std::max<int64_t>(heads, 1));
  nlohmann::json counts = nlohmann::json::array();
  for (const auto& h : hier) {
    nlohmann::json c = nlohmann::json::array();
    for (const auto& level : h.levels) c.push_back(level.size());
    counts.push_back(std::move(c));
  }
  return {{"acr", cost.acr},
          {"causal_band_coverage", cost.relative()},
          {"attn_madds_relative", cost.relative()},
          {"window_fractions", std::move(fractions)},
          {"group_counts", std::move(counts)}};
}

nlohmann::json to_json(const Hierarchy& h) { return h.levels; }

Hierarchy hierarchy_from_json(const nlohmann::json& j) {
  Hierarchy h;
  h.levels = j.get<std::vector<Groups>>();
  return h;
}

}  // namespace hw::aah
