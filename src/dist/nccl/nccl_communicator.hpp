#pragma once
// NcclComm, the NCCL communicator (public contract in include/headwise/dist/nccl_comm.hpp).
// Private to hw_nccl: nccl_comm.cpp builds and tears it down (GPU, stream, events, NCCL
// communicator, errors), nccl_collectives.cpp holds the collectives.
//
// Unverified: this machine and CI have no GPU, so this code is compiled, not run. The test
// command for a GPU node is in docs/distributed.md (HEADWISE_TEST_NCCL=1 mpirun -np 2 test_dist).
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "headwise/core/arena.hpp"
#include "headwise/dist/comm.hpp"
#include "headwise/dist/nccl_comm.hpp"

namespace hw::dist {

class NcclComm final : public Comm {
 public:
  explicit NcclComm(NcclJoin join);
  ~NcclComm() override;

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  int local_rank() const override { return local_rank_; }
  std::string name() const override { return "nccl"; }
  bool device_buffers() const override { return true; }
  // Throws when the stream belongs to another GPU (a backend created before the communicator
  // selected this rank's GPU).
  void bind_stream(void* cuda_stream) override;

  void allreduce_sum(float* data, std::int64_t count) override;
  void allreduce_sum(double* data, std::int64_t count) override;
  double allreduce_max(double value) override;
  void broadcast(void* data, std::int64_t bytes, int root) override;
  void barrier() override;
  void reduce_scatter_sum(float* data, std::int64_t count) override;
  void all_gather(float* data, std::int64_t count) override;
  [[noreturn]] void abort(int exit_code) override;

  Request allreduce_sum_async(float* data, std::int64_t count) override;
  void wait(Request& request) override;

 protected:
  std::uint64_t local_hash(const void* data, std::int64_t bytes) override;

 private:
  // --- nccl_comm.cpp: plumbing ---
  // hw::Error "call: reason (rank r)" for a failed NCCL / CUDA call.
  void nccl_ok(ncclResult_t result, const char* call);
  void cuda_ok(cudaError_t result, const char* call);
  // Makes this rank's GPU current for the calling thread.
  void use_device();
  // True for memory the GPU can address (device or managed memory of this rank's GPU), false
  // for host memory; another GPU's memory is an error naming `call`.
  bool on_device(const void* data, const char* call);
  // The communication stream waits for everything enqueued so far on the compute stream.
  void after_compute();
  // The host waits for the communication stream, checking NCCL's asynchronous errors while it
  // waits (a rank that died must not leave this one blocked forever).
  void sync(const char* call);
  // The owned device buffer for host-memory calls, at least `bytes` long (grows, never shrinks).
  void* staging(std::size_t bytes);
  // A free request slot with its completion event.
  int take_slot();
  void release() noexcept;

  // --- nccl_collectives.cpp ---
  // Runs a host-memory collective through the staging buffer in pieces: for each piece,
  // `bytes` of `host` go to the GPU, enqueue(device_ptr, elements) launches the NCCL call on
  // the communication stream, and the result comes back.
  template <class Enqueue>
  void through_staging(void* host, std::size_t bytes, std::size_t elem_bytes, const char* call, Enqueue enqueue);
  void allreduce_device(void* data, std::size_t count, ncclDataType_t type, ncclRedOp_t op, const char* call);

  int rank_ = 0;
  int world_ = 1;
  int local_rank_ = 0;
  int device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;   // owned: every NCCL call goes here, in call order
  cudaStream_t compute_ = nullptr;  // bound (not owned); nullptr = the legacy default stream
  cudaEvent_t ready_ = nullptr;     // recorded on compute_ before each collective
  std::vector<cudaEvent_t> done_;   // per request slot: recorded after its collective
  std::vector<char> busy_;          // per request slot
  Arena staging_{"nccl.staging", Device::CUDA};
  std::size_t staging_bytes_ = 0;
  std::vector<unsigned char> host_copy_;  // local_hash of device memory, piece by piece
  bool broken_ = false;  // an asynchronous NCCL error: the communicator can only be aborted
  std::unique_ptr<Comm> bootstrap_;
};

}  // namespace hw::dist
