// TaylorShift heads: q and k normalised to unit length, kernel 1 + s + s^2/2 with s = tau q^.k^
// and a learnable temperature tau per head (the OAL paper's TaylorShift baseline, without the
// extra output-magnitude normalisation). As a grouped quadratic kernel: one group, scale 1,
// eps 0 and L = [[1, 0], [tau/2, tau/2]] (L L^T = [[1, tau/2], [tau/2, tau^2/2]]), so it runs on
// the same exact chunked engine as the linear kind (quad_state.cpp). kappa >= 1/2 > 0 always.
#include "attention/quad_state.hpp"

#include <cmath>

#include "attention/kind_table.hpp"

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

// ---- the CPU table's entry (kind_table.hpp) ----
class TaylorShiftKind final : public CpuKindOf<TaylorShiftKind> {
 public:
  HeadKind kind() const override { return HeadKind::TaylorShift; }
  int64_t scratch(const HeadSpec&, int D) const override { return quad_scratch(D, 1); }
  int64_t partials(const HeadSpec&, int64_t, int) const override { return 1; }  // dtau's partial sum
  template <class F>
  void check_as(const LayerHeadParams<F>& params, int h, const HeadSpec&, int) const {
    hw::check(params.taylorshifts.size() > static_cast<size_t>(h) && params.taylorshifts[size_t(h)].tau,
              head_name(h) + " is a taylorshift head but has no temperature");
    hw::check(std::isfinite(double(*params.taylorshifts[size_t(h)].tau)),
              head_name(h) + ": taylorshift temperature is not finite");
  }
  template <class F>
  int64_t forward_as(const LayerHeadParams<F>& params, int h, const HeadSpec&, const HeadFwd<F>& a) const {
    F L[4];
    taylor_L(L, *params.taylorshifts[size_t(h)].tau);
    return quad_forward(taylor_kernel<F>(L), a);
  }
  // dtau accumulates into this task's partial sum (one value), or is skipped
  template <class F>
  void backward_as(const LayerHeadParams<F>& params, int h, const HeadSpec&, const HeadBwd<F>& a, F* partial) const {
    const auto& p = params.taylorshifts[size_t(h)];
    F L[4];
    const F tau = *p.tau;
    taylor_L(L, tau);
    F A[4] = {F(0), F(0), F(0), F(0)};
    quad_backward(taylor_kernel<F>(L), a, A);
    // kappa = M00 + 2 M01 s + M11 s^2 with M01 = tau/2, M11 = tau^2/2 and A = dkappa/dM summed
    if (p.dtau) *partial += (A[1] + A[2]) / F(2) + A[3] * tau;
  }
  template <class F>
  void reduce_as(const LayerHeadParams<F>& params, int h, F* first, int64_t stride, int64_t B, int64_t, int) const {
    const auto& p = params.taylorshifts[size_t(h)];
    if (p.dtau)
      for (int64_t b = 0; b < B; ++b) *p.dtau += first[b * stride];
  }
  // the linear kind's engine on unit-norm rows: its count
  double flops(const HeadSpec&, int64_t T, double D) const override { return quad_flops(T, D); }
  std::vector<BenchCase> curve_rows() const override {
    const HeadSpec spec{HeadKind::TaylorShift};
    return {{spec.str(), spec}};
  }
  void bench_params(const BenchCase&, int, int64_t, Rng&, BenchHead& out) const override {
    out.floats = {{1.f}, {0.f}};  // tau, dtau
    out.params.taylorshifts.push_back({out.floats[0].data(), out.floats[1].data()});
  }
};

}  // namespace

const CpuKind& taylorshift_cpu_kind() {
  static const TaylorShiftKind k{};
  return k;
}

}  // namespace hw::attn::detail
