// The block emulator itself (block_emulator.hpp): what the kernels rely on from a CUDA block.
#include <catch2/catch.hpp>

#include <vector>

#include "emulated/block_emulator.hpp"
#include "emulated/shim/cuda_runtime.h"
#include "headwise/core/error.hpp"

TEST_CASE("block emulator: __syncthreads orders shared-memory writes before reads across the block") {
  std::vector<float> seen(256 * 6);
  hw_emu::launch_grid(dim3(3, 2), dim3(256), 256 * 4, [&] {
    float* smem = hw_emu::block_smem();
    const int t = static_cast<int>(threadIdx.x);
    smem[t] = float(t * t);
    __syncthreads();
    const unsigned b = blockIdx.y * gridDim.x + blockIdx.x;
    seen[b * 256 + size_t(t)] = smem[255 - t] + float(100 * b);
  });
  for (unsigned b = 0; b < 6; ++b)
    for (int t = 0; t < 256; ++t) REQUIRE(seen[b * 256 + size_t(t)] == float((255 - t) * (255 - t) + 100 * int(b)));
}

TEST_CASE("block emulator: thread indices of a 2-D block follow CUDA's x-fastest order") {
  std::vector<int> id(64, -1);
  hw_emu::launch_grid(dim3(1), dim3(32, 2), 0, [&] {
    id[threadIdx.y * blockDim.x + threadIdx.x] = int(threadIdx.x) + 100 * int(threadIdx.y);
  });
  for (int t = 0; t < 64; ++t) REQUIRE(id[size_t(t)] == t % 32 + 100 * (t / 32));
}

TEST_CASE("block emulator: a thread that has exited no longer counts for __syncthreads") {
  int after = 0;
  hw_emu::launch_grid(dim3(1), dim3(256), 0, [&] {
    if (threadIdx.x >= 128) return;
    __syncthreads();
    ++after;
  });
  REQUIRE(after == 128);
}

TEST_CASE("block emulator: warp shuffles and ballots stay within each warp") {
  std::vector<double> xr(256);
  std::vector<int> from(256);
  std::vector<unsigned> votes(256);
  hw_emu::launch_grid(dim3(1), dim3(256), 0, [&] {
    const int t = static_cast<int>(threadIdx.x);
    xr[size_t(t)] = __shfl_xor_sync(0xffffffffu, double(t) + 0.5, 5);
    from[size_t(t)] = __shfl_sync(0xffffffffu, t, 3);
    votes[size_t(t)] = __ballot_sync(0xffffffffu, t % 3 == 0);
  });
  for (int t = 0; t < 256; ++t) {
    REQUIRE(xr[size_t(t)] == double(t ^ 5) + 0.5);
    REQUIRE(from[size_t(t)] == t / 32 * 32 + 3);
    unsigned want = 0;
    for (int l = 0; l < 32; ++l) want |= unsigned((t / 32 * 32 + l) % 3 == 0) << l;
    REQUIRE(votes[size_t(t)] == want);
  }
}

TEST_CASE("block emulator: a write past the requested shared memory is an error") {
  REQUIRE_NOTHROW(hw_emu::launch_grid(dim3(1), dim3(256), 64 * 4, [] { hw_emu::block_smem()[threadIdx.x % 64] = 1.f; }));
  REQUIRE_THROWS_AS(
      hw_emu::launch_grid(dim3(1), dim3(256), 64 * 4, [] { hw_emu::block_smem()[threadIdx.x % 65] = 1.f; }),
      hw::Error);
}
