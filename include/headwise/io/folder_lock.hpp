#pragma once
// One writer per output folder. Every command that writes into a run folder (train, experiment,
// finetune-tasks, mqar) holds an exclusive advisory lock (flock(2)) on FOLDER/.lock for its
// whole life; the commands that replace their output whole (convert, merge) hold OUT.lock beside
// it, since OUT itself is swapped by a rename. A second process is refused with one error naming
// the folder and the holder (command, pid, host, start time), before it reads or writes anything
// there. The kernel drops a flock when its holder dies (also SIGKILL), so a stale lock file
// never blocks anyone: only a live holder does.
//
// The lock file is removed on release. A process that opened it just before (and then got the
// lock of an unlinked file) sees that the path no longer names its file and tries again, so two
// processes never hold "the" lock at once. The descriptor is close-on-exec: a child process
// (experiment's bench runs) never keeps a lock alive after its parent.
//
// Filesystems without flock (Lustre mounted without -o flock): a warning, and the command goes on
// unlocked rather than refusing every run there.
#include <string>

namespace hw::io {

class FolderLock {
 public:
  FolderLock() = default;
  // Lock `dir` through dir/.lock, creating dir (and its parents) when missing; a folder created
  // here is removed again on release when nothing else was written into it. `command` names the
  // holder in the refusal message of others ("train", "convert", ...).
  static FolderLock inside(const std::string& dir, const std::string& command);
  // Lock the output `path` (replaced whole by its command) through path.lock beside it.
  static FolderLock beside(const std::string& path, const std::string& command);
  ~FolderLock();
  FolderLock(FolderLock&& o) noexcept;
  FolderLock& operator=(FolderLock&& o) noexcept;
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

  bool held() const { return fd_ >= 0; }
  const std::string& lock_file() const { return lock_file_; }
  // The locked folder was renamed to `new_dir` by its holder (train --overwrite moves a run
  // aside while still holding its lock): release() then removes new_dir/.lock.
  void folder_moved(const std::string& new_dir);
  void release();

 private:
  static FolderLock acquire(const std::string& folder, const std::string& lock_file, const std::string& command,
                            bool created_folder);
  std::string folder_;     // what the lock protects (for messages and the created-folder cleanup)
  std::string lock_file_;
  int fd_ = -1;
  bool created_folder_ = false;  // inside(): the folder did not exist before
};

}  // namespace hw::io
