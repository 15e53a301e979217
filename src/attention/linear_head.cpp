// Linear heads (OAL): weights kappa(q_i, k_j) / sum_{j'<=i} kappa(q_i, k_j') with the grouped
// quadratic kernel kappa(q, k) = eps + ||L^T s||^2, s = [1, s_1..s_G], s_g = sum_{r in g} q_r k_r / sqrt(D).
// The exact chunked evaluation (prefix state, GEMMs, O(T) time, memory independent of T) is the
// shared quadratic-kernel engine (quad_state.cpp); this file only names the kernel.
#include "attention/quad_state.hpp"

#include <algorithm>
#include <cmath>

namespace hw::attn::detail {

template <class F>
QuadKernel<F> linear_kernel(const LinearHeadParams<F>& p, double eps, int D) {
  QuadKernel<F> k;
  k.L = p.L;
  k.groups = p.groups;
  k.n_groups = p.n_groups;
  k.eps = eps;
  k.scale = 1.0 / std::sqrt(double(D));
  return k;
}

template QuadKernel<float> linear_kernel(const LinearHeadParams<float>&, double, int);
template QuadKernel<double> linear_kernel(const LinearHeadParams<double>&, double, int);

// Cached decoding keeps the exclusive prefix state S = sum_j X(k_j) (x) [v_j, 1] ([Fw][D + 1])
// of a KV head and reads it with each linear query head's psi = w (.) X(q): one row at a time,
// the same kernel as the chunked evaluation.
void linear_state_add(float* St, const float* k, const float* v, int D, float* X) {
  quad_features(X, k, D);
  const int64_t Fw = 1 + D + int64_t(D) * (D + 1) / 2;
  const int D1 = D + 1;
  for (int64_t f = 0; f < Fw; ++f) {
    const float w = X[f];
    if (w == 0.f) continue;
    float* Sf = St + f * D1;
    for (int d = 0; d < D; ++d) Sf[d] += w * v[d];
    Sf[D] += w;
  }
}

bool linear_state_read(const float* St, const float* w, const float* q, int D, float* psi, float* acc, float* out) {
  quad_features(psi, q, D);
  const int64_t Fw = 1 + D + int64_t(D) * (D + 1) / 2;
  const int D1 = D + 1;
  std::fill(acc, acc + D1, 0.f);
  for (int64_t f = 0; f < Fw; ++f) {
    const float p = w[f] * psi[f];
    if (p == 0.f) continue;
    const float* Sf = St + f * D1;
    for (int d = 0; d < D1; ++d) acc[d] += p * Sf[d];
  }
  const float den = acc[D];
  if (!(den > 0.f) || !std::isfinite(den)) return false;
  const float inv = 1.f / den;
  for (int d = 0; d < D; ++d) out[d] = acc[d] * inv;
  return true;
}

int64_t linear_scratch(int D, int n_groups) { return quad_scratch(D, n_groups); }

template <class F>
int64_t linear_forward(const LinearHeadParams<F>& p, double eps, const HeadFwd<F>& a) {
  return quad_forward(linear_kernel(p, eps, a.D), a);
}

template <class F>
void linear_backward(const LinearHeadParams<F>& p, double eps, const HeadBwd<F>& a, F* A) {
  quad_backward(linear_kernel(p, eps, a.D), a, A);
}

template int64_t linear_forward<float>(const LinearHeadParams<float>&, double, const HeadFwd<float>&);
template int64_t linear_forward<double>(const LinearHeadParams<double>&, double, const HeadFwd<double>&);
template void linear_backward<float>(const LinearHeadParams<float>&, double, const HeadBwd<float>&, float*);
template void linear_backward<double>(const LinearHeadParams<double>&, double, const HeadBwd<double>&, double*);

}  // namespace hw::attn::detail
