#pragma once
// The NCCL communicator for GPU ranks (src/dist/nccl). In a build without CUDA, creating one
// throws hw::Error saying so.
#include <memory>

#include "headwise/dist/comm.hpp"

namespace hw::dist {

// A communicator over every rank of the launch (rank, world and local rank from the launcher),
// on this rank's GPU (local rank modulo the visible GPUs).
std::unique_ptr<Comm> make_nccl_comm();

}  // namespace hw::dist
