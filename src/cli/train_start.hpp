#pragma once
// How `train --out DIR` starts in a folder that may already hold a run (docs/checkpoints.md,
// "Run folders"). Never over an earlier run in place:
//   - DIR holds no run: a fresh start (or --resume CKPT / --init-from as asked);
//   - DIR holds a run that reached train.steps: nothing to do, exit 0, nothing written;
//   - --resume auto: from DIR's newest complete checkpoint, or fresh when it has none (one
//     command for the first submission and every requeue);
//   - --overwrite: the earlier run moves whole to DIR.old-<time>, then a fresh start;
//   - otherwise: one error naming the newest checkpoint and those two choices.
// Decided by rank 0 alone, holding the folder's lock, and passed on to the other ranks.
#include <cstdint>
#include <string>

#include "headwise/dist/comm.hpp"
#include "headwise/io/folder_lock.hpp"

namespace hw::cli {

struct TrainStart {
  enum Kind : int64_t { Fresh = 0, Resume = 1, Complete = 2 } kind = Fresh;
  std::string checkpoint;  // Resume, Complete: the checkpoint folder
  int64_t step = 0;        // its step
};

// Collective over `comm`. Rank 0 takes `lock` on out_dir, looks at it and decides; every rank
// returns the same decision. When rank 0 is refused (the folder is in use, or it holds a run and
// no flag says what to do) rank 0 throws the error and the other ranks throw QuietExit{1}.
// `resume` is "" (no flag), "auto", or a checkpoint folder.
TrainStart decide_train_start(const std::string& out_dir, const std::string& resume, bool overwrite,
                              int64_t train_steps, dist::Comm& comm, io::FolderLock& lock);

}  // namespace hw::cli
