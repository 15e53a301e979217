// The NCCL communicator in a build without CUDA: asking for it is a clear error.
#include "headwise/core/error.hpp"
#include "headwise/dist/nccl_comm.hpp"

namespace hw::dist {

namespace {
constexpr const char* kNoCuda = "this headwise was built without CUDA/NCCL (configure with -DHEADWISE_CUDA=ON)";
}  // namespace

std::string nccl_unavailable_reason() { return kNoCuda; }

NcclId new_nccl_id() { fail(std::string("communicator 'nccl': ") + kNoCuda); }

std::unique_ptr<Comm> join_nccl(NcclJoin) { fail(std::string("communicator 'nccl': ") + kNoCuda); }

}  // namespace hw::dist
