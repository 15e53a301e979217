#pragma once
// The block emulator's launch_kernel (shadows src/kernels/cuda/launch_kernel.cuh): every block
// of the grid, one after the other in block order, on the emulator's fibers, with the dynamic
// shared memory the launch requests. Each thread gets its own copy of the by-value arguments.
#include <cstddef>

#include "emulated/block_emulator.hpp"
#include "emulated/shim/cuda_runtime.h"

namespace hw::cuda {

template <class... Params, class... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t /*stream*/,
                   Args&&... args) {
  hw_emu::launch_grid(grid, block, smem_bytes, [&] { kernel(Params(args)...); });
}

}  // namespace hw::cuda
