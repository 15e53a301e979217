#pragma once
// The communicator of this test process: MPI when the build has it (world 1 when run plainly,
// world N under mpirun -np N), else the local one. Collective tests use CHECK, not REQUIRE, so
// that a failure on one rank does not skip collectives the other ranks are waiting in.
#include <memory>

#include "headwise/dist/local_comm.hpp"
#include "headwise/dist/mpi_comm.hpp"

namespace hw::dist::test {

inline std::unique_ptr<Comm> process_comm(std::int64_t max_chunk = std::int64_t{1} << 30) {
#ifdef HEADWISE_HAVE_MPI
  return std::make_unique<MpiComm>(max_chunk);
#else
  (void)max_chunk;
  return std::make_unique<LocalComm>();
#endif
}

}  // namespace hw::dist::test
