#pragma once
// Launch geometry of the CUDA element/row ops (src/kernels/cuda): how many blocks a
// grid-stride loop gets, when float4 loads are allowed, and the block widths of the row
// kernels. Host+device so the CPU tests check the same arithmetic the launchers use.
#include <cstdint>

#include "headwise/kernels/tiles/host_device.hpp"

namespace hw::tiles {

constexpr int kOpThreads = 256;         // threads per block of the elementwise kernels
constexpr int64_t kOpMaxBlocks = 8192;  // grid-stride loops cover the rest (keeps grid.x small)
constexpr int kRowsPerBlock = 8;        // row kernels: one warp per row, 8 warps per block

// Blocks of `threads` that give each of `items` work items one thread, capped at max_blocks
// (the kernels loop with a grid stride, so a capped grid still covers every item).
HW_HOST_DEVICE int64_t stride_grid_blocks(int64_t items, int64_t threads, int64_t max_blocks) {
  if (items <= 0) return 0;
  const int64_t need = (items + threads - 1) / threads;
  return need < max_blocks ? need : max_blocks;
}

// A pointer that float4 loads/stores may use (16-byte aligned); null pointers qualify, so
// optional operands do not force the scalar path.
HW_HOST_DEVICE bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & uintptr_t{15}) == 0; }

// A flat range of n floats split into n/4 float4 items plus a scalar tail [tail_begin, n);
// with `vec` false everything is tail (misaligned operands).
struct Vec4Split {
  int64_t vec_items;
  int64_t tail_begin;
};
HW_HOST_DEVICE Vec4Split vec4_split(int64_t n, bool vec) {
  if (!vec || n < 4) return {0, 0};
  return {n / 4, (n / 4) * 4};
}
// Work items of a grid-stride loop over such a split: the float4 items or the tail, whichever
// is longer (both loops run with the same thread index and stride).
HW_HOST_DEVICE int64_t vec4_loop_items(const Vec4Split& s, int64_t n) {
  const int64_t tail = n - s.tail_begin;
  return s.vec_items > tail ? s.vec_items : tail;
}

// Rows of width C may use float4 when every row starts 16-byte aligned: C a multiple of 4 and
// the base pointers aligned.
HW_HOST_DEVICE bool rows_vec4(int64_t C, bool bases_aligned) { return bases_aligned && C % 4 == 0; }

// Threads per cross-entropy row block: about 16 logits per thread, a power of two in [32, 512]
// (a 50k vocabulary gets 512 threads; a byte vocabulary one warp).
HW_HOST_DEVICE int crossentropy_threads(int64_t V) {
  int t = 32;
  while (t < 512 && int64_t{t} * 16 < V) t *= 2;
  return t;
}

// Column sums over rows (LayerNorm's dweight/dbias, a bias gradient): a block owns
// kColumnSumCols adjacent columns and kColumnSumRowLanes threads per column; lane r adds rows
// r, r + lanes, ... in order, and the lanes' partials meet in a fixed tree. A warp reads 4 rows
// x 8 columns: whole 32-byte sectors, so the narrow blocks cost no extra traffic while giving
// C/8 blocks instead of C/32.
constexpr int kColumnSumCols = 8;
constexpr int kColumnSumRowLanes = 64;

}  // namespace hw::tiles
