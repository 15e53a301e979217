// Running the experiment protocol: one trunk per seed, branches from its checkpoints.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>

#include "headwise/core/error.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/experiment/experiment.hpp"
#include "headwise/experiment/update_speed_abba.hpp"
#include "headwise/io/files.hpp"
#include "headwise/methods/method_registry.hpp"
#include "headwise/train/trainer.hpp"

namespace hw {

namespace {

namespace fs = std::filesystem;
size_t training_bytes(Trainer& tr) {
  Model<float>& m = tr.model();
  return m.params().bytes() + m.grads().bytes() + m.buffers().bytes() + m.activation_bytes() +
         tr.optimizer().m().bytes() + tr.optimizer().v().bytes();
}

class MetricsFile {
 public:
  MetricsFile(const std::string& path, bool active) {
    if (active) out_ = io::AppendFile(path, /*truncate=*/true);
  }
  void write(const nlohmann::json& line) {
    if (out_.is_open()) out_.write_line(line.dump());
  }

 private:
  io::AppendFile out_;
};

// A branch's wall-time allowance after its intervention point, in ms (time budgets).
struct BranchBudget {
  bool time = false;
  double wall_ms = -1.0;
};

// Where a branch leaves the trunk and where its methods first act (-1: never).
struct BranchPoint {
  int64_t branch_step = 0;
  int64_t fire_step = -1;
};

// Continues one branch from the trunk checkpoint at its point: the planner hook there (as
// Trainer::run does it: at the top of every update and after the last one), updates until the
// budget is spent, the final evaluation. `wall_before` (the reference) gets, per step from the
// branch step on, the wall ms spent before that step's update, and last the total.
nlohmann::json run_branch(const RunConfig& cfg, const ExperimentBranch& branch, const std::string& ckpt,
                          const BranchPoint& point, const std::string& dir, const ExperimentSpec& spec,
                          const BranchBudget& budget, dist::Comm& comm, std::vector<double>* wall_before = nullptr) {
  const bool main_rank = comm.rank() == 0;
  const int64_t start = point.branch_step, steps = cfg.train.steps;
  // The branch's own peak RSS: the high-water mark restarts here (see experiment.hpp).
  const bool rss_reset = reset_peak_rss();
  const int64_t rss_start = current_rss_bytes();
  Trainer tr(cfg, dir, comm, make_planners(cfg));
  tr.resume(ckpt);
  check(tr.state().step == start, "experiment: checkpoint " + ckpt + " is not at update " + std::to_string(start));
  const int64_t first = first_action_step(tr.planners(), steps);
  check(first == point.fire_step,
        "experiment branch '" + branch.name + "': its method first acts at step " + std::to_string(first) +
            " for seed " + std::to_string(cfg.train.seed) + ", at " + std::to_string(point.fire_step) +
            " for the first seed (the intervention step must not depend on the seed)");
  nlohmann::json r = {{"branch", branch.name},
                      {"method", tr.config().to_json()["method"]},
                      {"branch_step", start},
                      {"fire_step", point.fire_step < 0 ? nlohmann::json(nullptr) : nlohmann::json(point.fire_step)}};
  nlohmann::json interventions = nlohmann::json::array();
  double capture_s = 0.0, fit_s = 0.0;
  bool has_capture = false, has_fit = false;
  // The hook at the current step; returns its wall ms (0 when nothing changed).
  auto intervene = [&] {
    const Stopwatch timer;
    const auto reports = tr.intervene_if_due();  // the trainer's own planner hook
    if (reports.empty()) return 0.0;
    const double ms = timer.ms();
    for (const auto& rep : reports) {
      if (rep.contains("capture_seconds")) {
        capture_s += rep["capture_seconds"].get<double>();
        has_capture = true;
      }
      if (rep.contains("fit_seconds")) {
        fit_s += rep["fit_seconds"].get<double>();
        has_fit = true;
      }
      interventions.push_back({{"step", rep.value("step", int64_t(-1))}, {"planner", rep.value("planner", "")}});
    }
    if (interventions.size() == reports.size())  // the first intervention: its selection
      for (const char* k : {"selected", "shortfall"})
        if (reports.front().contains(k)) r[k] = reports.front()[k];
    return ms;
  };
  BranchClock clock;
  clock.add_intervention(intervene());
  r["memory_bytes"] = training_bytes(tr);
  r["static_heads"] = tr.model().config().head_plan.count(attn::HeadKind::Static);
  // The plan after the intervention, for the A-B-B-A speed phase.
  if (main_rank) io::write_file_atomic(dir + "/head_plan.json", tr.model().config().head_plan.to_json().dump() + "\n");
  r["pruned_heads"] = tr.model().config().head_plan.count(attn::HeadKind::Pruned);

  MetricsFile metrics(dir + "/metrics.jsonl", main_rank);
  double loss = 0.0;
  std::vector<double> update_ms;  // after the intervention, its own step left out
  double first_update_ms = 0.0;
  auto more = [&] {
    if (!budget.time) return tr.state().step < steps;
    // Every rank must take the same decision: the slowest rank's clock decides.
    return comm.allreduce_max(clock.budgeted_ms()) < budget.wall_ms;
  };
  while (more()) {
    const int64_t step = tr.state().step;
    if (step != start) clock.add_intervention(intervene());  // later acts of the branch's methods
    if (wall_before) wall_before->push_back(clock.budgeted_ms());
    double norm = 0.0, upd = 0.0;
    const Stopwatch timer;
    loss = tr.train_step(&norm, &upd);
    upd = slowest_rank_ms(comm, upd);  // the update speed across ranks (all-reduce included)
    const double ms = timer.ms();
    clock.add_update(ms);
    if (step == start)
      first_update_ms = upd;  // the intervention step itself: left out of the speed
    else
      update_ms.push_back(upd);
    metrics.write({{"step", step}, {"loss", loss}, {"grad_norm", norm}, {"ms", ms}, {"update_ms", upd}});
  }
  // After the last update (a branch that stopped at its own intervention step already ran it).
  if (tr.state().step == steps && steps != start) clock.add_intervention(intervene());
  if (wall_before) wall_before->push_back(clock.budgeted_ms());
  const EvalResult ev = tr.eval(spec.eval_batches > 0 ? spec.eval_batches : cfg.train.eval_batches);
  metrics.write({{"step", tr.state().step}, {"val_loss", ev.loss}, {"val_ppl", ev.ppl}});
  if (has_capture) r["capture_seconds"] = capture_s;
  if (has_fit) r["fit_seconds"] = fit_s;
  r["interventions"] = interventions;
  r["steps"] = tr.state().step;
  r["updates_after_intervention"] = tr.state().step - start;
  r["tokens"] = tr.state().tokens;
  r["train_loss"] = tr.state().step > start ? nlohmann::json(loss) : nlohmann::json(nullptr);
  r["val_loss"] = ev.loss;
  r["val_ppl"] = ev.ppl;
  if (update_ms.empty() && tr.state().step > start) update_ms.push_back(first_update_ms);
  const bool timed = !update_ms.empty();  // no update at all: after the last one, or a time budget
  double sum = 0.0;
  for (double x : update_ms) sum += x;
  std::vector<double> sorted = update_ms;
  std::sort(sorted.begin(), sorted.end());
  r["update_ms_ranks"] = comm.world();  // update_ms: the slowest of these ranks per update
  r["mean_update_ms"] = timed ? nlohmann::json(sum / double(update_ms.size())) : nlohmann::json(nullptr);
  // The median resists the stalls of a shared machine; the table uses the mean, as the paper.
  r["median_update_ms"] = timed ? nlohmann::json(sorted[sorted.size() / 2]) : nlohmann::json(nullptr);
  r["intervention_seconds"] = clock.intervention_ms / 1000.0;
  r["train_seconds"] = clock.train_ms / 1000.0;
  r["wall_seconds"] = (clock.train_ms + clock.intervention_ms) / 1000.0;
  r["budget_seconds"] = budget.time ? nlohmann::json(budget.wall_ms / 1000.0) : nlohmann::json(nullptr);
  if (spec.save_final) tr.save_checkpoint(dir + "/final");
  // The kernel syncs its per-thread RSS counters lazily, so VmHWM read after a reset can lag
  // VmRSS read at the start by a few pages; the branch's peak is at least its start.
  const int64_t hwm = peak_rss_bytes(), rss_peak = hwm >= 0 ? std::max(hwm, rss_start) : hwm;
  r["rss_start_bytes"] = rss_start >= 0 ? nlohmann::json(rss_start) : nlohmann::json(nullptr);
  r["peak_rss_bytes"] = rss_peak >= 0 ? nlohmann::json(rss_peak) : nlohmann::json(nullptr);
  r["peak_rss_scope"] = rss_reset ? "branch" : "process";
  if (main_rank) io::write_file_atomic(dir + "/result.json", r.dump(2) + "\n");
  spdlog::info("experiment branch {}: val ppl {:.4f}, {} updates ({} after update {}), {:.2f} ms/update", branch.name,
               ev.ppl, tr.state().step, tr.state().step - start, start,
               timed ? r["mean_update_ms"].get<double>() : 0.0);
  return r;
}

}  // namespace

namespace {

// The A-B-B-A phase (experiment.hpp): the reference's plan against every other branch's, in
// fresh processes, on the first seed's reference config. {branch: run_abba result or null}.
nlohmann::json speed_phase(const ExperimentSetup& setup, const std::string& out_dir) {
  const ExperimentSpec& spec = setup.spec;
  nlohmann::json speed = nlohmann::json::object();
  if (spec.speed_rounds == 0 || setup.bench_exe.empty()) return speed;
  const int64_t seed = spec.seeds.front();
  const std::string seed_dir = out_dir + "/seed_" + std::to_string(seed), dir = out_dir + "/speed";
  io::ensure_dir(dir);
  io::write_file_atomic(dir + "/config.json",
                        branch_config(setup, spec.branches.front(), seed).to_json().dump(2) + "\n");
  const std::string ref_plan = seed_dir + "/" + spec.branches.front().name + "/head_plan.json";
  const std::string ref_text = io::read_file(ref_plan);
  for (size_t b = 1; b < spec.branches.size(); ++b) {
    const std::string& name = spec.branches[b].name;
    const std::string plan = seed_dir + "/" + name + "/head_plan.json";
    if (io::read_file(plan) == ref_text) {  // nothing changed: nothing to time
      speed[name] = nullptr;
      continue;
    }
    AbbaOptions o;
    o.exe = setup.bench_exe;
    o.config = dir + "/config.json";
    o.rounds = int(spec.speed_rounds);
    o.sets = spec.speed_sets;
    o.work_dir = dir + "/" + name;
    spdlog::info("experiment: A-B-B-A update speed of branch {} ({} rounds)", name, o.rounds);
    speed[name] = run_abba(o, ref_plan, plan);
    spdlog::info("experiment branch {}: A-B-B-A update speedup {:.4f}x", name, speed[name]["speedup"].get<double>());
  }
  return speed;
}

}  // namespace

nlohmann::json run_experiment(const ExperimentSetup& setup, const std::string& out_dir, dist::Comm& comm) {
  const ExperimentSpec& spec = setup.spec;
  const bool main_rank = comm.rank() == 0;
  const int64_t steps = setup.base.train.steps;
  // Each branch's intervention step; the trunk passes through all of them.
  std::vector<BranchPoint> points(spec.branches.size());
  std::set<int64_t> fire_steps;
  for (size_t b = 0; b < spec.branches.size(); ++b) {
    points[b].fire_step =
        first_action_step(make_planners(branch_config(setup, spec.branches[b], spec.seeds.front())), steps);
    if (points[b].fire_step >= 0) fire_steps.insert(points[b].fire_step);
  }
  check(!fire_steps.empty(), "experiment: no branch's method acts during the run's " + std::to_string(steps) +
                                 " updates (or after the last one)");
  for (auto& p : points) p.branch_step = p.fire_step >= 0 ? p.fire_step : *fire_steps.begin();
  if (main_rank) io::ensure_dir(out_dir);
  nlohmann::json per_seed = nlohmann::json::array();
  for (int64_t seed : spec.seeds) {
    const std::string seed_dir = out_dir + "/seed_" + std::to_string(seed);
    auto ckpt = [&](int64_t step) { return seed_dir + "/trunk/checkpoints/step_" + std::to_string(step); };
    // The trunk: ordinary training through every intervention point, a checkpoint at each.
    {
      const RunConfig trunk_cfg = branch_config(setup, {"trunk", {{"name", "none"}}}, seed);
      Trainer trunk(trunk_cfg, seed_dir + "/trunk", comm);
      for (int64_t f : fire_steps) {
        spdlog::info("experiment seed {}: trunk to update {}", seed, f);
        trunk.run(f);
        trunk.save_checkpoint(ckpt(f));
      }
    }
    nlohmann::json rows = nlohmann::json::array();
    // The reference runs to train.steps (tokens) and sets the time the others get.
    std::vector<double> ref_wall;  // ref_wall[i]: the reference's wall ms before update branch_step + i
    for (size_t b = 0; b < spec.branches.size(); ++b) {
      const ExperimentBranch& branch = spec.branches[b];
      const RunConfig cfg = branch_config(setup, branch, seed);
      BranchBudget budget;
      if (b > 0 && spec.budget == "time") {
        budget.time = true;
        const size_t from = size_t(points[b].branch_step - points[0].branch_step);
        check(points[b].branch_step >= points[0].branch_step && from < ref_wall.size(),
              "internal: experiment branch '" + branch.name + "' starts before the reference");
        budget.wall_ms = ref_wall.back() - ref_wall[from];
      }
      nlohmann::json r = run_branch(cfg, branch, ckpt(points[b].branch_step), points[b], seed_dir + "/" + branch.name,
                                    spec, budget, comm, b == 0 ? &ref_wall : nullptr);
      rows.push_back(std::move(r));
    }
    per_seed.push_back({{"seed", seed}, {"branches", rows}});
  }
  const nlohmann::json speed = main_rank ? speed_phase(setup, out_dir) : nlohmann::json::object();
  nlohmann::json summary = summarize_experiment(per_seed, spec.branches);
  for (auto& row : summary) {
    const std::string name = row["branch"].get<std::string>();
    row["abba_update_speedup"] = nullptr;
    if (speed.contains(name) && !speed[name].is_null())
      row["abba_update_speedup"] = {{"mean", speed[name]["speedup"]}, {"std", nullptr},
                                    {"pair_ratios", speed[name]["pair_ratios"]}};
  }
  nlohmann::json results = {{"fire_step", *fire_steps.begin()},
                            {"fire_steps", fire_steps},
                            {"budget", spec.budget},
                            {"spec", spec.to_json()},
                            {"config", setup.base.to_json()},
                            {"seeds", per_seed},
                            {"speed", speed},
                            {"summary", summary}};
  if (main_rank) {
    io::write_file_atomic(out_dir + "/results.json", results.dump(2) + "\n");
    io::write_file_atomic(out_dir + "/table.md", experiment_table_markdown(results));
  }
  return results;
}

}  // namespace hw
