#pragma once
// SAF (Selective Attention Freezing) as a trainer planner. At the top of update fire_step() it
// calibrates on method.calib_seqs sequences of its own stream (no weight update, no optimizer
// step, no training-data read), scores every head (variance of Eq. (1), forward KL, or
// Gate-Taylor), selects k = round(ratio * L * H) heads through the KL-gated compact fit, and
// hands back a plan in which those heads are `static` (mode freeze, with fitted alpha/rho) or
// `pruned` (mode prune). Data-parallel ranks calibrate on disjoint sequences and reduce the
// statistics, so every rank selects and fits the same heads (checked with Comm::all_equal).
#include <cstdint>
#include <string>

#include "headwise/methods/saf_calibration.hpp"
#include "headwise/train/planner.hpp"

namespace hw {

// The update at whose top SAF fires: method.at_step if >= 0, else round(at_fraction * steps).
int64_t saf_fire_step(const RunConfig& cfg);
// Seed of SAF's own streams: method.seed, or train.seed + 1 when it is 0.
uint64_t saf_seed(const RunConfig& cfg);

class SafPlanner final : public Planner {
 public:
  // Calibration sequences come from `source` when given (e.g. MQAR examples), else from
  // data.calib (data.val when empty) through a CalibSampler seeded with saf_seed(cfg).
  explicit SafPlanner(const RunConfig& cfg, saf::CalibSource source = {});
  std::string name() const override { return "saf"; }
  int64_t fire_step() const override { return fire_step_; }
  // Report (intervention.json): the selection (selector, requested, shortfall, per_layer_counts,
  // selected, heads with scores / selected / fit_kl / skipped), mode, pattern, calibration
  // sizes, "capture_seconds" and "fit_seconds".
  PlanChange plan(InterventionContext& ctx) override;

  int64_t calib_seq_len() const { return calib_T_; }

 private:
  RunConfig cfg_;
  saf::CalibSource source_;
  int64_t fire_step_ = -1;
  int64_t calib_T_ = 0;
};

}  // namespace hw
