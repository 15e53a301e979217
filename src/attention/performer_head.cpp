// Performer heads (FAVOR+): positive random features
//   phi(x) = exp(W x' - |x'|^2 / 2) / sqrt(M),  x' = x / D^(1/4),
// the same map on both sides, so E[phi(q) . phi(k)] = exp(q . k / sqrt(D)) for Gaussian rows
// of W (drawn orthogonal in blocks with chi-distributed norms: src/model/kinds/performer.cpp). W is a
// fixed buffer (no gradient). Evaluated exactly for these features by the chunked prefix-state
// engine (feature_state.cpp). No max-subtraction stabiliser: an overflowing feature makes a
// non-finite denominator, which the entry point reports.
#include <cmath>

#include "attention/feature_state.hpp"
#include "attention/kind_table.hpp"
#include "attention/tile_ops.hpp"

namespace hw::attn::detail {
namespace {

constexpr int C = kTile;

template <class F>
class PerformerMap final : public FeatureMap<F> {
 public:
  PerformerMap(const PerformerHeadParams<F>& p, int D)
      : W_(p.W), m_(p.n_features), D_(D), in_scale_(F(1) / std::sqrt(std::sqrt(F(D)))),
        out_scale_(F(1) / std::sqrt(F(p.n_features))) {}
  int n_features() const override { return m_; }
  int64_t scratch() const override { return performer_map_scratch(D_, m_); }
  static int64_t performer_map_scratch(int D, int m) { return int64_t(C) * D + int64_t(C) * m; }

  void features(F* X, const F* x, int64_t ldx, int n, bool /*query*/, F* ws) const override {
    F* xs = ws;  // x' rows
    F* sq = ws + int64_t(C) * D_;
    for (int i = 0; i < n; ++i) {
      F* r = xs + int64_t(i) * D_;
      for (int d = 0; d < D_; ++d) r[d] = x[i * ldx + d] * in_scale_;
      sq[i] = dot_lanes(r, r, D_) / F(2);
    }
    gemm_rm(false, true, n, m_, D_, F(1), xs, D_, W_, D_, F(0), X, m_);
    for (int i = 0; i < n; ++i) {
      F* row = X + int64_t(i) * m_;
      for (int f = 0; f < m_; ++f) row[f] = std::exp(row[f] - sq[i]) * out_scale_;
    }
  }

  // d phi_f / dx' = phi_f (w_f - x'), so dx' = (dX (.) X) W - x' rowsum(dX (.) X).
  void jacobian(F* dx, const F* dX, const F* X, const F* x, int64_t ldx, int n, bool /*query*/,
                F* ws) const override {
    F* E = ws + int64_t(C) * D_;  // n x m (the features' sq slot is free now)
    F* g = ws;                    // n x D: dx'
    for (int i = 0; i < n; ++i) {
      const F* a = dX + int64_t(i) * m_;
      const F* b = X + int64_t(i) * m_;
      F* e = E + int64_t(i) * m_;
      for (int f = 0; f < m_; ++f) e[f] = a[f] * b[f];
    }
    gemm_rm(false, false, n, D_, m_, F(1), E, m_, W_, D_, F(0), g, D_);
    for (int i = 0; i < n; ++i) {
      const F* e = E + int64_t(i) * m_;
      F tot = F(0);
      for (int f = 0; f < m_; ++f) tot += e[f];
      const F* gi = g + int64_t(i) * D_;
      F* o = dx + i * ldx;
      for (int d = 0; d < D_; ++d) o[d] += (gi[d] - x[i * ldx + d] * in_scale_ * tot) * in_scale_;
    }
  }

 private:
  const F* W_;
  int m_, D_;
  F in_scale_, out_scale_;
};

int64_t performer_scratch(int D, int m) {
  return feature_scratch(D, m, PerformerMap<double>::performer_map_scratch(D, m));
}

// ---- the CPU table's entry (kind_table.hpp) ----
class PerformerKind final : public CpuKindOf<PerformerKind> {
 public:
  HeadKind kind() const override { return HeadKind::Performer; }
  int64_t scratch(const HeadSpec& spec, int D) const override { return performer_scratch(D, spec.features); }
  template <class F>
  void check_as(const LayerHeadParams<F>& params, int h, const HeadSpec& spec, int) const {
    hw::check(params.performers.size() > static_cast<size_t>(h) && params.performers[size_t(h)].W,
              head_name(h) + " is a performer head but has no random features");
    hw::check(params.performers[size_t(h)].n_features == spec.features,
              head_name(h) + " is '" + spec.str() + "' but its feature matrix has " +
                  std::to_string(params.performers[size_t(h)].n_features) + " rows");
  }
  template <class F>
  int64_t forward_as(const LayerHeadParams<F>& params, int h, const HeadSpec&, const HeadFwd<F>& a) const {
    return feature_forward(PerformerMap<F>(params.performers[size_t(h)], a.D), a);
  }
  // W is fixed: no parameter gradient
  template <class F>
  void backward_as(const LayerHeadParams<F>& params, int h, const HeadSpec&, const HeadBwd<F>& a, F*) const {
    feature_backward(PerformerMap<F>(params.performers[size_t(h)], a.D), a);
  }
  double flops(const HeadSpec& spec, int64_t T, double D) const override { return feature_flops(T, D, spec.features); }
  std::vector<BenchCase> curve_rows() const override {
    const HeadSpec spec{HeadKind::Performer, 0, 0, HeadSpec::kPerformerFeatures};
    return {{spec.str(), spec}};
  }
  // Gaussian projections (timing does not depend on their orthogonality)
  void bench_params(const BenchCase& c, int D, int64_t, Rng& rng, BenchHead& out) const override {
    out.floats.assign(1, std::vector<float>(size_t(std::max(c.spec.features, 0)) * size_t(D)));
    for (auto& x : out.floats[0]) x = float(rng.normal());
    out.params.performers.push_back({out.floats[0].data(), c.spec.features});
  }
};

}  // namespace

const CpuKind& performer_cpu_kind() {
  static const PerformerKind k{};
  return k;
}

}  // namespace hw::attn::detail
