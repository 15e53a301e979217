#pragma once
// How the CUDA reductions (sum of squares, cross-entropy's loss total) split their input into
// per-block partial sums. The split depends only on the input size, never on the GPU, so a
// sum's order, and therefore its bits, are the same on every run and device.
#include <cstdint>

#include "headwise/kernels/tiles/host_device.hpp"

namespace hw::tiles {

// Threads of the single block that adds the partials in a fixed order.
constexpr int kPartialsFinishThreads = 256;

// blocks contiguous ranges of per_block elements (the last one shorter): range b is
// [b * per_block, min(n, (b + 1) * per_block)). per_block is a multiple of 4, so ranges of
// an aligned array start aligned for float4 loads; it is at least min_per_block so tiny
// inputs use few blocks, and blocks never exceeds max_blocks (the partials buffer size).
struct PartialsPlan {
  int64_t blocks;
  int64_t per_block;
};
HW_HOST_DEVICE PartialsPlan plan_partials(int64_t n, int64_t max_blocks, int64_t min_per_block) {
  if (n <= 0 || max_blocks <= 0) return {0, 0};
  int64_t per = (n + max_blocks - 1) / max_blocks;
  if (per < min_per_block) per = min_per_block;
  per = (per + 3) / 4 * 4;
  return {(n + per - 1) / per, per};
}

// Rows per block for row-wise reductions (cross-entropy): row r goes to block r % blocks, so
// each block's partial is the sum of its rows in increasing order.
HW_HOST_DEVICE int64_t row_partials_blocks(int64_t rows, int64_t max_blocks) {
  if (rows <= 0) return 0;
  return rows < max_blocks ? rows : max_blocks;
}

}  // namespace hw::tiles
