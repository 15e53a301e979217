// Dense layers on OpenBLAS. W is [I,O] (Conv1D) or [O,I] (w_out_in); both layouts are
// handled by the transpose flags of one gemm call, never by copying W.
#include "kernels/cpu/cblas.hpp"

#include <omp.h>

#include <algorithm>
#include <climits>
#include <string>
#include <type_traits>

#include "headwise/core/error.hpp"
#include "headwise/kernels/cpu.hpp"
#include "headwise/kernels/gemv.hpp"
#include "kernels/cpu/parallel.hpp"

namespace hw::cpu {

namespace {

void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const float* a, int lda, const float* b,
               int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const double* a, int lda,
               const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

void blas_gemv(CBLAS_TRANSPOSE t, int m, int n, const float* a, int lda, const float* x, float beta, float* y) {
  cblas_sgemv(CblasRowMajor, t, m, n, 1.0f, a, lda, x, 1, beta, y, 1);
}
void blas_gemv(CBLAS_TRANSPOSE t, int m, int n, const double* a, int lda, const double* x, double beta, double* y) {
  cblas_dgemv(CblasRowMajor, t, m, n, 1.0, a, lda, x, 1, beta, y, 1);
}

// Below this many multiply-adds a GEMM runs whole on the calling thread.
constexpr int64_t kParallelGemmMinWork = int64_t(1) << 21;
// ... and a one-row product (GEMV), which reads each weight once and is bound by memory: a team
// pays for itself from a few hundred KiB of weights (gemv.cpp's 16-bit kernels split from 2^15).
// Under the GEMM threshold, GPT-2's attention matrices (768 x 2304 and 768 x 768, 28% of a decode
// step's weights) ran on one thread of two at 19-22 GB/s while the MLP's streamed at 29-32.
constexpr int64_t kParallelGemvMinWork = int64_t(1) << 15;
// Piece boundaries fall on multiples of this (the BLAS kernels' register tiles are 16 or 32 wide).
constexpr int kPieceAlign = 32;
// A one-row product over W [I, O] splits W's rows when O fits a partial on each thread's stack
// (64 KiB of floats: GPT-2's, Qwen2.5-0.5B's and Llama-3.2-1B's decoder matrices; not a wider
// fused MLP such as Qwen3-4B's 19456, nor an LM head, which keep the column split).
constexpr int kRowSplitMaxOut = 16384;
constexpr int kMaxGemvThreads = 256;

// C = A B + beta C on the step's one thread pool: each OpenMP thread multiplies one contiguous
// block of C's rows (or of its columns, when C is wider than tall) with single-threaded BLAS.
// The BLAS library's own pool stays asleep: two pools on the same cores made OpenBLAS's workers
// spin in sched_yield between calls while the OpenMP team wanted the cores (20% of a 2-thread
// step in sched_yield/__schedule; bench_cpu_small ran at 1.5x its 1-thread speed instead of 1.8x).
// Every element is still one BLAS call's full-length dot product, in a fixed partition for a
// given thread count, so runs repeat bit for bit.
template <class F>
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const F* a, int lda, const F* b, int ldb,
          F beta, F* c, int ldc) {
  const blas::SingleThreaded blas_on_calling_thread;
  const bool split_rows = m >= n;
  const int len = split_rows ? m : n;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int pieces = std::min(threads, (len + kPieceAlign - 1) / kPieceAlign);
  if (pieces <= 1 || int64_t(m) * n * k < kParallelGemmMinWork) {
    blas_gemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(pieces)
  for (int p = 0; p < pieces; ++p) {
    const int lo = int(int64_t(len) * p / pieces) / kPieceAlign * kPieceAlign;
    const int hi = p + 1 == pieces ? len : int(int64_t(len) * (p + 1) / pieces) / kPieceAlign * kPieceAlign;
    if (hi <= lo) continue;
    if (split_rows) {  // rows lo..hi of C need rows lo..hi of op(A)
      const F* a_rows = ta == CblasNoTrans ? a + int64_t(lo) * lda : a + lo;
      blas_gemm(ta, tb, hi - lo, n, k, a_rows, lda, b, ldb, beta, c + int64_t(lo) * ldc, ldc);
    } else {  // columns lo..hi of C need columns lo..hi of op(B)
      const F* b_cols = tb == CblasNoTrans ? b + lo : b + int64_t(lo) * ldb;
      blas_gemm(ta, tb, m, hi - lo, k, a, lda, b_cols, ldb, beta, c + lo, ldc);
    }
  }
}

// How many threads' pieces a product of few rows over O outputs and fan-in I takes: 1 (the
// calling thread alone) inside a parallel region, for a single piece or below kParallelGemvMinWork.
int gemv_pieces(int o, int i) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int pieces = std::min(threads, (o + kPieceAlign - 1) / kPieceAlign);
  return pieces <= 1 || int64_t(o) * i < kParallelGemvMinWork ? 1 : pieces;
}

// piece(lo, hi) over `pieces` contiguous blocks of the O outputs, one per OpenMP thread, the
// boundaries on multiples of kPieceAlign.
template <class Piece>
void over_pieces(int pieces, int o, Piece&& piece) {
  if (pieces <= 1) {
    piece(0, o);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(pieces)
  for (int p = 0; p < pieces; ++p) {
    const int lo = int(int64_t(o) * p / pieces) / kPieceAlign * kPieceAlign;
    const int hi = p + 1 == pieces ? o : int(int64_t(o) * (p + 1) / pieces) / kPieceAlign * kPieceAlign;
    if (hi > lo) piece(lo, hi);
  }
}

// One row (a decode step): out[O] = x W (+ beta out), as single-threaded GEMVs over blocks of
// the outputs, one per OpenMP thread. A GEMM of one row packs W first and so reads it several
// times (measured with OpenBLAS 0.3.21 on 896 x 151936: 300 ms against GEMV's 135 ms); a decode
// step is all such products, bound by reading W once.
template <class F>
void row_gemv(const F* x, const F* w, int i, int o, bool w_out_in, F beta, F* out) {
  const blas::SingleThreaded blas_on_calling_thread;
  auto piece = [&](int lo, int hi) {
    if constexpr (std::is_same_v<F, float>)
      if (w_out_in && dot_rows_f32(out, x, w, i, lo, hi, beta != F(0))) return;
    if (w_out_in)  // W [O, I]: its rows lo..hi
      blas_gemv(CblasNoTrans, hi - lo, i, w + int64_t(lo) * i, i, x, beta, out + lo);
    else  // W [I, O]: its columns lo..hi
      blas_gemv(CblasTrans, i, hi - lo, w + lo, o, x, beta, out + lo);
  };
  const int pieces = gemv_pieces(o, i);
  if (pieces > 1 && !w_out_in && o <= kRowSplitMaxOut && i >= pieces * kPieceAlign) {
    // W [I, O] by columns is a strided walk (each thread reads part of every row: 21-23 GB/s at 2
    // threads on a 2-core EPYC); by contiguous blocks of rows it streams at 35-38 GB/s. Thread p
    // multiplies its rows' block into a partial on its own stack (thread 0 straight into out),
    // then each thread adds the partials, in thread order, into its block of the outputs.
    const F* parts[kMaxGemvThreads] = {};
    const int teams = std::min(pieces, kMaxGemvThreads);
#pragma omp parallel num_threads(teams)
    {
      const int p = omp_get_thread_num(), team = omp_get_num_threads();
      const int r0 = int(int64_t(i) * p / team) / kPieceAlign * kPieceAlign;
      const int r1 = p + 1 == team ? i : int(int64_t(i) * (p + 1) / team) / kPieceAlign * kPieceAlign;
      alignas(64) F part[kRowSplitMaxOut];
      F* y = p == 0 ? out : part;
      if (r1 > r0)
        blas_gemv(CblasTrans, r1 - r0, o, w + int64_t(r0) * o, o, x + r0, p == 0 ? beta : F(0), y);
      else
        std::fill(y, y + o, F(0));
      parts[p] = y;
#pragma omp barrier
      const int c0 = int(int64_t(o) * p / team), c1 = int(int64_t(o) * (p + 1) / team);
      for (int q = 1; q < team; ++q)
        for (int c = c0; c < c1; ++c) out[c] += parts[q][c];
#pragma omp barrier  // the partials live on the threads' stacks until every thread has read them
    }
    return;
  }
  over_pieces(pieces, o, piece);
}

// BLAS takes 32-bit sizes; a larger layer is a caller bug, reported instead of truncated.
int blas_dim(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)  // the message is built only on failure: a matmul allocates nothing
    hw::fail(std::string("matmul: dimension ") + what + "=" + std::to_string(v) + " does not fit a 32-bit BLAS size");
  return static_cast<int>(v);
}

// dbias[o] += sum over rows of dout[:, o]. Columns are split into blocks and each block sums
// all rows in order, so the result does not depend on the thread count.
template <class F>
void bias_grad(F* dbias, const F* dout, int64_t N, int64_t O) {
  const int64_t block = detail::column_block_width(O);
  const int64_t nblocks = (O + block - 1) / block;
  detail::parallel_for(nblocks, detail::worth_parallel(N * O), [&](int64_t blk) {
    const int64_t o0 = blk * block;
    const int64_t w = std::min(block, O - o0);
    double acc[detail::kMaxColumnBlock] = {};
    for (int64_t n = 0; n < N; n++) {
      const F* row = dout + n * O + o0;
#pragma omp simd
      for (int64_t j = 0; j < w; j++) acc[j] += static_cast<double>(row[j]);
    }
    for (int64_t j = 0; j < w; j++) dbias[o0 + j] += static_cast<F>(acc[j]);
  });
}

}  // namespace

// A few rows (batched decoding: one row per sequence): out[N, O] = inp W (+ beta out) with W
// read from memory once for all N rows. A GEMM of a few rows packs W first (OpenBLAS's panels
// outgrow L2: on the Qwen2.5-0.5B shape a step of 4 rows took 2.4x one row's, where reading W
// is the whole cost). W [O, I] (the decoder's re-laid matrices, LM heads): gemv.hpp's
// few_rows_f32, each weight loaded once into a register for up to four rows, every row equal to
// its one-row product. W [I, O]: each thread walks its share of W's columns in blocks of rows
// small enough to stay in L2 (kFewRowsBlockFloats), every row's GEMV over a block while it is
// there; the summation order is fixed for a given thread count (the blocks' depth follows each
// thread's share of the columns), so runs repeat bit for bit.
constexpr int kFewRowsMaxInOut = 8;  // W [I, O]: at 16 rows OpenBLAS's GEMM led again (Qwen2.5-0.5B shape, 2 threads)
constexpr int kFewRowsMaxOutIn = 32;  // W [O, I]: at 32 rows even with OpenBLAS's GEMM (bench_gemv --rows 32: 0.94-1.14x)
constexpr int64_t kFewRowsBlockFloats = 32768;  // 128 KiB of W per block

template <class F>
void few_rows_gemv(const F* x, const F* w, int n, int i, int o, bool w_out_in, F beta, F* out) {
  const blas::SingleThreaded blas_on_calling_thread;
  auto piece = [&](int lo, int hi) {
    if (w_out_in) {  // W [O, I]: its rows lo..hi
      if constexpr (std::is_same_v<F, float>)
        if (few_rows_f32(out, x, w, n, i, o, lo, hi, beta != F(0))) return;
      for (int r = 0; r < n; ++r)
        blas_gemv(CblasNoTrans, hi - lo, i, w + int64_t(lo) * i, i, x + int64_t(r) * i, beta, out + int64_t(r) * o + lo);
    } else {  // W [I, O]: its columns lo..hi in blocks of rows, every row's partial sums added
      const int cols = hi - lo;
      const int depth = int(std::max<int64_t>(1, kFewRowsBlockFloats / std::max(cols, 1)));
      for (int k0 = 0; k0 < i; k0 += depth) {
        const int k1 = std::min(i, k0 + depth);
        for (int r = 0; r < n; ++r)
          blas_gemv(CblasTrans, k1 - k0, cols, w + int64_t(k0) * o + lo, o, x + int64_t(r) * i + k0,
                    k0 == 0 ? beta : F(1), out + int64_t(r) * o + lo);
      }
    }
  };
  const int pieces = gemv_pieces(o, i);
  over_pieces(pieces, o, piece);
}

template <class F>
void matmul_forward(F* out, const F* inp, const F* w, const F* bias, int64_t N, int64_t I, int64_t O,
                    bool w_out_in) {
  const int n = blas_dim(N, "N"), i = blas_dim(I, "I"), o = blas_dim(O, "O");
  if (N == 0 || O == 0) return;
  // Prefilling out with the bias and using beta=1 folds the bias into the gemm's own pass
  // over out (with beta=0 OpenBLAS still makes a pass to zero it).
  F beta = 0;
  if (bias) {
    detail::parallel_for(N, detail::worth_parallel(N * O), [&](int64_t r) {
      F* row = out + r * O;
#pragma omp simd
      for (int64_t j = 0; j < O; j++) row[j] = bias[j];
    });
    beta = 1;
  }
  // (float only: double is the test path, whose GEMM summation order the chunked-classifier
  // bounds in tests/model/test_classifier_chunks.cpp are calibrated on)
  if (std::is_same_v<F, float> && N == 1 && I > 0) {
    row_gemv(inp, w, i, o, w_out_in, beta, out);
  } else if (std::is_same_v<F, float> && N <= (w_out_in ? kFewRowsMaxOutIn : kFewRowsMaxInOut) && I > 0) {
    few_rows_gemv(inp, w, n, i, o, w_out_in, beta, out);
  } else if (w_out_in) {  // out = inp @ W^T, W [O,I]
    gemm(CblasNoTrans, CblasTrans, n, o, i, inp, std::max(i, 1), w, std::max(i, 1), beta, out, o);
  } else {  // out = inp @ W, W [I,O]
    gemm(CblasNoTrans, CblasNoTrans, n, o, i, inp, std::max(i, 1), w, o, beta, out, o);
  }
}

void gemm_rows_wt(float* out, int64_t ldo, const float* inp, const float* w, int64_t N, int64_t I, int64_t O,
                  const float* bias) {
  const int n = blas_dim(N, "N"), i = blas_dim(I, "I"), o = blas_dim(O, "O"), ld = blas_dim(ldo, "ldo");
  if (N == 0 || O == 0) return;
  float beta = 0.f;
  if (bias) {
    for (int64_t r = 0; r < N; r++)
      for (int64_t j = 0; j < O; j++) out[r * ldo + j] = bias[j];
    beta = 1.f;
  }
  gemm(CblasNoTrans, CblasTrans, n, o, i, inp, std::max(i, 1), w, std::max(i, 1), beta, out, ld);
}

template <class F>
void matmul_backward(F* dinp, F* dw, F* dbias, const F* dout, const F* inp, const F* w, int64_t N, int64_t I,
                     int64_t O, bool w_out_in) {
  const int n = blas_dim(N, "N"), i = blas_dim(I, "I"), o = blas_dim(O, "O");
  if (N == 0 || O == 0 || I == 0) {
    if (dbias && N > 0 && O > 0) bias_grad(dbias, dout, N, O);
    return;
  }
  if (dinp) {
    if (w_out_in) {  // dinp[N,I] += dout[N,O] @ W[O,I]
      gemm(CblasNoTrans, CblasNoTrans, n, i, o, dout, o, w, i, F(1), dinp, i);
    } else {  // dinp[N,I] += dout[N,O] @ W[I,O]^T
      gemm(CblasNoTrans, CblasTrans, n, i, o, dout, o, w, o, F(1), dinp, i);
    }
  }
  if (dw) {
    if (w_out_in) {  // dW[O,I] += dout^T @ inp
      gemm(CblasTrans, CblasNoTrans, o, i, n, dout, o, inp, i, F(1), dw, i);
    } else {  // dW[I,O] += inp^T @ dout
      gemm(CblasTrans, CblasNoTrans, i, o, n, inp, i, dout, o, F(1), dw, o);
    }
  }
  if (dbias) bias_grad(dbias, dout, N, O);
}

template void matmul_forward<float>(float*, const float*, const float*, const float*, int64_t, int64_t, int64_t,
                                    bool);
template void matmul_forward<double>(double*, const double*, const double*, const double*, int64_t, int64_t,
                                     int64_t, bool);
template void matmul_backward<float>(float*, float*, float*, const float*, const float*, const float*, int64_t,
                                     int64_t, int64_t, bool);
template void matmul_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                      int64_t, int64_t, int64_t, bool);

}  // namespace hw::cpu
