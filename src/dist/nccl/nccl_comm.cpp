// NcclComm plumbing: joining (GPU, stream, ncclCommInitRank), errors, the stream handshake
// with the compute stream, the staging buffer, request slots, abort and teardown.
// Unverified on GPUs (none here): compiled only; see nccl_communicator.hpp.
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "dist/nccl/nccl_communicator.hpp"
#include "headwise/core/device_memory.hpp"
#include "headwise/core/error.hpp"

namespace hw::dist {

static_assert(sizeof(ncclUniqueId) == kNcclIdBytes, "NCCL_UNIQUE_ID_BYTES changed");

std::string nccl_unavailable_reason() {
  if (hw::device::available()) return "";
  return hw::device::describe() + " (check CUDA_VISIBLE_DEVICES and the job's GPU request)";
}

NcclId new_nccl_id() {
  ncclUniqueId uid{};
  const ncclResult_t r = ncclGetUniqueId(&uid);
  if (r != ncclSuccess) fail(std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
  NcclId id{};
  std::memcpy(id.data(), uid.internal, id.size());
  return id;
}

std::unique_ptr<Comm> join_nccl(NcclJoin join) { return std::make_unique<NcclComm>(std::move(join)); }

NcclComm::NcclComm(NcclJoin join)
    : rank_(join.rank), world_(join.world), local_rank_(join.local_rank), bootstrap_(std::move(join.bootstrap)) {
  check(world_ >= 1 && rank_ >= 0 && rank_ < world_ && local_rank_ >= 0,
        "communicator 'nccl': rank " + std::to_string(rank_) + " of " + std::to_string(world_) + " is not a rank");
  try {
    const int gpus = hw::device::count();
    check(gpus > 0, "communicator 'nccl' (rank " + std::to_string(rank_) + "): " + hw::device::describe());
    device_ = local_rank_ % gpus;
    hw::device::select(device_);
    // The highest priority, so the collectives' kernels are scheduled ahead of backward's
    // when both are ready: the communication is what the overlap waits for.
    int least = 0, greatest = 0;
    cuda_ok(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange");
    cuda_ok(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest), "cudaStreamCreateWithPriority");
    cuda_ok(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    ncclUniqueId uid{};
    std::memcpy(uid.internal, join.id.data(), join.id.size());
    nccl_ok(ncclCommInitRank(&comm_, world_, uid, rank_), "ncclCommInitRank");
  } catch (...) {
    release();
    throw;
  }
}

NcclComm::~NcclComm() {
  if (comm_ != nullptr && !broken_) {
    try {
      sync("ncclCommDestroy");  // let issued collectives finish; an error here aborts below
    } catch (const Error&) {
      broken_ = true;
    }
  }
  release();
}

void NcclComm::release() noexcept {
  if (comm_ != nullptr) {
    if (broken_)
      (void)ncclCommAbort(comm_);
    else
      (void)ncclCommDestroy(comm_);
    comm_ = nullptr;
  }
  for (cudaEvent_t e : done_) (void)cudaEventDestroy(e);
  done_.clear();
  if (ready_ != nullptr) (void)cudaEventDestroy(ready_);
  ready_ = nullptr;
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

void NcclComm::bind_stream(void* cuda_stream) {
  auto* stream = static_cast<cudaStream_t>(cuda_stream);
#if CUDART_VERSION >= 12080
  if (stream != nullptr) {
    int dev = -1;
    cuda_ok(cudaStreamGetDevice(stream, &dev), "cudaStreamGetDevice");
    check(dev == device_, "bind_stream: the compute stream is on GPU " + std::to_string(dev) + " but rank " +
                              std::to_string(rank_) + " communicates from GPU " + std::to_string(device_) +
                              ": create the communicator (which selects the GPU) before the backend");
  }
#endif
  compute_ = stream;
}

void NcclComm::nccl_ok(ncclResult_t result, const char* call) {
  if (result == ncclSuccess) return;
  // Argument errors leave the communicator usable; anything else means it cannot be trusted.
  if (result != ncclInvalidArgument && result != ncclInvalidUsage) broken_ = true;
  std::string msg = std::string(call) + ": " + ncclGetErrorString(result) + " (rank " + std::to_string(rank_) + ")";
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
  if (comm_ != nullptr) {
    std::string detail = ncclGetLastError(comm_);
    for (char& c : detail)
      if (c == '\n' || c == '\r') c = ' ';
    if (!detail.empty()) msg += ": " + detail;
  }
#endif
  fail(msg);
}

void NcclComm::cuda_ok(cudaError_t result, const char* call) {
  if (result == cudaSuccess) return;
  fail(std::string(call) + ": " + cudaGetErrorString(result) + " (rank " + std::to_string(rank_) + ")");
}

void NcclComm::use_device() {
  check(!broken_, "communicator 'nccl' (rank " + std::to_string(rank_) +
                      ") is unusable after an earlier NCCL error");
  cuda_ok(cudaSetDevice(device_), "cudaSetDevice");
}

bool NcclComm::on_device(const void* data, const char* call) {
  cudaPointerAttributes a{};
  const cudaError_t e = cudaPointerGetAttributes(&a, data);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // not a pointer CUDA knows: host memory
    return false;
  }
  if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) return false;
  check(a.type == cudaMemoryTypeManaged || a.device == device_,
        std::string(call) + ": the buffer is on GPU " + std::to_string(a.device) + " but rank " +
            std::to_string(rank_) + " communicates from GPU " + std::to_string(device_));
  return true;
}

void NcclComm::after_compute() {
  cuda_ok(cudaEventRecord(ready_, compute_), "cudaEventRecord");
  cuda_ok(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
}

void NcclComm::sync(const char* call) {
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      broken_ = true;
      cuda_ok(e, call);
    }
    ncclResult_t async = ncclSuccess;
    nccl_ok(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
    nccl_ok(async, call);
    std::this_thread::yield();
  }
}

void* NcclComm::staging(std::size_t bytes) {
  if (bytes > staging_bytes_) {
    sync("nccl.staging");  // nothing in flight may still use the old buffer
    staging_.reset();
    const auto floats = static_cast<std::int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
    staging_.declare("buffer", {floats});
    staging_.allocate();
    // allocate() zeroes on the legacy default stream, which the non-blocking communication
    // stream does not wait for.
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    staging_bytes_ = static_cast<std::size_t>(floats) * sizeof(float);
  }
  return staging_.base();
}

int NcclComm::take_slot() {
  for (std::size_t i = 0; i < busy_.size(); ++i)
    if (!busy_[i]) {
      busy_[i] = 1;
      return static_cast<int>(i);
    }
  cudaEvent_t e = nullptr;
  cuda_ok(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  done_.push_back(e);
  busy_.push_back(1);
  return static_cast<int>(busy_.size() - 1);
}

void NcclComm::abort(int exit_code) {
  if (comm_ != nullptr) (void)ncclCommAbort(comm_);
  comm_ = nullptr;
  if (bootstrap_) bootstrap_->abort(exit_code);  // MPI_Abort: ends every rank
  std::exit(exit_code);
}

}  // namespace hw::dist
