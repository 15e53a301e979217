#pragma once
// Register fragments of the tensor-core instruction the bf16 attention uses,
//   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32  D = A B + C
// (A 16x16 bf16 row-major, B 16x8 bf16 "col", C/D 16x8 fp32; sm_80 and later): which element of
// which matrix each lane of the warp holds, how fragments are read from shared-memory tiles, and
// how an fp32 result fragment becomes the bf16 A fragment of the next product (FlashAttention-2's
// P V and dS K without a trip through shared memory). Layouts: PTX ISA, section 9.7.14.5.8
// "Matrix Fragments for mma.m16n8k16 with floating point type" (groupID = laneid >> 2,
// threadID_in_group = laneid % 4). Host+device, so the CPU tests (tests/kernels/test_mma_fragments)
// check the layouts against the PTX tables and emulate whole warps with these very functions.
//
// Shared-memory tiles of bf16 values are held as 32-bit words, two bf16 per word (element 2w of a
// row in the low half of word w, the layout of tiles/bf16_pack.hpp), so every fragment read is a
// 32-bit load with no type punning. A row of `cols` bf16 takes ld_words(cols) words: 4 words of
// padding put the 8 rows x 4 words a warp reads per fragment register on 32 distinct banks.
#include <cstdint>

#include "headwise/core/bf16.hpp"
#include "headwise/kernels/tiles/bf16_pack.hpp"
#include "headwise/kernels/tiles/host_device.hpp"

namespace hw::tiles::mma {

constexpr int kWarp = 32;
constexpr int kM = 16, kN = 8, kK = 16;  // the instruction's shape
constexpr int kAElems = 8, kBElems = 4, kCElems = 4;  // elements per lane (A, B: two bf16 per register)

struct Coord {
  int row = 0, col = 0;
};

HW_HOST_DEVICE int group_id(int lane) { return lane >> 2; }
HW_HOST_DEVICE int thread_in_group(int lane) { return lane & 3; }

// A (16 x 16, row): element i (0..7) of a lane; register i / 2 holds elements 2r (low half) and 2r + 1.
// row = groupID for i in {0, 1, 4, 5}, groupID + 8 otherwise; col = 2 threadID_in_group + (i & 1), + 8 for i >= 4.
HW_HOST_DEVICE Coord a_coord(int lane, int i) {
  return {group_id(lane) + (((i >> 1) & 1) ? 8 : 0), 2 * thread_in_group(lane) + (i & 1) + (i >= 4 ? 8 : 0)};
}
// B (16 x 8, col; row = k, col = n): element i (0..3); row = 2 threadID_in_group + (i & 1), + 8 for i >= 2;
// col = groupID.
HW_HOST_DEVICE Coord b_coord(int lane, int i) {
  return {2 * thread_in_group(lane) + (i & 1) + (i >= 2 ? 8 : 0), group_id(lane)};
}
// C and D (16 x 8, fp32): element i (0..3); row = groupID for i < 2, groupID + 8 otherwise;
// col = 2 threadID_in_group + (i & 1).
HW_HOST_DEVICE Coord c_coord(int lane, int i) {
  return {group_id(lane) + (i >= 2 ? 8 : 0), 2 * thread_in_group(lane) + (i & 1)};
}

// ---- row ownership of a C fragment (the online softmax's view) ----
// Element i of a C fragment lies in the lane's row half i / 2: row groupID (half 0) or groupID + 8
// (half 1). The four lanes of a group (a quad: lanes 4g .. 4g + 3) hold the same two rows, so a
// row's max or sum over a 16 x 8n block is the lane's own partial combined with lanes lane ^ 1
// and lane ^ 2 (a two-step butterfly; every lane of the quad ends with the same value).
HW_HOST_DEVICE int c_row_half(int i) { return i >> 1; }
HW_HOST_DEVICE int owned_row(int lane, int half) { return group_id(lane) + 8 * half; }
constexpr int kQuadXor0 = 1, kQuadXor1 = 2;

// ---- C fragment -> A fragment (the P of P V, the dS of dS K) ----
// A 16 x 16 A block over k columns [16 kk, 16 kk + 16) is the two 16 x 8 C blocks 2 kk and
// 2 kk + 1 side by side: A element i is C element i % 4 of block 2 kk + i / 4 (same row, column
// 8 (i / 4) + 2 threadID_in_group + (i & 1)), so the lane already holds every value it needs.
HW_HOST_DEVICE Coord a_source_in_c(int i) { return {i / 4, i % 4}; }  // {block offset 0/1, C element}

// The A fragment from C blocks lo (= 2 kk) and hi (= 2 kk + 1), each value rounded once to bf16.
HW_HOST_DEVICE void pack_a_from_c(const float (&lo)[4], const float (&hi)[4], uint32_t (&a)[4]) {
  a[0] = bf16_word(lo[0], lo[1]);
  a[1] = bf16_word(lo[2], lo[3]);
  a[2] = bf16_word(hi[0], hi[1]);
  a[3] = bf16_word(hi[2], hi[3]);
}

// ---- shared-memory word tiles ----
HW_HOST_DEVICE constexpr int ld_words(int cols) { return cols / 2 + 4; }

// The word holding two stored bf16 (exact: the bits are kept, nothing rounds).
HW_HOST_DEVICE uint32_t bf16_pair_word(bf16 lo, bf16 hi) {
  return static_cast<uint32_t>(lo.bits) | (static_cast<uint32_t>(hi.bits) << 16);
}
// Element `col` of a word tile's row (widened, exact).
HW_HOST_DEVICE float word_elem(const uint32_t* row, int col) {
  const uint32_t w = row[col >> 1];
  return (col & 1) ? bf16_word_hi(w) : bf16_word_lo(w);
}
HW_HOST_DEVICE uint32_t half_bits(uint32_t w, int high) { return high ? (w >> 16) : (w & 0xffffu); }

// ---- ldmatrix: the fragment loads the kernels use ----
// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 (PTX ISA, "Warp-level matrix load instruction:
// ldmatrix") loads four 8 x 8 matrices of 16-bit elements in one warp-collective instruction: lane
// 8 m + r supplies the shared address of row r of matrix m (8 elements = 16 bytes = 4 words,
// 16-byte aligned), and register m of lane 4 r + w receives word w of row r of matrix m. With
// .trans every matrix is read transposed: register m of lane l holds elements (2 (l % 4), l / 4)
// and (2 (l % 4) + 1, l / 4) of matrix m, low half first. One instruction replaces the 4 to 8
// scalar shared loads (and, for V, the half-word shuffling) of the per-element loads below, which
// stay as the reference the tests compare it with. Row strides of ld_words(cols) words keep the 8
// rows of a matrix on distinct bank quads, so each of its 4 phases is conflict-free.
HW_HOST_DEVICE int ldsm_matrix(int lane) { return lane >> 3; }
HW_HOST_DEVICE int ldsm_row(int lane) { return lane & 7; }

// The element (row, col) of a word tile whose 8-element row a lane addresses, for the three loads
// of the tiles (col is a multiple of 8, so the address tile + row ldw + col / 2 is 16-byte aligned
// whenever the tile and its row stride are):
// - an A fragment of rows [0, 16) x columns [0, 16): matrices (rows 0-7, cols 0-7), (rows 8-15,
//   cols 0-7), (rows 0-7, cols 8-15), (rows 8-15, cols 8-15) are registers a[0..3] (a_coord);
HW_HOST_DEVICE Coord ldsm_a_source(int lane) {
  return {ldsm_row(lane) + 8 * (ldsm_matrix(lane) & 1), 8 * (ldsm_matrix(lane) >> 1)};
}
// - two B fragments with B(k, n) = tile(n, k), n-tiles n 0-7 and 8-15 over k 0-15 (the tile's rows
//   are B's columns: K in Q K^T): matrices (rows 0-7, cols 0-7), (rows 0-7, cols 8-15),
//   (rows 8-15, cols 0-7), (rows 8-15, cols 8-15) are b[0], b[1] of n-tile 0, then of n-tile 1;
HW_HOST_DEVICE Coord ldsm_b_nk_source(int lane) {
  return {ldsm_row(lane) + 8 * (ldsm_matrix(lane) >> 1), 8 * (ldsm_matrix(lane) & 1)};
}
// - two B fragments with B(k, n) = tile(k, n), k 0-15, n-tiles 0-7 and 8-15 (the tile's rows are
//   B's rows: V in P V), read with .trans: matrices (rows 0-7, cols 0-7), (rows 8-15, cols 0-7),
//   (rows 0-7, cols 8-15), (rows 8-15, cols 8-15) are b[0], b[1] of n-tile 0, then of n-tile 1.
HW_HOST_DEVICE Coord ldsm_b_kn_source(int lane) {
  return {ldsm_row(lane) + 8 * (ldsm_matrix(lane) & 1), 8 * (ldsm_matrix(lane) >> 1)};
}
// The word a lane addresses: element `at` of a word tile with row stride ldw, offset by (row0, col0).
HW_HOST_DEVICE const uint32_t* ldsm_address(const uint32_t* tile, int ldw, int row0, int col0, Coord at) {
  return tile + (row0 + at.row) * ldw + ((col0 + at.col) >> 1);
}

// ---- per-element fragment loads (the reference of the ldmatrix loads) ----
// A fragment of rows [0, 16) x columns [k0, k0 + 16) of a row-major word tile (row stride ldw
// words; k0 even). Each register is one word.
HW_HOST_DEVICE void load_a(const uint32_t* tile, int ldw, int k0, int lane, uint32_t (&a)[4]) {
  for (int r = 0; r < 4; ++r) {
    const Coord c = a_coord(lane, 2 * r);
    a[r] = tile[c.row * ldw + ((k0 + c.col) >> 1)];
  }
}
// B fragment with B(k, n) = tile(n, k0 + k): the tile's rows are B's columns (K rows for Q K^T).
// Each register is one word.
HW_HOST_DEVICE void load_b_nk(const uint32_t* tile, int ldw, int k0, int lane, uint32_t (&b)[2]) {
  for (int r = 0; r < 2; ++r) {
    const Coord c = b_coord(lane, 2 * r);
    b[r] = tile[c.col * ldw + ((k0 + c.row) >> 1)];
  }
}
// B fragment with B(k, n) = tile(k, n0 + n): the tile's rows are B's rows (V rows for P V). A
// register's two elements lie in consecutive rows, so each comes from its own word.
HW_HOST_DEVICE void load_b_kn(const uint32_t* tile, int ldw, int n0, int lane, uint32_t (&b)[2]) {
  for (int r = 0; r < 2; ++r) {
    const Coord lo = b_coord(lane, 2 * r), hi = b_coord(lane, 2 * r + 1);
    const int n = n0 + lo.col;  // == n0 + hi.col
    b[r] = half_bits(tile[lo.row * ldw + (n >> 1)], n & 1) | (half_bits(tile[hi.row * ldw + (n >> 1)], n & 1) << 16);
  }
}

}  // namespace hw::tiles::mma
