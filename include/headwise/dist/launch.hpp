#pragma once
// Where this process sits in a multi-process launch, read from the launcher's environment
// before any communicator exists: srun sets SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID,
// OpenMPI's mpirun sets OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK. mpirun's variables win when
// both are present (mpirun inside an sbatch script inherits the batch step's SLURM_* values).
#include <functional>
#include <string>

namespace hw::dist {

struct LaunchInfo {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  // "none" (a plain process), "openmpi" (mpirun) or "slurm" (srun).
  std::string launcher = "none";
  // srun started the tasks with PMIx (srun --mpi=pmix): MPI_Init can find its peers.
  bool pmix = false;
  // The variable names the values came from, for error messages.
  std::string rank_var;
  std::string world_var;

  // True when the processes of this launch should talk through MPI: started by mpirun, or by
  // srun --mpi=pmix with more than one task.
  bool wants_mpi() const;
  // Throws hw::Error unless MPI's view of the job agrees with the launcher's.
  void check_matches(int mpi_rank, int mpi_world) const;
};

using EnvLookup = std::function<const char*(const char*)>;

// Reads the launch from `env` (std::getenv by default). Throws hw::Error naming the variable
// when a value is not a number or out of range (rank >= world, ...).
LaunchInfo read_launch_info(const EnvLookup& env);
LaunchInfo read_launch_info();

}  // namespace hw::dist
