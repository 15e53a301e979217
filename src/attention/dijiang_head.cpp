// DiJiang heads (frequency-domain kernelization, the OAL paper's DiJiang baseline):
//   a(x) = softmax(C x'),  x' = x / D^(1/4),  C the orthonormal D x D DCT-II matrix,
//   kappa(q, k) = sum_m w_m a_m(q) a_m(k),  w_m = exp(log_w_m) > 0 (D learnable weights),
// the weights applied once, on the query side (psi = w (.) a(q), phi = a(k)). Positive by
// construction. Evaluated exactly for this map by the chunked prefix-state engine
// (feature_state.cpp); gradients for q, k, v and log_w.
#include <cmath>
#include <vector>

#include "attention/feature_state.hpp"
#include "attention/kind_table.hpp"
#include "attention/tile_ops.hpp"

namespace hw::attn::detail {
namespace {

constexpr int C = kTile;

template <class F>
class DiJiangMap final : public FeatureMap<F> {
 public:
  DiJiangMap(const DiJiangHeadParams<F>& p, int D)
      : dlog_w_(p.dlog_w), D_(D), in_scale_(F(1) / std::sqrt(std::sqrt(F(D)))), dct_(size_t(D) * size_t(D)),
        wt_(size_t(D)) {
    const double pi = std::acos(-1.0);
    for (int f = 0; f < D; ++f)
      for (int d = 0; d < D; ++d)
        dct_[size_t(f * D + d)] =
            F(std::sqrt((f == 0 ? 1.0 : 2.0) / D) * std::cos(pi * (double(d) + 0.5) * double(f) / double(D)));
    for (int f = 0; f < D; ++f) wt_[size_t(f)] = std::exp(p.log_w[f]);
  }
  int n_features() const override { return D_; }
  int64_t scratch() const override { return dijiang_map_scratch(D_); }
  static int64_t dijiang_map_scratch(int D) { return 3 * int64_t(C) * D; }

  // a rows (softmax of the DCT) of n rows into A (n x D)
  void softmax_dct(F* A, const F* x, int64_t ldx, int n, F* xs) const {
    for (int i = 0; i < n; ++i)
      for (int d = 0; d < D_; ++d) xs[int64_t(i) * D_ + d] = x[i * ldx + d] * in_scale_;
    gemm_rm(false, true, n, D_, D_, F(1), xs, D_, dct_.data(), D_, F(0), A, D_);
    for (int i = 0; i < n; ++i) {
      F* r = A + int64_t(i) * D_;
      F mx = r[0];
      for (int f = 1; f < D_; ++f) mx = std::max(mx, r[f]);
      F z = F(0);
      for (int f = 0; f < D_; ++f) z += (r[f] = std::exp(r[f] - mx));
      const F inv = F(1) / z;
      for (int f = 0; f < D_; ++f) r[f] *= inv;
    }
  }

  void features(F* X, const F* x, int64_t ldx, int n, bool query, F* ws) const override {
    softmax_dct(X, x, ldx, n, ws);
    if (!query) return;
    for (int i = 0; i < n; ++i)
      for (int f = 0; f < D_; ++f) X[int64_t(i) * D_ + f] *= wt_[size_t(f)];
  }

  // dz = a (.) (da - a . da), dx' = dz C; the query side also gives dlog_w += dpsi (.) psi.
  void jacobian(F* dx, const F* dX, const F* X, const F* x, int64_t ldx, int n, bool query, F* ws) const override {
    F* A = ws + int64_t(C) * D_;
    F* dz = ws + 2 * int64_t(C) * D_;
    softmax_dct(A, x, ldx, n, ws);
    for (int i = 0; i < n; ++i) {
      const F* a = A + int64_t(i) * D_;
      const F* g = dX + int64_t(i) * D_;
      F* z = dz + int64_t(i) * D_;
      F dot = F(0);
      for (int f = 0; f < D_; ++f) {
        const F da = query ? g[f] * wt_[size_t(f)] : g[f];
        z[f] = da;
        dot += da * a[f];
      }
      for (int f = 0; f < D_; ++f) z[f] = a[f] * (z[f] - dot);
      if (query && dlog_w_)
        for (int f = 0; f < D_; ++f) dlog_w_[f] += g[f] * X[int64_t(i) * D_ + f];
    }
    F* g = ws;  // dx' (the xs slot is free after softmax_dct)
    gemm_rm(false, false, n, D_, D_, F(1), dz, D_, dct_.data(), D_, F(0), g, D_);
    for (int i = 0; i < n; ++i)
      for (int d = 0; d < D_; ++d) dx[i * ldx + d] += g[int64_t(i) * D_ + d] * in_scale_;
  }

 private:
  F* dlog_w_;
  int D_;
  F in_scale_;
  std::vector<F> dct_, wt_;
};

int64_t dijiang_scratch(int D) { return feature_scratch(D, D, DiJiangMap<double>::dijiang_map_scratch(D)); }

// ---- the CPU table's entry (kind_table.hpp) ----
class DiJiangKind final : public CpuKindOf<DiJiangKind> {
 public:
  HeadKind kind() const override { return HeadKind::DiJiang; }
  int64_t scratch(const HeadSpec&, int D) const override { return dijiang_scratch(D); }
  int64_t partials(const HeadSpec&, int64_t, int D) const override { return D; }  // dlog_w's partial sums
  template <class F>
  void check_as(const LayerHeadParams<F>& params, int h, const HeadSpec&, int) const {
    hw::check(params.dijiangs.size() > static_cast<size_t>(h) && params.dijiangs[size_t(h)].log_w,
              head_name(h) + " is a dijiang head but has no weights");
  }
  template <class F>
  int64_t forward_as(const LayerHeadParams<F>& params, int h, const HeadSpec&, const HeadFwd<F>& a) const {
    return feature_forward(DiJiangMap<F>(params.dijiangs[size_t(h)], a.D), a);
  }
  // dlog_w accumulates into this task's partial sums (length D), or is skipped
  template <class F>
  void backward_as(const LayerHeadParams<F>& params, int h, const HeadSpec&, const HeadBwd<F>& a, F* partial) const {
    DiJiangHeadParams<F> q = params.dijiangs[size_t(h)];
    q.dlog_w = q.dlog_w ? partial : nullptr;
    feature_backward(DiJiangMap<F>(q, a.D), a);
  }
  template <class F>
  void reduce_as(const LayerHeadParams<F>& params, int h, F* first, int64_t stride, int64_t B, int64_t, int D) const {
    const auto& p = params.dijiangs[size_t(h)];
    if (p.dlog_w)
      for (int64_t b = 0; b < B; ++b)
        for (int f = 0; f < D; ++f) p.dlog_w[f] += first[b * stride + f];
  }
  double flops(const HeadSpec&, int64_t T, double D) const override { return feature_flops(T, D, D); }
  std::vector<BenchCase> curve_rows() const override {
    const HeadSpec spec{HeadKind::DiJiang};
    return {{spec.str(), spec}};
  }
  // unit weights
  void bench_params(const BenchCase&, int D, int64_t, Rng&, BenchHead& out) const override {
    out.floats.assign(2, std::vector<float>(size_t(D), 0.f));
    out.params.dijiangs.push_back({out.floats[0].data(), out.floats[1].data()});
  }
};

}  // namespace

const CpuKind& dijiang_cpu_kind() {
  static const DiJiangKind k{};
  return k;
}

}  // namespace hw::attn::detail
