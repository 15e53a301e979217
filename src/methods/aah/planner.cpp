#include "headwise/methods/aah/planner.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
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

namespace {

// Readers of the saved state (trainer.json, a file): every list checked for type, length and
// range against the model before any of it is used, errors naming the key.
std::vector<int> int_list(const nlohmann::json& v, const std::string& where, int lo, int hi) {
  check(v.is_array(), where + ": expected a list, got " + json_brief(v));
  std::vector<int> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) out.push_back(int(json_int(v[i], where + "[" + std::to_string(i) + "]", lo, hi)));
  return out;
}

// A partition of the nodes 0..n-1 into non-empty groups (each node in exactly one).
aah::Groups partition_of(const nlohmann::json& v, const std::string& where, int n) {
  check(v.is_array(), where + ": expected a list of groups, got " + json_brief(v));
  aah::Groups g;
  std::vector<char> seen(size_t(n), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string wi = where + "[" + std::to_string(i) + "]";
    g.push_back(int_list(v[i], wi, 0, n - 1));
    check(!g.back().empty(), wi + ": an empty group");
    for (int m : g.back()) {
      check(!seen[size_t(m)], wi + ": node " + std::to_string(m) + " is in two groups");
      seen[size_t(m)] = 1;
    }
  }
  for (int m = 0; m < n; ++m) check(seen[size_t(m)], where + ": node " + std::to_string(m) + " is in no group");
  return g;
}

// A hierarchy: level 0 a partition of the n_heads heads, each level above one of the level below.
aah::Hierarchy hierarchy_of(const nlohmann::json& v, const std::string& where, int n_heads) {
  check(v.is_array() && v.size() <= size_t(n_heads), where + ": expected at most " + std::to_string(n_heads) +
                                                         " levels, got " + json_brief(v));
  aah::Hierarchy h;
  int n = n_heads;
  for (size_t lev = 0; lev < v.size(); ++lev) {
    h.levels.push_back(partition_of(v[lev], where + "[" + std::to_string(lev) + "]", n));
    n = int(h.levels.back().size());
  }
  return h;
}

int64_t counter(const nlohmann::json& s, const char* key) { return json_int(json_at(s, key, "aah state"), key, 0); }

}  // namespace

void AahPlanner::restore(const nlohmann::json& s) {
  if (s.is_null()) return;
  check(s.is_object(), "expected an object, got " + json_brief(s));
  const size_t n = size_t(L_) * size_t(H_);
  auto per_layer = [&](const char* key) -> const nlohmann::json& {
    const nlohmann::json& v = json_at(s, key, "aah state");
    check(v.is_array() && v.size() == size_t(L_), std::string(key) + ": expected a list of the model's " +
                                                      std::to_string(L_) + " layers, got " + json_brief(v));
    return v;
  };
  // Everything is read into locals first: a bad key leaves the planner as it was.
  aah::FeatureTracker features(L_, H_);
  features.restore(json_at(s, "features", "aah state"));
  std::vector<aah::Groups> level0;
  for (int l = 0; l < L_; ++l) {
    const nlohmann::json& v = per_layer("level0")[size_t(l)];
    const std::string where = "level0[" + std::to_string(l) + "]";
    level0.push_back(v.is_array() && v.empty() ? aah::Groups{} : partition_of(v, where, H_));  // [] = not built
  }
  std::vector<aah::Hierarchy> hier;
  for (int l = 0; l < L_; ++l)
    hier.push_back(hierarchy_of(per_layer("hierarchy")[size_t(l)], "hierarchy[" + std::to_string(l) + "]", H_));
  std::vector<std::vector<std::vector<int>>> node_index;
  for (int l = 0; l < L_; ++l) {
    const nlohmann::json& v = per_layer("node_index")[size_t(l)];
    const std::string where = "node_index[" + std::to_string(l) + "]";
    const auto& levels = hier[size_t(l)].levels;
    check(v.is_array() && (v.empty() || v.size() == levels.size()),
          where + ": expected [] or one list per level of hierarchy[" + std::to_string(l) + "], got " + json_brief(v));
    node_index.emplace_back();
    for (size_t lev = 0; lev < v.size(); ++lev) {
      const std::string wl = where + "[" + std::to_string(lev) + "]";
      node_index.back().push_back(int_list(v[lev], wl, 0, K_ - 1));
      check(node_index.back().back().size() == levels[lev].size(),
            wl + ": expected one window index per node of that level (" + std::to_string(levels[lev].size()) + ")");
    }
  }
  auto per_head = [&](const char* key) {
    std::vector<int> v = int_list(json_at(s, key, "aah state"), key, 0, K_ - 1);
    check(v.size() == n, std::string(key) + ": expected " + std::to_string(n) + " window indices (" +
                             std::to_string(L_) + " layers x " + std::to_string(H_) + " heads), got " +
                             std::to_string(v.size()));
    return v;
  };
  std::vector<int> index = per_head("index"), executed = per_head("executed");
  std::vector<double> resolution;
  try {
    resolution = aah::doubles_from_hex(json_string(json_at(s, "resolution", "aah state"), "resolution"));
  } catch (const Error& e) {
    fail(std::string("resolution: ") + e.what());
  }
  check(resolution.size() == n, "resolution: expected " + std::to_string(n) + " values, got " +
                                    std::to_string(resolution.size()));
  for (double r : resolution)  // an EMA of indices in 0..K-1
    check(std::isfinite(r) && r >= 0 && r <= double(K_ - 1),
          "resolution: holds a value outside [0, " + std::to_string(K_ - 1) + "]");
  const int64_t level0_builds = counter(s, "level0_builds"), upper_builds = counter(s, "upper_builds"),
                control_updates = counter(s, "control_updates");

  features_ = std::move(features);
  level0_ = std::move(level0);
  hier_ = std::move(hier);
  node_index_ = std::move(node_index);
  index_ = std::move(index);
  resolution_ = std::move(resolution);
  executed_ = std::move(executed);
  level0_builds_ = level0_builds;
  upper_builds_ = upper_builds;
  control_updates_ = control_updates;
}

}  // namespace hw
