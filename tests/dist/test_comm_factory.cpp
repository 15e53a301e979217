// make_comm: the kinds, and "auto" following the launcher of this very process.
#include <catch2/catch.hpp>

#include "dist/process_comm.hpp"
#include "headwise/core/error.hpp"
#include "headwise/dist/comm.hpp"
#include "headwise/dist/launch.hpp"
#include "headwise/dist/nccl_comm.hpp"

using namespace hw::dist;

namespace {
std::string error_of(const std::string& kind) {
  try {
    make_comm(kind);
  } catch (const hw::Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("make_comm builds the local communicator and rejects unknown kinds") {
  auto local = make_comm("local");
  REQUIRE(local->name() == "local");
  REQUIRE(local->world() == 1);
  REQUIRE(local->rank() == 0);
  REQUIRE(error_of("gloo").find("unknown communicator kind 'gloo'") != std::string::npos);
}

TEST_CASE("make_comm(\"nccl\") says why it cannot join without a GPU") {
  if (hw::device::available()) {
    // A GPU here: nothing to refuse. As one process the communicator joins (a world of one
    // needs no id exchange); ranks of a multi-process launch join in HEADWISE_TEST_NCCL=1 runs.
    REQUIRE(nccl_unavailable_reason().empty());
    const LaunchInfo launch = read_launch_info();
    if (launch.world == 1) {
      auto comm = make_comm("nccl");
      REQUIRE(comm->name() == "nccl");
      REQUIRE(comm->world() == 1);
      REQUIRE(comm->rank() == 0);
    }
    return;
  }
  // The same on every rank: no GPU here, so every rank fails before any id exchange (under
  // MPI after agreeing on it, so no rank waits for another).
  const std::string e = error_of("nccl");
  INFO(e);
  REQUIRE(e.find("communicator 'nccl'") != std::string::npos);
  const bool no_cuda = e.find("built without CUDA") != std::string::npos;
  const bool no_gpu = e.find("CUDA_VISIBLE_DEVICES") != std::string::npos;
  REQUIRE((no_cuda || no_gpu));
}

TEST_CASE("make_comm(\"mpi\") follows the build") {
#ifdef HEADWISE_HAVE_MPI
  auto comm = make_comm("mpi");
  REQUIRE(comm->name() == "mpi");
  REQUIRE(comm->world() >= 1);
  REQUIRE(comm->rank() < comm->world());
  REQUIRE(comm->local_rank() <= comm->rank());  // ranks of one node here
#else
  REQUIRE(error_of("mpi").find("-DHEADWISE_MPI=ON") != std::string::npos);
#endif
}

TEST_CASE("make_comm(\"auto\") matches how this process was launched") {
  const LaunchInfo launch = read_launch_info();
  auto comm = make_comm("auto");
  REQUIRE(comm->world() == launch.world);
  REQUIRE(comm->rank() == launch.rank);
  REQUIRE(comm->name() == (launch.wants_mpi() ? "mpi" : "local"));
}
