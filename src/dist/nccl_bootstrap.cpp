// make_nccl_comm: from the launcher's environment to a joined NCCL communicator (steps in
// nccl_comm.hpp). It lives in hw_dist, not hw_nccl, because it needs the launch info, MPI and
// the id exchange; hw_nccl only makes the id and joins.
#include <cstdlib>
#include <memory>
#include <string>

#include "headwise/core/error.hpp"
#include "headwise/dist/launch.hpp"
#include "headwise/dist/mpi_comm.hpp"
#include "headwise/dist/nccl_comm.hpp"
#include "headwise/dist/nccl_id.hpp"
#include "headwise/dist/rendezvous.hpp"

namespace hw::dist {
namespace {

// Under MPI: every rank learns whether any rank cannot be a GPU rank before anyone waits for
// the id, so a rank without a GPU stops the job instead of leaving the others blocked.
void agree_all_can_join(Comm& bootstrap, const std::string& reason) {
  const double bad = bootstrap.allreduce_max(reason.empty() ? 0.0 : 1.0);
  if (!reason.empty()) fail("communicator 'nccl' (rank " + std::to_string(bootstrap.rank()) + "): " + reason);
  check(bad == 0.0, "communicator 'nccl': another rank cannot use NCCL (see its error)");
}

// The id through DIR (no MPI, e.g. srun without PMIx): the file rendezvous (rendezvous.hpp).
NcclId exchange_through_file(const LaunchInfo& launch) {
  const char* dir = std::getenv(kNcclIdDirVar);
  check(dir != nullptr && *dir != '\0',
        "communicator 'nccl': " + std::to_string(launch.world) + " ranks (" + launch.world_var +
            ") without MPI: set " + kNcclIdDirVar + " to a folder every node sees, or launch with `srun --mpi=pmix`"
            " or mpirun");
  const std::string tag = default_nccl_id_tag();
  // Without a launch tag a file left by an earlier job could be taken for this one's.
  check(!tag.empty(), std::string("communicator 'nccl': the id file needs SLURM_JOB_ID to tell launches apart (") +
                          launch.launcher + " launch without MPI)");
  // Every rank arrives before rank 0 makes the id, so a missing rank is an error after the
  // timeout rather than NCCL's init waiting for it forever.
  return rendezvous_through_files(launch, dir, tag, rendezvous_timeout_s(), new_nccl_id);
}

std::unique_ptr<Comm> mpi_bootstrap(const LaunchInfo& launch) {
#ifdef HEADWISE_HAVE_MPI
  (void)launch;
  return std::make_unique<MpiComm>();
#else
  (void)launch;
  return nullptr;  // a build without MPI: the file exchange
#endif
}

}  // namespace

std::unique_ptr<Comm> make_nccl_comm() {
  const LaunchInfo launch = read_launch_info();
  NcclJoin join;
  join.rank = launch.rank;
  join.world = launch.world;
  join.local_rank = launch.local_rank;
  const std::string reason = nccl_unavailable_reason();
  if (launch.wants_mpi()) join.bootstrap = mpi_bootstrap(launch);
  if (join.bootstrap) {
    agree_all_can_join(*join.bootstrap, reason);
    // MPI's view wins (MpiComm checked that it agrees with the launcher's).
    join.rank = join.bootstrap->rank();
    join.world = join.bootstrap->world();
    join.local_rank = join.bootstrap->local_rank();
    if (join.rank == 0) join.id = new_nccl_id();
    share_nccl_id(*join.bootstrap, join.id);
  } else {
    if (!reason.empty()) fail("communicator 'nccl': " + reason);
    join.id = launch.world == 1 ? new_nccl_id() : exchange_through_file(launch);
  }
  return join_nccl(std::move(join));
}

}  // namespace hw::dist
