#pragma once
// Internal: when a kernel is worth an OpenMP team. Forking and joining costs microseconds
// (far more on a loaded machine), so loops touching fewer elements than this run serially.
// Results never depend on this choice: every reduction has a fixed order either way.
#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace hw::cpu::detail {

constexpr int64_t kParallelMinWork = 1 << 14;

inline bool worth_parallel(int64_t elements) { return elements >= kParallelMinWork; }

// Column reductions over an [N x O] row-major matrix (bias gradients) walk the rows in order
// within blocks of columns, one block per OpenMP iteration. Wide blocks read long contiguous
// runs of each row (the prefetcher follows them; 64-column blocks of a 4 KiB row stride cost a
// TLB walk per row and ran GELU's fused backward at a third of its arithmetic speed); there
// are still enough blocks to give every thread one. Any width gives the same bits: each column
// sums its rows in order.
constexpr int64_t kMaxColumnBlock = 512;
inline int64_t column_block_width(int64_t O) {
  const int64_t threads = std::max(1, omp_get_max_threads());
  const int64_t per_thread = ((O + threads - 1) / threads + 15) / 16 * 16;
  return std::clamp<int64_t>(per_thread, 16, kMaxColumnBlock);
}

}  // namespace hw::cpu::detail
