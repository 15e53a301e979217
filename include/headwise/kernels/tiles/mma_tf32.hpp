#pragma once
// Block-level tensor-core tile product for fp32 tiles in shared memory, on the TF32 instruction
//   mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32   D = A B + C
// (A 16x8 row-major, B 8x8 "col", C/D 16x8 fp32; sm_80 and later), or on the bf16 one of
// mma_fragments.hpp for operands that are bf16 values (TcPrecision::kBf16), so the linear (OAL)
// heads' chunk products (src/kernels/cuda/attention_linear.cuh) can run on tensor cores in place
// of the SIMT attn_tile::tile_gemm_acc. Host+device: the CPU tests (tests/kernels/test_mma_tf32.cpp) run
// this very code with an emulated warp policy.
//
// Fragment layouts: PTX ISA 9.1, section 9.7.14.5.7 "Matrix Fragments for mma.m16n8k8", the .tf32
// tables (Figures 72, 75, 77), with groupID = laneid >> 2 and threadID_in_group = laneid % 4:
//   A (.tf32): row = groupID for a0, a2; groupID + 8 for a1, a3
//              col = threadID_in_group for a0, a1; threadID_in_group + 4 for a2, a3
//   B (.tf32): row (k) = threadID_in_group for b0; threadID_in_group + 4 for b1;  col (n) = groupID
//   C/D (.f32): the same as m16n8k16 (c_coord in mma_fragments.hpp).
// Note A's register order differs from the bf16 m16n8k16 one (there the row changes first).
#include <cstdint>
#include <cstring>

#include "headwise/kernels/tiles/bf16_pack.hpp"
#include "headwise/kernels/tiles/host_device.hpp"
#include "headwise/kernels/tiles/mma_fragments.hpp"
#include "headwise/kernels/tiles/static_unroll.hpp"

namespace hw::tiles::mma {

constexpr int kTf32M = 16, kTf32N = 8, kTf32K = 8;  // the instruction's shape
constexpr int kTf32AElems = 4, kTf32BElems = 2;     // registers (= elements) per lane
constexpr int kTcWarps = 8;                         // warps of the 256-thread block (kAttnThreads)

// A (16 x 8, row): register i (0..3) of a lane.
HW_HOST_DEVICE Coord tf32_a_coord(int lane, int i) {
  return {group_id(lane) + ((i & 1) ? 8 : 0), thread_in_group(lane) + ((i & 2) ? 4 : 0)};
}
// B (8 x 8, col; row = k, col = n): register i (0..1) of a lane.
HW_HOST_DEVICE Coord tf32_b_coord(int lane, int i) { return {thread_in_group(lane) + (i ? 4 : 0), group_id(lane)}; }

// fp32 -> tf32 as cvt.rna.tf32.f32: round to nearest, ties away from zero, keeping 10 mantissa
// bits. Returns the fp32 bit pattern of the rounded value (low 13 bits zero), which is what the
// mma's .tf32 operand registers hold. Host: the same rounding in integer arithmetic (adding half
// an ulp of tf32 to the magnitude bits rounds ties away from zero, and a carry out of the mantissa
// correctly bumps the exponent, up to inf). inf stays inf; NaN stays a (quiet) NaN whose low bits
// are cleared. Denormals round like normals on the host.
HW_HOST_DEVICE uint32_t tf32_round(float x) {
#ifdef __CUDA_ARCH__
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u) return (u & 0x007fffffu) ? ((u | 0x00400000u) & ~0x1fffu) : u;
  return (u + 0x1000u) & ~0x1fffu;
#endif
}
HW_HOST_DEVICE float tf32_bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The accumulator of an M x N product as 16 x 8 tiles in row-major tile order; warp w of the
// block's 8 owns tiles [w TPW, w TPW + TPW), all in one 16-row strip (so the A fragment of a k
// step is loaded once and shared by the warp's TPW products). v[j] is the C fragment of the
// warp's tile j. Kernel code reaches the elements through for_each, never the layout.
template <int M, int N>
struct TcAcc {
  static_assert(M % kTf32M == 0 && N % kTf32N == 0, "TcAcc: M must be a multiple of 16, N of 8");
  static_assert((M * N) % (kTcWarps * kTf32M * kTf32N) == 0, "TcAcc: the 8 warps need whole 16x8 tiles each");
  static constexpr int kTilesPerRow = N / kTf32N;
  static constexpr int TPW = M * N / (kTcWarps * kTf32M * kTf32N);
  static_assert(kTilesPerRow % TPW == 0, "TcAcc: a warp's tiles must share one 16-row strip");

  float v[TPW][4];

  HW_HOST_DEVICE void zero() {
    unroll<TPW>([&](auto j) {
      for (int e = 0; e < 4; ++e) v[j][e] = 0.f;
    });
  }
  // First row and column of the warp's tile j.
  HW_HOST_DEVICE static int tile_row0(int warp) { return (warp * TPW / kTilesPerRow) * kTf32M; }
  HW_HOST_DEVICE static int tile_col0(int warp, int j) { return ((warp * TPW) % kTilesPerRow + j) * kTf32N; }

  // f(row, col, value&) for every element the lane owns (row-major tile order, then c0..c3).
  template <class F>
  HW_HOST_DEVICE void for_each(int warp, int lane, F&& f) {
    unroll<TPW>([&](auto j) {
      for (int e = 0; e < 4; ++e) {
        const Coord p = c_coord(lane, e);
        f(tile_row0(warp) + p.row, tile_col0(warp, j) + p.col, v[j][e]);
      }
    });
  }
  template <class F>
  HW_HOST_DEVICE void for_each(int warp, int lane, F&& f) const {
    unroll<TPW>([&](auto j) {
      for (int e = 0; e < 4; ++e) {
        const Coord p = c_coord(lane, e);
        f(tile_row0(warp) + p.row, tile_col0(warp, j) + p.col, v[j][e]);
      }
    });
  }
};

// Precision of a tensor-core tile product. kTf32: each operand rounded once to tf32 (10
// mantissa bits, relative error 2^-11 per operand). kSplit3: "3xTF32", each operand split
// into a tf32 high part and a tf32 rounding of the remainder, x = hi + lo (to about 2^-22),
// and A B formed as lo_a hi_b + hi_a lo_b + hi_a hi_b (small terms first; lo_a lo_b, below fp32's
// resolution, is dropped): fp32-level accuracy for three instructions instead of one (the
// kernels do not use it at present: the one product whose terms cancel exactly, a linear head's
// dKappa, now multiplies bf16 values, exactly, with kBf16). kBf16: each operand rounded once to bf16 and multiplied
// by the bf16 instruction m16n8k16 (fragments: mma_fragments.hpp) into the same fp32
// accumulator tiles, at twice the tf32 rate; for operands that already hold bf16 values (a bf16
// model's activations) nothing is rounded and every product is exact, so the result is as
// accurate as fp32 accumulation allows.
enum class TcPrecision { kTf32, kSplit3, kBf16 };

// The tf32 operand parts of x for precision P (lo is 0 for kTf32).
template <TcPrecision P>
HW_HOST_DEVICE void tf32_parts(float x, uint32_t& hi, uint32_t& lo) {
  hi = tf32_round(x);
  lo = P == TcPrecision::kSplit3 ? tf32_round(x - tf32_bits_to_float(hi)) : 0u;
}

// acc[m][n] += sum_k A(m, k) B(k, n) with A(m, k) = A[m * ARS + k * ACS] and
// B(k, n) = B[k * BRS + n * BCS] (shared memory; the stride convention of attn_tile::tile_gemm_acc).
// K is any positive count: k steps of 8, and elements at k >= K are zero in the fragments and
// never read, so a ragged last step does not touch memory past the tile. Operands are split or
// rounded to tf32 (or bf16) as the fragments are loaded (TcPrecision); the warp's products go
// through the policy's W::mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
// (kBf16: W::mma with the m16n8k16 fragments, k steps of 16). Fixed
// order (k steps ascending, the instruction's own accumulation), so results are bit-reproducible.
template <int M, int N, int K, int ARS, int ACS, int BRS, int BCS, class W, TcPrecision P = TcPrecision::kTf32>
HW_HOST_DEVICE void tc_tile_gemm_acc(TcAcc<M, N>& acc, const float* A, const float* B, int warp, int lane) {
  static_assert(K > 0, "tc_tile_gemm_acc: K must be positive");
  using Acc = TcAcc<M, N>;
  const int r0 = Acc::tile_row0(warp);
  const float* a_strip = A + r0 * ARS;
  if constexpr (P == TcPrecision::kBf16) {
    // k steps of 16; register r of a fragment packs elements 2r (low half) and 2r + 1.
    for (int k0 = 0; k0 < K; k0 += 16) {
      float av[8];
      for (int i = 0; i < 8; ++i) {
        const Coord p = a_coord(lane, i);
        const int k = k0 + p.col;
        av[i] = k < K ? a_strip[p.row * ARS + k * ACS] : 0.f;
      }
      const uint32_t a[4] = {bf16_word(av[0], av[1]), bf16_word(av[2], av[3]), bf16_word(av[4], av[5]),
                             bf16_word(av[6], av[7])};
      unroll<Acc::TPW>([&](auto j) {
        const int n0 = Acc::tile_col0(warp, j);
        float bv[4];
        for (int i = 0; i < 4; ++i) {
          const Coord p = b_coord(lane, i);
          const int k = k0 + p.row;
          bv[i] = k < K ? B[k * BRS + (n0 + p.col) * BCS] : 0.f;
        }
        const uint32_t b[2] = {bf16_word(bv[0], bv[1]), bf16_word(bv[2], bv[3])};
        W::mma(acc.v[j], a, b);
      });
    }
  } else {
    for (int k0 = 0; k0 < K; k0 += kTf32K) {
      uint32_t a_hi[4], a_lo[4];
      for (int i = 0; i < 4; ++i) {
        const Coord p = tf32_a_coord(lane, i);
        const int k = k0 + p.col;
        tf32_parts<P>(k < K ? a_strip[p.row * ARS + k * ACS] : 0.f, a_hi[i], a_lo[i]);
      }
      unroll<Acc::TPW>([&](auto j) {
        const int n0 = Acc::tile_col0(warp, j);
        uint32_t b_hi[2], b_lo[2];
        for (int i = 0; i < 2; ++i) {
          const Coord p = tf32_b_coord(lane, i);
          const int k = k0 + p.row;
          tf32_parts<P>(k < K ? B[k * BRS + (n0 + p.col) * BCS] : 0.f, b_hi[i], b_lo[i]);
        }
        if constexpr (P == TcPrecision::kSplit3) {
          W::mma_tf32(acc.v[j], a_lo, b_hi);
          W::mma_tf32(acc.v[j], a_hi, b_lo);
        }
        W::mma_tf32(acc.v[j], a_hi, b_hi);
      });
    }
  }
}

}  // namespace hw::tiles::mma
