#pragma once
// The block's dynamic shared memory as floats (16-byte aligned), for kernels launched with a
// dynamic size. A function rather than an `extern __shared__` array in each kernel so that the
// CPU block emulator (tests/emulated/shim) can hand out its own buffer in the same place.
#include <cuda_runtime.h>

namespace hw::cuda {

__device__ __forceinline__ float* dynamic_smem_floats() {
  extern __shared__ float4 dynamic_smem4[];
  return reinterpret_cast<float*>(dynamic_smem4);
}

}  // namespace hw::cuda
