#pragma once
// Every kernel launch of the CUDA backend goes through launch_kernel instead of the <<<>>>
// syntax, so that the CPU block emulator (tests/emulated), which shadows this header, runs the
// same launchers on host memory: one place where "launch" means the GPU.
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace hw::cuda {

// kernel<<<grid, block, smem_bytes, stream>>>(args...); arguments convert to the kernel's
// parameter types as in a direct launch.
template <class... Params, class... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
                   Args&&... args) {
  kernel<<<grid, block, smem_bytes, stream>>>(std::forward<Args>(args)...);
}

}  // namespace hw::cuda
