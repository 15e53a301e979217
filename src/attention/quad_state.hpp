#pragma once
// The chunked, exact, linear-time evaluation of a causal attention head whose kernel is a
// quadratic form in grouped dot products:
//   kappa(x, y) = eps + ||L^T s||^2,  s = [1, s_1..s_G],  s_g = scale * sum_{r in g} x_r y_r,
// over working rows x (queries) and y (keys): the rows themselves (`linear`, OAL) or the rows
// normalised to unit length. Shared by linear_head.cpp and the kinds that reuse its engine, which
// only choose L, eps, scale and the row normalisation and map the gradient A to their parameters.
#include <algorithm>
#include <cstdint>

#include "attention/head_kernels.hpp"

namespace hw::attn::detail {

template <class F>
struct QuadKernel {
  const F* L = nullptr;             // (G+1)x(G+1) row-major; only the lower triangle is read
  const int32_t* groups = nullptr;  // per dimension, 1..G
  int n_groups = 1;
  double eps = 0.0;
  double scale = 0.0;
  bool unit_norm = false;  // rows normalised to unit length before the kernel
};

// The kernel's two sides, the one definition that the chunked evaluation below and cached
// decoding's prefix state (cached_attention.cpp) both use: raw features of one row
// X(x) = [1, x_r, x_r x_c (r <= c)] (Fw = 1 + D + D(D+1)/2), and the query-side weights
//   w_0 = eps + M_00,  w_r = 2 M_{0,g(r)} scale,  w_rc = (2 - [r==c]) M_{g(r),g(c)} scale^2,
// M = L_low L_low^T (G1 x G1 scratch), so that kappa(x, y) = (w (.) X(x)) . X(y).
template <class F>
inline void quad_features(F* f, const F* x, int D) {
  f[0] = F(1);
  for (int r = 0; r < D; ++r) f[1 + r] = x[r];
  F* pp = f + 1 + D;
  for (int r = 0; r < D; ++r) {
    const F xr = x[r];
    for (int c = r; c < D; ++c) pp[c - r] = xr * x[c];
    pp += D - r;
  }
}

template <class F>
inline void quad_query_weights(const QuadKernel<F>& k, int D, F* M, F* w) {
  const int G1 = k.n_groups + 1;
  const F sc = F(k.scale);
  for (int a = 0; a < G1; ++a)
    for (int b = 0; b < G1; ++b) {
      F m = F(0);  // only L's lower triangle: c <= min(a, b)
      for (int c = 0; c <= std::min(a, b); ++c) m += k.L[a * G1 + c] * k.L[b * G1 + c];
      M[a * G1 + b] = m;
    }
  const int32_t* grp = k.groups;
  auto g = [&](int r) { return grp ? grp[r] : 1; };
  w[0] = F(k.eps) + M[0];
  for (int r = 0; r < D; ++r) w[1 + r] = F(2) * M[g(r)] * sc;
  F* wp = w + 1 + D;
  for (int r = 0, e = 0; r < D; ++r)
    for (int c = r; c < D; ++c, ++e) wp[e] = (r == c ? F(1) : F(2)) * M[g(r) * G1 + g(c)] * sc * sc;
}

// A linear (OAL) head's kernel: its L and groups, eps, scale 1/sqrt(D) (linear_head.cpp).
template <class F>
QuadKernel<F> linear_kernel(const LinearHeadParams<F>& p, double eps, int D);

// Cached decoding's step of linear heads (linear_head.cpp): add key k, value v to a KV head's
// exclusive prefix state St [Fw][D + 1] (X: Fw scratch); read it for query q with query-side
// weights w into out[D] (psi: Fw, acc: D + 1 scratch); false when the denominator is not
// positive and finite.
void linear_state_add(float* St, const float* k, const float* v, int D, float* X);
bool linear_state_read(const float* St, const float* w, const float* q, int D, float* psi, float* acc, float* out);

// Scratch of one (sequence, head) task, in elements of F; independent of T.
int64_t quad_scratch(int D, int n_groups);
// Forward multiply-adds per sequence of length T (attn::plan_cost; what it counts: quad_state.cpp).
double quad_flops(int64_t T, double D);

// Writes out and the per-row denominators (a.stats). Returns -1, or the first position whose
// denominator is not positive and finite (the caller throws: not inside an OpenMP region).
template <class F>
int64_t quad_forward(const QuadKernel<F>& k, const HeadFwd<F>& a);

// Accumulates dq, dk, dv, and into A[(G+1)^2] the gradient with respect to M = L L^T
// (sum over pairs of dkappa s s^T); the caller turns it into its parameters' gradients.
template <class F>
void quad_backward(const QuadKernel<F>& k, const HeadBwd<F>& a, F* A);

}  // namespace hw::attn::detail
