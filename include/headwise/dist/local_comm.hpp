#pragma once
// The communicator of a single process: world 1, every collective a no-op.
#include "headwise/dist/comm.hpp"

namespace hw::dist {

class LocalComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  int local_rank() const override { return 0; }
  std::string name() const override { return "local"; }
  void allreduce_sum(float* data, std::int64_t count) override;
  void allreduce_sum(double* data, std::int64_t count) override;
  double allreduce_max(double value) override { return value; }
  void broadcast(void* data, std::int64_t bytes, int root) override;
  void barrier() override {}
  void reduce_scatter_sum(float* data, std::int64_t count) override;
  void all_gather(float* data, std::int64_t count) override;
  [[noreturn]] void abort(int exit_code) override;
};

}  // namespace hw::dist
