#pragma once
// The NCCL communicator for GPU ranks: one process per GPU, every rank of the launch in one
// NCCL communicator. make_comm("nccl") calls make_nccl_comm.
//
// Joining (make_nccl_comm, src/dist/nccl_bootstrap.cpp):
//   1. rank, world and local rank from the launcher (launch.hpp: mpirun or srun);
//   2. every rank checks that it can be a GPU rank (a CUDA build, a visible GPU); under MPI the
//      ranks agree first, so one rank without a GPU stops all of them with a clear error;
//   3. rank 0 makes NCCL's unique id; it reaches the others by an MPI broadcast when the launch
//      uses MPI (mpirun, srun --mpi=pmix), otherwise through the file HEADWISE_NCCL_ID_DIR/nccl_id
//      on a filesystem every node sees (srun without PMIx; nccl_id.hpp);
//   4. the rank selects GPU local_rank % (visible GPUs) and calls ncclCommInitRank.
// So create the communicator before anything that allocates on the GPU or creates streams (the
// CUDA backend): they belong to the GPU current at the time. bind_stream refuses a stream of
// another GPU.
//
// Semantics of the collectives: comm.hpp. On this communicator:
// - float/double buffers may be device memory of this rank's GPU (the fast path) or host
//   memory (staged through an owned device buffer, "nccl.staging"; for small host-side sums);
// - the blocking calls return when the result is in memory (the host waits for the
//   communicator's stream); allreduce_sum_async + wait only order the work on the GPU streams:
//   the communication stream waits for the bound compute stream (bind_stream) at the start,
//   and wait makes the compute stream wait for the collective, without blocking the host;
// - every NCCL or CUDA failure is an hw::Error naming the call and this rank, e.g.
//   "ncclAllReduce: unhandled cuda error (rank 3)"; abort() aborts the NCCL communicator and
//   ends the job (MPI_Abort when MPI bootstrapped it).
#include <memory>
#include <string>

#include "headwise/dist/comm.hpp"
#include "headwise/dist/nccl_id.hpp"

namespace hw::dist {

// Joins every rank of the launch (the steps above). Throws hw::Error naming the missing piece.
std::unique_ptr<Comm> make_nccl_comm();

// How long ranks other than 0 wait for the id file before giving up, in seconds.
inline constexpr double kNcclIdFileTimeoutS = 600.0;

// The pieces make_nccl_comm is made of. They are implemented by hw_nccl: src/dist/nccl in a
// CUDA build, the stand-in src/runtime/none/nccl_comm.cpp otherwise.

// "" when this process can be a GPU rank, else the reason in one line (no CUDA in this build,
// no GPU visible).
std::string nccl_unavailable_reason();
// A fresh ncclUniqueId (rank 0 only).
NcclId new_nccl_id();

struct NcclJoin {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  NcclId id{};  // rank 0's unique id, the same on every rank
  // The communicator that carried the id (MPI), kept so that abort() can end every rank;
  // null when the id came through the file.
  std::unique_ptr<Comm> bootstrap;
};
// Selects the GPU and calls ncclCommInitRank (collective over the `world` ranks).
std::unique_ptr<Comm> join_nccl(NcclJoin join);

}  // namespace hw::dist
