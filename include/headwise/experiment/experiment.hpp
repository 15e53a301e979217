#pragma once
// The SAF experiment protocol (paper §4), for any method or stack of methods: train one trunk
// of ordinary attention per seed through every branch's intervention point, checkpoint at each,
// then continue every branch from the trunk checkpoint at its own first action step (same
// weights, optimizer state and data position): ordinary attention, SAF at several ratios,
// same-head pruning, random selection, Gate-Taylor pruning, any method, at one or several
// points (SAF's 25/50/75% timing study costs one trunk), including after the last update (the
// paper's "replace after training" row: fraction 1, no update after the change). Budgets are
// matched in tokens or in wall time, over one or more seeds; then a table in the paper's format
// (final val PPL, relative PPL change, update speedup, peak memory change, calibration and fit
// time; mean and standard deviation over seeds).
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
  // An object: keys merged onto the config's method section; "name" defaults to "saf" ("none" =
  // ordinary). A list: a stack of method objects replacing the config's method section.
  nlohmann::json method = nlohmann::json::object();
};

struct ExperimentSpec {
  std::vector<int64_t> seeds;       // empty: train.seed alone
  std::string budget = "tokens";    // tokens: every branch runs to train.steps; time: see below
  std::vector<ExperimentBranch> branches;  // the first one is the reference (ordinary attention)
  int64_t eval_batches = 0;         // validation batches for the final PPL; 0 = train.eval_batches
  bool save_final = true;           // a final checkpoint per branch (e.g. for `headwise mqar`)
  // A-B-B-A rounds of the update-speed phase (update_speed_abba.hpp) after the quality runs;
  // 0 = none (the in-run figures only).
  int64_t speed_rounds = 2;
  // --set overrides ("key=value") of the speed phase's processes only, e.g. a longer context where
  // the plans' difference in work exceeds the round-to-round spread (the plans stay the branches';
  // overrides that change the number of layers or heads are refused by the plan check).
  std::vector<std::string> speed_sets;

  // Keys: seeds, budget, eval_batches, save_final, speed_rounds, speed_sets, and either "branches" ([{name, method}]) or
  // "ratios" (SAF ratios, default [0.25, 0.5]) with "controls" (any of "prune", "random",
  // "gate_taylor"; default all three) at "control_ratio" (default: the first ratio). The
  // generated list is ordinary, saf_<pct>..., prune_<pct>, random_<pct>, gate_taylor_<pct>.
  // With "at_fractions" (a list in [0, 1]; not with "branches") every generated branch but
  // ordinary is repeated once per fraction f, with method.at_fraction = f (method.at_step = -1)
  // and the name suffix _at_<pct of f>, in fraction order: e.g. [0.25, 0.5, 0.75, 1.0] with
  // "controls": [] gives ordinary, saf_25_at_25, saf_50_at_25, ..., saf_50_at_100.
  static ExperimentSpec from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

struct ExperimentSetup {
  RunConfig base;
  ExperimentSpec spec;
  nlohmann::json doc;  // the config document without "experiment" (branches are built from it)
  // The headwise binary the update-speed phase runs its processes with (`headwise experiment`
  // sets its own); empty: no speed phase (in-process callers, e.g. tests), its column is "-".
  std::string bench_exe;
};

// A config document (overrides already applied) -> base run config + spec.
ExperimentSetup experiment_from_json(nlohmann::json doc);
// Reads FILE, applies --set overrides to the whole document (so experiment.seeds=[1,2] works).
ExperimentSetup load_experiment(const std::string& path, const std::vector<std::string>& overrides);
// The run config of one branch for one seed.
RunConfig branch_config(const ExperimentSetup& setup, const ExperimentBranch& branch, int64_t seed);

// A branch's clock. The paper's main table matches training time only: the planner hook's
// wall time (calibration capture, fitting, selection, at every act of the branch's methods) is
// kept apart from the updates' and reported as its own column, never charged to the budget.
struct BranchClock {
  double train_ms = 0.0;         // the updates (Trainer::train_step), what a time budget counts
  double intervention_ms = 0.0;  // every act of the branch's methods
  void add_update(double ms) { train_ms += ms; }
  void add_intervention(double ms) { intervention_ms += ms; }
  // What a time budget compares (another update starts while it is below the budget).
  double budgeted_ms() const { return train_ms; }
};

// Runs the protocol. A branch's intervention step F is the first step at which its methods act
// (first_action_step, in [0, train.steps]; from the first seed's config, and checked for every
// seed); a branch whose methods never act (the reference) branches at the earliest F of all.
// The trunk runs once per seed, through the distinct F in increasing order, saving
// OUT/seed_<s>/trunk/checkpoints/step_<F> at each; each branch resumes from the one at its F,
// runs the planner hook there (and at every later update and after the last one, as
// Trainer::run does), trains, and is evaluated. Files (rank 0): OUT/seed_<s>/trunk,
// OUT/seed_<s>/<branch>/ (metrics.jsonl, interventions/, result.json, final/),
// OUT/results.json and OUT/table.md. results.json: "fire_step" (the earliest F), "fire_steps"
// (the distinct F), and per branch row and summary entry "fire_step" (null for a branch whose
// methods never act) and "branch_step" (the trunk checkpoint it resumed from); the table adds an
// "Intervention" column when the acting branches' F differ.
// Budgets: "tokens" runs every branch to train.steps; "time" gives a branch at F the wall time
// the reference branch spent on its updates F .. train.steps - 1 (the reference resumes at the
// earliest F and its per-update wall time is recorded), counting the branch's updates only: its
// calibration and fit (BranchClock) are excluded, as in the paper's main table, and reported
// per branch as "intervention_seconds" (every act of its methods; summary and table column
// "Intervention time (s)"), beside "train_seconds" (the budgeted time), "wall_seconds" (both)
// and "budget_seconds" (null under tokens); updates past train.steps run at min_lr (the schedule's end). A branch at F =
// train.steps makes no update under either budget: its final PPL is the trunk's model after the
// change, and its speed columns are null ("-" in the table).
// Two update-speed columns:
//  - A-B-B-A (the paper's protocol; summary "abba_update_speedup", table "Update speedup
//    (A-B-B-A)"): after every seed's branches ran, rank 0 times the reference branch's final
//    head plan (OUT/seed_<first>/<reference>/head_plan.json) against each other branch's, on the
//    reference's run config of the first seed (OUT/speed/config.json), in 4 x speed_rounds fresh
//    processes of bench_exe (run_abba; logs and results in OUT/speed/<branch>/); the value is
//    the median of per-pair ratios t_reference / t_branch, once per branch (the plan's speed
//    does not depend on the seed's weights), and results.json "speed" holds every process's
//    times. A branch whose plan equals the reference's gets null.
//  - in-run (summary "update_speedup" and "update_speedup_median", table "In-run speedup"):
//    mean update_ms (Trainer::train_step: accumulation, backward, all-reduce, clipping, AdamW;
//    no data loading) over the branch's updates after its intervention, the first one excluded
//    (the reference's over all its updates after the earliest F), reference over branch.
// Two memory columns, both per branch:
//  - arena: "memory_bytes" = parameter + gradient + buffer + activation + AdamW arena bytes
//    right after the intervention (what the model's layout needs; summary
//    "memory_change_pct", table "Arena memory change (%)");
//  - process peak RSS (CPU): "peak_rss_bytes" = the process's resident-set high-water mark
//    (VmHWM of /proc/self/status) from the branch's start to its end (after the final
//    evaluation and checkpoint). A process-wide peak only grows, so at each branch start the
//    mark is reset to the current RSS (writing "5" to /proc/self/clear_refs, Linux >= 4.0):
//    "peak_rss_scope" = "branch". Where the reset is refused, the value is the process's
//    peak since it started (earlier branches and the trunk included) and the scope is
//    "process". "rss_start_bytes" is the RSS at the branch's start (the trunk's and earlier
//    branches' freed memory aside, the process baseline: binary, data shards, allocator
//    caches). Summary "peak_rss_change_pct" = 100 (peak / the reference's peak - 1), table
//    "Peak RSS change (%)"; it includes the baseline, so it dilutes the arena change. On the
//    GPU neither is the device allocator's high-water mark (not measured yet).
nlohmann::json run_experiment(const ExperimentSetup& setup, const std::string& out_dir, dist::Comm& comm);

// Per-branch mean and standard deviation over seeds of every table column (from the per-seed
// results that run_experiment collects), and the markdown table.
nlohmann::json summarize_experiment(const nlohmann::json& per_seed, const std::vector<ExperimentBranch>& branches);
std::string experiment_table_markdown(const nlohmann::json& results);

}  // namespace hw
