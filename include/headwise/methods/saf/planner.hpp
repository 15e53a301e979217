#pragma once
// SAF (Selective Attention Freezing) as a trainer planner. At the top of update
// SafConfig::fire_step it calibrates on calib_seqs sequences of its own stream (no weight
// update, no optimizer step, no training-data read), scores every head (variance of Eq. (1),
// forward KL, or Gate-Taylor), selects k = round(ratio * L * H) heads through the KL-gated
// compact fit, and hands back a plan in which those heads are `static` (mode freeze, with
// fitted alpha/rho) or `pruned` (mode prune). Data-parallel ranks calibrate on disjoint
// sequences and reduce the statistics, so every rank selects and fits the same heads (checked
// with Comm::all_equal). It keeps no state between steps: the plan it installed is the model's.
#include <cstdint>
#include <string>

#include "headwise/methods/saf/calibration.hpp"
#include "headwise/methods/saf/config.hpp"
#include "headwise/train/planner.hpp"

namespace hw {

class SafPlanner final : public Planner {
 public:
  // Calibration sequences come from `source` when given (e.g. MQAR examples), else from
  // data.calib (data.val when empty) through a CalibSampler seeded with stream_seed(run).
  SafPlanner(const saf::SafConfig& cfg, const RunConfig& run, saf::CalibSource source = {});
  std::string name() const override { return "saf"; }
  nlohmann::json config() const override { return cfg_.to_json(); }
  bool acts_at(int64_t step) const override { return step == fire_step_; }
  // Report: the selection (selector, requested, shortfall, per_layer_counts, selected, heads
  // with scores / selected / fit_kl / skipped), mode, pattern, calibration sizes,
  // "capture_seconds" and "fit_seconds".
  std::optional<PlanChange> act(PlannerContext& ctx) override;
  // The gate_taylor selector scores heads from backward passes.
  bool needs_gradients() const override { return cfg_.selector == "gate_taylor"; }

  int64_t fire_step() const { return fire_step_; }
  int64_t calib_seq_len() const { return calib_T_; }
  const saf::SafConfig& saf_config() const { return cfg_; }

 private:
  saf::SafConfig cfg_;
  saf::CalibSource source_;
  int64_t fire_step_ = -1;
  int64_t calib_T_ = 0;
};

}  // namespace hw
