// DiJiang heads (frequency-domain kernelization, the OAL paper's DiJiang baseline):
//   a(x) = softmax(C x'),  x' = x / D^(1/4),  C the orthonormal D x D DCT-II matrix,
//   kappa(q, k) = sum_m w_m a_m(q) a_m(k),  w_m = exp(log_w_m) > 0 (D learnable weights),
// the weights applied once, on the query side (psi = w (.) a(q), phi = a(k)). Positive by
// construction. Evaluated exactly for this map by the chunked prefix-state engine
// (feature_state.cpp); gradients for q, k, v and log_w.
#include <cmath>
#include <vector>

#include "attention/feature_state.hpp"
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

}  // namespace

int64_t dijiang_scratch(int D) { return feature_scratch(D, D, DiJiangMap<double>::dijiang_map_scratch(D)); }

template <class F>
int64_t dijiang_forward(const DiJiangHeadParams<F>& p, const HeadFwd<F>& a) {
  return feature_forward(DiJiangMap<F>(p, a.D), a);
}

// dlog_w: this task's partial sums (length D, accumulated), or null to skip them.
template <class F>
void dijiang_backward(const DiJiangHeadParams<F>& p, const HeadBwd<F>& a, F* dlog_w) {
  DiJiangHeadParams<F> q = p;
  q.dlog_w = dlog_w;
  feature_backward(DiJiangMap<F>(q, a.D), a);
}

template int64_t dijiang_forward<float>(const DiJiangHeadParams<float>&, const HeadFwd<float>&);
template int64_t dijiang_forward<double>(const DiJiangHeadParams<double>&, const HeadFwd<double>&);
template void dijiang_backward<float>(const DiJiangHeadParams<float>&, const HeadBwd<float>&, float*);
template void dijiang_backward<double>(const DiJiangHeadParams<double>&, const HeadBwd<double>&, double*);

}  // namespace hw::attn::detail
