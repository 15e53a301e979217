// Linear heads (OAL): weights kappa(q_i, k_j) / sum_{j'<=i} kappa(q_i, k_j') with the grouped
// quadratic kernel kappa(q, k) = eps + ||L^T s||^2, s = [1, s_1..s_G], s_g = sum_{r in g} q_r k_r / sqrt(D).
// The exact chunked evaluation (prefix state, GEMMs, O(T) time, memory independent of T) is the
// shared quadratic-kernel engine (quad_state.cpp); this file only names the kernel.
#include "attention/quad_state.hpp"

#include <cmath>

namespace hw::attn::detail {
namespace {

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

}  // namespace

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
