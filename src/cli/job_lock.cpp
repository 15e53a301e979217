#include "cli/job_lock.hpp"

#include "cli/commands.hpp"
#include "headwise/core/error.hpp"

namespace hw::cli {

io::FolderLock lock_folder_for_job(const std::string& dir, const std::string& command, dist::Comm& comm) {
  io::FolderLock lock;
  std::string refused;
  if (comm.rank() == 0) {
    try {
      lock = io::FolderLock::inside(dir, command);
    } catch (const Error& e) {
      refused = e.what();
    }
  }
  int64_t failed = refused.empty() ? 0 : 1;
  if (comm.world() > 1) comm.broadcast(&failed, int64_t(sizeof failed), 0);
  if (failed != 0) {
    if (comm.rank() == 0) fail(refused);
    throw QuietExit{1};
  }
  return lock;
}

}  // namespace hw::cli
