// Plan changes: the planners' hook at the top of an update (intervene_if_due), installing a
// changed head plan, extras and adapters into the model and the optimizer, and the
// interventions/ files that record each change.
#include <spdlog/spdlog.h>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/io/files.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/train/trainer.hpp"

namespace hw {

uint64_t adapter_init_seed(int64_t run_seed, int64_t step) {
  return data::derive_seed(uint64_t(run_seed), data::Stream::LoraInit, uint64_t(step) + 1);  // (+1: not the init's)
}

bool Trainer::install(const PlanChange& change) {
  if (!change.adapters && model_->keeps_layout(change.plan, change.extras)) {
    // Same tensors at the same places: parameters, gradients, AdamW moments (and their ZeRO-1
    // shards) and the gradient buckets stay as they are.
    check(model_->install_plan(change.plan, change.extras), "internal: a layout-keeping plan moved the layout");
    model_->reserve_activations(cfg_.train.micro_batch, cfg_.train.seq_len);
    return true;
  }
  const auto old_specs = model_->specs();
  const auto old_layouts = model_->layouts();
  auto apply = [&] {
    model_->install_plan(change.plan, change.extras);
    // New adapters draw from the run's seed and the step they arrive at.
    if (change.adapters)
      model_->add_adapters(*change.adapters, adapter_init_seed(cfg_.train.seed, state_.step));
  };
  if (zero1_) {
    // Each rank holds only its shard of the moments, and the new layout cuts the block into
    // different shards: gather the full moments (temporarily, laid out like the old parameter
    // block), remap them like the parameters, then keep only the new shard.
    auto old_m = gather_moments(opt_->m(), "adam.m.full");
    auto old_v = gather_moments(opt_->v(), "adam.v.full");
    apply();
    const dist::Range own = own_shard();
    opt_->rebuild(model_->params(), BlockShard{own.begin, own.end});
    for (auto [from, to] : {std::pair{old_m.get(), &opt_->m()}, std::pair{old_v.get(), &opt_->v()}}) {
      auto full = arena_like(model_->params(), "adam.full");
      remap_arena<float>(*ops_, *from, old_specs, old_layouts, *full, model_->specs(), model_->layouts());
      keep_own_shard(*full, *to);
    }
  } else {
    apply();
    auto [old_m, old_v] = opt_->rebuild(model_->params());
    remap_arena<float>(*ops_, *old_m, old_specs, old_layouts, opt_->m(), model_->specs(), model_->layouts());
    remap_arena<float>(*ops_, *old_v, old_specs, old_layouts, opt_->v(), model_->specs(), model_->layouts());
  }
  make_buckets();  // the gradient block moved
  model_->reserve_activations(cfg_.train.micro_batch, cfg_.train.seq_len);
  return false;
}

std::vector<nlohmann::json> Trainer::intervene_if_due() {
  std::vector<nlohmann::json> reports;
  for (size_t k = 0; k < planners_.size(); ++k) {
    Planner& planner = *planners_[k];
    if (!planner.acts_at(state_.step)) continue;
    const Stopwatch total;
    const RunConfig now = config();
    PlannerContext ctx{*model_, now, comm_, state_.step};
    std::optional<PlanChange> change = planner.act(ctx);
    if (!change) continue;  // looked, kept the plan
    const Stopwatch install_time;
    const bool kept = install(*change);
    nlohmann::json report = change->report;
    report["planner"] = planner.name();
    report["planner_index"] = k;
    report["step"] = state_.step;
    report["layout_kept"] = kept;
    report["install_ms"] = install_time.ms();
    report["total_seconds"] = total.ms() / 1000.0;
    report["head_plan"] = model_->config().head_plan.to_json();
    if (!out_dir_.empty() && comm_.rank() == 0) {
      io::ensure_dir(out_dir_ + "/interventions");
      io::write_file_atomic(intervention_file(out_dir_, state_.step, k, planner.name()), report.dump(2) + "\n");
    }
    spdlog::info("{}: installed a new head plan at step {} ({:.1f} s{})", planner.name(), state_.step,
                 total.ms() / 1000.0, kept ? ", layout kept" : "");
    if (!kept) log_optimizer_memory();  // the new layout's shard
    reports.push_back(std::move(report));
  }
  return reports;
}

std::string intervention_file(const std::string& run_dir, int64_t step, size_t index, const std::string& planner) {
  return run_dir + "/interventions/step_" + std::to_string(step) + "." + std::to_string(index) + "." + planner +
         ".json";
}

}  // namespace hw
