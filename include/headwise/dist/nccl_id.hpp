#pragma once
// Getting NCCL's 128-byte unique id (ncclUniqueId, made by rank 0 with ncclGetUniqueId) to every
// rank before ncclCommInitRank. Two ways, neither needs CUDA: a broadcast over a bootstrap
// communicator (MPI under mpirun or srun --mpi=pmix), or a file on a filesystem every node sees,
// for jobs started without MPI. The NCCL communicator itself comes with the CUDA backend.
#include <array>
#include <cstdint>
#include <string>

namespace hw::dist {

class Comm;

inline constexpr std::size_t kNcclIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
using NcclId = std::array<std::uint8_t, kNcclIdBytes>;

// The environment variable naming the shared folder for the file exchange.
inline constexpr const char* kNcclIdDirVar = "HEADWISE_NCCL_ID_DIR";

// Rank 0's id reaches every rank (collective).
void share_nccl_id(Comm& comm, NcclId& id);

// The file exchange uses DIR/nccl_id. The file carries a tag naming the launch (by default
// SLURM_JOB_ID.SLURM_STEP_ID, plus ".r<SLURM_RESTART_COUNT>" in a requeued job) so that a file
// left by an earlier job, or by this job's attempt before a requeue, is never taken for this
// launch's id.
std::string nccl_id_path(const std::string& dir);
std::string default_nccl_id_tag();

// Rank 0: creates DIR if needed and writes the id atomically (a temporary file renamed into
// place), so a reader never sees half a file.
void write_nccl_id_file(const std::string& dir, const NcclId& id, const std::string& tag);

// Other ranks: polls DIR/nccl_id until a file with `tag` appears; throws hw::Error after
// timeout_s seconds (or at once for a file that is not a headwise id file).
NcclId read_nccl_id_file(const std::string& dir, const std::string& tag, double timeout_s);

}  // namespace hw::dist
