#pragma once
// The block emulator's dynamic shared memory (shadows src/kernels/cuda/dynamic_smem.cuh): the
// buffer of the running block, exactly the bytes the launch requested plus a guard region.
#include "emulated/block_emulator.hpp"

namespace hw::cuda {

inline float* dynamic_smem_floats() { return hw_emu::block_smem(); }

}  // namespace hw::cuda
