#pragma once
// How the CUDA attention kernels read and write their activations (qkv, out, dout, dqkv) in
// either storage type, fp32 or bf16: tiles always hold fp32, so a load widens and a store
// rounds once to nearest even. bf16 tiles are loaded eight elements (16 bytes) per thread
// when the rows allow it; this header holds that plan (which elements one vector covers, when
// a block of rows is aligned for it, how the eight values unpack), host+device so the CPU tests
// (tests/kernels/test_attention_storage) check the very indexing the kernels run.
#include <cstdint>

#include "headwise/core/bf16.hpp"
#include "headwise/kernels/tiles/bf16_pack.hpp"
#include "headwise/kernels/tiles/host_device.hpp"

namespace hw::tiles {

// Scalar widening load and rounding store of one activation element.
HW_HOST_DEVICE float load_as_float(const float* p) { return *p; }
HW_HOST_DEVICE float load_as_float(const bf16* p) { return to_float(*p); }
HW_HOST_DEVICE void store_from_float(float* p, float x) { *p = x; }
HW_HOST_DEVICE void store_from_float(bf16* p, float x) { *p = to_bf16(x); }

// Elements of one 16-byte vector load.
constexpr int kBf16PerVec = 8;

// Whether every row of a strided block starting at byte address `base` starts on a 16-byte
// boundary (so each row can be read in whole 16-byte vectors): the base is aligned and the row
// stride (elements of `elem_bytes` bytes) is a multiple of 16 bytes.
HW_HOST_DEVICE bool rows_vec16_aligned(uint64_t base, int64_t stride, int elem_bytes) {
  return base % 16 == 0 && (stride * elem_bytes) % 16 == 0;
}

// Vector v of a [rows][cols] tile read `vec` elements at a time (cols a multiple of vec): its
// row and first column. Consecutive v walk a row first, so a warp reads contiguous memory.
struct VecSlot {
  int row = 0, col = 0;
};
HW_HOST_DEVICE VecSlot vec_slot(int v, int cols, int vec) {
  const int per_row = cols / vec;
  return {v / per_row, (v % per_row) * vec};
}

// Eight bf16 read as four 32-bit words (one uint4): element 2k is the low half of word k,
// element 2k + 1 its high half (the word layout of tiles/bf16_pack.hpp). Widening is exact.
HW_HOST_DEVICE void unpack_bf16x8(const uint32_t (&w)[4], float (&out)[8]) {
  for (int k = 0; k < 4; ++k) {
    out[2 * k] = bf16_word_lo(w[k]);
    out[2 * k + 1] = bf16_word_hi(w[k]);
  }
}

}  // namespace hw::tiles
