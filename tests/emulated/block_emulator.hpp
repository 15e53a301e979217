#pragma once
// A CUDA thread block on the CPU: 256 fibers on one OS thread run the kernels' own device code,
// compiled as host C++ against shim/cuda_runtime.h. A fiber runs until it reaches a barrier
// (__syncthreads, or a warp collective: shuffle, mma), then the next one runs; a barrier opens
// when every thread that has not exited has arrived, as on the GPU. The warps' tensor-core mma
// is gathered from the 32 lanes' fragments and multiplied in double (tests/kernels/
// mma_emulation.hpp). Deterministic, and cheap enough for CI: a barrier costs 256 context
// switches, not 256 kernel wake-ups. It checks indexing, masks, barriers, shared-memory
// carving and each thread's arithmetic order; not timing, the memory model or the compiler.
//
// Shared memory is a buffer of exactly the bytes the launch would request, followed by a
// guard region that must still hold its pattern after every block: a carve past the
// requested size fails the test instead of silently reading a neighbour.
#include <cstdint>
#include <functional>
#include <vector>

namespace hw_emu {

constexpr int kBlockThreads = 256;
constexpr int kWarps = kBlockThreads / 32;

// The running warp's collectives (used by the shim's DeviceWarp and __shfl_xor_sync).
void warp_mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]);
void warp_mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]);

class BlockEmulator {
 public:
  BlockEmulator();
  ~BlockEmulator();
  BlockEmulator(const BlockEmulator&) = delete;
  BlockEmulator& operator=(const BlockEmulator&) = delete;

  // Runs body(smem) on the 256 threads as block (bx, by, bz), with `smem_bytes` of dynamic
  // shared memory (NaN-filled, so reading before writing shows). Throws hw::Error if a
  // thread wrote past smem_bytes; aborts with a message if the block deadlocks.
  void run(unsigned bx, unsigned by, unsigned bz, int smem_bytes, const std::function<void(float*)>& body);

 private:
  struct Fibers;
  Fibers* fibers_;
  std::vector<float> smem_;
};

}  // namespace hw_emu
