#pragma once
// The MPI communicator for CPU ranks (and for bootstrapping GPU ranks). Only in builds with
// -DHEADWISE_MPI=ON, which define HEADWISE_HAVE_MPI. mpi.h stays out of this header so that
// code using the communicator does not need MPI's include paths.
#ifdef HEADWISE_HAVE_MPI
#include <cstdint>
#include <memory>
#include <vector>

#include "headwise/dist/comm.hpp"

namespace hw::dist {

class MpiComm final : public Comm {
 public:
  // MPI counts are int: larger buffers go in pieces of at most max_chunk elements (bytes for
  // broadcast). Tests pass a tiny max_chunk to exercise the piecewise paths.
  static constexpr std::int64_t kDefaultMaxChunk = std::int64_t{1} << 30;

  // Initialises MPI on first use (MPI_THREAD_FUNNELED; finalised at process exit when headwise
  // initialised it), works on a private duplicate of MPI_COMM_WORLD, and checks that MPI's rank
  // and size agree with the launcher's environment.
  explicit MpiComm(std::int64_t max_chunk = kDefaultMaxChunk);
  ~MpiComm() override;

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  int local_rank() const override { return local_rank_; }
  std::string name() const override { return "mpi"; }
  void allreduce_sum(float* data, std::int64_t count) override;
  void allreduce_sum(double* data, std::int64_t count) override;
  double allreduce_max(double value) override;
  void broadcast(void* data, std::int64_t bytes, int root) override;
  void barrier() override;
  void reduce_scatter_sum(float* data, std::int64_t count) override;
  void all_gather(float* data, std::int64_t count) override;
  [[noreturn]] void abort(int exit_code) override;

 private:
  struct Handle;  // holds the MPI_Comm
  std::unique_ptr<Handle> handle_;
  std::int64_t max_chunk_;
  int rank_ = 0;
  int world_ = 1;
  int local_rank_ = 0;
  // Per-rank counts and offsets for the one-call paths, sized once (no per-step allocation).
  std::vector<int> counts_;
  std::vector<int> displs_;
};

}  // namespace hw::dist
#endif  // HEADWISE_HAVE_MPI
