#pragma once
// Dense tile products used by the softmax-family and static heads.
#include "kernels/cpu/cblas.hpp"
#include "kernels/cpu/vec_math.hpp"

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace hw::attn::detail {

// Query rows and keys per tile. Also the chunk length of the prefix-state engines
// (quad_state.cpp, feature_state.cpp).
constexpr int kTile = 64;

// The (i, j <= i) pairs inside the chunks of T rows: the exact intra-chunk part of the
// prefix-state engines' work (their FLOP counts).
inline double intra_chunk_pairs(int64_t T) {
  const int64_t C = kTile;
  const int64_t full = T / C, rest = T % C;
  return double(full) * double(C * (C + 1) / 2) + double(rest * (rest + 1) / 2);
}

// The three tile products go to BLAS (OpenBLAS), which the caller runs single-threaded
// inside the per-head OpenMP loop (BlasSingleThreaded below): the entry point already
// parallelises over heads, and a single-threaded GEMM has a fixed summation order, so every
// result stays deterministic.
inline void gemm_rm(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int64_t lda, const float* B,
                    int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, A,
              int(lda), B, int(ldb), beta, C, int(ldc));
}
inline void gemm_rm(bool ta, bool tb, int m, int n, int k, double alpha, const double* A, int64_t lda,
                    const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, A,
              int(lda), B, int(ldb), beta, C, int(ldc));
}

// C[m x n] = scale * A[m x k] B[n x k]^T with C's row stride kTile (A, B rows strided by
// lda, ldb). Columns >= n of C are not touched. `bt` is unused scratch kept for the layout.
template <class F>
inline void tile_abt(F* C, const F* A, int64_t lda, const F* B, int64_t ldb, int m, int n, int k, F scale,
                     F* /*bt*/) {
  gemm_rm(false, true, m, n, k, scale, A, lda, B, ldb, F(0), C, kTile);
}

// C[m x k] += P[m x n] B[n x k]; P has row stride kTile, B and C strided rows.
template <class F>
inline void tile_ab_acc(F* C, int64_t ldc, const F* P, const F* B, int64_t ldb, int m, int n, int k) {
  gemm_rm(false, false, m, k, n, F(1), P, kTile, B, ldb, F(1), C, ldc);
}

// C[n x k] += P[m x n]^T B[m x k]; P has row stride kTile, B and C strided rows.
template <class F>
inline void tile_atb_acc(F* C, int64_t ldc, const F* P, const F* B, int64_t ldb, int m, int n, int k) {
  gemm_rm(true, false, n, k, m, F(1), P, kTile, B, ldb, F(1), C, ldc);
}

// While alive, the BLAS library runs every call on the calling thread.
using BlasSingleThreaded = blas::SingleThreaded;

// exp(x), but exactly zero where the result would be subnormal: subnormal arithmetic is
// about 100x slower on x86, and a weight below the smallest normal number (1e-38 in float)
// cannot change an attention output. Also maps -inf (masked) to 0. The float exp is vexp
// (about 1 ulp, vectorizable: libm's expf was a scalar call per score, 3% of a training step).
template <class F>
inline F exp_or_zero(F x) {
  constexpr F lo = std::is_same_v<F, float> ? F(-87.0) : F(-708.0);
  return x < lo ? F(0) : hw::cpu::detail::vexp(x);
}

// Dot product with 8 independent partial sums (vectorizes, fixed order: deterministic).
template <class F>
inline F dot_lanes(const F* x, const F* y, int n) {
  F acc[8] = {};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += x[i + l] * y[i + l];
  F s = F(0);
  for (; i < n; ++i) s += x[i] * y[i];
  for (int l = 0; l < 8; ++l) s += acc[l];
  return s;
}

}  // namespace hw::attn::detail
