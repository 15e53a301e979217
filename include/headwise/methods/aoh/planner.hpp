#pragma once
// AoH (Autonomy-of-Heads) as a trainer planner: at the top of update AohConfig::fire_step it
// scores every softmax-family head from its query-key weights alone (heads.hpp: no data, no
// calibration, no forward), marks the `sparsity` fraction of KV heads with the most diffuse
// spectra (highest effective rank) as streaming, and hands back the plan in which every scored
// query head of a streaming KV head is sink_window:sink:window. The layout is kept (no parameter,
// gradient or optimizer state moves); training continues. Weights are identical on every
// data-parallel rank, so every rank computes the same plan. It keeps no state between steps.
#include <cstdint>
#include <string>

#include "headwise/methods/aoh/config.hpp"
#include "headwise/train/planner.hpp"

namespace hw {

class AohPlanner final : public Planner {
 public:
  AohPlanner(const aoh::AohConfig& cfg, const RunConfig& run);
  std::string name() const override { return "aoh"; }
  nlohmann::json config() const override { return cfg_.to_json(); }
  bool acts_at(int64_t step) const override { return step == fire_step_; }
  // Report: "method", "sparsity", "per_layer", "sink", "window", "n_kv_heads_scored",
  // "n_streaming_kv_heads", "streaming_kv_heads" ([layer, kv head] pairs), "streaming_heads"
  // ([layer, head]), "scores" (aoh::to_json) and "score_seconds".
  std::optional<PlanChange> act(PlannerContext& ctx) override;
  // The attention weights alone (aoh::scored_weights).
  std::optional<std::set<std::string>> weights_read(const ModelConfig& model) const override;

  int64_t fire_step() const { return fire_step_; }
  const aoh::AohConfig& aoh_config() const { return cfg_; }

 private:
  aoh::AohConfig cfg_;
  int64_t fire_step_ = -1;
};

}  // namespace hw
