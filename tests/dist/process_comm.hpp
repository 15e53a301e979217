#pragma once
// The communicator of this test process: MPI when the build has it (world 1 when run plainly,
// world N under mpirun -np N), else the local one. Collective tests use CHECK, not REQUIRE, so
// that a failure on one rank does not skip collectives the other ranks are waiting in.
//
// On a GPU node, HEADWISE_TEST_NCCL=1 adds the NCCL communicator to the collective tests, with
// the buffers in device memory (docs/distributed.md has the command).
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "headwise/core/device_memory.hpp"
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

// True when HEADWISE_TEST_NCCL=1 asks for the NCCL tests and a GPU is visible.
inline bool nccl_tests_enabled() {
  const char* v = std::getenv("HEADWISE_TEST_NCCL");
  return v != nullptr && std::string(v) == "1" && hw::device::available();
}

// The NCCL communicator, joined once per process (joining takes a while), or null when the
// NCCL tests are off.
inline std::shared_ptr<Comm> nccl_comm() {
  static const std::shared_ptr<Comm> comm = nccl_tests_enabled() ? std::shared_ptr<Comm>(make_comm("nccl")) : nullptr;
  return comm;
}

// LocalComm, the process communicator, the process communicator with a 3-element limit (so
// that the piecewise large-count paths run too) and, when enabled, the NCCL communicator.
inline std::vector<std::shared_ptr<Comm>> all_comms() {
  std::vector<std::shared_ptr<Comm>> comms;
  comms.push_back(std::make_shared<LocalComm>());
  comms.push_back(process_comm());
  comms.push_back(process_comm(3));
  if (auto nccl = nccl_comm()) comms.push_back(nccl);
  return comms;
}

// Runs fn(p) with p pointing at the vector's contents in the memory `comm` works on: a device
// copy for a GPU communicator (copied back when fn returns; the copy follows the legacy default
// stream, which the unbound communicator orders its work after), the vector itself otherwise.
template <class T, class Fn>
void on_comm_memory(Comm& comm, std::vector<T>& v, Fn fn) {
  if (!comm.device_buffers()) {
    fn(v.data());
    return;
  }
  const std::size_t bytes = v.size() * sizeof(T);
  void* d = bytes > 0 ? hw::device::alloc(bytes, "test buffer") : nullptr;
  try {
    hw::device::copy_to_device(d, v.data(), bytes);
    fn(static_cast<T*>(d));
    hw::device::copy_to_host(v.data(), d, bytes);
  } catch (...) {
    hw::device::free(d);
    throw;
  }
  hw::device::free(d);
}

}  // namespace hw::dist::test
