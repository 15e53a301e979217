#pragma once
// AAH's `method.*` keys (method.name = "aah"), parsed, defaulted and validated here and nowhere
// else. Defaults follow the paper, "Asymmetric Attention Heads" (AAH), arXiv 2608.19203.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headwise/train/run_config.hpp"

namespace hw::aah {

enum class Regime { Full, GroupingOff, FullAdaptive, ShallowFreeze, DeepReuse };

enum class Ablation {
  None,
  ControlOff,           // no control at all: the run is ordinary training
  FixedRandomGrouping,  // level 0 = a seeded balanced random split in two, fixed for the run
  FreezeAfterWarmup,    // the whole hierarchy built at the first control update, then frozen
  IndependentScoring,   // controller logits only, no joint sibling scorer
  NoParentConstraint,   // a child's index is its own argmax
  NoFeatureEma,         // feature EMA coefficient 0
  FixedWindow,          // every head window:ablation_value from the end of warm-up
  ShufflePostSelect,    // selected indices permuted among a layer's heads (seeded, per update)
  RandomUniform,        // indices drawn uniformly per head and control update (seeded)
  ControlInterval,      // control every ablation_value updates instead of control_every
};

const char* regime_name(Regime r);
std::string ablation_text(Ablation a, int64_t value);

struct AahConfig {
  Regime regime = Regime::FullAdaptive;
  std::vector<int64_t> windows;  // ascending, in 1..T; empty until check_run: {T/8, T/4, T/2, T}
  int64_t warmup_steps = 100;
  int64_t control_every = 5;
  double feature_ema = 0.9;
  double resolution_ema = 0.15;
  int64_t max_depth = 4;  // levels including level 0; 1 for shallow_freeze unless given
  double similarity = 0.72;
  double upper_similarity = 0.76;
  int64_t seed = 0;
  Ablation ablation = Ablation::None;
  int64_t ablation_value = 0;  // fixed_window:W, control_interval:N
  std::string where = "method";

  // From one method object (its "name" must be "aah"). Unknown keys and out-of-range values are
  // errors naming the key.
  static AahConfig from_json(const nlohmann::json& spec, const std::string& where = "method");
  nlohmann::json to_json() const;  // every key, "name" included

  // The checks that need the run (windows in 1..model.block_size, fixed_window too); fills the
  // default windows from model.block_size.
  void check_run(const RunConfig& run);

  // What the regime and ablation leave of the machinery.
  bool controls() const { return regime != Regime::Full && ablation != Ablation::ControlOff; }
  int64_t interval() const { return ablation == Ablation::ControlInterval ? ablation_value : control_every; }
  double feature_beta() const { return ablation == Ablation::NoFeatureEma ? 0.0 : feature_ema; }
  bool joint_scoring() const { return regime != Regime::GroupingOff && ablation != Ablation::IndependentScoring; }
  bool parent_constraint() const { return ablation != Ablation::NoParentConstraint; }
  // Whether the policy reads features (the data-free ablations do not observe).
  bool needs_features() const {
    return controls() && ablation != Ablation::FixedWindow && ablation != Ablation::RandomUniform;
  }
};

}  // namespace hw::aah
