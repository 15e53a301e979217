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
// A wait that still spins after a minute means a broken schedule: it traps instead of hanging.
#include <cstdint>

namespace hw::cuda::chain {

// The block's item index: the next ticket of the launch (counter zeroed before the launch).
// Called by every thread of the block, once, before the item touches shared memory.
__device__ __forceinline__ int32_t grab_item(int32_t* counter) {
  __shared__ int32_t ticket;
  if (threadIdx.x == 0) ticket = atomicAdd(counter, 1);
  __syncthreads();
  return ticket;
}

// Waits until *progress >= at_least (another block's publish). Every thread calls it.
__device__ __forceinline__ void wait_at_least(const int32_t* progress, int32_t at_least) {
  if (threadIdx.x == 0) {
    const long long start = clock64();
    while (*static_cast<const volatile int32_t*>(progress) < at_least) {
      __nanosleep(100);
      // 2^37 SM cycles (over a minute at 2 GHz): a predecessor that never publishes. Timed by the
      // clock, not by the number of polls, since __nanosleep's sleep is only approximate.
      if (clock64() - start > (1ll << 37)) __trap();
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
