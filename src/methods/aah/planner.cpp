#include "headwise/methods/aah/planner.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/methods/aah/report.hpp"

namespace hw {

using aah::Ablation;
using aah::Regime;

AahPlanner::AahPlanner(const aah::AahConfig& cfg, const RunConfig& run)
    : cfg_(cfg),
      L_(run.model.n_layer),
      H_(run.model.n_head),
      steps_(run.train.steps),
      block_size_(run.model.block_size),
      seq_len_(run.train.seq_len),
      head_dim_(run.model.head_dim()),
      policy_(uint64_t(cfg.seed), 1),
      features_(run.model.n_layer, run.model.n_head) {
  cfg_.check_run(run);
  K_ = int(cfg_.windows.size());
  policy_ = aah::Policy(uint64_t(cfg_.seed), K_);
  // Entropy and last-key weight on about 64 query rows per sequence: O(B 64 T D) per head.
  row_stride_ = std::max<int64_t>(1, seq_len_ / 64);
  level0_.assign(size_t(L_), {});
  hier_.assign(size_t(L_), {});
  node_index_.assign(size_t(L_), {});
  index_.assign(size_t(L_) * size_t(H_), K_ - 1);
  resolution_.assign(index_.size(), double(K_ - 1));  // warm-up runs at full attention
  executed_ = index_;
}

bool AahPlanner::is_control(int64_t step) const {
  return cfg_.controls() && step >= cfg_.warmup_steps && step < steps_ &&
         (step - cfg_.warmup_steps) % cfg_.interval() == 0;
}

bool AahPlanner::acts_at(int64_t step) const {
  if (!cfg_.controls() || step >= steps_) return false;
  if (step >= cfg_.warmup_steps) return true;  // control, or the resolution EMA moving
  // Deep practical reuse: level 0 from the features of update 0, built at the top of update 1.
  return early_level0() && step == 1;
}

bool AahPlanner::early_level0() const {
  return cfg_.regime == Regime::DeepReuse && cfg_.needs_features() && cfg_.ablation != Ablation::FixedRandomGrouping &&
         cfg_.warmup_steps > 1;
}

bool AahPlanner::observes_at(int64_t step) const {
  if (!cfg_.needs_features()) return false;
  return is_control(step + 1) || (early_level0() && step == 0 && steps_ > 1);
}

void AahPlanner::control_update(int64_t step) {
  ++control_updates_;
  if (cfg_.ablation == Ablation::FixedWindow) return;  // no policy: every head runs the fixed window
  const bool freeze_all = cfg_.regime == Regime::ShallowFreeze || cfg_.ablation == Ablation::FreezeAfterWarmup;
  bool built0 = false, built_up = false;
  for (int l = 0; l < L_; ++l) {
    int* idx = &index_[size_t(l) * size_t(H_)];
    if (cfg_.ablation == Ablation::RandomUniform) {
      Rng rng(data::derive_seed(uint64_t(cfg_.seed), data::Stream::AahAblation, uint64_t(step) * uint64_t(L_) + uint64_t(l)));
      for (int h = 0; h < H_; ++h) idx[h] = int(rng.below(uint64_t(K_)));
      continue;
    }
    const std::vector<aah::Vec> heads = features_.layer(l);
    if (cfg_.regime == Regime::GroupingOff) {
      if (hier_[size_t(l)].depth() == 0) hier_[size_t(l)].levels = {aah::singleton_groups(H_)};
    } else {
      if (level0_[size_t(l)].empty() && cfg_.ablation == Ablation::FixedRandomGrouping) {
        level0_[size_t(l)] = aah::balanced_random_groups(H_, data::derive_seed(uint64_t(cfg_.seed), data::Stream::AahGrouping, uint64_t(l)));
        built0 = true;
      } else if (level0_[size_t(l)].empty() ||
                 (cfg_.regime == Regime::FullAdaptive && !freeze_all && cfg_.ablation != Ablation::FixedRandomGrouping)) {
        level0_[size_t(l)] = aah::head_groups(heads, cfg_.similarity);
        built0 = true;
      }
      if (hier_[size_t(l)].depth() == 0 || !freeze_all) {
        hier_[size_t(l)] = aah::build_upper(heads, level0_[size_t(l)], cfg_.upper_similarity, int(cfg_.max_depth));
        built_up = true;
      }
    }
    const aah::Selection sel = policy_.select(heads, hier_[size_t(l)], cfg_.joint_scoring(), cfg_.parent_constraint());
    node_index_[size_t(l)] = sel.node_index;
    std::copy(sel.head_index.begin(), sel.head_index.end(), idx);
  }
  level0_builds_ += built0;
  upper_builds_ += built_up;
  if (cfg_.ablation == Ablation::ShufflePostSelect) {
    Rng rng(data::derive_seed(uint64_t(cfg_.seed), data::Stream::AahAblation, uint64_t(step)));
    for (int l = 0; l < L_; ++l) {
      int* idx = &index_[size_t(l) * size_t(H_)];
      for (int h = H_ - 1; h > 0; --h) std::swap(idx[h], idx[rng.below(uint64_t(h + 1))]);
    }
  }
}

attn::HeadPlan AahPlanner::executed_plan(const attn::HeadPlan& current) const {
  attn::HeadPlan plan = current;
  for (int l = 0; l < L_; ++l)
    for (int h = 0; h < H_; ++h) {
      attn::HeadSpec& s = plan.layers[size_t(l)][size_t(h)];
      if (s.kind != attn::HeadKind::Softmax && s.kind != attn::HeadKind::Window) continue;  // other kinds stay
      const int64_t w = cfg_.ablation == Ablation::FixedWindow ? cfg_.ablation_value
                                                               : cfg_.windows[size_t(executed_[size_t(l) * size_t(H_) + size_t(h)])];
      s = attn::HeadSpec{};
      if (w < block_size_) {
        s.kind = attn::HeadKind::Window;
        s.window = int32_t(w);
      }
    }
  return plan;
}

std::optional<PlanChange> AahPlanner::act(PlannerContext& ctx) {
  const int64_t step = ctx.step;
  if (features_.pending()) features_.fold(ctx.comm, cfg_.feature_beta());
  if (step < cfg_.warmup_steps) {  // deep_reuse: the level-0 partition of update 0's features
    if (early_level0() && level0_[0].empty()) {
      for (int l = 0; l < L_; ++l) level0_[size_t(l)] = aah::head_groups(features_.layer(l), cfg_.similarity);
      ++level0_builds_;
    }
    return std::nullopt;
  }
  const bool control = is_control(step);
  if (control) control_update(step);
  // The resolution EMA on the executed index, every update after warm-up.
  const double rho = cfg_.resolution_ema;
  for (size_t i = 0; i < index_.size(); ++i) {
    resolution_[i] = rho * resolution_[i] + (1.0 - rho) * double(index_[i]);
    executed_[i] = std::clamp(int(std::floor(resolution_[i] + 0.5)), 0, K_ - 1);
  }
  const attn::HeadPlan& current = ctx.model.config().head_plan;
  PlanChange change;
  change.plan = executed_plan(current);
  if (!control && change.plan == current) return std::nullopt;

  auto per_layer = [&](const std::vector<int>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (int l = 0; l < L_; ++l)
      a.push_back(std::vector<int>(v.begin() + l * H_, v.begin() + (l + 1) * H_));
    return a;
  };
  nlohmann::json hier = nlohmann::json::array();
  for (const auto& h : hier_) hier.push_back(aah::to_json(h));
  change.report = aah::plan_report(change.plan, seq_len_, head_dim_, hier_);
  change.report["method"] = "aah";
  change.report["regime"] = aah::regime_name(cfg_.regime);
  change.report["ablation"] = aah::ablation_text(cfg_.ablation, cfg_.ablation_value);
  change.report["control_update"] = control;
  change.report["windows"] = cfg_.windows;
  change.report["selected_index"] = per_layer(index_);
  change.report["executed_index"] = per_layer(executed_);
  change.report["node_index"] = node_index_;
  change.report["hierarchy"] = std::move(hier);
  change.report["level0_builds"] = level0_builds_;
  change.report["upper_builds"] = upper_builds_;
  change.report["control_updates"] = control_updates_;
  if (control)
    spdlog::info("AAH step {}: ACR {:.4f}, attention multiply-adds {:.4f} of full", step,
                 change.report["acr"].get<double>(), change.report["attn_madds_relative"].get<double>());
  return change;
}

nlohmann::json AahPlanner::state() const {
  nlohmann::json l0 = nlohmann::json::array(), hier = nlohmann::json::array();
  for (const auto& g : level0_) l0.push_back(g);
  for (const auto& h : hier_) hier.push_back(aah::to_json(h));
  std::vector<double> idx(index_.begin(), index_.end());
  return {{"features", features_.state()},
          {"level0", std::move(l0)},
          {"hierarchy", std::move(hier)},
          {"node_index", node_index_},
          {"index", index_},
          {"resolution", aah::doubles_to_hex(resolution_)},
          {"executed", executed_},
          {"level0_builds", level0_builds_},
          {"upper_builds", upper_builds_},
          {"control_updates", control_updates_}};
}

void AahPlanner::restore(const nlohmann::json& s) {
  if (s.is_null()) return;
  features_.restore(s.at("features"));
  level0_ = s.at("level0").get<std::vector<aah::Groups>>();
  hier_.clear();
  for (const auto& h : s.at("hierarchy")) hier_.push_back(aah::hierarchy_from_json(h));
  node_index_ = s.at("node_index").get<std::vector<std::vector<std::vector<int>>>>();
  index_ = s.at("index").get<std::vector<int>>();
  resolution_ = aah::doubles_from_hex(s.at("resolution").get<std::string>());
  executed_ = s.at("executed").get<std::vector<int>>();
  level0_builds_ = s.at("level0_builds").get<int64_t>();
  upper_builds_ = s.at("upper_builds").get<int64_t>();
  control_updates_ = s.at("control_updates").get<int64_t>();
  const size_t n = size_t(L_) * size_t(H_);
  check(level0_.size() == size_t(L_) && hier_.size() == size_t(L_) && index_.size() == n && resolution_.size() == n &&
            executed_.size() == n,
        "aah state: does not match the model's " + std::to_string(L_) + " layers x " + std::to_string(H_) + " heads");
}

}  // namespace hw
