#pragma once
// The one attention entry point: forward and backward of a whole layer under its plan.
// Inputs are the fused QKV activations laid out by LayerLayout (Q and K already rotated
// when RoPE is on); the output is the concatenation of the non-pruned heads' outputs.
// Each head kind's math lives in its own file (softmax_family.cpp, static_head.cpp,
// linear_head.cpp); this entry point only dispatches, and work is skipped, not masked.
#include <cstdint>
#include <string>
#include <vector>

#include "headwise/attention/head_plan.hpp"

namespace hw::attn {

struct AttnDims {
  int64_t B = 0, T = 0;  // batch, sequence length (T <= n_positions)
};

// Parameters of one static head: alpha[j], rho[d] and the row log-normalisers
// log_z[i] = log sum_{k<=i} exp(alpha[k] + rho[i-k]), all of length >= T.
// dalpha/drho may be null (in training they are buffers without gradient).
template <class F>
struct StaticHeadParams {
  const F* alpha = nullptr;
  const F* rho = nullptr;
  const F* log_z = nullptr;
  F* dalpha = nullptr;
  F* drho = nullptr;
};

// Parameters of one linear head: L is (G+1)x(G+1) row-major (lower triangle used), groups
// maps each of head_dim dimensions to 1..G. dL may be null.
template <class F>
struct LinearHeadParams {
  const F* L = nullptr;
  F* dL = nullptr;
  const int32_t* groups = nullptr;
  int n_groups = 0;
};

// The one check of a linear head's groups (an int tensor from a checkpoint or a planner), made
// wherever they enter: the model, checkpoint loading, the decoder, the CUDA setup. groups[d]
// indexes the rows of L, so every value must be in 1..n_groups, and 1 <= n_groups <= head_dim.
// Throws hw::Error "<who>: ..." naming the first bad value. `groups` is host memory.
void check_linear_groups(const int32_t* groups, int head_dim, int n_groups, const std::string& who);

// Parameters of one performer head (FAVOR+ positive random features): W is M x head_dim
// row-major, the random projections (fixed: no gradient). phi(x) = exp(W x' - |x'|^2 / 2) /
// sqrt(M) with x' = x / head_dim^(1/4), kernel phi(q) . phi(k).
template <class F>
struct PerformerHeadParams {
  const F* W = nullptr;
  int n_features = 0;
};

// Parameters of one DiJiang head: log_w[head_dim], the log of the positive feature weights
// (kernel sum_m exp(log_w_m) a_m(q) a_m(k), a(x) = softmax(C x / head_dim^(1/4)), C the
// orthonormal DCT-II). dlog_w may be null.
template <class F>
struct DiJiangHeadParams {
  const F* log_w = nullptr;
  F* dlog_w = nullptr;
};

// Parameters of one TaylorShift head: the temperature tau (one value): kernel 1 + s + s^2/2,
// s = tau q.k / (|q| |k|). dtau may be null.
template <class F>
struct TaylorShiftHeadParams {
  const F* tau = nullptr;
  F* dtau = nullptr;
};

// Per-layer head parameters, indexed by query head (entries for other kinds are unused).
template <class F>
struct LayerHeadParams {
  std::vector<StaticHeadParams<F>> statics;
  std::vector<LinearHeadParams<F>> linears;
  std::vector<PerformerHeadParams<F>> performers;
  std::vector<DiJiangHeadParams<F>> dijiangs;
  std::vector<TaylorShiftHeadParams<F>> taylorshifts;
  double linear_eps = 1e-6;
};

// What the forward saves for backward, per (b, query head, t) row: softmax-family heads save
// the row's log-sum-exp, linear heads and the baselines (performer, dijiang, taylorshift) the
// row's kernel denominator, static and pruned heads nothing.
// `row_stats` has B * n_head * T elements, indexed [(b * n_head + h) * T + t].
int64_t row_stats_size(const LayerLayout& layout, const AttnDims& dims);
// Scratch the entry point may use, in elements of F, for `threads` OpenMP threads; owned by
// the caller's activation arena. `threads` must be at least attention_threads() at the time
// of the forward/backward call (each OpenMP thread uses its own slice).
int64_t workspace_size(const LayerPlan& plan, const LayerLayout& layout, const AttnDims& dims, int threads);
// The OpenMP thread count layer_forward/layer_backward run with (omp_get_max_threads()).
int attention_threads();

// out[N, out_width] (overwritten), row_stats (overwritten).
template <class F>
void layer_forward(const LayerPlan& plan, const LayerLayout& layout, const AttnDims& dims,
                   const LayerHeadParams<F>& params, const F* qkv, F* out, F* row_stats, F* workspace);

// dqkv[N, qkv_width] is OVERWRITTEN (every column the layout has is written); parameter
// gradients (dalpha, drho, dL, dlog_w, dtau) accumulate.
template <class F>
void layer_backward(const LayerPlan& plan, const LayerLayout& layout, const AttnDims& dims,
                    const LayerHeadParams<F>& params, const F* qkv, const F* out, const F* row_stats,
                    const F* dout, F* dqkv, F* workspace);

// Static heads: fill log_z[0..n) from alpha and rho (call after alpha/rho change).
template <class F>
void static_log_normalisers(F* log_z, const F* alpha, const F* rho, int64_t n);
// Rows [begin, end) only, into log_z[0, end - begin) (row i reads alpha and rho up to i).
template <class F>
void static_log_normaliser_rows(F* log_z, const F* alpha, const F* rho, int64_t begin, int64_t end);

}  // namespace hw::attn
