// `headwise launch-check [--dir DIR] [--tag TAG]`: the launch rendezvous of GPU ranks without a
// GPU, with a stand-in id in place of NCCL's, by the path make_nccl_comm would take (MPI under
// mpirun or srun --mpi=pmix, else the folder of rendezvous.hpp): every task of an srun step prints
// its rank, world, host and the id it got, so a cluster's shared folder and Slurm environment
// can be checked (and the SLURM self-test can run the rendezvous with CPU processes) before a
// job spends hours. One task alone (no srun) meets only itself.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "headwise/core/error.hpp"
#include "data/seed_mix.hpp"
#include "headwise/dist/comm.hpp"
#include "headwise/dist/launch.hpp"
#include "headwise/dist/nccl_id.hpp"
#include "headwise/dist/rendezvous.hpp"

namespace hw::cli {

namespace {

struct LaunchCheckArgs {
  std::string dir, tag;
};

// Rank 0's stand-in id: 128 bytes from its clock and pid (different for every launch, as NCCL's is).
dist::NcclId stand_in_id() {
  dist::NcclId id{};
  uint64_t s = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^ (uint64_t(getpid()) << 32);
  for (size_t i = 0; i < id.size(); i += 8) {
    s = data::mix64(s + 0x9E3779B97F4A7C15ull);
    for (size_t k = 0; k < 8; ++k) id[i + k] = uint8_t(s >> (8 * k));
  }
  return id;
}

}  // namespace

void add_launch_check_command(CLI::App& app) {
  auto a = std::make_shared<LaunchCheckArgs>();
  CLI::App* cmd = app.add_subcommand(
      "launch-check", "Run the launch rendezvous without MPI (srun without PMIx) with a stand-in id and print it");
  cmd->add_option("--dir", a->dir, "Folder every node sees (default: $HEADWISE_NCCL_ID_DIR)");
  cmd->add_option("--tag", a->tag, "Launch tag (default: SLURM_JOB_ID.SLURM_STEP_ID)");
  cmd->callback([a] {
    const dist::LaunchInfo launch = dist::read_launch_info();
    dist::NcclId id{};
    const char* path = "file";
    if (launch.wants_mpi()) {  // mpirun or srun --mpi=pmix: the id goes over MPI, as make_nccl_comm sends it
      path = "mpi";
      const std::unique_ptr<dist::Comm> comm = dist::make_comm("auto");
      if (comm->rank() == 0) id = stand_in_id();
      dist::share_nccl_id(*comm, id);
    } else {
      std::string dir = a->dir;
      if (dir.empty() && std::getenv(dist::kNcclIdDirVar)) dir = std::getenv(dist::kNcclIdDirVar);
      check(!dir.empty(), std::string("launch-check needs --dir or ") + dist::kNcclIdDirVar +
                              " (a folder every node of the job sees)");
      const std::string tag = a->tag.empty() ? dist::default_nccl_id_tag() : a->tag;
      check(!tag.empty(), "launch-check needs --tag or SLURM_JOB_ID (to tell launches apart)");
      id = dist::rendezvous_through_files(launch, dir, tag, dist::rendezvous_timeout_s(), stand_in_id);
    }
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    std::string hex;
    for (size_t i = 0; i < 8; ++i) {
      char b[3];
      std::snprintf(b, sizeof b, "%02x", id[i]);
      hex += b;
    }
    std::printf("launch-check: rank %d of %d (local %d) on %s: id %s (launcher %s, through %s)\n", launch.rank,
                launch.world, launch.local_rank, host, hex.c_str(), launch.launcher.c_str(), path);
  });
}

}  // namespace hw::cli
