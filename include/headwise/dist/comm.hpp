#pragma once
// The communicator that data-parallel training talks to: gradient averaging (allreduce_sum),
// the global gradient norm (allreduce_sum of squares), ZeRO-1 (reduce_scatter_sum, update the
// own shard, all_gather) and consistency checks (all_equal, e.g. that every rank selected the
// same heads). One interface, several transports: LocalComm (one process), MpiComm (CPU ranks),
// and later an NCCL communicator for GPU ranks (comes with the CUDA backend).
//
// Every call is collective: all ranks must make the same calls in the same order with the same
// counts, or the job hangs. Results are deterministic for a fixed (count, world): the same
// transport splits and orders the reduction identically from run to run.
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

  // Ends every rank now with `exit_code`. Call after an error on one rank when the others may
  // be waiting in a collective: a plain exit would leave them (and the job) hanging.
  [[noreturn]] virtual void abort(int exit_code) = 0;

  // True on every rank iff every rank holds the same `bytes` bytes (a length difference counts
  // as a difference). Compares a 64-bit hash of the bytes with rank 0's: collective, cheap.
  bool all_equal(const void* data, std::int64_t bytes);
};

// kind: "auto" (MPI when launched by mpirun or by srun --mpi=pmix with more than one task and
// headwise was built with MPI, otherwise local; a multi-task launch without a way to talk is an
// error), "local", "mpi", "nccl" (not yet: needs the CUDA build). Throws hw::Error otherwise.
std::unique_ptr<Comm> make_comm(const std::string& kind);

// 64-bit FNV-1a of the bytes, then of the length (so "" and "\0" differ). Used by all_equal.
std::uint64_t bytes_hash(const void* data, std::int64_t bytes);

}  // namespace hw::dist
