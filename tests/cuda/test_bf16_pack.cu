// The device's bf16 pair packing (tiles::bf16_word: one cvt.rn.bf16x2.f32 on sm_80 and later)
// against the host's integer rounding (the same function compiled for the CPU, which the CPU
// tests check against round-to-nearest-even edge cases): bit-identical for every non-NaN input,
// ties, subnormals, values rounding to infinity and signed zeros included, and lo/hi in the
// right halves. NaN inputs only need to stay NaN (the payloads differ).
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cuda/cuda_test_util.hpp"
#include "headwise/core/device_memory.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/kernels/tiles/bf16_pack.hpp"

namespace {

__global__ void pack_pairs(const float* x, uint32_t* words, int n_pairs) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n_pairs) words[i] = hw::tiles::bf16_word(x[2 * i], x[2 * i + 1]);
}

float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

}  // namespace

TEST_CASE("bf16 pack: the device's cvt.rn.bf16x2 equals the host rounding bit for bit") {
  std::vector<float> x = {0.f, -0.f, 1.f, -1.f, from_bits(0x3f808000u) /* tie, rounds to even (down) */,
                          from_bits(0x3f818000u) /* tie, rounds up */, from_bits(0x3f808001u),
                          from_bits(0x00000001u) /* smallest subnormal */, from_bits(0x00408000u),
                          from_bits(0x807fffffu), std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                          from_bits(0x7f7f8000u) /* rounds to infinity */, INFINITY, -INFINITY,
                          from_bits(0x7f7f7fffu) /* stays finite */};
  hw::Rng rng(2026);
  for (int i = 0; i < 100000; ++i) x.push_back(static_cast<float>(rng.normal() * std::pow(2.0, rng.normal() * 20)));
  for (int i = 0; i < 20000; ++i) x.push_back(from_bits(static_cast<uint32_t>(rng.next_u64()) & 0x7f7fffffu));
  x.push_back(NAN);
  if (x.size() % 2) x.push_back(0.5f);
  const int n_pairs = static_cast<int>(x.size() / 2);
  hw::cudatest::DeviceArray<float> dx(static_cast<int64_t>(x.size()));
  hw::cudatest::DeviceArray<uint32_t> dw(n_pairs);
  hw::device::copy_to_device(dx.get(), x.data(), dx.bytes());
  pack_pairs<<<(n_pairs + 255) / 256, 256>>>(dx.get(), dw.get(), n_pairs);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  std::vector<uint32_t> got(static_cast<size_t>(n_pairs));
  hw::device::copy_to_host(got.data(), dw.get(), dw.bytes());
  int64_t mismatches = 0;
  for (int i = 0; i < n_pairs; ++i) {
    const float lo = x[size_t(2 * i)], hi = x[size_t(2 * i + 1)];
    const uint32_t want = hw::tiles::bf16_word(lo, hi);
    if (std::isnan(lo) || std::isnan(hi)) {
      CHECK(std::isnan(hw::tiles::bf16_word_lo(got[size_t(i)])) == std::isnan(lo));
      CHECK(std::isnan(hw::tiles::bf16_word_hi(got[size_t(i)])) == std::isnan(hi));
      continue;
    }
    if (got[size_t(i)] != want && mismatches++ < 5)
      FAIL_CHECK("pair " << i << " (" << lo << ", " << hi << "): device " << std::hex << got[size_t(i)] << " host "
                         << want);
  }
  CHECK(mismatches == 0);
}
