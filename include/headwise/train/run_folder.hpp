#pragma once
// What a run folder (train --out DIR) holds, and the bookkeeping that keeps its record whole
// across resubmissions (docs/checkpoints.md, "Run folders"):
//
//   DIR/metrics.jsonl            one line per update ("step", "loss", ...) and per evaluation
//   DIR/interventions/step_<s>.<k>.<planner>.json   the planners' plan changes
//   DIR/checkpoints/step_<N>/    complete checkpoints (written as step_<N>.tmp, then renamed)
//   DIR/checkpoints/best/        train.keep_best
//   DIR/summary.json             once the run reached train.steps
//
// Only a folder named exactly step_<digits> holding trainer.json is a checkpoint: step_<N>.tmp
// (a save cut short, by a crash or a second signal) and step_<N>.old (the moment of a replace)
// never are.
#include <cstdint>
#include <optional>
#include <string>

namespace hw {

struct RunCheckpoint {
  int64_t step = 0;
  std::string dir;  // DIR/checkpoints/step_<step>
};

// The newest complete checkpoint of run folder `run_dir` (none: no checkpoints yet). Links are
// refused, not followed (a run folder may come from elsewhere).
std::optional<RunCheckpoint> newest_checkpoint(const std::string& run_dir);

// Does run_dir hold an earlier run: a checkpoint (step_N or best), a non-empty metrics.jsonl or a
// summary.json? (An empty folder, or one with only a lock file, holds none.)
bool holds_run(const std::string& run_dir);

// train --overwrite: rename run_dir to run_dir.old-<UTC time> (a free name), never deleting
// anything; returns the new name.
std::string move_run_aside(const std::string& run_dir);

// Resuming at `step` (checkpoint step_<step>): the lines of metrics.jsonl whose "step" is below
// it stay, in order; the others (updates and evaluations that will be redone, a line cut short by
// a crash) go; the planners' intervention files of steps that will be redone go too (an
// intervention at `step` itself is redone unless step == train_steps, where the final checkpoint
// already holds it). The log is rewritten atomically. Returns the number of lines dropped.
int64_t truncate_run_record(const std::string& run_dir, int64_t step, int64_t train_steps);

}  // namespace hw
