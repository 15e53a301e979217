#pragma once
// Launch without PMIx: the ranks of an srun step (SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID,
// launch.hpp) meet through a folder every node sees, with no MPI. Every rank announces itself
// (DIR/<tag>.rank<r>: its world size and host); rank 0 waits until ranks 0..world-1 have all
// arrived and agree on the world, then writes the NCCL id file (nccl_id.hpp) that the others
// wait for. Nothing hangs: a rank that never arrives (or disagrees) is one error on rank 0 after
// timeout_s naming it, which rank 0 also leaves in DIR/<tag>.failed so every other rank stops
// at once with the same reason; the others wait 2 x timeout_s for the id, after which rank 0
// itself never came.
#include <functional>
#include <string>

#include "headwise/dist/launch.hpp"
#include "headwise/dist/nccl_id.hpp"

namespace hw::dist {

// Seconds each side waits (HEADWISE_RENDEZVOUS_TIMEOUT_S, default kNcclIdFileTimeoutS);
// throws naming the variable for anything but a positive number.
double rendezvous_timeout_s();

// The id every rank of `launch` gets: make_id() on rank 0 (NCCL's unique id, or a stand-in in
// the self-test), read from DIR on the others. `tag` names the launch (default_nccl_id_tag())
// and becomes part of file names, so it may hold only letters, digits, '.', '_' and '-'.
NcclId rendezvous_through_files(const LaunchInfo& launch, const std::string& dir, const std::string& tag,
                                double timeout_s, const std::function<NcclId()>& make_id);

}  // namespace hw::dist
