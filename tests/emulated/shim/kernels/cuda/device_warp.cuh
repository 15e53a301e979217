#pragma once
// The block emulator's DeviceWarp (stands in for src/kernels/cuda/device_warp.cuh, which this
// folder shadows on the emulator's include path): the warp's mma instructions gathered from its
// 32 lanes and multiplied in double, the shuffle and ldmatrix through per-warp slots
// (block_emulator.cpp).
#include <cstdint>

#include "emulated/block_emulator.hpp"
#include "emulated/shim/cuda_runtime.h"

namespace hw::cuda::attn_mma {

struct DeviceWarp {
  static void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) { hw_emu::warp_mma_bf16(d, a, b); }
  static void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    hw_emu::warp_mma_tf32(d, a, b);
  }
  static void ldsm_x4(uint32_t (&r)[4], const uint32_t* row) { hw_emu::warp_ldmatrix(r, row, false); }
  static void ldsm_x4_trans(uint32_t (&r)[4], const uint32_t* row) { hw_emu::warp_ldmatrix(r, row, true); }
  static float shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
};

}  // namespace hw::cuda::attn_mma
