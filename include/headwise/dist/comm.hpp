#pragma once
// The communicator that data-parallel training talks to: gradient averaging (allreduce_sum),
// the global gradient norm (allreduce_sum of squares), ZeRO-1 (reduce_scatter_sum, update the
// own shard, all_gather) and consistency checks (all_equal, e.g. that every rank selected the
// same heads). One interface, several transports: LocalComm (one process), MpiComm (CPU ranks)
// and NcclComm (GPU ranks, src/dist/nccl; see nccl_comm.hpp).
//
// Every call is collective: all ranks must make the same calls in the same order with the same
// counts, or the job hangs. Results are deterministic for a fixed (count, world): the same
// transport splits and orders the reduction identically from run to run.
//
// Buffers: a CPU communicator (device_buffers() false) takes host memory. A GPU communicator
// (NcclComm, device_buffers() true) takes device memory of its GPU for every call, and host
// memory too (staged through a device buffer it owns: correct, not fast; meant for the small
// host-side sums such as calibration statistics, the loss and all_equal).
#include <cstdint>
#include <memory>
#include <string>

namespace hw::dist {

// A half-open range [begin, end) of element indices.
struct Range {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end - begin; }
};

// ZeRO-1 sharding of n elements over `world` ranks: with c = ceil(n / world), rank r owns
// [r*c, (r+1)*c) clipped to [0, n). The ranges are contiguous, in rank order, and cover [0, n)
// exactly; trailing ranks may own an empty range when n is small (n = 5, world = 4 gives sizes
// 2, 2, 1, 0). Throws hw::Error for world < 1, rank outside [0, world) or n < 0.
Range shard_range(std::int64_t n, int rank, int world);

class Comm;

// A started asynchronous collective (Comm::allreduce_sum_async): pass it to wait() of the
// communicator that started it, exactly once, before the buffer is read or changed. Move-only,
// so a pending collective cannot be waited for twice through a copy; a default-constructed or
// waited-for request is not pending.
class Request {
 public:
  Request() = default;
  Request(Request&& other) noexcept : owner_(other.owner_), slot_(other.slot_) { other.owner_ = nullptr; }
  // Throws hw::Error when *this is still pending: overwriting it would lose the collective.
  Request& operator=(Request&& other);
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request() = default;

  bool pending() const { return owner_ != nullptr; }

 private:
  friend class Comm;
  const Comm* owner_ = nullptr;
  int slot_ = -1;  // the communicator's bookkeeping slot for this collective
};

class Comm {
 public:
  virtual ~Comm() = default;
  Comm() = default;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  virtual int rank() const = 0;
  virtual int world() const = 0;
  // Rank among the processes on this node (picks the GPU of a GPU rank).
  virtual int local_rank() const = 0;
  virtual std::string name() const = 0;

  // In place: data[i] becomes the sum over ranks of data[i].
  virtual void allreduce_sum(float* data, std::int64_t count) = 0;
  virtual void allreduce_sum(double* data, std::int64_t count) = 0;
  // The largest `value` over ranks.
  virtual double allreduce_max(double value) = 0;
  // Copies `bytes` bytes from rank `root` to every rank.
  virtual void broadcast(void* data, std::int64_t bytes, int root) = 0;
  virtual void barrier() = 0;

  // ZeRO-1, in place over the same `count` on every rank. reduce_scatter_sum: afterwards the
  // own shard shard_range(count, rank(), world()) of data holds the sum over ranks of that
  // shard; entries outside the own shard are unspecified. all_gather: every rank contributes
  // its own shard and afterwards holds all of [0, count).
  virtual void reduce_scatter_sum(float* data, std::int64_t count) = 0;
  virtual void all_gather(float* data, std::int64_t count) = 0;

  // Asynchronous allreduce_sum (bucketed gradient reduction overlapped with backward, see
  // grad_buckets.hpp). Starts the in-place sum and returns at once; after wait(request),
  // data[i] holds the sum: for a CPU communicator in host memory when wait returns, for a GPU
  // communicator for all work enqueued afterwards on the bound stream (wait does not block the
  // host). Asynchronous collectives are started in the same order on every rank, like every
  // other call; they may be waited for in any order, and blocking calls may come in between.
  // Several may be pending at once; the buffers of pending ones must not overlap.
  //
  // The result equals allreduce_sum of the same floats bit for bit when world <= 2 (each sum
  // is a + b, in either order the same float). MpiComm with more ranks: see mpi_comm.hpp.
  // The default (LocalComm, test doubles) runs the blocking allreduce_sum and returns a
  // request that is already complete.
  virtual Request allreduce_sum_async(float* data, std::int64_t count);
  // Completes `request` (see above) and leaves it not pending. Throws hw::Error for a request
  // that is not pending or was started by another communicator.
  virtual void wait(Request& request);

  // GPU communicators: the CUDA stream (a cudaStream_t) whose work every later collective must
  // follow, i.e. the compute stream that writes the gradients; nullptr means the legacy default
  // stream. CPU communicators ignore it.
  virtual void bind_stream(void* cuda_stream) { (void)cuda_stream; }
  // True when the float collectives expect device memory (a GPU communicator).
  virtual bool device_buffers() const { return false; }

  // Ends every rank now with `exit_code`. Call after an error on one rank when the others may
  // be waiting in a collective: a plain exit would leave them (and the job) hanging.
  [[noreturn]] virtual void abort(int exit_code) = 0;

  // True on every rank iff every rank holds the same `bytes` bytes (a length difference counts
  // as a difference). Compares a 64-bit hash of the bytes with rank 0's: collective, cheap.
  bool all_equal(const void* data, std::int64_t bytes);

 protected:
  // For implementations: a pending request of this communicator in `slot`, and taking a
  // request back in wait (checks it is pending and ours, names `what` otherwise; leaves it
  // not pending and returns its slot).
  Request start_request(int slot) const;
  int finish_request(Request& request, const char* what) const;
  // bytes_hash of `bytes` bytes at `data`, for all_equal; a GPU communicator also reads device
  // memory.
  virtual std::uint64_t local_hash(const void* data, std::int64_t bytes);
};

// kind: "auto" (MPI when launched by mpirun or by srun --mpi=pmix with more than one task and
// headwise was built with MPI, otherwise local; a multi-task launch without a way to talk is an
// error), "local", "mpi", "nccl" (GPU ranks: one NCCL communicator over every rank of the
// launch, see nccl_comm.hpp; needs the CUDA build and a GPU). Throws hw::Error otherwise.
// make_comm("auto") never picks NCCL: GPU training resolves its kind first with
// resolve_comm_kind (train/experiment commands do), which asks for "nccl" when train.device is
// "cuda" and the launch has more than one rank; one GPU rank needs no communicator beyond "local".
std::unique_ptr<Comm> make_comm(const std::string& kind);
// The communicator a training run uses for train.comm = `kind`: "auto" becomes "nccl" for GPU
// training launched as several ranks (gradients live on the GPUs); anything else is kept.
std::string resolve_comm_kind(const std::string& kind, bool gpu_training);

// An update's time across ranks, as the paper's multi-GPU update speed: the slowest rank's
// (each rank's time includes the gradient all-reduce); collective, every rank gets the same.
// (The process's own measures, wall time and memory, are core/process_stats.hpp.)
double slowest_rank_ms(Comm& comm, double ms);

// 64-bit FNV-1a of the bytes, then of the length (so "" and "\0" differ). Used by all_equal.
std::uint64_t bytes_hash(const void* data, std::int64_t bytes);
// The same hash fed piece by piece: start with kFnvOffset, add each piece in order with
// fnv1a_update, end with fnv1a_finish(h, total bytes); equals bytes_hash of the whole.
inline constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
std::uint64_t fnv1a_update(std::uint64_t h, const void* data, std::int64_t bytes);
std::uint64_t fnv1a_finish(std::uint64_t h, std::int64_t total_bytes);

}  // namespace hw::dist
