// CPU tests of the CUDA ops' launch geometry (tiles/ops_grid.hpp, tiles/reduction_partials.hpp):
// simulated grid-stride loops and partial ranges must touch every element exactly once.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "headwise/kernels/tiles/ops_grid.hpp"
#include "headwise/kernels/tiles/reduction_partials.hpp"

using namespace hw::tiles;

namespace {

// How many times each element is visited by the kernels' loop pair: float4 items
// [0, vec_items) and the scalar tail [tail_begin, n), both with a grid stride.
std::vector<int> visits(int64_t n, bool vec, int64_t threads, int64_t max_blocks) {
  const Vec4Split s = vec4_split(n, vec);
  const int64_t blocks = stride_grid_blocks(vec4_loop_items(s, n), threads, max_blocks);
  std::vector<int> seen(static_cast<size_t>(n), 0);
  const int64_t stride = blocks * threads;
  for (int64_t tid = 0; tid < stride; tid++) {
    for (int64_t i = tid; i < s.vec_items; i += stride)
      for (int64_t k = 0; k < 4; k++) seen[static_cast<size_t>(4 * i + k)]++;
    for (int64_t i = s.tail_begin + tid; i < n; i += stride) seen[static_cast<size_t>(i)]++;
  }
  return seen;
}

}  // namespace

TEST_CASE("cuda tiling: grid-stride loops with float4 and tail visit each element once") {
  for (int64_t n : {1, 3, 4, 5, 7, 8, 255, 256, 1023, 1024, 1025, 4099}) {
    for (bool vec : {false, true}) {
      for (int64_t max_blocks : {1, 3, 1000}) {
        const auto seen = visits(n, vec, 32, max_blocks);
        for (int64_t i = 0; i < n; i++) {
          INFO("n=" << n << " vec=" << vec << " max_blocks=" << max_blocks << " i=" << i);
          REQUIRE(seen[static_cast<size_t>(i)] == 1);
        }
      }
    }
  }
}

TEST_CASE("cuda tiling: block counts") {
  CHECK(stride_grid_blocks(0, 256, 100) == 0);
  CHECK(stride_grid_blocks(-5, 256, 100) == 0);
  CHECK(stride_grid_blocks(1, 256, 100) == 1);
  CHECK(stride_grid_blocks(256, 256, 100) == 1);
  CHECK(stride_grid_blocks(257, 256, 100) == 2);
  CHECK(stride_grid_blocks(int64_t{1} << 40, 256, kOpMaxBlocks) == kOpMaxBlocks);
  // The split: float4 only when asked and worthwhile, the tail is the rest.
  CHECK(vec4_split(10, true).vec_items == 2);
  CHECK(vec4_split(10, true).tail_begin == 8);
  CHECK(vec4_split(10, false).vec_items == 0);
  CHECK(vec4_split(10, false).tail_begin == 0);
  CHECK(vec4_split(3, true).vec_items == 0);
}

TEST_CASE("cuda tiling: float4 eligibility of pointers and rows") {
  alignas(16) float buf[8] = {};
  CHECK(aligned16(buf));
  CHECK_FALSE(aligned16(buf + 1));
  CHECK_FALSE(aligned16(buf + 2));
  CHECK(aligned16(buf + 4));
  CHECK(aligned16(nullptr));
  CHECK(rows_vec4(768, true));
  CHECK_FALSE(rows_vec4(768, false));
  CHECK_FALSE(rows_vec4(50257, true));
  CHECK(rows_vec4(50304, true));
}

TEST_CASE("cuda tiling: cross-entropy block width") {
  CHECK(crossentropy_threads(1) == 32);
  CHECK(crossentropy_threads(256) == 32);
  CHECK(crossentropy_threads(513) == 64);
  CHECK(crossentropy_threads(50257) == 512);
  for (int64_t V : {1, 17, 300, 4096, 8193, 50257, 1 << 20}) {
    const int t = crossentropy_threads(V);
    INFO("V=" << V);
    CHECK(t % 32 == 0);
    CHECK((t & (t - 1)) == 0);
    CHECK(t >= 32);
    CHECK(t <= 512);
  }
}

TEST_CASE("cuda tiling: reduction partials cover 0..n-1 in contiguous aligned ranges") {
  for (int64_t n : {1, 3, 4, 100, 4095, 4096, 4097, 1000000, 123456789}) {
    for (int64_t max_blocks : {1, 7, 1024}) {
      const PartialsPlan p = plan_partials(n, max_blocks, 4096);
      INFO("n=" << n << " max_blocks=" << max_blocks);
      REQUIRE(p.blocks >= 1);
      CHECK(p.blocks <= max_blocks);
      CHECK(p.per_block % 4 == 0);
      CHECK((p.per_block >= 4096 || p.blocks == 1));
      // Ranges [b*per, min(n, (b+1)*per)) are non-empty and end exactly at n.
      CHECK(p.blocks * p.per_block >= n);
      CHECK((p.blocks - 1) * p.per_block < n);
    }
  }
  CHECK(plan_partials(0, 1024, 4096).blocks == 0);
  CHECK(plan_partials(5, 0, 4096).blocks == 0);
  // The plan depends on n only, so the same array always sums in the same order.
  CHECK(plan_partials(1 << 24, 1024, 4096).per_block == (1 << 24) / 1024);
}

TEST_CASE("cuda tiling: row partials give each row to one block in order") {
  CHECK(row_partials_blocks(0, 1024) == 0);
  CHECK(row_partials_blocks(5, 1024) == 5);
  CHECK(row_partials_blocks(8192, 1024) == 1024);
  const int64_t rows = 2500, blocks = row_partials_blocks(rows, 1024);
  std::vector<int> seen(rows, 0);
  for (int64_t b = 0; b < blocks; b++) {
    int64_t last = -1;
    for (int64_t r = b; r < rows; r += blocks) {
      CHECK(r > last);
      last = r;
      seen[static_cast<size_t>(r)]++;
    }
  }
  for (int s : seen) REQUIRE(s == 1);
}

TEST_CASE("cuda tiling: column sums give each (row, column) to one lane") {
  const int64_t N = 333, C = 21;
  std::vector<int> seen(static_cast<size_t>(N * C), 0);
  const int64_t grid = (C + kColumnSumCols - 1) / kColumnSumCols;
  for (int64_t bx = 0; bx < grid; bx++)
    for (int tx = 0; tx < kColumnSumCols; tx++)
      for (int ty = 0; ty < kColumnSumRowLanes; ty++) {
        const int64_t c = bx * kColumnSumCols + tx;
        if (c >= C) continue;
        for (int64_t n = ty; n < N; n += kColumnSumRowLanes) seen[static_cast<size_t>(n * C + c)]++;
      }
  for (int s : seen) REQUIRE(s == 1);
  // The lane tree halves a power of two down to one.
  CHECK((kColumnSumRowLanes & (kColumnSumRowLanes - 1)) == 0);
  CHECK(kColumnSumCols * kColumnSumRowLanes <= 1024);
}
