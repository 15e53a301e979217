#pragma once
// The block emulator's cp.async (shadows src/kernels/cuda/async_copy.cuh), made to expose misuse
// rather than to hide it: an issued copy poisons its 16 destination bytes at once (all ones, a NaN
// as fp32 and as both bf16 halves) and lands only when the issuing thread waits for its group.
// A read before the wait and the barrier after it, or an issue into a buffer that other threads
// still read, then sees NaN and the parity checks fail. Addresses are checked (shared
// destination in the launch's bytes, 16-byte alignment); copies never waited for are an error at
// the end of the block.
#include "emulated/block_emulator.hpp"

namespace hw::cuda {

inline void async_copy16(void* dst, const void* src, bool valid) { hw_emu::async_copy16(dst, src, valid); }
inline void async_commit() { hw_emu::async_commit(); }
template <int N>
inline void async_wait() {
  hw_emu::async_wait(N);
}

}  // namespace hw::cuda
