#pragma once
// Dense tile products used by the softmax-family and static heads. They are written as
// axpy loops over one contiguous row, which the compiler vectorizes without -ffast-math
// (no reassociation), and they run on the calling thread: the entry point already
// parallelises over heads, so a threaded BLAS underneath would oversubscribe the cores,
// and a fixed summation order keeps every result deterministic.
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace hw::attn::detail {

// Query rows and keys per tile. Also the linear head's chunk length.
constexpr int kTile = 64;

// C[m x kTile] = scale * A[m x k] B[n x k]^T (A, B rows strided by lda, ldb); columns >= n of
// C are zero. bt is scratch of k * kTile elements (B transposed and zero padded, so the inner
// loop has a fixed length of kTile and its accumulators stay in registers).
template <class F>
inline void tile_abt(F* C, const F* A, int64_t lda, const F* B, int64_t ldb, int m, int n, int k, F scale,
                     F* bt) {
  for (int d = 0; d < k; ++d) {
    F* row = bt + int64_t(d) * kTile;
    for (int j = 0; j < n; ++j) row[j] = B[j * ldb + d];
    for (int j = n; j < kTile; ++j) row[j] = F(0);
  }
  for (int i = 0; i < m; ++i) {
    F acc[kTile] = {};
    const F* a = A + i * lda;
    for (int d = 0; d < k; ++d) {
      const F ad = a[d];
      const F* b = bt + int64_t(d) * kTile;
      for (int j = 0; j < kTile; ++j) acc[j] += ad * b[j];
    }
    F* c = C + int64_t(i) * kTile;
    for (int j = 0; j < kTile; ++j) c[j] = scale * acc[j];
  }
}

// C[m x k] += P[m x n] B[n x k]; P has row stride kTile, B and C strided rows. Zero weights
// (masked keys) are skipped.
template <class F>
inline void tile_ab_acc(F* C, int64_t ldc, const F* P, const F* B, int64_t ldb, int m, int n, int k) {
  for (int i = 0; i < m; ++i) {
    F* c = C + i * ldc;
    const F* p = P + int64_t(i) * kTile;
    for (int j = 0; j < n; ++j) {
      const F pj = p[j];
      if (pj == F(0)) continue;
      const F* b = B + j * ldb;
      for (int d = 0; d < k; ++d) c[d] += pj * b[d];
    }
  }
}

// C[n x k] += P[m x n]^T B[m x k]; P has row stride kTile, B and C strided rows.
template <class F>
inline void tile_atb_acc(F* C, int64_t ldc, const F* P, const F* B, int64_t ldb, int m, int n, int k) {
  for (int i = 0; i < m; ++i) {
    const F* b = B + i * ldb;
    const F* p = P + int64_t(i) * kTile;
    for (int j = 0; j < n; ++j) {
      const F pij = p[j];
      if (pij == F(0)) continue;
      F* c = C + j * ldc;
      for (int d = 0; d < k; ++d) c[d] += pij * b[d];
    }
  }
}

// exp(x), but exactly zero where the result would be subnormal: subnormal arithmetic is
// about 100x slower on x86, and a weight below the smallest normal number (1e-38 in float)
// cannot change an attention output. Also maps -inf (masked) to 0.
template <class F>
inline F exp_or_zero(F x) {
  constexpr F lo = std::is_same_v<F, float> ? F(-87.0) : F(-708.0);
  return x < lo ? F(0) : std::exp(x);
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
