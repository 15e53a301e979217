#pragma once
// SAF calibration capture: one head's causal attention for one sequence, recomputed from its
// q and k rows so the planner can feed the statistics accumulator (stats.hpp) head by head.
#include <cstdint>

namespace hw::saf {

// Causal raw logits s_ij = q_i . k_j / sqrt(head_dim) and causal softmax probabilities
// A_ij = exp(s_ij) / sum_{j'<=i} exp(s_ij') for one head and one sequence.
//   q, k: row t of the head starts at q + t * q_stride (resp. k_stride), head_dim floats.
//   logits, probs: caller buffers of T x T (row-major); either may be null to skip it.
// Cells above the diagonal (j > i) are written as 0 in both outputs: they are never read as
// logits, and as probabilities they are exactly 0. Dot products and the softmax run in
// float64 whatever the output type. Rows are independent (OpenMP over rows, deterministic).
void causal_attention(const float* q, int64_t q_stride, const float* k, int64_t k_stride, int T,
                      int head_dim, double* logits, double* probs);
void causal_attention(const float* q, int64_t q_stride, const float* k, int64_t k_stride, int T,
                      int head_dim, float* logits, float* probs);

}  // namespace hw::saf
