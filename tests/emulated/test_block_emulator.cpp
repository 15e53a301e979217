// The block emulator itself (block_emulator.hpp): what the kernels rely on from a CUDA block.
#include <catch2/catch.hpp>

#include <vector>

#include "emulated/block_emulator.hpp"
#include "emulated/shim/cuda_runtime.h"
#include "headwise/core/error.hpp"

TEST_CASE("block emulator: __syncthreads orders shared-memory writes before reads across the block") {
  hw_emu::BlockEmulator emu;
  std::vector<float> seen(256);
  emu.run(3, 1, 2, 256 * 4, [&](float* smem) {
    const int t = static_cast<int>(threadIdx.x);
    smem[t] = float(t * t);
    __syncthreads();
    seen[size_t(t)] = smem[255 - t] + float(blockIdx.x * 100 + blockIdx.y * 10 + blockIdx.z);
  });
  for (int t = 0; t < 256; ++t) REQUIRE(seen[size_t(t)] == float((255 - t) * (255 - t) + 312));
}

TEST_CASE("block emulator: a thread that has exited no longer counts for __syncthreads") {
  hw_emu::BlockEmulator emu;
  int after = 0;
  emu.run(0, 0, 0, 0, [&](float*) {
    if (threadIdx.x >= 128) return;
    __syncthreads();
    ++after;
  });
  REQUIRE(after == 128);
}

TEST_CASE("block emulator: warp shuffles exchange within each warp only") {
  hw_emu::BlockEmulator emu;
  std::vector<float> got(256);
  emu.run(0, 0, 0, 0, [&](float*) {
    const int t = static_cast<int>(threadIdx.x);
    got[size_t(t)] = __shfl_xor_sync(0xffffffffu, float(t), 5);
  });
  for (int t = 0; t < 256; ++t) REQUIRE(got[size_t(t)] == float(t ^ 5));
}

TEST_CASE("block emulator: a write past the requested shared memory is an error") {
  hw_emu::BlockEmulator emu;
  REQUIRE_NOTHROW(emu.run(0, 0, 0, 64 * 4, [](float* smem) { smem[threadIdx.x % 64] = 1.f; }));
  REQUIRE_THROWS_AS(emu.run(0, 0, 0, 64 * 4, [](float* smem) { smem[threadIdx.x % 65] = 1.f; }), hw::Error);
}
