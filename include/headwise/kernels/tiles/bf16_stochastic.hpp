#pragma once
// Stochastic rounding of fp32 to bf16, for bf16 copies of fp32 master weights: the rounded
// value is x's upper or lower bf16 neighbour with probabilities that make its expectation
// exactly x, so small updates are not lost on average the way round-to-nearest loses them.
// The random bits come from a counter-based hash of (seed, element index): no generator
// state, and every element's rounding is reproducible from the seed alone.
#include <bit>
#include <cstdint>

#include "headwise/kernels/tiles/host_device.hpp"

namespace hw::tiles {

// A 32-bit integer hash with good avalanche (xorshift-multiply rounds; constants from
// published hash-prospector searches). Bijective, so distinct inputs give distinct outputs.
HW_HOST_DEVICE uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

// The random word for element `index` under `seed`. For a fixed seed and upper index half it
// is a bijection of the lower half, so neighbouring elements never share their bits.
HW_HOST_DEVICE uint32_t rounding_bits(uint32_t seed, uint64_t index) {
  const uint32_t hi = static_cast<uint32_t>(index >> 32);
  const uint32_t lo = static_cast<uint32_t>(index);
  return mix32(lo ^ mix32(seed ^ mix32(hi + 0x9e3779b9U)));
}

// bf16 bits of x rounded stochastically with the low 16 bits of `random`: adding them to the
// 16 bits bf16 drops carries into the kept part with probability (dropped bits) / 2^16, so
// the magnitude rounds up with exactly that probability (sign-magnitude: unbiased for
// negative x too). Representable values (dropped bits 0) never change; +-inf stay inf;
// values above the largest finite bf16 may round to inf, as the rounding's expectation
// requires. NaN stays a (quiet) NaN instead of possibly carrying into infinity.
HW_HOST_DEVICE uint16_t bf16_bits_stochastic(float x, uint32_t random) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  if ((b & 0x7fffffffU) > 0x7f800000U) return static_cast<uint16_t>((b >> 16) | 0x0040U);
  return static_cast<uint16_t>((b + (random & 0xffffU)) >> 16);
}

// The float value of bf16 bits (exact: bf16 is fp32 with 16 fewer mantissa bits).
HW_HOST_DEVICE float bf16_bits_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

}  // namespace hw::tiles
