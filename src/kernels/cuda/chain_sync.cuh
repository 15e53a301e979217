#pragma once
// Ordering between the blocks of one launch, for the linear heads' chains of stages
// (attention_linear.cuh): an item ticket, and per-stage progress counters that a stage
// publishes after writing a chunk's partial sums and its successor waits on before reading
// them. The pattern is the one cooperative groups' grid sync uses: every thread fences its
// own writes, the block meets at a barrier, then one thread publishes; the reader's one thread
// sees the counter, fences, and the block meets again before anyone reads. Partial sums are
// read with ld.global.cg (L2, never a stale L1 line).
//
// Why waiting cannot deadlock: items are handed out in ticket order (grab_item), not by
// blockIdx, and a stage's predecessor always has the lower item index (the schedule puts it
// first), so it was handed to a block that is already running; stage 0 waits for nobody.
// A wait that still spins after kWaitLimitNs means a broken schedule (or a predecessor that
// faulted): it prints which item waited for what, then traps, instead of hanging. The limit is
// far above any real wait (a predecessor's chunk takes microseconds) and below the per-case
// timeout of scripts/gpu_check.sh's reruns, so the message reaches the log.
#include <cstdint>
#include <cstdio>

namespace hw::cuda::chain {

// The block's item index: the next ticket of the launch (counter zeroed before the launch).
// Called by every thread of the block, once, before the item touches shared memory.
__device__ __forceinline__ int32_t grab_item(int32_t* counter) {
  __shared__ int32_t ticket;
  if (threadIdx.x == 0) ticket = atomicAdd(counter, 1);
  __syncthreads();
  return ticket;
}

// Which wait timed out, for the message before the trap.
enum WaitItem : int { kWaitForward = 0, kWaitDq = 1, kWaitDkv = 2 };

inline constexpr unsigned long long kWaitLimitNs = 10ull * 1000 * 1000 * 1000;  // 10 s

// Nanoseconds of the GPU's global timer (wall clock: unlike clock64() it does not depend on the
// SM clock, which ranges from ~345 MHz idle to ~2 GHz). Host compilation (the block emulator)
// never gets here: a wait there aborts at its first sleep.
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t = 0;
#ifdef __CUDA_ARCH__
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
#endif
  return t;
}

// The message before the trap. Inline, with ints only: out of line, the call's register saves
// made the bf16 backward at head_dim 128 (255 registers) spill 180 B; a string argument cost
// the bf16 forward at head_dim 64 (128 registers) 108 B of spill.
__device__ __forceinline__ void report_timeout_and_trap(int item, int b, int head, int stage, int32_t at_least,
                                                        int32_t seen) {
  printf("headwise: linear chain wait timed out after 10 s: item kind %d (0 forward, 1 dQ, 2 dK/dV), batch %d "
         "head %d stage %d waits for stage %d to publish chunk %d (it has published %d); trapping\n",
         item, b, head, stage, stage - 1, at_least - 1, seen);
  __trap();
}

// Waits until *progress >= at_least (another block's publish). Every thread calls it; item, b,
// head and stage only name the waiter in the timeout message.
__device__ __forceinline__ void wait_at_least(const int32_t* progress, int32_t at_least, int item, int b, int head,
                                              int stage) {
  if (threadIdx.x == 0) {
    const unsigned long long start = global_ns();
    int32_t seen;
    while ((seen = *static_cast<const volatile int32_t*>(progress)) < at_least) {
      __nanosleep(100);
      if (global_ns() - start > kWaitLimitNs) report_timeout_and_trap(item, b, head, stage, at_least, seen);
    }
    __threadfence();
  }
  __syncthreads();
}

// Publishes *progress = value after every thread's earlier global writes. Every thread calls it.
__device__ __forceinline__ void publish(int32_t* progress, int32_t value) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) atomicExch(progress, value);
}

// A partial sum another block wrote (after wait_at_least).
__device__ __forceinline__ float load_shared_partial(const float* p) { return __ldcg(p); }

}  // namespace hw::cuda::chain
