// Transport-independent parts of the communicator: sharding, the equality check, the factory.
#include "headwise/dist/comm.hpp"

#include <algorithm>
#include <cstring>

#include "headwise/core/error.hpp"
#include "headwise/dist/launch.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/dist/mpi_comm.hpp"
#include "headwise/dist/nccl_comm.hpp"

namespace hw::dist {

Range shard_range(std::int64_t n, int rank, int world) {
  check(world >= 1, "shard_range: world " + std::to_string(world) + " must be at least 1");
  check(rank >= 0 && rank < world,
        "shard_range: rank " + std::to_string(rank) + " outside [0, " + std::to_string(world) + ")");
  check(n >= 0, "shard_range: element count " + std::to_string(n) + " is negative");
  const std::int64_t chunk = (n + world - 1) / world;
  return Range{std::min(n, rank * chunk), std::min(n, (rank + 1) * chunk)};
}

namespace {
constexpr std::uint64_t kFnvPrime = 0x100000001b3ULL;
}  // namespace

std::uint64_t fnv1a_update(std::uint64_t h, const void* data, std::int64_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::int64_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

std::uint64_t fnv1a_finish(std::uint64_t h, std::int64_t total_bytes) {
  for (int i = 0; i < 8; ++i) h = (h ^ ((static_cast<std::uint64_t>(total_bytes) >> (8 * i)) & 0xff)) * kFnvPrime;
  return h;
}

std::uint64_t bytes_hash(const void* data, std::int64_t bytes) {
  return fnv1a_finish(fnv1a_update(kFnvOffset, data, bytes), bytes);
}

Request& Request::operator=(Request&& other) {
  if (this == &other) return *this;
  check(!pending(), "a pending collective request was overwritten: wait for it first");
  owner_ = other.owner_;
  slot_ = other.slot_;
  other.owner_ = nullptr;
  return *this;
}

Request Comm::start_request(int slot) const {
  Request r;
  r.owner_ = this;
  r.slot_ = slot;
  return r;
}

int Comm::finish_request(Request& request, const char* what) const {
  check(request.pending(), std::string(what) + ": the request is not pending (never started, or already waited for)");
  check(request.owner_ == this, std::string(what) + ": the request was started by another communicator");
  request.owner_ = nullptr;
  return request.slot_;
}

// The default: a blocking sum, complete before the request exists.
Request Comm::allreduce_sum_async(float* data, std::int64_t count) {
  allreduce_sum(data, count);
  return start_request(0);
}

void Comm::wait(Request& request) { (void)finish_request(request, "wait"); }

std::uint64_t Comm::local_hash(const void* data, std::int64_t bytes) { return bytes_hash(data, bytes); }

bool Comm::all_equal(const void* data, std::int64_t bytes) {
  check(bytes >= 0, "all_equal: byte count " + std::to_string(bytes) + " is negative");
  const std::uint64_t mine = local_hash(data, bytes);
  std::uint64_t root = mine;
  broadcast(&root, sizeof root, 0);
  // Any rank that differs from rank 0 makes the maximum 1 everywhere.
  return allreduce_max(root == mine ? 0.0 : 1.0) == 0.0;
}

std::string resolve_comm_kind(const std::string& kind, bool gpu_training) {
  if (kind == "auto" && gpu_training && read_launch_info().world > 1) return "nccl";
  return kind;
}

std::unique_ptr<Comm> make_comm(const std::string& kind) {
  if (kind == "local") return std::make_unique<LocalComm>();
  if (kind == "nccl") return make_nccl_comm();
  if (kind == "mpi") {
#ifdef HEADWISE_HAVE_MPI
    return std::make_unique<MpiComm>();
#else
    fail("mpi communicator needs a build with -DHEADWISE_MPI=ON");
#endif
  }
  if (kind == "auto") {
    const LaunchInfo launch = read_launch_info();
    if (launch.wants_mpi()) {
#ifdef HEADWISE_HAVE_MPI
      return std::make_unique<MpiComm>();
#else
      if (launch.world > 1)
        fail("launched as " + std::to_string(launch.world) + " ranks (" + launch.world_var +
             ") but headwise was built without MPI: rebuild with -DHEADWISE_MPI=ON");
#endif
    } else if (launch.world > 1) {
      // srun without PMIx: every task would train alone, silently.
      fail(launch.world_var + "=" + std::to_string(launch.world) +
           " but no PMIx in the environment: launch with `srun --mpi=pmix` (or mpirun)");
    }
    return std::make_unique<LocalComm>();
  }
  fail("unknown communicator kind '" + kind + "' (expected auto, local, mpi or nccl)");
}

double slowest_rank_ms(Comm& comm, double ms) { return comm.world() > 1 ? comm.allreduce_max(ms) : ms; }

}  // namespace hw::dist
