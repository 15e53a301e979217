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

// body(i) for i in [0, n): across the OpenMP team when `parallel`, else on this thread without
// entering a parallel region. An `if` clause is not enough: libgomp allocates a team record on
// the heap for every region it enters, one the clause keeps to a single thread included, and a
// decode step (tens of small kernels) must allocate nothing (tests/infer/test_no_alloc.cpp).
template <class Body>
inline void parallel_for(int64_t n, bool parallel, const Body& body) {
  if (parallel) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) body(i);
  } else {
    for (int64_t i = 0; i < n; i++) body(i);
  }
}
// The same over elements, vectorised.
template <class Body>
inline void parallel_for_simd(int64_t n, bool parallel, const Body& body) {
  if (parallel) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++) body(i);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) body(i);
  }
}

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
