#pragma once
// The chunked, exact, linear-time evaluation of a causal attention head whose kernel is an
// explicit positive feature map: kappa(q, k) = psi(q) . phi(k) with m features per side
// (random features, a DCT with a feature softmax, ...). A kind supplies the map
// and its Jacobian (FeatureMap); the engine runs the prefix state S = sum_j phi(k_j) (x) [v_j, 1]
// over chunks of 64 tokens with GEMMs, the intra-chunk pairs as a masked GEMM, and the backward
// as a forward pass (dq) and a reverse suffix pass (dk, dv). Memory independent of T.
#include <cstdint>

#include "attention/head_kernels.hpp"

namespace hw::attn::detail {

template <class F>
class FeatureMap {
 public:
  virtual ~FeatureMap() = default;
  virtual int n_features() const = 0;
  // Scratch the map needs per call, in elements of F.
  virtual int64_t scratch() const = 0;
  // X[n x m] (row stride m) of n rows x (row stride ldx): psi when `query`, else phi.
  virtual void features(F* X, const F* x, int64_t ldx, int n, bool query, F* ws) const = 0;
  // dx (row stride ldx, ACCUMULATED) += dX . d(features)/dx for the same n rows; X is what
  // features() wrote for them. Parameter gradients of the query side accumulate in the map.
  virtual void jacobian(F* dx, const F* dX, const F* X, const F* x, int64_t ldx, int n, bool query, F* ws) const = 0;
};

// Engine scratch for a map of m features with map scratch `map_ws` (elements of F).
int64_t feature_scratch(int D, int m, int64_t map_ws);
// Forward multiply-adds per sequence of length T for M features, the maps' cost taken as a
// D x M projection each (attn::plan_cost; what it counts: feature_state.cpp).
double feature_flops(int64_t T, double D, double M);

// Writes out and the denominators; returns -1 or the first position whose denominator is not
// positive and finite (the caller throws).
template <class F>
int64_t feature_forward(const FeatureMap<F>& map, const HeadFwd<F>& a);

// Accumulates dq, dk, dv (and the map's parameter gradients through jacobian()).
template <class F>
void feature_backward(const FeatureMap<F>& map, const HeadBwd<F>& a);

}  // namespace hw::attn::detail
