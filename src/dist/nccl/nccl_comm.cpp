// Placeholder until the NCCL communicator lands (issue 7).
#include "headwise/core/error.hpp"
#include "headwise/dist/nccl_comm.hpp"

namespace hw::dist {

std::unique_ptr<Comm> make_nccl_comm() { fail("communicator 'nccl' is not implemented yet"); }

}  // namespace hw::dist
