#pragma once
// Stand-in for <cuda_runtime.h> when the attention kernels' device code is compiled as host
// C++ for the CPU block emulator (tests/emulated): this folder comes first on the emulator's
// include path, so the kernels' own `#include <cuda_runtime.h>` lands here. It supplies the few
// CUDA names the attention items use; a block's 256 threads are fibers (block_emulator.hpp),
// so barriers and warp shuffles behave as on the GPU, including the deadlock a divergent
// __syncthreads would cause (the emulator reports it and aborts instead of hanging).
#include <cmath>
#include <cstdint>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __grid_constant__

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
struct uint4 {
  unsigned x, y, z, w;
};
struct uint2 {
  unsigned x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

namespace hw_emu {
// The running emulated thread's place in its block (the block emulator points this at the
// fiber it resumes).
struct ThreadPlace {
  dim3 thread, block, block_dim;
};
inline ThreadPlace* g_place = nullptr;
void sync_block();                  // __syncthreads
float shfl_xor(float v, int mask);  // within the running thread's warp
}  // namespace hw_emu

#define threadIdx (hw_emu::g_place->thread)
#define blockIdx (hw_emu::g_place->block)
#define blockDim (hw_emu::g_place->block_dim)

inline void __syncthreads() { hw_emu::sync_block(); }
inline float __shfl_xor_sync(unsigned /*mask*/, float v, int lane_mask) { return hw_emu::shfl_xor(v, lane_mask); }
