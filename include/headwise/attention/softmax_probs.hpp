#pragma once
// Dense causal attention probabilities of one softmax head, computed the way the CPU backend's
// softmax forward computes them (softmax_family.cpp): kTile x kTile blocks of q k^T / sqrt(D)
// by single-threaded BLAS GEMMs, exp_or_zero of the logit minus the row maximum, in F. For
// methods that need the probabilities themselves (SAF's calibration statistics), which the
// forward never materialises. CPU backend only: pointers are host memory.
#include <cstdint>

namespace hw::attn {

// One head of one sequence: row t of q (k) starts at q + t * ldx (k + t * ldx), D values.
// probs (required) and logits (may be null) are dense T x T row-major; cells above the diagonal
// are written 0. Query tiles run in parallel (OpenMP); each row's arithmetic has a fixed order,
// so the result does not depend on the thread count.
template <class F>
void softmax_probabilities(const F* q, const F* k, int64_t ldx, int64_t T, int D, F* logits, F* probs);

}  // namespace hw::attn
