#pragma once
// The SAF experiment protocol (paper §4): train once to the intervention point, checkpoint,
// then continue several branches from that same checkpoint, optimizer state and data position
// (ordinary attention, SAF at several ratios, same-head pruning, random selection, Gate-Taylor
// pruning), with budgets matched in tokens or in wall time, over one or more seeds; then a
// table in the paper's format (final val PPL, relative PPL change, update speedup, peak memory
// change, calibration and fit time; mean and standard deviation over seeds).
//
// The spec lives in the run config's own file under a top-level "experiment" key, which is
// taken out before the rest is read as a RunConfig (whose sections are strict).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headwise/dist/comm.hpp"
#include "headwise/train/run_config.hpp"

namespace hw {

struct ExperimentBranch {
  std::string name;
  // Keys merged onto the config's method section; "name" defaults to "saf" ("none" = ordinary).
  nlohmann::json method = nlohmann::json::object();
};

struct ExperimentSpec {
  std::vector<int64_t> seeds;       // empty: train.seed alone
  std::string budget = "tokens";    // tokens: every branch runs to train.steps; time: see below
  std::vector<ExperimentBranch> branches;  // the first one is the reference (ordinary attention)
  int64_t eval_batches = 0;         // validation batches for the final PPL; 0 = train.eval_batches
  bool save_final = true;           // a final checkpoint per branch (e.g. for `headwise mqar`)

  // Keys: seeds, budget, eval_batches, save_final, and either "branches" ([{name, method}]) or
  // "ratios" (SAF ratios, default [0.25, 0.5]) with "controls" (any of "prune", "random",
  // "gate_taylor"; default all three) at "control_ratio" (default: the first ratio). The
  // generated list is ordinary, saf_<pct>..., prune_<pct>, random_<pct>, gate_taylor_<pct>.
  static ExperimentSpec from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

struct ExperimentSetup {
  RunConfig base;
  ExperimentSpec spec;
  nlohmann::json doc;  // the config document without "experiment" (branches are built from it)
};

// A config document (overrides already applied) -> base run config + spec.
ExperimentSetup experiment_from_json(nlohmann::json doc);
// Reads FILE, applies --set overrides to the whole document (so experiment.seeds=[1,2] works).
ExperimentSetup load_experiment(const std::string& path, const std::vector<std::string>& overrides);
// The run config of one branch for one seed.
RunConfig branch_config(const ExperimentSetup& setup, const ExperimentBranch& branch, int64_t seed);

// Runs the protocol. Files (rank 0): OUT/seed_<s>/trunk (the shared run up to the
// intervention, its checkpoint in checkpoints/step_<F>), OUT/seed_<s>/<branch>/ (metrics.jsonl,
// intervention.json, result.json, final/), OUT/results.json and OUT/table.md.
// Budgets: "tokens" runs every branch to train.steps; "time" gives every branch the wall time
// the reference branch spent after the intervention point, counting a branch's own
// calibration and fit; updates past train.steps run at min_lr (the schedule's end).
// Update speed = mean update_ms (Trainer::train_step: accumulation, backward, all-reduce,
// clipping, AdamW; no data loading) over the updates after the intervention, the first one
// excluded. Memory = parameter + gradient + buffer + activation + AdamW arena bytes after it.
nlohmann::json run_experiment(const ExperimentSetup& setup, const std::string& out_dir, dist::Comm& comm);

// Per-branch mean and standard deviation over seeds of every table column (from the per-seed
// results that run_experiment collects), and the markdown table.
nlohmann::json summarize_experiment(const nlohmann::json& per_seed, const std::vector<ExperimentBranch>& branches);
std::string experiment_table_markdown(const nlohmann::json& results);

}  // namespace hw
