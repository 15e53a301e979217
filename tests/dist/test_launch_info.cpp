// Reading the launcher's environment from a fake environment.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "headwise/core/error.hpp"
#include "headwise/dist/launch.hpp"

using hw::dist::LaunchInfo;
using hw::dist::read_launch_info;

namespace {
LaunchInfo read(const std::map<std::string, std::string>& vars) {
  return read_launch_info([&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}
std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    read(vars);
  } catch (const hw::Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("launch info: a plain process is rank 0 of 1") {
  const LaunchInfo li = read({});
  REQUIRE(li.launcher == "none");
  REQUIRE(li.rank == 0);
  REQUIRE(li.world == 1);
  REQUIRE(li.local_rank == 0);
  REQUIRE_FALSE(li.wants_mpi());
  REQUIRE_NOTHROW(li.check_matches(0, 1));
}

TEST_CASE("launch info: mpirun's variables") {
  const LaunchInfo li =
      read({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  REQUIRE(li.launcher == "openmpi");
  REQUIRE(li.rank == 3);
  REQUIRE(li.world == 4);
  REQUIRE(li.local_rank == 1);
  REQUIRE(li.wants_mpi());
  REQUIRE_NOTHROW(li.check_matches(3, 4));
  REQUIRE_THROWS_AS(li.check_matches(0, 1), hw::Error);
}

TEST_CASE("launch info: srun's variables, with and without PMIx") {
  // Each environment is built whole (GCC 12 warns falsely on string assignment into a map).
  auto srun_env = [](const char* rank, const char* ntasks, bool pmix) {
    std::map<std::string, std::string> vars{
        {"SLURM_PROCID", rank}, {"SLURM_NTASKS", ntasks}, {"SLURM_LOCALID", rank}, {"SLURM_STEP_ID", "0"}};
    if (pmix) vars.emplace("PMIX_RANK", rank);
    return vars;
  };
  LaunchInfo li = read(srun_env("5", "16", false));
  REQUIRE(li.launcher == "slurm");
  REQUIRE(li.rank == 5);
  REQUIRE(li.world == 16);
  REQUIRE(li.local_rank == 5);
  REQUIRE_FALSE(li.pmix);
  REQUIRE_FALSE(li.wants_mpi());  // plain srun: OpenMPI cannot find its peers

  li = read(srun_env("5", "16", true));
  REQUIRE(li.pmix);
  REQUIRE(li.wants_mpi());

  // A one-task step needs no communication.
  REQUIRE_FALSE(read(srun_env("0", "1", true)).wants_mpi());

  // MPI disagreeing with srun names the fix.
  li = read(srun_env("0", "2", false));
  try {
    li.check_matches(0, 1);
    FAIL("check_matches accepted a world of 1 for SLURM_NTASKS=2");
  } catch (const hw::Error& e) {
    REQUIRE(std::string(e.what()).find("srun --mpi=pmix") != std::string::npos);
  }
}

TEST_CASE("launch info: the batch script itself is not a rank of a launch") {
  // sbatch's script sees the allocation's SLURM_NTASKS but no step id.
  const LaunchInfo li = read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "0"}});
  REQUIRE(li.launcher == "none");
  REQUIRE(li.world == 1);
}

TEST_CASE("launch info: mpirun inside an sbatch script wins over the batch step") {
  const LaunchInfo li = read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_STEP_ID", "0"},
                              {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  REQUIRE(li.launcher == "openmpi");
  REQUIRE(li.rank == 1);
  REQUIRE(li.world == 2);
}

TEST_CASE("launch info: bad values name the variable") {
  REQUIRE(error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2x"}, {"SLURM_STEP_ID", "0"}})
              .find("SLURM_NTASKS='2x'") != std::string::npos);
  REQUIRE(error_of({{"OMPI_COMM_WORLD_RANK", ""}, {"OMPI_COMM_WORLD_SIZE", "2"}})
              .find("OMPI_COMM_WORLD_RANK=''") != std::string::npos);
  REQUIRE(error_of({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}})
              .find("SLURM_PROCID=2 outside") != std::string::npos);
  REQUIRE(error_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "0"}})
              .find("OMPI_COMM_WORLD_SIZE=0") != std::string::npos);
  REQUIRE(error_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "99999999999"}})
              .find("OMPI_COMM_WORLD_SIZE='99999999999'") != std::string::npos);
}
