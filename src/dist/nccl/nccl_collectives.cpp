// NcclComm's collectives. Device buffers go straight to NCCL on the communication stream
// (after the compute stream's work); host buffers go through the staging buffer in pieces.
// Unverified on GPUs (none here): compiled only; see nccl_communicator.hpp.
#include <algorithm>
#include <string>

#include "dist/nccl/nccl_communicator.hpp"
#include "headwise/core/error.hpp"

namespace hw::dist {
namespace {

// Host-memory calls move at most this much per piece, so the staging buffer stays small.
constexpr std::size_t kStagingPieceBytes = std::size_t{16} << 20;

void check_buffer(const char* what, std::int64_t count, const void* data) {
  check(count >= 0, std::string(what) + ": count " + std::to_string(count) + " is negative");
  check(count == 0 || data != nullptr, std::string(what) + ": null buffer");
}

std::size_t as_size(std::int64_t n) { return static_cast<std::size_t>(n); }

}  // namespace

template <class Enqueue>
void NcclComm::through_staging(void* host, std::size_t bytes, std::size_t elem_bytes, const char* call,
                               Enqueue enqueue) {
  if (bytes == 0) return;
  const std::size_t piece = std::max(elem_bytes, kStagingPieceBytes / elem_bytes * elem_bytes);
  void* dev = staging(std::min(bytes, piece));
  auto* h = static_cast<unsigned char*>(host);
  for (std::size_t off = 0; off < bytes; off += piece) {
    const std::size_t n = std::min(piece, bytes - off);
    cuda_ok(cudaMemcpyAsync(dev, h + off, n, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (to the GPU)");
    enqueue(dev, n / elem_bytes);
    sync(call);  // polls NCCL's errors; the copy back below would block without polling
    cuda_ok(cudaMemcpyAsync(h + off, dev, n, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (from the GPU)");
    sync(call);
  }
}

void NcclComm::allreduce_device(void* data, std::size_t count, ncclDataType_t type, ncclRedOp_t op,
                                const char* call) {
  after_compute();
  nccl_ok(ncclAllReduce(data, data, count, type, op, comm_, stream_), call);
  sync(call);
}

void NcclComm::allreduce_sum(float* data, std::int64_t count) {
  check_buffer("allreduce_sum", count, data);
  if (count == 0) return;
  use_device();
  if (on_device(data, "allreduce_sum")) return allreduce_device(data, as_size(count), ncclFloat32, ncclSum, "ncclAllReduce");
  through_staging(data, as_size(count) * sizeof(float), sizeof(float), "ncclAllReduce", [this](void* d, std::size_t n) {
    nccl_ok(ncclAllReduce(d, d, n, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce");
  });
}

void NcclComm::allreduce_sum(double* data, std::int64_t count) {
  check_buffer("allreduce_sum", count, data);
  if (count == 0) return;
  use_device();
  if (on_device(data, "allreduce_sum")) return allreduce_device(data, as_size(count), ncclFloat64, ncclSum, "ncclAllReduce");
  through_staging(data, as_size(count) * sizeof(double), sizeof(double), "ncclAllReduce", [this](void* d, std::size_t n) {
    nccl_ok(ncclAllReduce(d, d, n, ncclFloat64, ncclSum, comm_, stream_), "ncclAllReduce");
  });
}

double NcclComm::allreduce_max(double value) {
  use_device();
  through_staging(&value, sizeof value, sizeof value, "ncclAllReduce", [this](void* d, std::size_t n) {
    nccl_ok(ncclAllReduce(d, d, n, ncclFloat64, ncclMax, comm_, stream_), "ncclAllReduce");
  });
  return value;
}

void NcclComm::broadcast(void* data, std::int64_t bytes, int root) {
  check_buffer("broadcast", bytes, data);
  check(root >= 0 && root < world_,
        "broadcast: root " + std::to_string(root) + " outside [0, " + std::to_string(world_) + ")");
  if (bytes == 0) return;
  use_device();
  if (on_device(data, "broadcast")) {
    after_compute();
    nccl_ok(ncclBroadcast(data, data, as_size(bytes), ncclUint8, root, comm_, stream_), "ncclBroadcast");
    return sync("ncclBroadcast");
  }
  through_staging(data, as_size(bytes), 1, "ncclBroadcast", [this, root](void* d, std::size_t n) {
    nccl_ok(ncclBroadcast(d, d, n, ncclUint8, root, comm_, stream_), "ncclBroadcast");
  });
}

void NcclComm::barrier() {
  // NCCL has no barrier: a one-float sum that every rank must enter, and the host waits for.
  use_device();
  float token = 0.0f;
  through_staging(&token, sizeof token, sizeof token, "ncclAllReduce (barrier)", [this](void* d, std::size_t n) {
    nccl_ok(ncclAllReduce(d, d, n, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce (barrier)");
  });
}

// ZeRO-1 shards (shard_range) are ceil(count / world) long except at the end. When count is a
// multiple of world they are exactly NCCL's equal chunks and ncclReduceScatter works in place
// (recvbuff = sendbuff + rank * chunk). Otherwise one ncclReduce per shard to its owner, fused
// by a group into one launch: the same result without a padded copy of the whole block.
void NcclComm::reduce_scatter_sum(float* data, std::int64_t count) {
  check_buffer("reduce_scatter_sum", count, data);
  if (world_ == 1 || count == 0) return;
  use_device();
  if (!on_device(data, "reduce_scatter_sum")) {
    // Host memory: a full sum leaves the own shard right (the rest is unspecified anyway).
    through_staging(data, as_size(count) * sizeof(float), sizeof(float), "ncclAllReduce (reduce_scatter_sum)",
                    [this](void* d, std::size_t n) {
                      nccl_ok(ncclAllReduce(d, d, n, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce");
                    });
    return;
  }
  after_compute();
  if (count % world_ == 0) {
    const std::int64_t chunk = count / world_;
    nccl_ok(ncclReduceScatter(data, data + rank_ * chunk, as_size(chunk), ncclFloat32, ncclSum, comm_, stream_),
            "ncclReduceScatter");
    return sync("ncclReduceScatter");
  }
  nccl_ok(ncclGroupStart(), "ncclGroupStart");
  ncclResult_t first = ncclSuccess;
  for (int r = 0; r < world_ && first == ncclSuccess; ++r) {
    const Range s = shard_range(count, r, world_);
    if (s.size() > 0)
      first = ncclReduce(data + s.begin, data + s.begin, as_size(s.size()), ncclFloat32, ncclSum, r, comm_, stream_);
  }
  const ncclResult_t end = ncclGroupEnd();  // always closes the group, even after an error
  nccl_ok(first, "ncclReduce (reduce_scatter_sum)");
  nccl_ok(end, "ncclGroupEnd (reduce_scatter_sum)");
  sync("ncclReduce (reduce_scatter_sum)");
}

// The mirror image: in-place ncclAllGather (sendbuff = recvbuff + rank * chunk) for equal
// chunks, else one ncclBroadcast per shard from its owner in one group.
void NcclComm::all_gather(float* data, std::int64_t count) {
  check_buffer("all_gather", count, data);
  if (world_ == 1 || count == 0) return;
  use_device();
  if (!on_device(data, "all_gather")) {
    for (int r = 0; r < world_; ++r) {
      const Range s = shard_range(count, r, world_);
      through_staging(data + s.begin, as_size(s.size()) * sizeof(float), sizeof(float), "ncclBroadcast (all_gather)",
                      [this, r](void* d, std::size_t n) {
                        nccl_ok(ncclBroadcast(d, d, n, ncclFloat32, r, comm_, stream_), "ncclBroadcast");
                      });
    }
    return;
  }
  after_compute();
  if (count % world_ == 0) {
    const std::int64_t chunk = count / world_;
    nccl_ok(ncclAllGather(data + rank_ * chunk, data, as_size(chunk), ncclFloat32, comm_, stream_), "ncclAllGather");
    return sync("ncclAllGather");
  }
  nccl_ok(ncclGroupStart(), "ncclGroupStart");
  ncclResult_t first = ncclSuccess;
  for (int r = 0; r < world_ && first == ncclSuccess; ++r) {
    const Range s = shard_range(count, r, world_);
    if (s.size() > 0)
      first = ncclBroadcast(data + s.begin, data + s.begin, as_size(s.size()), ncclFloat32, r, comm_, stream_);
  }
  const ncclResult_t end = ncclGroupEnd();
  nccl_ok(first, "ncclBroadcast (all_gather)");
  nccl_ok(end, "ncclGroupEnd (all_gather)");
  sync("ncclBroadcast (all_gather)");
}

Request NcclComm::allreduce_sum_async(float* data, std::int64_t count) {
  check_buffer("allreduce_sum_async", count, data);
  use_device();
  const int slot = take_slot();
  try {
    if (count > 0 && on_device(data, "allreduce_sum_async")) {
      after_compute();
      nccl_ok(ncclAllReduce(data, data, as_size(count), ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce");
    } else {
      allreduce_sum(data, count);  // host memory: done before this returns
    }
    cuda_ok(cudaEventRecord(done_[static_cast<std::size_t>(slot)], stream_), "cudaEventRecord");
  } catch (...) {
    busy_[static_cast<std::size_t>(slot)] = 0;
    throw;
  }
  return start_request(slot);
}

void NcclComm::wait(Request& request) {
  const auto slot = static_cast<std::size_t>(finish_request(request, "wait"));
  busy_[slot] = 0;
  use_device();
  // The compute stream, not the host, waits: later kernels see the sums. (Asynchronous NCCL
  // errors surface at the next blocking call, whose sync follows this collective in stream order.)
  cuda_ok(cudaStreamWaitEvent(compute_, done_[slot], 0), "cudaStreamWaitEvent");
}

std::uint64_t NcclComm::local_hash(const void* data, std::int64_t bytes) {
  if (bytes == 0) return bytes_hash(data, bytes);
  use_device();
  if (!on_device(data, "all_equal")) return bytes_hash(data, bytes);
  after_compute();  // hash what the compute stream has written
  const std::size_t piece = std::min(as_size(bytes), kStagingPieceBytes);
  host_copy_.resize(std::max(host_copy_.size(), piece));
  const auto* d = static_cast<const unsigned char*>(data);
  std::uint64_t h = kFnvOffset;
  for (std::size_t off = 0; off < as_size(bytes); off += piece) {
    const std::size_t n = std::min(piece, as_size(bytes) - off);
    cuda_ok(cudaMemcpyAsync(host_copy_.data(), d + off, n, cudaMemcpyDeviceToHost, stream_),
            "cudaMemcpyAsync (all_equal)");
    sync("cudaMemcpyAsync (all_equal)");
    h = fnv1a_update(h, host_copy_.data(), static_cast<std::int64_t>(n));
  }
  return fnv1a_finish(h, bytes);
}

}  // namespace hw::dist
