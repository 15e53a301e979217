#pragma once
// The run-folder lock (headwise/io/folder_lock.hpp) for a command that may run as several ranks
// (experiment): rank 0 takes it for the whole job, since the ranks of one job share the folder.
// When rank 0 is refused it throws the error (one line for the job) and the other ranks throw
// QuietExit{1}. Collective.
#include <string>

#include "headwise/dist/comm.hpp"
#include "headwise/io/folder_lock.hpp"

namespace hw::cli {

io::FolderLock lock_folder_for_job(const std::string& dir, const std::string& command, dist::Comm& comm);

}  // namespace hw::cli
