// The NCCL communicator in a build without CUDA: asking for it is a clear error.
#include "headwise/core/error.hpp"
#include "headwise/dist/nccl_comm.hpp"

namespace hw::dist {

std::unique_ptr<Comm> make_nccl_comm() {
  fail("communicator 'nccl': this headwise was built without CUDA/NCCL (configure with -DHEADWISE_CUDA=ON)");
}

}  // namespace hw::dist
