#pragma once
// CUDA thread blocks on the CPU, for running the CUDA backend's own kernels and launchers in
// tests without a GPU. A block's threads are fibers on one OS thread: a fiber runs until it
// reaches a barrier (__syncthreads, or a warp collective: shuffle, ballot, mma), then the next
// one runs; a barrier opens when every thread that has not exited has arrived, as on the GPU.
// The warps' tensor-core mma is gathered from the 32 lanes' fragments and multiplied in double
// (tests/kernels/mma_emulation.hpp). Blocks of a grid run one after the other in block order.
// Deterministic, and cheap enough for CI: a barrier costs a few hundred fiber switches.
//
// It checks indexing, masks, barriers, shared-memory carving and each thread's arithmetic
// order; not timing, the memory model, register pressure or the compiler.
//
// Dynamic shared memory is a buffer of exactly the bytes the launch requests, NaN-filled (so
// reading before writing shows), followed by a guard region that must still hold its pattern
// after every block: a carve past the requested size is an error, not a silent overlap.
#include <cstddef>
#include <cstdint>
#include <functional>

#include "emulated/shim/cuda_runtime.h"

namespace hw_emu {

constexpr int kMaxBlockThreads = 1024;

// Runs body on every thread of every block of the grid. Throws hw::Error for a bad launch
// shape or a write past smem_bytes; aborts with a message if a block deadlocks.
void launch_grid(dim3 grid, dim3 block, size_t smem_bytes, const std::function<void()>& body);

// While one lives, every block runs its fibers from the highest thread index down. A kernel that
// misses a barrier between one thread's writes and another's reads can pass in one order (the
// writer happens to run first) but not in both: the parity tests rerun a launch this way and
// require the same bits.
class ReverseThreadOrder {
 public:
  ReverseThreadOrder();
  ~ReverseThreadOrder();
  ReverseThreadOrder(const ReverseThreadOrder&) = delete;
  ReverseThreadOrder& operator=(const ReverseThreadOrder&) = delete;
};

// The running block's dynamic shared memory.
float* block_smem();

// The running warp's tensor-core instructions (used by the shim's DeviceWarp).
void warp_mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]);
void warp_mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]);
// ldmatrix .x4 (.trans): every lane's row address must lie in the block's shared memory (within
// the bytes the launch asked for) and be 16-byte aligned, as on the hardware; aborts otherwise.
void warp_ldmatrix(uint32_t (&r)[4], const uint32_t* row, bool trans);

// cp.async for the running thread (the shim's async_copy.cuh says how it exposes misuse).
void async_copy16(void* dst, const void* src, bool valid);
void async_commit();
void async_wait(int pending);

}  // namespace hw_emu
