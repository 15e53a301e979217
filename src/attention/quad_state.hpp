#pragma once
// The chunked, exact, linear-time evaluation of a causal attention head whose kernel is a
// quadratic form in grouped dot products:
//   kappa(x, y) = eps + ||L^T s||^2,  s = [1, s_1..s_G],  s_g = scale * sum_{r in g} x_r y_r,
// over working rows x (queries) and y (keys): the rows themselves (`linear`, OAL) or the rows
// normalised to unit length (`taylorshift`). Shared by linear_head.cpp and taylorshift_head.cpp,
// which only choose L, eps, scale and the row normalisation and map the gradient A to their
// parameters.
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
  bool unit_norm = false;  // rows normalised to unit length before the kernel (TaylorShift)
};

// Scratch of one (sequence, head) task, in elements of F; independent of T.
int64_t quad_scratch(int D, int n_groups);

// Writes out and the per-row denominators (a.stats). Returns -1, or the first position whose
// denominator is not positive and finite (the caller throws: not inside an OpenMP region).
template <class F>
int64_t quad_forward(const QuadKernel<F>& k, const HeadFwd<F>& a);

// Accumulates dq, dk, dv, and into A[(G+1)^2] the gradient with respect to M = L L^T
// (sum over pairs of dkappa s s^T); the caller turns it into its parameters' gradients.
template <class F>
void quad_backward(const QuadKernel<F>& k, const HeadBwd<F>& a, F* A);

}  // namespace hw::attn::detail
