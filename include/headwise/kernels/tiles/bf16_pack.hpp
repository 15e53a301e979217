#pragma once
// Vector access to bf16 arrays in the CUDA op kernels: four consecutive bf16 move as one
// 8-byte uint2 (the bf16 counterpart of a float4), i.e. as two 32-bit words. Memory is
// little-endian, so element 2k of the array is the LOW half of word k and element 2k + 1 its
// high half. Unpacking widens exactly; packing rounds each float once, to nearest even
// (hw::to_bf16), like every scalar bf16 store. Host+device so the CPU tests check the bit
// layout the kernels rely on.
#include <bit>
#include <cstdint>

#include "headwise/core/bf16.hpp"
#include "headwise/kernels/tiles/host_device.hpp"
#include "headwise/kernels/tiles/ops_grid.hpp"

namespace hw::tiles {

// The two bf16 of one word, widened to float (exact).
HW_HOST_DEVICE float bf16_word_lo(uint32_t w) { return std::bit_cast<float>(w << 16); }
HW_HOST_DEVICE float bf16_word_hi(uint32_t w) { return std::bit_cast<float>(w & 0xffff0000U); }

// lo and hi rounded to bf16 and packed into one word (lo at the lower address). On sm_80 and
// later one cvt.rn.bf16x2.f32 does both (its first source goes to the upper half); it rounds as
// to_bf16 does, subnormals included, and differs only in a NaN's payload (tests/cuda/
// test_bf16_pack.cu compares the two bit for bit on the GPU).
HW_HOST_DEVICE uint32_t bf16_word(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t w;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  return w;
#else
  return static_cast<uint32_t>(to_bf16(lo).bits) | (static_cast<uint32_t>(to_bf16(hi).bits) << 16);
#endif
}

// Four elements of T may move as one vector (float4: 16 bytes; 4 bf16: 8 bytes) when the
// pointer is aligned to the vector's size. Null pointers qualify (optional operands), as in
// aligned16, which is exactly the float test.
HW_HOST_DEVICE bool vec4_aligned(const float* p) { return aligned16(p); }
HW_HOST_DEVICE bool vec4_aligned(const bf16* p) { return (reinterpret_cast<uintptr_t>(p) & uintptr_t{7}) == 0; }

}  // namespace hw::tiles
