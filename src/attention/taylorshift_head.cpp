// TaylorShift heads: q and k normalised to unit length, kernel 1 + s + s^2/2 with s = tau q^.k^
// and a learnable temperature tau per head (the OAL paper's TaylorShift baseline, without the
// extra output-magnitude normalisation). As a grouped quadratic kernel: one group, scale 1,
// eps 0 and L = [[1, 0], [tau/2, tau/2]] (L L^T = [[1, tau/2], [tau/2, tau^2/2]]), so it runs on
// the same exact chunked engine as the linear kind (quad_state.cpp). kappa >= 1/2 > 0 always.
#include "attention/quad_state.hpp"

namespace hw::attn::detail {
namespace {

template <class F>
QuadKernel<F> taylor_kernel(const F* L) {
  QuadKernel<F> k;
  k.L = L;
  k.groups = nullptr;  // every dimension in group 1
  k.n_groups = 1;
  k.eps = 0.0;
  k.scale = 1.0;
  k.unit_norm = true;
  return k;
}

template <class F>
void taylor_L(F* L, F tau) {
  L[0] = F(1);
  L[1] = F(0);
  L[2] = tau / F(2);
  L[3] = tau / F(2);
}

}  // namespace

int64_t taylorshift_scratch(int D) { return quad_scratch(D, 1); }

template <class F>
int64_t taylorshift_forward(const TaylorShiftHeadParams<F>& p, const HeadFwd<F>& a) {
  F L[4];
  taylor_L(L, *p.tau);
  return quad_forward(taylor_kernel<F>(L), a);
}

template <class F>
void taylorshift_backward(const TaylorShiftHeadParams<F>& p, const HeadBwd<F>& a, F* dtau) {
  F L[4];
  const F tau = *p.tau;
  taylor_L(L, tau);
  F A[4] = {F(0), F(0), F(0), F(0)};
  quad_backward(taylor_kernel<F>(L), a, A);
  // kappa = M00 + 2 M01 s + M11 s^2 with M01 = tau/2, M11 = tau^2/2 and A = dkappa/dM summed
  *dtau += (A[1] + A[2]) / F(2) + A[3] * tau;
}

template int64_t taylorshift_forward<float>(const TaylorShiftHeadParams<float>&, const HeadFwd<float>&);
template int64_t taylorshift_forward<double>(const TaylorShiftHeadParams<double>&, const HeadFwd<double>&);
template void taylorshift_backward<float>(const TaylorShiftHeadParams<float>&, const HeadBwd<float>&, float*);
template void taylorshift_backward<double>(const TaylorShiftHeadParams<double>&, const HeadBwd<double>&, double*);

}  // namespace hw::attn::detail
