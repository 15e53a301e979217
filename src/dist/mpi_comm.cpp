// MpiComm: collectives over a private duplicate of MPI_COMM_WORLD. Buffers larger than
// max_chunk elements go in pieces (MPI counts are int). Errors come back as hw::Error
// (MPI_ERRORS_RETURN) instead of MPI's default abort, so the caller can say which call failed.
#ifdef HEADWISE_HAVE_MPI
#include "headwise/dist/mpi_comm.hpp"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/dist/launch.hpp"

namespace hw::dist {

struct MpiComm::Handle {
  MPI_Comm comm = MPI_COMM_NULL;
  // One slot per started asynchronous collective: its MPI requests (one per piece). Slots and
  // their vectors are reused, so steady-state steps allocate nothing.
  struct Pending {
    bool busy = false;
    std::vector<MPI_Request> requests;
  };
  std::vector<Pending> pending;

  int free_slot() {
    for (std::size_t i = 0; i < pending.size(); ++i)
      if (!pending[i].busy) return static_cast<int>(i);
    pending.emplace_back();
    return static_cast<int>(pending.size() - 1);
  }
};

namespace {

void mpi_check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  fail(std::string(call) + " failed: " + std::string(text, static_cast<std::size_t>(len)));
}

// Initialises MPI once per process and finalises it at exit, but only if headwise initialised
// it (a host program that owns MPI keeps owning it).
class MpiRuntime {
 public:
  static void ensure() { static MpiRuntime runtime; }
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

 private:
  MpiRuntime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    check(!finalized, "MPI was already finalised in this process: cannot create an MPI communicator");
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return;
    // Only the main thread calls MPI; OpenMP workers never do.
    int provided = 0;
    mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    owned_ = true;
    check(provided >= MPI_THREAD_FUNNELED, "MPI_Init_thread: the MPI library does not support MPI_THREAD_FUNNELED");
  }
  ~MpiRuntime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) MPI_Finalize();
  }
  bool owned_ = false;
};

void check_buffer(const char* what, std::int64_t count, const void* data) {
  check(count >= 0, std::string(what) + ": count " + std::to_string(count) + " is negative");
  check(count == 0 || data != nullptr, std::string(what) + ": null buffer");
}

}  // namespace

MpiComm::MpiComm(std::int64_t max_chunk) : handle_(std::make_unique<Handle>()), max_chunk_(max_chunk) {
  check(max_chunk >= 1 && max_chunk <= INT_MAX,
        "MpiComm: max_chunk " + std::to_string(max_chunk) + " outside [1, INT_MAX]");
  const LaunchInfo launch = read_launch_info();
  // OpenMPI started by plain srun aborts inside MPI_Init with a page of text; say it in one line.
  check(!(launch.launcher == "slurm" && !launch.pmix && launch.world > 1),
        "SLURM_NTASKS=" + std::to_string(launch.world) +
            " but no PMIx in the environment: launch with `srun --mpi=pmix` (or mpirun)");
  MpiRuntime::ensure();
  mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &handle_->comm), "MPI_Comm_dup");
  mpi_check(MPI_Comm_set_errhandler(handle_->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  mpi_check(MPI_Comm_rank(handle_->comm, &rank_), "MPI_Comm_rank");
  mpi_check(MPI_Comm_size(handle_->comm, &world_), "MPI_Comm_size");
  launch.check_matches(rank_, world_);
  if (launch.launcher != "none") {
    local_rank_ = launch.local_rank;
  } else {  // no launcher variables: ask MPI which ranks share this node
    MPI_Comm node = MPI_COMM_NULL;
    mpi_check(MPI_Comm_split_type(handle_->comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type");
    mpi_check(MPI_Comm_rank(node, &local_rank_), "MPI_Comm_rank");
    MPI_Comm_free(&node);
  }
  counts_.resize(static_cast<std::size_t>(world_));
  displs_.resize(static_cast<std::size_t>(world_));
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && handle_->comm != MPI_COMM_NULL) MPI_Comm_free(&handle_->comm);
}

void MpiComm::allreduce_sum(float* data, std::int64_t count) {
  check_buffer("allreduce_sum", count, data);
  for (std::int64_t off = 0; off < count; off += max_chunk_) {
    const int n = static_cast<int>(std::min(max_chunk_, count - off));
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, data + off, n, MPI_FLOAT, MPI_SUM, handle_->comm), "MPI_Allreduce");
  }
}

void MpiComm::allreduce_sum(double* data, std::int64_t count) {
  check_buffer("allreduce_sum", count, data);
  for (std::int64_t off = 0; off < count; off += max_chunk_) {
    const int n = static_cast<int>(std::min(max_chunk_, count - off));
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, data + off, n, MPI_DOUBLE, MPI_SUM, handle_->comm), "MPI_Allreduce");
  }
}

double MpiComm::allreduce_max(double value) {
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, handle_->comm), "MPI_Allreduce");
  return value;
}

void MpiComm::broadcast(void* data, std::int64_t bytes, int root) {
  check_buffer("broadcast", bytes, data);
  check(root >= 0 && root < world_,
        "broadcast: root " + std::to_string(root) + " outside [0, " + std::to_string(world_) + ")");
  auto* p = static_cast<unsigned char*>(data);
  for (std::int64_t off = 0; off < bytes; off += max_chunk_) {
    const int n = static_cast<int>(std::min(max_chunk_, bytes - off));
    mpi_check(MPI_Bcast(p + off, n, MPI_BYTE, root, handle_->comm), "MPI_Bcast");
  }
}

void MpiComm::barrier() { mpi_check(MPI_Barrier(handle_->comm), "MPI_Barrier"); }

void MpiComm::reduce_scatter_sum(float* data, std::int64_t count) {
  check_buffer("reduce_scatter_sum", count, data);
  if (world_ == 1) return;
  if (count <= max_chunk_) {  // one call; MPI_IN_PLACE leaves the own shard at data[0..]
    for (int r = 0; r < world_; ++r) counts_[r] = static_cast<int>(shard_range(count, r, world_).size());
    mpi_check(MPI_Reduce_scatter(MPI_IN_PLACE, data, counts_.data(), MPI_FLOAT, MPI_SUM, handle_->comm),
              "MPI_Reduce_scatter");
    const Range own = shard_range(count, rank_, world_);
    if (own.size() > 0 && own.begin != 0)
      std::memmove(data + own.begin, data, static_cast<std::size_t>(own.size()) * sizeof(float));
    return;
  }
  // Too large for int counts: reduce each rank's shard to that rank, piece by piece.
  for (int r = 0; r < world_; ++r) {
    const Range shard = shard_range(count, r, world_);
    for (std::int64_t off = shard.begin; off < shard.end; off += max_chunk_) {
      const int n = static_cast<int>(std::min(max_chunk_, shard.end - off));
      const void* send = r == rank_ ? MPI_IN_PLACE : data + off;
      mpi_check(MPI_Reduce(send, data + off, n, MPI_FLOAT, MPI_SUM, r, handle_->comm), "MPI_Reduce");
    }
  }
}

void MpiComm::all_gather(float* data, std::int64_t count) {
  check_buffer("all_gather", count, data);
  if (world_ == 1) return;
  if (count <= max_chunk_) {
    for (int r = 0; r < world_; ++r) {
      const Range shard = shard_range(count, r, world_);
      counts_[r] = static_cast<int>(shard.size());
      displs_[r] = static_cast<int>(shard.begin);
    }
    mpi_check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts_.data(), displs_.data(), MPI_FLOAT,
                             handle_->comm),
              "MPI_Allgatherv");
    return;
  }
  for (int r = 0; r < world_; ++r) {
    const Range shard = shard_range(count, r, world_);
    for (std::int64_t off = shard.begin; off < shard.end; off += max_chunk_) {
      const int n = static_cast<int>(std::min(max_chunk_, shard.end - off));
      mpi_check(MPI_Bcast(data + off, n, MPI_FLOAT, r, handle_->comm), "MPI_Bcast");
    }
  }
}

Request MpiComm::allreduce_sum_async(float* data, std::int64_t count) {
  check_buffer("allreduce_sum_async", count, data);
  // Progress for the collectives already in flight (completed ones become MPI_REQUEST_NULL).
  for (auto& p : handle_->pending) {
    if (!p.busy) continue;
    int done = 0;
    mpi_check(MPI_Testall(static_cast<int>(p.requests.size()), p.requests.data(), &done, MPI_STATUSES_IGNORE),
              "MPI_Testall");
  }
  const int slot = handle_->free_slot();
  auto& mine = handle_->pending[static_cast<std::size_t>(slot)];
  mine.requests.clear();
  for (std::int64_t off = 0; off < count; off += max_chunk_) {
    const int n = static_cast<int>(std::min(max_chunk_, count - off));
    mine.requests.push_back(MPI_REQUEST_NULL);
    mpi_check(MPI_Iallreduce(MPI_IN_PLACE, data + off, n, MPI_FLOAT, MPI_SUM, handle_->comm, &mine.requests.back()),
              "MPI_Iallreduce");
  }
  mine.busy = true;
  return start_request(slot);
}

void MpiComm::wait(Request& request) {
  const int slot = finish_request(request, "wait");
  auto& p = handle_->pending.at(static_cast<std::size_t>(slot));
  p.busy = false;
  mpi_check(MPI_Waitall(static_cast<int>(p.requests.size()), p.requests.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
}

void MpiComm::abort(int exit_code) {
  MPI_Abort(handle_->comm, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

}  // namespace hw::dist
#endif  // HEADWISE_HAVE_MPI
