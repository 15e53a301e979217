#pragma once
// A warp of the tensor-core tile routines emulated on the CPU, shared by the tests of
// tiles/mma_attention_warp.hpp and tiles/mma_static_warp.hpp: the 32 lanes are 32 threads running
// the kernel's own lane code; the warp's m16n8k16 mma is gathered from the lanes' fragments with
// the layout functions of tiles/mma_fragments.hpp, multiplied in double and scattered back, and the
// quad shuffle goes through shared slots; the m16n8k8 tf32 mma of tiles/mma_tf32.hpp likewise. Plus
// word tiles of bf16 values as the kernels load them.
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "headwise/core/bf16.hpp"
#include "headwise/kernels/tiles/bf16_pack.hpp"
#include "headwise/kernels/tiles/mma_fragments.hpp"
#include "headwise/kernels/tiles/mma_tf32.hpp"
#include "support/rel_err.hpp"

namespace hw_test_mma {

namespace mma = hw::tiles::mma;
using Vec = std::vector<double>;

inline double bf(double x) { return hw::to_float(hw::to_bf16(static_cast<float>(x))); }
inline float lo_of(uint32_t w) { return hw::tiles::bf16_word_lo(w); }
inline float hi_of(uint32_t w) { return hw::tiles::bf16_word_hi(w); }

// ---------------- one warp on 32 threads ----------------
struct WarpShared {
  std::barrier<> bar{32};
  uint32_t a[32][4] = {};
  uint32_t b[32][2] = {};
  float c[32][4] = {};
  float v[32] = {};
  const uint32_t* rows[32] = {};
};
inline thread_local WarpShared* t_warp = nullptr;
inline thread_local int t_lane = 0;

// One warp's m16n8k16: gather A, B, C from the 32 lanes' fragments, D = A B + C in double, scatter.
inline void emulate_mma(const uint32_t (&a)[32][4], const uint32_t (&b)[32][2], float (&c)[32][4]) {
  double A[16][16] = {}, B[16][8] = {}, C[16][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) {
      const mma::Coord p = mma::a_coord(lane, i);
      A[p.row][p.col] = (i & 1) ? hi_of(a[lane][i / 2]) : lo_of(a[lane][i / 2]);
    }
    for (int i = 0; i < 4; ++i) {
      const mma::Coord p = mma::b_coord(lane, i);
      B[p.row][p.col] = (i & 1) ? hi_of(b[lane][i / 2]) : lo_of(b[lane][i / 2]);
      const mma::Coord q = mma::c_coord(lane, i);
      C[q.row][q.col] = c[lane][i];
    }
  }
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      const mma::Coord q = mma::c_coord(lane, i);
      double d = C[q.row][q.col];
      for (int k = 0; k < 16; ++k) d += A[q.row][k] * B[k][q.col];
      c[lane][i] = static_cast<float>(d);
    }
}

// One warp's m16n8k8 tf32: the same, with the tf32 layouts. The tensor core reads only the tf32
// bits of an operand register, so the low 13 bits are dropped here too (an operand that skipped
// tf32_round is truncated, as on the hardware, and the tests see the difference).
inline void emulate_mma_tf32(const uint32_t (&a)[32][4], const uint32_t (&b)[32][2], float (&c)[32][4]) {
  double A[16][8] = {}, B[8][8] = {}, C[16][8] = {};
  auto value = [](uint32_t u) { return double(mma::tf32_bits_to_float(u & ~0x1fffu)); };
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const mma::Coord p = mma::tf32_a_coord(lane, i);
      A[p.row][p.col] = value(a[lane][i]);
      const mma::Coord q = mma::c_coord(lane, i);
      C[q.row][q.col] = c[lane][i];
    }
    for (int i = 0; i < 2; ++i) {
      const mma::Coord p = mma::tf32_b_coord(lane, i);
      B[p.row][p.col] = value(b[lane][i]);
    }
  }
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      const mma::Coord q = mma::c_coord(lane, i);
      double d = C[q.row][q.col];
      for (int k = 0; k < 8; ++k) d += A[q.row][k] * B[k][q.col];
      c[lane][i] = static_cast<float>(d);
    }
}

// What lane `lane` receives from ldmatrix .x4 (.trans when `trans`), given the row address each of
// the 32 lanes supplied; written from the PTX description of the instruction (lane 8 m + r names row
// r of matrix m; register m of lane 4 r + w is word w of that row, or with .trans the elements
// (2 w, r) and (2 w + 1, r) of matrix m), independently of the fragment tables in mma_fragments.hpp.
inline void emulate_ldmatrix(const uint32_t* const (&rows)[32], int lane, bool trans, uint32_t (&r)[4]) {
  const int w = lane % 4, q = lane / 4;
  for (int m = 0; m < 4; ++m) {
    if (!trans) {
      r[m] = rows[8 * m + q][w];
      continue;
    }
    const uint32_t lo = mma::half_bits(rows[8 * m + 2 * w][q / 2], q & 1);
    const uint32_t hi = mma::half_bits(rows[8 * m + 2 * w + 1][q / 2], q & 1);
    r[m] = lo | (hi << 16);
  }
}
// The instruction's address rule: each row address 16-byte aligned.
inline bool ldmatrix_row_aligned(const uint32_t* row) { return reinterpret_cast<uintptr_t>(row) % 16 == 0; }

struct HostWarp {
  // One warp-collective mma: every lane posts its fragments, lane 0 multiplies, every lane
  // reads its result fragment back.
  template <class Emulate>
  static void exchange_mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], Emulate emulate) {
    WarpShared& w = *t_warp;
    const int l = t_lane;
    std::copy(a, a + 4, w.a[l]);
    std::copy(b, b + 2, w.b[l]);
    std::copy(d, d + 4, w.c[l]);
    w.bar.arrive_and_wait();
    if (l == 0) emulate(w.a, w.b, w.c);
    w.bar.arrive_and_wait();
    std::copy(w.c[l], w.c[l] + 4, d);
  }
  static void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    exchange_mma(d, a, b, [](auto& A, auto& B, auto& C) { emulate_mma(A, B, C); });
  }
  static void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    exchange_mma(d, a, b, [](auto& A, auto& B, auto& C) { emulate_mma_tf32(A, B, C); });
  }
  static void ldsm(uint32_t (&r)[4], const uint32_t* row, bool trans) {
    if (!ldmatrix_row_aligned(row)) {
      std::fprintf(stderr, "emulated ldmatrix: lane %d gave a row address that is not 16-byte aligned\n", t_lane);
      std::abort();
    }
    WarpShared& w = *t_warp;
    w.rows[t_lane] = row;
    w.bar.arrive_and_wait();
    emulate_ldmatrix(w.rows, t_lane, trans, r);
    w.bar.arrive_and_wait();
  }
  static void ldsm_x4(uint32_t (&r)[4], const uint32_t* row) { ldsm(r, row, false); }
  static void ldsm_x4_trans(uint32_t (&r)[4], const uint32_t* row) { ldsm(r, row, true); }
  static float shfl_xor(float v, int mask) {
    WarpShared& w = *t_warp;
    w.v[t_lane] = v;
    w.bar.arrive_and_wait();
    const float r = w.v[t_lane ^ mask];
    w.bar.arrive_and_wait();
    return r;
  }
};

// Runs f(lane) on 32 threads that form one warp.
template <class F>
void run_warp(const F& f) {
  WarpShared w;
  std::vector<std::thread> ts;
  for (int lane = 0; lane < 32; ++lane)
    ts.emplace_back([&w, &f, lane] {
      t_warp = &w;
      t_lane = lane;
      f(lane);
    });
  for (auto& t : ts) t.join();
}

// A word tile (row stride ld_words(cols)) holding rows [r0, r0 + rows) of a row-major [n][cols]
// array of bf16 values; rows at or past n are zero, as the kernels load them.
inline std::vector<uint32_t> word_tile(const Vec& x, int64_t n, int cols, int64_t r0, int rows = 64) {
  const int ldw = mma::ld_words(cols);
  std::vector<uint32_t> t(static_cast<size_t>(rows * ldw), 0u);
  for (int r = 0; r < rows; ++r) {
    if (r0 + r >= n) break;
    for (int w = 0; w < cols / 2; ++w) {
      const size_t base = static_cast<size_t>((r0 + r) * cols + 2 * w);
      t[size_t(r * ldw + w)] = mma::bf16_pair_word(hw::to_bf16(float(x[base])), hw::to_bf16(float(x[base + 1])));
    }
  }
  return t;
}

// max |got - ref| / scale over the rows [r0, r0 + 16) (those < T) of a [T][HD] reference, got
// holding just those 16 rows; the scale is the block's max |ref|, at least 5% of the whole
// array's (a block can be nearly zero). T = 1 makes dQ and dK exactly zero: then err itself.
inline double row_block_err(const std::vector<float>& got, const std::vector<double>& ref, int64_t T, int HD,
                            int64_t r0) {
  using hw::test::bigger_scale;
  double scale = 0, whole = 0, err = 0;
  for (double x : ref) whole = bigger_scale(whole, x);
  for (int64_t r = r0; r < std::min(T, r0 + 16); ++r)
    for (int c = 0; c < HD; ++c) {
      const double g = got[size_t((r - r0) * HD + c)], x = ref[size_t(r * HD + c)];
      scale = bigger_scale(scale, x);
      err = hw::test::worse(err, hw::test::abs_err(g, x));
    }
  scale = bigger_scale(scale, 0.05 * whole);
  return hw::test::ratio(err, scale);
}

}  // namespace hw_test_mma
