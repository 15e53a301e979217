#pragma once
// AAH (Asymmetric Attention Heads) as a trainer planner that sets every softmax/window head's
// window while training runs ("Asymmetric Attention Heads" (AAH), arXiv 2608.19203;
// details in docs/methods/aah.md).
//
// Timing: updates 0 .. warmup_steps-1 run at full attention; the control updates are warmup,
// warmup + interval, ...; the planner observes the update right before each control update
// (the forward closest to it: the trainer acts at the top of an update, before its forward) and
// folds those features into the EMA at the control update. At a control update it (re)builds the
// hierarchy as the regime says and the seeded policy picks each head's window index
// (policy.hpp). The resolution EMA r = rho r + (1 - rho) index runs at every update after
// warm-up (the paper: every forward; here an update is the unit, so with gradient accumulation
// all micro-steps of an update run the same windows), and the executed window is
// windows[round(r)], r starting at the largest window. The window is chosen in
// AahPlanner::act (src/methods/aah/planner.cpp) through AahPlanner::control_update.
//
// Window changes keep the parameter layout: the trainer installs them without moving any
// parameter or AdamW state, and the data order is untouched. Everything the planner needs to
// continue (feature EMA and pending sums, resolution EMA, indices, cached topology, counters) is
// in state(), bit for bit.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "headwise/methods/aah/config.hpp"
#include "headwise/methods/aah/features.hpp"
#include "headwise/methods/aah/grouping.hpp"
#include "headwise/methods/aah/policy.hpp"
#include "headwise/train/planner.hpp"

namespace hw {

class AahPlanner final : public Planner, public AttentionObserver {
 public:
  AahPlanner(const aah::AahConfig& cfg, const RunConfig& run);
  std::string name() const override { return "aah"; }
  nlohmann::json config() const override { return cfg_.to_json(); }
  bool acts_at(int64_t step) const override;
  // Report (every control update, and any other update whose executed windows change): see
  // plan_report in report.hpp, plus "step", "control_update", "selected_index" and
  // "executed_index" ([layer][head]), "node_index" ([layer][level][node]), "hierarchy"
  // ([layer][level][group] = nodes of the level below), "level0_builds", "upper_builds",
  // "control_updates".
  std::optional<PlanChange> act(PlannerContext& ctx) override;
  bool observes_at(int64_t step) const override;
  AttentionObserver* observer() override { return this; }
  void on_forward(const AttentionView& v) override { features_.observe(v, row_stride_); }
  nlohmann::json state() const override;
  void restore(const nlohmann::json& s) override;

  bool is_control(int64_t step) const;
  const aah::AahConfig& aah_config() const { return cfg_; }
  int64_t level0_builds() const { return level0_builds_; }
  int64_t upper_builds() const { return upper_builds_; }
  int64_t control_updates() const { return control_updates_; }
  const std::vector<aah::Hierarchy>& hierarchies() const { return hier_; }

 private:
  void control_update(int64_t step);
  // Deep practical reuse builds level 0 from update 0's features at the top of update 1 (with a
  // warm-up of 0 or 1 updates, at the first control update instead).
  bool early_level0() const;
  attn::HeadPlan executed_plan(const attn::HeadPlan& current) const;

  aah::AahConfig cfg_;
  int L_ = 0, H_ = 0, K_ = 0;
  int64_t steps_ = 0, block_size_ = 0, seq_len_ = 0, row_stride_ = 1;
  int head_dim_ = 0;
  aah::Policy policy_;
  aah::FeatureTracker features_;
  std::vector<aah::Groups> level0_;       // per layer (empty: not built)
  std::vector<aah::Hierarchy> hier_;      // per layer (depth 0: not built)
  std::vector<std::vector<std::vector<int>>> node_index_;  // per layer, [level][node]
  std::vector<int> index_;                // selected index per (layer, head)
  std::vector<double> resolution_;        // resolution EMA per (layer, head)
  std::vector<int> executed_;             // round(resolution) per (layer, head)
  int64_t level0_builds_ = 0, upper_builds_ = 0, control_updates_ = 0;
};

}  // namespace hw
