#pragma once
// The KV cache's rows read by a cached decode step (attention/cached_attention.cpp), and written by it in 16
// bits: rows of width D, fp32 or bf16/fp16 (widened to fp32 in registers), multiplied by fp32 q
// or p (neither is rounded), fp32 sums. A step reads every cached row of every head once, so these
// are bound by the bytes they read. Single-threaded: the decoder calls them inside its per-head
// tasks. AVX-512 where the CPU has it and the plain paths are not forced (gemv.hpp's
// half_kernels_plain), else loops the compiler vectorizes.
#include <cstdint>

#include "headwise/kernels/gemv.hpp"

namespace hw::cpu {

// out[r] = scale * sum_d q[d] K[r D + d], r < n (attention scores of n cached keys).
void kv_dot_rows(float* out, const float* q, const uint16_t* K, int64_t n, int64_t D, HalfType t, float scale);
void kv_dot_rows(float* out, const float* q, const float* K, int64_t n, int64_t D, float scale);
// acc[d] += sum_r p[r] V[r D + d], r < n (the probability-weighted sum of n cached values).
void kv_axpy_rows(float* acc, const float* p, const uint16_t* V, int64_t n, int64_t D, HalfType t);
void kv_axpy_rows(float* acc, const float* p, const float* V, int64_t n, int64_t D);
// dst[i] = src[i] widened to fp32, i < n (a prefill's cached rows, for its GEMMs).
void kv_widen_rows(float* dst, const uint16_t* src, int64_t n, HalfType t);
// dst[d] = src[d] rounded to t (nearest even), d < D. Returns false when a finite value is
// beyond fp16's range (it would become infinity); bf16 has fp32's range.
bool kv_store_row(uint16_t* dst, const float* src, int64_t D, HalfType t);

}  // namespace hw::cpu
