#pragma once
// Per-kind math of one (sequence, query head), called by the layer entry point (layer.cpp)
// through each kind's entry in the CPU table (kind_table.hpp).
// Pointers address row 0 of the sequence at the head's column block; rows are strided by
// ldx (QKV and dQKV) and ldo (out and dout). Backward ACCUMULATES into dq, dk, dv (the entry
// point zeroes them, then heads of one KV group add their share in head order).
#include <cstdint>

#include "headwise/attention/attention.hpp"
#include "headwise/attention/head_plan.hpp"
#include "attention/tile_ops.hpp"
#include "headwise/kernels/tiles/attention_tiles.hpp"

namespace hw::attn::detail {

template <class F>
struct HeadFwd {
  int64_t T = 0;
  int D = 0;
  int64_t ldx = 0, ldo = 0;
  const F* q = nullptr;
  const F* k = nullptr;
  const F* v = nullptr;
  F* out = nullptr;
  F* stats = nullptr;  // T per-row statistics (softmax: log-sum-exp, linear: denominator)
  F* ws = nullptr;     // this thread's scratch
};

template <class F>
struct HeadBwd {
  int64_t T = 0;
  int D = 0;
  int64_t ldx = 0, ldo = 0;
  const F* q = nullptr;
  const F* k = nullptr;
  const F* v = nullptr;
  const F* out = nullptr;
  const F* dout = nullptr;
  const F* stats = nullptr;
  F* dq = nullptr;
  F* dk = nullptr;
  F* dv = nullptr;
  F* ws = nullptr;
};

// Keys visible to query i: j <= i && (j < sink || j > i - window) (tiles::key_visible, the one
// definition the CPU heads, the CUDA kernels and cached decoding share). Softmax is window = T.
using KeySet = tiles::KeyRule;
KeySet key_set(const HeadSpec& spec, int64_t T);

// ---- softmax family (softmax_family.cpp) ----
int64_t softmax_scratch(int D);
template <class F>
void softmax_family_forward(const KeySet& ks, const HeadFwd<F>& a);
template <class F>
void softmax_family_backward(const KeySet& ks, const HeadBwd<F>& a);

// ---- static heads (static_head.cpp) ----
// The weight P(i, j) = exp(alpha_j + rho_{i-j} - log_z_i) (0 for j > i): the one formula the
// training tiles and cached decoding use.
template <class F>
inline F static_weight(const StaticHeadParams<F>& p, int64_t i, int64_t j) {
  return j <= i ? exp_or_zero(p.alpha[j] + p.rho[i - j] - p.log_z[i]) : F(0);
}
int64_t static_scratch(int D);
template <class F>
void static_forward(const StaticHeadParams<F>& p, const HeadFwd<F>& a);
// dalpha/drho: this task's partial sums (length T, accumulated), or null to skip them.
template <class F>
void static_backward(const StaticHeadParams<F>& p, const HeadBwd<F>& a, F* dalpha, F* drho);

// ---- linear heads (linear_head.cpp) ----
int64_t linear_scratch(int D, int n_groups);
// Returns -1, or the first position whose denominator is not positive and finite (the
// caller throws; exceptions must not leave an OpenMP region).
template <class F>
int64_t linear_forward(const LinearHeadParams<F>& p, double eps, const HeadFwd<F>& a);
// A: (G+1)x(G+1) partial sum of dkappa * s s^T (accumulated); the caller turns it into
// dL = 2 A L_lower after reducing the partials in a fixed order.
template <class F>
void linear_backward(const LinearHeadParams<F>& p, double eps, const HeadBwd<F>& a, F* A);

}  // namespace hw::attn::detail
