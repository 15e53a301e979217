// Static heads (SAF's compact fit): fixed weights P(i,j) = exp(alpha[j] + rho[i-j] - log_z[i])
// rebuilt tile by tile from the parameters, so the head reads only V and computes neither
// QK^T nor a softmax. Backward: dV = P^T dO, and when asked the exact gradients of alpha and
// rho through the row softmax (log_z's dependence included).
#include <algorithm>
#include <cmath>

#include "attention/head_kernels.hpp"
#include "attention/kind_table.hpp"
#include "attention/tile_ops.hpp"

namespace hw::attn {

template <class F>
void static_log_normaliser_rows(F* log_z, const F* alpha, const F* rho, int64_t begin, int64_t end) {
  // O(i) per row once per parameter change; rows are independent, so parallel rows stay
  // deterministic. Double accumulation: log_z feeds every weight of the row.
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t i = begin; i < end; ++i) {
    double mx = -HUGE_VAL;
    for (int64_t k = 0; k <= i; ++k) mx = std::max(mx, double(alpha[k]) + double(rho[i - k]));
    double s = 0.0;
    for (int64_t k = 0; k <= i; ++k) s += std::exp(double(alpha[k]) + double(rho[i - k]) - mx);
    log_z[i - begin] = F(mx + std::log(s));
  }
}

template <class F>
void static_log_normalisers(F* log_z, const F* alpha, const F* rho, int64_t n) {
  static_log_normaliser_rows(log_z, alpha, rho, 0, n);
}

template void static_log_normalisers<float>(float*, const float*, const float*, int64_t);
template void static_log_normalisers<double>(double*, const double*, const double*, int64_t);
template void static_log_normaliser_rows<float>(float*, const float*, const float*, int64_t, int64_t);
template void static_log_normaliser_rows<double>(double*, const double*, const double*, int64_t, int64_t);

namespace detail {

int64_t static_scratch(int D) { return 2 * int64_t(kTile) * kTile + int64_t(D) * kTile + kTile; }

namespace {

// P tile for query rows [i0, i0+m) and keys [j0, j0+n): zero above the diagonal.
template <class F>
void static_tile(F* P, const StaticHeadParams<F>& p, int64_t i0, int m, int64_t j0, int n) {
  for (int r = 0; r < m; ++r) {
    const int64_t i = i0 + r;
    F* row = P + int64_t(r) * kTile;
    for (int c = 0; c < n; ++c) row[c] = static_weight(p, i, j0 + c);
  }
}

}  // namespace

template <class F>
void static_forward(const StaticHeadParams<F>& p, const HeadFwd<F>& a) {
  F* P = a.ws;
  for (int64_t i0 = 0; i0 < a.T; i0 += kTile) {
    const int m = static_cast<int>(std::min<int64_t>(kTile, a.T - i0));
    F* out0 = a.out + i0 * a.ldo;
    for (int r = 0; r < m; ++r) std::fill(out0 + r * a.ldo, out0 + r * a.ldo + a.D, F(0));
    for (int64_t j0 = 0; j0 < i0 + m; j0 += kTile) {
      const int n = static_cast<int>(std::min<int64_t>(kTile, i0 + m - j0));
      static_tile(P, p, i0, m, j0, n);
      tile_ab_acc(out0, a.ldo, P, a.v + j0 * a.ldx, a.ldx, m, n, a.D);
    }
  }
}

template <class F>
void static_backward(const StaticHeadParams<F>& p, const HeadBwd<F>& a, F* dalpha, F* drho) {
  const bool params = dalpha != nullptr || drho != nullptr;
  F* P = a.ws;
  F* dP = P + kTile * kTile;
  F* bt = dP + kTile * kTile;
  F* delta = bt + int64_t(a.D) * kTile;
  for (int64_t i0 = 0; i0 < a.T; i0 += kTile) {
    const int m = static_cast<int>(std::min<int64_t>(kTile, a.T - i0));
    if (params) {
      for (int r = 0; r < m; ++r) {
        const F* o = a.out + (i0 + r) * a.ldo;
        const F* g = a.dout + (i0 + r) * a.ldo;
        F s = F(0);
        for (int d = 0; d < a.D; ++d) s += o[d] * g[d];
        delta[r] = s;
      }
    }
    for (int64_t j0 = 0; j0 < i0 + m; j0 += kTile) {
      const int n = static_cast<int>(std::min<int64_t>(kTile, i0 + m - j0));
      static_tile(P, p, i0, m, j0, n);
      tile_atb_acc(a.dv + j0 * a.ldx, a.ldx, P, a.dout + i0 * a.ldo, a.ldo, m, n, a.D);
      if (!params) continue;
      // logit gradient dl_ij = P_ij (dP_ij - delta_i), with dP = dO V^T
      tile_abt(dP, a.dout + i0 * a.ldo, a.ldo, a.v + j0 * a.ldx, a.ldx, m, n, a.D, F(1), bt);
      for (int r = 0; r < m; ++r) {
        const int64_t i = i0 + r;
        const F* prow = P + int64_t(r) * kTile;
        const F* drow = dP + int64_t(r) * kTile;
        for (int c = 0; c < n; ++c) {
          const int64_t j = j0 + c;
          if (j > i) break;
          const F dl = prow[c] * (drow[c] - delta[r]);
          if (dalpha) dalpha[j] += dl;
          if (drho) drho[i - j] += dl;
        }
      }
    }
  }
}

template void static_forward<float>(const StaticHeadParams<float>&, const HeadFwd<float>&);
template void static_forward<double>(const StaticHeadParams<double>&, const HeadFwd<double>&);
template void static_backward<float>(const StaticHeadParams<float>&, const HeadBwd<float>&, float*, float*);
template void static_backward<double>(const StaticHeadParams<double>&, const HeadBwd<double>&, double*, double*);

// ---- the CPU table's entry (kind_table.hpp) ----
namespace {

class StaticKind final : public CpuKindOf<StaticKind> {
 public:
  HeadKind kind() const override { return HeadKind::Static; }
  int64_t scratch(const HeadSpec&, int D) const override { return static_scratch(D); }
  // dalpha's and drho's partial sums, T each
  int64_t partials(const HeadSpec&, int64_t T, int) const override { return 2 * T; }
  template <class F>
  void check_as(const LayerHeadParams<F>& params, int h, const HeadSpec&, int) const {
    hw::check(params.statics.size() > static_cast<size_t>(h), head_name(h) + " is static but has no parameters");
    const auto& p = params.statics[static_cast<size_t>(h)];
    hw::check(p.alpha && p.rho && p.log_z, head_name(h) + " is static but alpha, rho or log_z is null");
  }
  // no row statistic: zeros
  template <class F>
  int64_t forward_as(const LayerHeadParams<F>& params, int h, const HeadSpec&, const HeadFwd<F>& a) const {
    std::fill(a.stats, a.stats + a.T, F(0));
    static_forward(params.statics[static_cast<size_t>(h)], a);
    return -1;
  }
  template <class F>
  void backward_as(const LayerHeadParams<F>& params, int h, const HeadSpec&, const HeadBwd<F>& a, F* partial) const {
    const auto& p = params.statics[static_cast<size_t>(h)];
    static_backward(p, a, p.dalpha ? partial : nullptr, p.drho ? partial + a.T : nullptr);
  }
  template <class F>
  void reduce_as(const LayerHeadParams<F>& params, int h, F* first, int64_t stride, int64_t B, int64_t T, int) const {
    const auto& p = params.statics[static_cast<size_t>(h)];
    for (int64_t b = 0; b < B; ++b) {
      const F* part = first + b * stride;
      if (p.dalpha)
        for (int64_t j = 0; j < T; ++j) p.dalpha[j] += part[j];
      if (p.drho)
        for (int64_t j = 0; j < T; ++j) p.drho[j] += part[T + j];
    }
  }
  // PV only over the causal band: 2 D per pair (no scores computed)
  double flops(const HeadSpec&, int64_t T, double D) const override { return 2 * D * (double(T) * double(T + 1) / 2); }
  std::vector<BenchCase> bench_rows(int64_t) const override { return {{"static", {HeadKind::Static, 0, 0}}}; }
  // a recency-biased fixed pattern
  void bench_params(const BenchCase&, int, int64_t T, Rng& rng, BenchHead& out) const override {
    const auto n = static_cast<size_t>(T);
    out.floats.assign(5, std::vector<float>(n, 0.f));
    auto& alpha = out.floats[0];
    auto& rho = out.floats[1];
    for (auto& x : alpha) x = float(0.1 * rng.normal());
    for (int64_t d = 0; d < T; ++d) rho[size_t(d)] = -0.05f * float(d);
    static_log_normalisers(out.floats[2].data(), alpha.data(), rho.data(), T);
    out.params.statics.push_back(
        {alpha.data(), rho.data(), out.floats[2].data(), out.floats[3].data(), out.floats[4].data()});
  }
};

}  // namespace

const CpuKind& static_cpu_kind() {
  static const StaticKind k{};
  return k;
}

}  // namespace detail
}  // namespace hw::attn
