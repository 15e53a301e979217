// Running the experiment protocol: one trunk per seed, branches from its checkpoint.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "headwise/core/error.hpp"
#include "headwise/io/files.hpp"
#include "headwise/methods/experiment.hpp"
#include "headwise/methods/method_registry.hpp"
#include "headwise/train/trainer.hpp"

namespace hw {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

size_t training_bytes(Trainer& tr) {
  Model<float>& m = tr.model();
  return m.params().bytes() + m.grads().bytes() + m.buffers().bytes() + m.activation_bytes() +
         tr.optimizer().m().bytes() + tr.optimizer().v().bytes();
}

class MetricsFile {
 public:
  MetricsFile(const std::string& path, bool active) {
    if (active) out_.open(path, std::ios::trunc);
  }
  void write(const nlohmann::json& line) {
    if (out_.is_open()) out_ << line.dump() << "\n";
  }

 private:
  std::ofstream out_;
};

// The reference branch's post-intervention wall time, in ms (time budgets); < 0 when unset.
struct BranchBudget {
  bool time = false;
  double wall_ms = -1.0;
};

// Continues one branch from the trunk checkpoint: the intervention (as the trainer's planner
// hook does it), updates until the budget is spent, the final evaluation.
nlohmann::json run_branch(const RunConfig& cfg, const ExperimentBranch& branch, const std::string& ckpt,
                          int64_t fire_step, const std::string& dir, const ExperimentSpec& spec,
                          const BranchBudget& budget, dist::Comm& comm) {
  const bool main_rank = comm.rank() == 0;
  Trainer tr(cfg, dir, comm, make_planners(cfg));
  tr.resume(ckpt);
  check(tr.state().step == fire_step, "experiment: checkpoint " + ckpt + " is not at the intervention step");
  nlohmann::json r = {{"branch", branch.name}, {"method", tr.config().to_json()["method"]}};
  const int64_t first = first_action_step(tr.planners(), cfg.train.steps);
  check(tr.planners().empty() || first == fire_step,
        "experiment branch '" + branch.name + "': its method first acts at update " + std::to_string(first) +
            ", the trunk stopped at " + std::to_string(fire_step) +
            " (set the schedule in the config's method section, not per branch)");
  const auto t_intervene = Clock::now();
  const auto reports = tr.intervene_if_due();  // the trainer's own planner hook
  const double intervention_ms = reports.empty() ? 0.0 : ms_since(t_intervene);
  if (!reports.empty())
    for (const char* k : {"capture_seconds", "fit_seconds", "selected", "shortfall"})
      if (reports.front().contains(k)) r[k] = reports.front()[k];
  r["intervention_seconds"] = intervention_ms / 1000.0;
  r["memory_bytes"] = training_bytes(tr);
  r["static_heads"] = tr.model().config().head_plan.count(attn::HeadKind::Static);
  r["pruned_heads"] = tr.model().config().head_plan.count(attn::HeadKind::Pruned);

  MetricsFile metrics(dir + "/metrics.jsonl", main_rank);
  const int64_t steps = cfg.train.steps;
  double wall_ms = intervention_ms, loss = 0.0;
  std::vector<double> update_ms;  // after the intervention, its own step left out
  double first_update_ms = 0.0;
  auto more = [&] {
    if (!budget.time) return tr.state().step < steps;
    // Every rank must take the same decision: the slowest rank's clock decides.
    return comm.allreduce_max(wall_ms) < budget.wall_ms;
  };
  while (more()) {
    const int64_t step = tr.state().step;
    double norm = 0.0, upd = 0.0;
    const auto t0 = Clock::now();
    loss = tr.train_step(&norm, &upd);
    const double ms = ms_since(t0);
    wall_ms += ms;
    if (step == fire_step)
      first_update_ms = upd;  // the intervention step itself: left out of the speed
    else
      update_ms.push_back(upd);
    metrics.write({{"step", step}, {"loss", loss}, {"grad_norm", norm}, {"ms", ms}, {"update_ms", upd}});
  }
  const EvalResult ev = tr.eval(spec.eval_batches > 0 ? spec.eval_batches : cfg.train.eval_batches);
  metrics.write({{"step", tr.state().step}, {"val_loss", ev.loss}, {"val_ppl", ev.ppl}});
  r["steps"] = tr.state().step;
  r["updates_after_intervention"] = tr.state().step - fire_step;
  r["tokens"] = tr.state().tokens;
  r["train_loss"] = loss;
  r["val_loss"] = ev.loss;
  r["val_ppl"] = ev.ppl;
  if (update_ms.empty() && tr.state().step > fire_step) update_ms.push_back(first_update_ms);
  const bool timed = !update_ms.empty();  // a time budget may allow no update at all
  double sum = 0.0;
  for (double x : update_ms) sum += x;
  std::vector<double> sorted = update_ms;
  std::sort(sorted.begin(), sorted.end());
  r["mean_update_ms"] = timed ? nlohmann::json(sum / double(update_ms.size())) : nlohmann::json(nullptr);
  // The median resists the stalls of a shared machine; the table uses the mean, as the paper.
  r["median_update_ms"] = timed ? nlohmann::json(sorted[sorted.size() / 2]) : nlohmann::json(nullptr);
  r["wall_seconds"] = wall_ms / 1000.0;
  if (spec.save_final) tr.save_checkpoint(dir + "/final");
  if (main_rank) io::write_file_atomic(dir + "/result.json", r.dump(2) + "\n");
  spdlog::info("experiment branch {}: val ppl {:.4f}, {} updates, {:.2f} ms/update", branch.name, ev.ppl,
               tr.state().step, timed ? r["mean_update_ms"].get<double>() : 0.0);
  return r;
}

}  // namespace

nlohmann::json run_experiment(const ExperimentSetup& setup, const std::string& out_dir, dist::Comm& comm) {
  const ExperimentSpec& spec = setup.spec;
  const bool main_rank = comm.rank() == 0;
  // The trunk runs to the first update at which any branch's method acts.
  int64_t fire_step = -1;
  for (const auto& branch : spec.branches) {
    const int64_t s = first_action_step(make_planners(branch_config(setup, branch, spec.seeds.front())),
                                        setup.base.train.steps);
    if (s >= 0 && (fire_step < 0 || s < fire_step)) fire_step = s;
  }
  check(fire_step >= 0, "experiment: no branch's method acts during the run's " +
                            std::to_string(setup.base.train.steps) + " updates");
  if (main_rank) fs::create_directories(out_dir);
  nlohmann::json per_seed = nlohmann::json::array();
  for (int64_t seed : spec.seeds) {
    const std::string seed_dir = out_dir + "/seed_" + std::to_string(seed);
    // The trunk: ordinary training up to the intervention point, then a checkpoint.
    const RunConfig trunk_cfg = branch_config(setup, {"trunk", {{"name", "none"}}}, seed);
    const std::string ckpt = seed_dir + "/trunk/checkpoints/step_" + std::to_string(fire_step);
    {
      spdlog::info("experiment seed {}: trunk to update {}", seed, fire_step);
      Trainer trunk(trunk_cfg, seed_dir + "/trunk", comm);
      trunk.run(fire_step);
      trunk.save_checkpoint(ckpt);
    }
    nlohmann::json rows = nlohmann::json::array();
    BranchBudget budget;
    budget.time = spec.budget == "time";
    for (const auto& branch : spec.branches) {
      const RunConfig cfg = branch_config(setup, branch, seed);
      // The reference runs to train.steps and sets the time the others get.
      const BranchBudget mine = budget.wall_ms < 0 ? BranchBudget{} : budget;
      nlohmann::json r = run_branch(cfg, branch, ckpt, fire_step, seed_dir + "/" + branch.name, spec, mine, comm);
      if (budget.time && budget.wall_ms < 0) budget.wall_ms = r["wall_seconds"].get<double>() * 1000.0;
      rows.push_back(std::move(r));
    }
    per_seed.push_back({{"seed", seed}, {"branches", rows}});
  }
  nlohmann::json results = {{"fire_step", fire_step},
                            {"budget", spec.budget},
                            {"spec", spec.to_json()},
                            {"config", setup.base.to_json()},
                            {"seeds", per_seed},
                            {"summary", summarize_experiment(per_seed, spec.branches)}};
  if (main_rank) {
    io::write_file_atomic(out_dir + "/results.json", results.dump(2) + "\n");
    io::write_file_atomic(out_dir + "/table.md", experiment_table_markdown(results));
  }
  return results;
}

}  // namespace hw
