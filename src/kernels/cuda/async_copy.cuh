#pragma once
// Asynchronous global -> shared copies (cp.async, sm_80 and later): the tensor-core attention
// items issue the next tile's rows before computing on the current one, so the loads overlap the
// products (FlashAttention-2's double buffering). Its own file so that the CPU block emulator
// (tests/emulated/shim) can put a checking stand-in in the same place.
//
// Rules the callers keep: a thread's copies belong to its open group until async_commit();
// async_wait<N>() returns once at most N of the thread's committed groups are still in flight;
// other threads' copies are visible only after a block barrier that follows their waits; and no
// thread issues into a buffer before a barrier that follows every read of its previous contents.
#include <cuda_runtime.h>

namespace hw::cuda {

// 16 bytes from global `src` to shared `dst`, both 16-byte aligned. With valid false nothing is
// read (src-size 0) and the 16 bytes become zeros; src must still be a mapped address. .cg
// caches in L2 only: a block reads each K/V row once.
__device__ __forceinline__ void async_copy16(void* dst, const void* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const size_t s = __cvta_generic_to_global(src);  // the .global operand takes a global address
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(s), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// The "memory" clobber keeps the compiler from moving shared-memory reads above the wait.
template <int N>
__device__ __forceinline__ void async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace hw::cuda
