// LocalComm: one rank, so every collective leaves the data as it is; only arguments are checked,
// so a caller's bug shows up in single-process runs too.
#include "headwise/dist/local_comm.hpp"

#include <cstdlib>

#include "headwise/core/error.hpp"

namespace hw::dist {
namespace {
void check_count(const char* what, std::int64_t count, const void* data) {
  check(count >= 0, std::string(what) + ": count " + std::to_string(count) + " is negative");
  check(count == 0 || data != nullptr, std::string(what) + ": null buffer");
}
}  // namespace

void LocalComm::allreduce_sum(float* data, std::int64_t count) { check_count("allreduce_sum", count, data); }
void LocalComm::allreduce_sum(double* data, std::int64_t count) { check_count("allreduce_sum", count, data); }

void LocalComm::broadcast(void* data, std::int64_t bytes, int root) {
  check_count("broadcast", bytes, data);
  check(root == 0, "broadcast: root " + std::to_string(root) + " outside [0, 1)");
}

void LocalComm::reduce_scatter_sum(float* data, std::int64_t count) {
  check_count("reduce_scatter_sum", count, data);
}
void LocalComm::all_gather(float* data, std::int64_t count) { check_count("all_gather", count, data); }

void LocalComm::abort(int exit_code) { std::exit(exit_code); }

}  // namespace hw::dist
