// Reading the launcher's environment (see launch.hpp).
#include "headwise/dist/launch.hpp"

#include <cerrno>
#include <cstdlib>
#include <limits>

#include "headwise/core/error.hpp"

namespace hw::dist {
namespace {

// The integer value of `name`, or `fallback` when unset. Rejects "", "2x", "-", overflow.
int env_int(const EnvLookup& env, const char* name, int fallback) {
  const char* v = env(name);
  if (v == nullptr) return fallback;
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  check(end != v && *end == '\0' && errno == 0 && x >= std::numeric_limits<int>::min() &&
            x <= std::numeric_limits<int>::max(),
        std::string("environment variable ") + name + "='" + v + "' is not an integer");
  return static_cast<int>(x);
}

}  // namespace

LaunchInfo read_launch_info(const EnvLookup& env) {
  LaunchInfo li;
  if (env("OMPI_COMM_WORLD_SIZE") != nullptr) {
    li.launcher = "openmpi";
    li.rank_var = "OMPI_COMM_WORLD_RANK";
    li.world_var = "OMPI_COMM_WORLD_SIZE";
    li.world = env_int(env, "OMPI_COMM_WORLD_SIZE", 1);
    li.rank = env_int(env, "OMPI_COMM_WORLD_RANK", 0);
    li.local_rank = env_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0);
  } else if (env("SLURM_PROCID") != nullptr && env("SLURM_STEP_ID") != nullptr) {
    // Only inside an srun step: the batch script itself also sees SLURM_NTASKS (the whole
    // allocation's) but is one process.
    li.launcher = "slurm";
    li.rank_var = "SLURM_PROCID";
    li.world_var = "SLURM_NTASKS";
    li.world = env_int(env, "SLURM_NTASKS", 1);
    li.rank = env_int(env, "SLURM_PROCID", 0);
    li.local_rank = env_int(env, "SLURM_LOCALID", 0);
    li.pmix = env("PMIX_RANK") != nullptr;
  } else {
    return li;
  }
  check(li.world >= 1, li.world_var + "=" + std::to_string(li.world) + " must be at least 1");
  check(li.rank >= 0 && li.rank < li.world, li.rank_var + "=" + std::to_string(li.rank) + " outside [0, " +
                                                li.world_var + "=" + std::to_string(li.world) + ")");
  check(li.local_rank >= 0 && li.local_rank < li.world,
        "local rank " + std::to_string(li.local_rank) + " from the " + li.launcher + " environment is outside [0, " +
            li.world_var + "=" + std::to_string(li.world) + ")");
  return li;
}

LaunchInfo read_launch_info() {
  return read_launch_info([](const char* name) -> const char* { return std::getenv(name); });
}

bool LaunchInfo::wants_mpi() const {
  return launcher == "openmpi" || (launcher == "slurm" && pmix && world > 1);
}

void LaunchInfo::check_matches(int mpi_rank, int mpi_world) const {
  if (launcher == "none") return;
  check(mpi_rank == rank && mpi_world == world,
        "the launcher says rank " + std::to_string(rank) + " of " + std::to_string(world) + " (" + rank_var +
            ", " + world_var + ") but MPI says rank " + std::to_string(mpi_rank) + " of " +
            std::to_string(mpi_world) + (launcher == "slurm" ? ": use `srun --mpi=pmix`" : ""));
}

}  // namespace hw::dist
