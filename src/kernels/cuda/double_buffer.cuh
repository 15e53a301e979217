#pragma once
// The double-buffered tile walk of the tensor-core attention items: tile it + 1's rows are in
// flight (cp.async) while tile it is used. The waits and barriers that make this safe (the rules
// in async_copy.cuh) live here once, for every item that walks tiles.
#include <cstdint>

#include "kernels/cuda/async_copy.cuh"

namespace hw::cuda {

// Starts a walk over tiles 0 .. n - 1: issue(0) puts tile 0 in flight, together with anything
// the caller issued before, and the returned walk(use) does the rest:
//   for each it: issue(it + 1) into the other buffer, wait for tile it, barrier, use(it), barrier.
// issue(it) loads tile it into buffer it % 2 (cp.async copies, or plain stores, which the same
// wait-then-barrier covers); use(it) computes on buffer it % 2. Each is called once per tile, in
// order, by every thread of the block with the same n. Between the start and walk the caller may
// load other tiles and compute (tile 0 stays in flight). walk returns with no copy in flight and
// after a barrier, so the buffers are free.
template <class Issue>
__device__ __forceinline__ auto start_double_buffered(int32_t n, Issue issue) {
  if (n > 0) issue(0);
  async_commit();
  return [n, issue](auto&& use) {
    for (int32_t it = 0; it < n; ++it) {
      if (it + 1 < n) issue(it + 1);  // into the buffer tile it - 1 used, freed by the last barrier
      async_commit();                 // (an empty group at the end keeps the count)
      async_wait<1>();                // this thread's copies of tile it have landed
      __syncthreads();                // ... and every thread's
      use(it);
      __syncthreads();  // every warp is done with buffer it % 2 before it is refilled
    }
    async_wait<0>();
  };
}

}  // namespace hw::cuda
