#pragma once
// bf16 as a storage type: the upper 16 bits of an fp32 (8-bit exponent, 7-bit mantissa).
// Mixed-precision steps keep activations and the GEMMs' copy of the weights in bf16 and do
// all arithmetic in fp32, so this type only converts; it has no arithmetic of its own.
// Layout-compatible with CUDA's __nv_bfloat16 (two bytes, same bits), so device code may
// reinterpret pointers to it.
#include <bit>
#include <cstdint>

#include "headwise/kernels/tiles/host_device.hpp"

namespace hw {

struct bf16 {
  uint16_t bits;  // no initialiser: a trivial type (memcpy-able, allowed in __shared__ arrays); bf16{} is zero
};
static_assert(sizeof(bf16) == 2, "bf16 must be two bytes");

// Exact: every bf16 is an fp32.
HW_HOST_DEVICE float to_float(bf16 x) { return std::bit_cast<float>(static_cast<uint32_t>(x.bits) << 16); }

// Round to nearest, ties to even (what __float2bfloat16_rn does). NaN stays a quiet NaN
// (its mantissa could otherwise round into infinity); values beyond the largest finite bf16
// round to infinity.
HW_HOST_DEVICE bf16 to_bf16(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  if ((b & 0x7fffffffU) > 0x7f800000U) return {static_cast<uint16_t>((b >> 16) | 0x0040U)};
  const uint32_t rounded = b + 0x7fffU + ((b >> 16) & 1U);
  return {static_cast<uint16_t>(rounded >> 16)};
}

}  // namespace hw
