#pragma once
// OAL (Outlier-Aware Attention Linearization) as a planner. At update method.at_step it reads
// its calibration data (data.calib, else data.val; or the sequences the caller hands act()),
// computes every chosen layer's contribution statistics, groups each query head's dimensions,
// calibrates each head's L against its softmax outputs, and hands back a plan in which the
// chosen layers' heads are `linear` with the fitted L and groups, plus LoRA adapters (q/k/v/o
// of every layer) for the fine-tuning that follows. It keeps no state after acting.
// With method.kernel set to a baseline (performer, dijiang, taylorshift) the chosen heads become
// that kind instead, with its starting values (baselines.hpp) and the same adapters, uncalibrated.
#include <cstdint>
#include <string>
#include <vector>

#include "headwise/methods/oal/config.hpp"
#include "headwise/methods/oal/pipeline.hpp"
#include "headwise/train/planner.hpp"

namespace hw {

class OalPlanner final : public Planner {
 public:
  OalPlanner(const oal::OalConfig& cfg, const RunConfig& run);
  std::string name() const override { return "oal"; }
  nlohmann::json config() const override { return cfg_.to_json(); }
  bool acts_at(int64_t step) const override { return step == cfg_.at_step; }
  // Report: the pipeline's per-head contributions, groupings and calibrations, the frozen
  // validation MSE summary, and the timings.
  std::optional<PlanChange> act(PlannerContext& ctx) override;

 private:
  PlanChange baseline_change(PlannerContext& ctx, const std::vector<int>& layers) const;
  oal::OalConfig cfg_;
  oal::Sources own_;  // from data.calib / data.val (opened at the first fetch)
};

}  // namespace hw
