#include "cli/train_start.hpp"

#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "headwise/core/error.hpp"
#include "headwise/train/run_folder.hpp"

namespace hw::cli {

namespace {

// Rank 0's decision, holding the lock (which --overwrite moves to the new folder).
TrainStart decide_locally(const std::string& out, const std::string& resume, bool overwrite, int64_t train_steps,
                          io::FolderLock& lock) {
  if (!resume.empty() && resume != "auto") {
    // A checkpoint named by hand: resumed as asked, whatever the folder holds (its record is cut
    // back to the checkpoint's step).
    return {TrainStart::Resume, resume, 0};
  }
  if (overwrite) {
    if (holds_run(out)) {
      // Still holding the old folder's lock while it moves, so nobody writes into it meanwhile;
      // then the new folder's.
      const std::string aside = move_run_aside(out);
      lock.folder_moved(aside);
      io::FolderLock fresh = io::FolderLock::inside(out, "train");
      lock = std::move(fresh);
      spdlog::info("--overwrite: moved the earlier run in {} to {} (whole); starting again", out, aside);
    }
    return {};
  }
  const auto newest = newest_checkpoint(out);
  if (newest && newest->step >= train_steps) return {TrainStart::Complete, newest->dir, newest->step};
  if (resume == "auto") {
    if (newest) return {TrainStart::Resume, newest->dir, newest->step};
    if (holds_run(out)) spdlog::info("--resume auto: {} holds no complete checkpoint yet: starting from step 0", out);
    return {};
  }
  if (holds_run(out)) {
    const std::string what = newest ? "its newest checkpoint is " + newest->dir + " (step " + std::to_string(newest->step) +
                                          " of train.steps " + std::to_string(train_steps) + ")"
                                    : "it has no checkpoint yet, only the record of an earlier start";
    fail("--out " + out + " already holds a run (" + what +
         "); train never starts over in place: --resume auto continues it from its newest checkpoint, --overwrite "
         "moves it aside to " + out + ".old-<time> and starts again");
  }
  return {};
}

}  // namespace

TrainStart decide_train_start(const std::string& out_dir, const std::string& resume, bool overwrite,
                              int64_t train_steps, dist::Comm& comm, io::FolderLock& lock) {
  TrainStart start;
  std::string refused;
  if (comm.rank() == 0) {
    // Only rank 0 takes the lock: the ranks of one job share the folder (rank 0 writes the
    // record and the model; with ZeRO-1 each rank adds its optimizer shard), a second job must not.
    try {
      lock = io::FolderLock::inside(out_dir, "train");
      start = decide_locally(out_dir, resume, overwrite, train_steps, lock);
    } catch (const Error& e) {
      refused = e.what();
    }
  }
  int64_t msg[3] = {refused.empty() ? 0 : 1, int64_t(start.kind), start.step};
  if (comm.world() > 1) comm.broadcast(msg, int64_t(sizeof msg), 0);
  if (msg[0] != 0) {
    if (comm.rank() == 0) fail(refused);
    throw QuietExit{1};  // rank 0 says why
  }
  if (comm.rank() != 0) {
    start.kind = TrainStart::Kind(msg[1]);
    start.step = msg[2];
    if (start.kind != TrainStart::Fresh)
      start.checkpoint = !resume.empty() && resume != "auto" ? resume
                                                              : out_dir + "/checkpoints/step_" + std::to_string(start.step);
  }
  return start;
}

}  // namespace hw::cli
